"""Answer check: the three 0-100 grades parsed into [0, 1], bad replies recorded invalid with no
number; one real-model run."""

from __future__ import annotations

import json

import pytest

from ragkit.errors import LLMError
from ragkit.llms import LLMClient, llms
from ragkit.stages.answer.answer_check import (
    ANSWER_CHECK_METRICS,
    AnswerCheckJudge,
    AnswerCheckParams,
    answer_check_scores,
)
from ragkit.stages.base import STAGES, JudgementLog
from tests.factories import scripted_llm_class

ScriptedLLM = scripted_llm_class()
NOTHING = {"relevance": None, "completeness": None, "accuracy": None}


def check(reply, tmp_path, **params):
    backend = ScriptedLLM([reply])
    judge = AnswerCheckJudge(AnswerCheckParams(**params), LLMClient(backend, tmp_path))
    trace = JudgementLog()
    return judge.check("why do cats purr", "Cats purr when content [1].", ["Cats purr when content."], trace), \
        trace, backend


@pytest.mark.unit
@pytest.mark.parametrize(("reply", "expected", "valid"), [
    (json.dumps({"relevance": 90, "completeness": 50, "accuracy": 100, "reason": "r"}),
     {"relevance": 0.9, "completeness": 0.5, "accuracy": 1.0}, True),
    (json.dumps({"relevance": 0, "completeness": 0, "accuracy": 0}), {"relevance": 0, "completeness": 0,
                                                                      "accuracy": 0}, True),
    (json.dumps({"relevance": 101, "completeness": 50, "accuracy": 50}), NOTHING, False),   # out of range
    (json.dumps({"relevance": 80, "completeness": 50}), NOTHING, False),                    # a grade missing
    ("The answer is good.", NOTHING, False),                                                # prose
    (LLMError("timed out"), NOTHING, False),
])
def test_grades_parsed_or_recorded_invalid(tmp_path, reply, expected, valid):
    scores, trace, _ = check(reply, tmp_path)
    assert scores == expected
    (judgement,) = trace.judgements
    assert judgement.judge == "answer_check" and judgement.valid is valid and judgement.fell_back is (not valid)
    if not valid:  # the reason a row carries instead of a number
        assert judgement.error and judgement.decision["reason"] == judgement.error
        assert {aspect: judgement.decision[aspect] for aspect in NOTHING} == NOTHING


@pytest.mark.unit
def test_prompt_shows_question_answer_and_capped_context(tmp_path):
    _, _, backend = check(json.dumps({"relevance": 1, "completeness": 1, "accuracy": 1}), tmp_path,
                          context_chars=100)
    prompt = backend.requests[0][-1]["content"]
    assert "Question: why do cats purr\nAnswer: Cats purr when content [1]." in prompt
    assert "Context: Cats purr when content.\n" in prompt


@pytest.mark.unit
def test_off_makes_no_call_and_score_rows_are_named(tmp_path):
    backend = ScriptedLLM(["{}"])
    judge = AnswerCheckJudge(AnswerCheckParams(mode="off"), LLMClient(backend, tmp_path))
    assert judge.check("q", "a", [], JudgementLog()) == NOTHING and backend.requests == []
    assert answer_check_scores({"relevance": 0.5, "completeness": None, "accuracy": 1.0}) == {
        "answer_relevance": 0.5, "answer_completeness": None, "answer_accuracy": 1.0}
    assert ANSWER_CHECK_METRICS == ("answer_relevance", "answer_completeness", "answer_accuracy")
    assert STAGES.get("answer_check") is AnswerCheckJudge


@pytest.mark.integration
def test_real_local_model_gives_a_recorded_well_formed_result(tmp_path):
    client = LLMClient(llms.build({"type": "local"}), cache_dir=tmp_path)
    trace = JudgementLog()
    scores = AnswerCheckJudge(AnswerCheckParams(), client).check(
        "why do cats purr", "Cats purr when they are content.", ["Cats purr when they are content."], trace)
    (judgement,) = trace.judgements
    assert judgement.raw_reply is not None and set(scores) == {"relevance", "completeness", "accuracy"}
    if judgement.valid:
        assert all(0.0 <= value <= 1.0 for value in scores.values())
    else:
        assert scores == NOTHING and judgement.fell_back
