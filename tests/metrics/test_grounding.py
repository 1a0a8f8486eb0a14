"""Embedding groundedness: sentence splitting (no model) and hand-made cases scored by the real MiniLM."""

from __future__ import annotations

import math
import re

import pytest

from ragkit.metrics.grounding import DEFAULT_THRESHOLD, embedding_groundedness
from ragkit.text import punkt_sentences

CONTEXTS = [
    "Cats purr when they are content. A purr is produced by the muscles of the larynx.",
    "Most cats sleep between twelve and sixteen hours a day.",
]


@pytest.mark.unit
@pytest.mark.parametrize(
    ("text", "min_words", "sentences"),
    [
        ("Cats purr. Dogs bark loudly at night.", 1, ["Cats purr.", "Dogs bark loudly at night."]),
        # trained Punkt: abbreviations do not end a sentence
        ("Dr. Smith saw cats at 5 p.m. on Monday. They purred.", 1,
         ["Dr. Smith saw cats at 5 p.m. on Monday.", "They purred."]),
        # fragments under min_words join the next sentence, the last one the previous
        ("Yes. Cats purr when content. Indeed.", 3, ["Yes. Cats purr when content. Indeed."]),
        ("Cats purr when content.   Dogs bark at strangers.", 3,
         ["Cats purr when content.", "Dogs bark at strangers."]),
        ("Maybe.", 3, ["Maybe."]),
        ("  ", 3, []),
    ],
)
def test_sentences_come_from_trained_punkt_with_short_fragments_joined(text, min_words, sentences):
    assert punkt_sentences(text, min_words) == sentences


@pytest.mark.unit
def test_bad_arguments_fail_before_embedding():
    with pytest.raises(ValueError, match="min_words must be >= 1, got 0"):
        punkt_sentences("Cats purr.", 0)
    with pytest.raises(ValueError, match=re.escape("threshold is a cosine similarity in [-1, 1], got 1.5")):
        embedding_groundedness("Cats purr when content.", CONTEXTS, embed_model=None, threshold=1.5)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("answer", "contexts", "reason"),
    [
        ("Yes.", CONTEXTS, "no sentence of at least 3 words in the answer"),
        ("", CONTEXTS, "no sentence of at least 3 words in the answer"),
        ("Cats purr when they are content.", [], "no context text to check the answer against"),
        ("Cats purr when they are content.", ["  "], "no context text to check the answer against"),
    ],
)
def test_nothing_to_score_is_nan_with_the_reason_and_embeds_nothing(answer, contexts, reason):
    result = embedding_groundedness(answer, contexts, embed_model=None)
    assert math.isnan(result.score) and result.reason == reason and result.sentences == []


@pytest.mark.integration
def test_an_answer_copied_from_the_context_is_fully_supported(minilm_embed_model):
    answer = "Cats purr when they are content [1]. Most cats sleep between twelve and sixteen hours a day [2]."
    result = embedding_groundedness(answer, CONTEXTS, minilm_embed_model)
    assert result.score == 1.0 and result.reason is None and result.unsupported == []
    assert [s.sentence for s in result.sentences] == [
        "Cats purr when they are content.", "Most cats sleep between twelve and sixteen hours a day."]
    assert all(s.similarity > 0.99 for s in result.sentences)
    assert result.sentences[0].best_context_sentence == "Cats purr when they are content."


@pytest.mark.integration
def test_an_unrelated_answer_is_unsupported(minilm_embed_model):
    answer = "The Eiffel Tower was completed in 1889. Interest rates rose sharply last year."
    result = embedding_groundedness(answer, CONTEXTS, minilm_embed_model)
    assert result.score == 0.0
    assert [s.sentence for s in result.unsupported] == [
        "The Eiffel Tower was completed in 1889.", "Interest rates rose sharply last year."]
    assert all(s.similarity < DEFAULT_THRESHOLD for s in result.sentences)


@pytest.mark.integration
def test_a_half_supported_answer_scores_half_and_names_the_unsupported_sentence(minilm_embed_model):
    answer = "Cats purr when they are content. The Eiffel Tower was completed in 1889."
    result = embedding_groundedness(answer, CONTEXTS, minilm_embed_model)
    assert result.score == 0.5
    assert [s.sentence for s in result.unsupported] == ["The Eiffel Tower was completed in 1889."]


@pytest.mark.integration
def test_known_limit_a_negated_sentence_counts_as_supported(minilm_embed_model):
    """Similarity is not entailment: this is why the metric is not called faithfulness."""
    result = embedding_groundedness("Cats never purr when they are content.", CONTEXTS, minilm_embed_model)
    assert result.score == 1.0


@pytest.mark.integration
def test_the_threshold_decides(minilm_embed_model):
    answer = "Felines make a rumbling sound when happy."
    loose = embedding_groundedness(answer, CONTEXTS, minilm_embed_model, threshold=0.0)
    strict = embedding_groundedness(answer, CONTEXTS, minilm_embed_model, threshold=0.99)
    assert (loose.score, strict.score) == (1.0, 0.0)
    assert loose.sentences[0].similarity == pytest.approx(strict.sentences[0].similarity)
