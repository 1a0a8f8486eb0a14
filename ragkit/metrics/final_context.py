"""Metrics of the whole final context: what a configuration actually passes on to the generator.

The final context is the ranked chunk list left after every judge (``Trace.nodes``: after the
query transforms, the quality gate, the Retrieval Judge and the rerank judge). Tokens are cl100k
tokens of each chunk's own text (``ragkit.chunkers.token.cl100k_tokenizer``, the tokenizer the
token chunker counts with). Per question:

- final_chunks = number of chunks; final_tokens = the sum of their tokens (descriptive: neither
  more nor fewer is better in itself).
- final_recall = relevant documents among the chunks' documents / all relevant documents.
- final_precision = chunks from a relevant document / chunks (a chunk share, not a document share).
- final_span_recall = answer groups covered by any chunk / all groups (any-of within a group,
  all-of across groups, as in ``ragkit.metrics.spans``).
- final_span_precision = chunks that overlap any answer span / chunks.

An empty final context is a real result, not a failure: 0 chunks, 0 tokens and 0 on every
ground-truth metric. As with the ranking metrics, a ground-truth level the question lacks is
left out, not zeroed.
"""

from __future__ import annotations

import functools
from array import array
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ragkit.metrics.documents import doc_recall, has_relevant, relevant_set
from ragkit.metrics.names import FINAL_CONTEXT_METRICS
from ragkit.metrics.ranking import RetrievedSpan
from ragkit.metrics.spans import AnswerGroups, has_spans, overlapping_chunks, span_recall


@dataclass(frozen=True)
class FinalContext:
    """The final context's chunks in rank order, with what the token metrics need of their text."""

    chunks: Sequence[RetrievedSpan]
    tokens: Sequence[int]  # tokens of each chunk's text
    # (chunk index, n) -> how many characters of that chunk's text its first n tokens hold
    prefix_chars: Callable[[int, int], int]

    def __post_init__(self) -> None:
        if len(self.chunks) != len(self.tokens):
            raise ValueError(f"{len(self.chunks)} chunks but {len(self.tokens)} token counts")

    @classmethod
    def from_texts(cls, chunks: Sequence[RetrievedSpan], texts: Sequence[str]) -> FinalContext:
        """Counted with cl100k. A token boundary can fall inside a multi-byte character; the
        characters of the first n tokens are then those whose bytes all lie in them."""
        from ragkit.chunkers.token import cl100k_encoding

        def prefix_chars(index: int, n: int) -> int:
            ids = cl100k_ids(texts[index])
            if n >= len(ids):
                return len(texts[index])
            return len(cl100k_encoding().decode_bytes(ids[:n].tolist()).decode("utf-8", errors="ignore"))

        return cls(tuple(chunks), tuple(cl100k_count(text) for text in texts), prefix_chars)

    @classmethod
    def empty(cls) -> FinalContext:
        return cls((), (), lambda index, n: 0)


@functools.lru_cache(maxsize=8192)
def cl100k_ids(text: str) -> array:
    """cl100k token ids of ``text``; cached, since the same chunks come back for many questions
    and runs (a budget cut reads the ids of the chunk it cuts). 4 bytes per id, not a Python int."""
    from ragkit.chunkers.token import cl100k_tokenizer

    return array("I", cl100k_tokenizer()(text))


def cl100k_count(text: str) -> int:
    """cl100k tokens of ``text``."""
    return len(cl100k_ids(text))


def final_context_metrics(context: FinalContext, relevant_docs: Mapping[str, float] | None,
                          groups: AnswerGroups | None) -> dict[str, float]:
    chunks_name, tokens_name, recall_name, precision_name, span_recall_name, span_precision_name = (
        FINAL_CONTEXT_METRICS)
    chunks = context.chunks
    scores = {chunks_name: float(len(chunks)), tokens_name: float(sum(context.tokens))}
    if has_relevant(relevant_docs):
        relevant = relevant_set(relevant_docs)
        scores[recall_name] = doc_recall((doc_id for doc_id, _, _ in chunks), relevant_docs)
        scores[precision_name] = _share(sum(doc_id in relevant for doc_id, _, _ in chunks), len(chunks))
    if has_spans(groups):
        scores[span_recall_name] = span_recall(chunks, groups)
        scores[span_precision_name] = _share(overlapping_chunks(chunks, groups), len(chunks))
    return scores


def _share(count: int, total: int) -> float:
    return count / total if total else 0.0
