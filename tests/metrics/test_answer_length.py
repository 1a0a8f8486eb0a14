"""answer_length: hand-counted words per answer, citation markers out; an empty answer is 0."""

from __future__ import annotations

import pytest

from ragkit.metrics.answer_length import answer_chars, answer_length
from ragkit.metrics.generation import EvaluationParams, GenerationSample, evaluate_generation
from ragkit.metrics.names import better_direction, parse_metric

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("answer", "words"), [
    ("", 0),
    ("   ", 0),
    ("not found", 2),
    ("Cats purr when content [1].", 4),
    ("Cats purr [1, 2] and sleep [3-4].", 4),  # markers and ranges are not words
    ("Don't panic: COVID-19 spreads by droplets.", 6),  # one word each: don't, COVID-19
    ("The answer is 42 - or 43.", 6),  # a lone dash is not a word
    ("Line one.\nLine two.", 4),
    ("Über naïve café", 3),
])
def test_answer_length_counts_words_by_hand(answer, words):
    assert answer_length(answer) == words


def test_cross_checked_against_a_plain_whitespace_count_where_they_must_agree():
    # Without markers or punctuation-only pieces, the count is Python's whitespace split.
    answer = "severe acute respiratory syndrome coronavirus 2 causes COVID-19"
    assert answer_length(answer) == len(answer.split()) == 8


def test_it_is_a_generation_metric_without_a_better_direction():
    assert parse_metric("answer_length").level == "generation"
    assert better_direction("answer_length") == 0


def test_the_evaluation_scores_it_without_an_llm_and_an_empty_answer_as_zero():
    samples = [GenerationSample(question_id="q1", question="why?", answer="Because it is [1]."),
               GenerationSample(question_id="q2", question="how?", answer="")]
    frame = evaluate_generation(samples, EvaluationParams(metrics=["answer_length"]), llm=None, embed_model=None)
    assert frame[["question_id", "metric", "value"]].to_dict("records") == [
        {"question_id": "q1", "metric": "answer_length", "value": 3.0},
        {"question_id": "q2", "metric": "answer_length", "value": 0.0},
    ]
    assert frame["error"].isna().all()


@pytest.mark.parametrize(("answer", "chars"), [
    ("", 0), ("   ", 0), ("not found", 9), ("Cats purr [1].", 14), ("  Über café \n", 9),
])
def test_answer_chars_counts_characters_as_written(answer, chars):
    assert answer_chars(answer) == chars


def test_answer_chars_is_descriptive_too():
    assert parse_metric("answer_chars").level == "generation" and better_direction("answer_chars") == 0
