"""Embedding groundedness: the share of an answer's sentences that some context sentence supports.

Offline and LLM-free, so it scores where no adequate judge LLM is available. It is a measure of
*semantic closeness*, not of entailment: a sentence that negates its context sentence ("X does
not cause Y" against "X causes Y") is close in embedding space and counts as supported. It is
named for what it is and shown beside ragas ``faithfulness`` (which asks an LLM), never in its place.

How a score is made:

1. The answer and each context are split into sentences with LlamaIndex's sentence splitting
   (``split_by_sentence_tokenizer_internal``) over NLTK's trained English Punkt model, which
   LlamaIndex bundles (``ragkit.text.punkt_sentences``). Citation markers such as ``[1]`` are
   removed from the answer; fragments shorter than ``min_words`` words ("Fig.", "et al.") are
   joined to the next sentence.
2. Every sentence is embedded; each answer sentence's support is its best cosine similarity
   with any context sentence.
3. A sentence is supported when its support is >= ``threshold``; the score is the supported
   fraction. An answer with no sentence of ``min_words`` words, or no context sentence, has no
   score (NaN) and a reason, never 0.

Default threshold 0.49: the one maximising balanced accuracy between an answer span's sentences
checked against the paragraph holding the span (supported) and against another article's answer
paragraph (unsupported), on COVID-QA with all-MiniLM-L6-v2 (``benchmarks/calibrate_grounding.py``;
the run and its accuracy: benchmarks/README.md, "Figures behind choices in the code"). The
negatives are topically close (all coronavirus papers), but the positives are copied spans: a
paraphrased answer scores lower, so expect more false "unsupported" on abstractive answers than
the calibration shows. Cosine scales differ between embedders: the default fits MiniLM; for
another embedder, recalibrate.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ragkit.text import punkt_sentences, strip_citations

DEFAULT_THRESHOLD = 0.49
MIN_SENTENCE_WORDS = 3


@dataclass(frozen=True)
class SentenceSupport:
    sentence: str
    best_context_sentence: str
    similarity: float  # cosine similarity with best_context_sentence
    supported: bool


@dataclass(frozen=True)
class GroundednessResult:
    score: float  # supported fraction of the answer's sentences; NaN when nothing could be scored
    sentences: list[SentenceSupport]
    threshold: float
    reason: str | None = None  # why the score is NaN

    @property
    def unsupported(self) -> list[SentenceSupport]:
        return [sentence for sentence in self.sentences if not sentence.supported]


def best_support(
    sentences: Sequence[str], context_sentences: Sequence[str], embed_model: Any
) -> tuple[np.ndarray, np.ndarray]:
    """For each sentence: the best cosine similarity among ``context_sentences`` and its index."""
    if not sentences or not context_sentences:
        raise ValueError("best_support needs at least one sentence and one context sentence")
    vectors = np.asarray(embed_model.get_text_embedding_batch([*sentences, *context_sentences]), dtype=np.float64)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    vectors = vectors / np.where(norms == 0, 1.0, norms)
    similarity = vectors[: len(sentences)] @ vectors[len(sentences) :].T
    best = similarity.argmax(axis=1)
    return similarity[np.arange(len(sentences)), best], best


def embedding_groundedness(
    answer: str,
    contexts: Sequence[str],
    embed_model: Any,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    min_words: int = MIN_SENTENCE_WORDS,
) -> GroundednessResult:
    """Score ``answer`` against ``contexts`` with ``embed_model`` (a LlamaIndex ``BaseEmbedding``)."""
    if not -1.0 <= threshold <= 1.0:
        raise ValueError(f"threshold is a cosine similarity in [-1, 1], got {threshold}")
    answer_text = strip_citations(answer, ranges=True)
    sentences = [s for s in punkt_sentences(answer_text, min_words) if len(s.split()) >= min_words]
    context_sentences = list(dict.fromkeys(s for context in contexts for s in punkt_sentences(context, min_words)))
    if not sentences:
        reason = f"no sentence of at least {min_words} words in the answer"
        return GroundednessResult(math.nan, [], threshold, reason)
    if not context_sentences:
        return GroundednessResult(math.nan, [], threshold, "no context text to check the answer against")
    similarities, best = best_support(sentences, context_sentences, embed_model)
    checked = [
        SentenceSupport(sentence, context_sentences[index], float(similarity), bool(similarity >= threshold))
        for sentence, similarity, index in zip(sentences, similarities, best)
    ]
    score = sum(check.supported for check in checked) / len(checked)
    return GroundednessResult(score, checked, threshold)
