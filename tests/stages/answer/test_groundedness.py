"""Groundedness judge: claim splitting, per-claim verdicts, unknown claims and the evaluator API; one real-model run."""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

import pytest
from llama_index.core.evaluation import BaseEvaluator, EvaluationResult
from llama_index.core.prompts import PromptTemplate

from ragkit.errors import LLMError
from ragkit.llms import LLMClient, llms
from ragkit.stages.answer.groundedness import GroundednessJudge, GroundednessParams, split_claims, unsupported_claims
from ragkit.stages.base import STAGES, JudgementLog
from tests.factories import scripted_llm_class

QUERY = "why do cats purr"
CONTEXTS = ["Cats purr when they are content.", "Felines sleep most of the day."]
ANSWER = "Cats purr when they are content [1]. Cats sleep most of the day [2]. Cats can fly over houses."


ScriptedLLM = scripted_llm_class()


def verdict(supported: bool, evidence: str = "") -> str:
    return json.dumps({"supported": supported, "evidence": evidence})


def grounded(replies: list[Any], tmp_path, **params: Any) -> tuple[GroundednessJudge, ScriptedLLM]:
    backend = ScriptedLLM(replies)
    return GroundednessJudge(GroundednessParams(**params), LLMClient(backend, tmp_path)), backend


def claims_of(judgement) -> list[tuple[str, str]]:
    return [(check["claim"], check["verdict"]) for check in judgement.decision["claims"]]


@pytest.mark.unit
@pytest.mark.parametrize(
    ("answer", "claims"),
    [
        (ANSWER, ["Cats purr when they are content.", "Cats sleep most of the day.", "Cats can fly over houses."]),
        ("Yes. Cats purr [1, 2]!  Really they do purr when content?", ["Really they do purr when content?"]),
        ("Version 2.5 is out. It adds three new features.", ["Version 2.5 is out.", "It adds three new features."]),
        ("", []),
    ],
)
def test_heuristic_claims_are_sentences_without_citations(answer, claims):
    assert split_claims(answer, min_words=3) == claims


@pytest.mark.unit
def test_score_is_the_supported_fraction_with_unsupported_claims_in_feedback(tmp_path):
    judge, backend = grounded([verdict(True, "content"), verdict(True, "naps"), verdict(False)], tmp_path)
    trace = JudgementLog()
    score, judgement = judge.judge(QUERY, ANSWER, CONTEXTS, trace)
    assert score == pytest.approx(2 / 3)
    assert len(backend.requests) == 3
    assert claims_of(judgement)[2] == ("Cats can fly over houses.", "unsupported")
    assert [judgement.decision[label] for label in ("supported", "unsupported", "unknown")] == [2, 1, 0]
    assert "unsupported: Cats can fly over houses." in judgement.decision["feedback"]
    assert judgement.valid and not judgement.fell_back and trace.judgements == [judgement]
    assert judgement.raw_reply.count("---") == 2
    assert [check["evidence_in_context"] for check in judgement.decision["claims"]] == [True, False, False]


@pytest.mark.unit
@pytest.mark.parametrize(
    "garbage", ["the claim is fine", '{"supported": "perhaps"}', '{"supported": true', "", LLMError("down")]
)
def test_an_unparseable_verdict_makes_the_claim_unknown_and_unscored(tmp_path, garbage):
    judge, _ = grounded([verdict(True), garbage, verdict(False)], tmp_path)
    score, judgement = judge.judge(QUERY, ANSWER, CONTEXTS, JudgementLog())
    assert score == pytest.approx(1 / 2)  # 1 supported of 2 scored; the unknown claim is left out
    assert [verdict for _, verdict in claims_of(judgement)] == ["supported", "unknown", "unsupported"]
    assert judgement.decision["unknown"] == 1
    assert not judgement.valid and "claim 2" in judgement.error and not judgement.fell_back
    assert "unknown (unparseable verdict): Cats sleep most of the day." in judgement.decision["feedback"]


@pytest.mark.unit
def test_all_claims_unknown_gives_no_score_with_the_reason(tmp_path):
    judge, _ = grounded(["nonsense"], tmp_path)
    score, judgement = judge.judge(QUERY, ANSWER, CONTEXTS, JudgementLog())
    assert score is None
    assert judgement.decision["unknown"] == 3 and judgement.fell_back and not judgement.valid
    assert "no verdict could be parsed" in judgement.decision["no_score_reason"]


@pytest.mark.unit
@pytest.mark.parametrize("answer", ["", "Yes.", "No idea [1]."])
def test_an_answer_without_claims_gives_no_score_and_no_call(tmp_path, answer):
    judge, backend = grounded([verdict(True)], tmp_path)
    score, judgement = judge.judge(QUERY, answer, CONTEXTS, JudgementLog())
    assert score is None and backend.requests == []
    assert judgement.decision["no_score_reason"] == "no claims in the answer" and not judgement.valid


@pytest.mark.unit
def test_a_verdict_in_a_code_fence_is_read(tmp_path):
    judge, _ = grounded(["```json\n" + verdict(True, "x") + "\n```"], tmp_path)
    score, _ = judge.judge(QUERY, "Cats purr when content.", CONTEXTS, JudgementLog())
    assert score == 1.0


@pytest.mark.unit
def test_llm_claim_split_is_used_and_falls_back_to_sentences(tmp_path):
    claims = json.dumps({"claims": ["Cats purr.", "Cats fly."]})
    judge, backend = grounded([claims, verdict(True), verdict(False)], tmp_path, claim_split="llm")
    score, judgement = judge.judge(QUERY, ANSWER, CONTEXTS, JudgementLog())
    assert claims_of(judgement) == [("Cats purr.", "supported"), ("Cats fly.", "unsupported")] and score == 0.5
    assert len(backend.requests) == 3

    judge, _ = grounded(['{"claims": [}', verdict(True)], tmp_path / "b", claim_split="llm")
    score, judgement = judge.judge(QUERY, ANSWER, CONTEXTS, JudgementLog())
    assert judgement.decision["split_fell_back"] and judgement.decision["split_error"]
    assert len(judgement.decision["claims"]) == 3 and score == 1.0


@pytest.mark.unit
def test_claims_and_context_are_capped(tmp_path):
    judge, backend = grounded([verdict(True)], tmp_path, max_claims=2, context_chars=120)
    long_context = ["word " * 200]
    judge.judge(QUERY, ANSWER, long_context, JudgementLog())
    assert len(backend.requests) == 2
    prompt = backend.requests[0][-1]["content"]
    context_line = next(line for line in prompt.splitlines()[4:] if line.startswith("Context: "))
    assert len(context_line) <= len("Context: ") + 120


@pytest.mark.unit
def test_off_scores_nothing_and_calls_nothing(tmp_path):
    judge, backend = grounded([verdict(True)], tmp_path, mode="off")
    trace = JudgementLog()
    assert judge.judge(QUERY, ANSWER, CONTEXTS, trace) == (None, None)
    assert backend.requests == [] and trace.judgements == []
    result = asyncio.run(judge.aevaluate(QUERY, ANSWER, CONTEXTS))
    assert result.invalid_result and result.score is None


@pytest.mark.unit
def test_missing_inputs_fail_before_any_call(tmp_path):
    judge, backend = grounded([verdict(True)], tmp_path)
    with pytest.raises(ValueError, match="needs the answer and the contexts"):
        judge.judge(QUERY, ANSWER, None, JudgementLog())
    assert backend.requests == []


@pytest.mark.unit
def test_it_is_a_llama_index_evaluator(tmp_path):
    judge, _ = grounded([verdict(True), verdict(True), verdict(False)], tmp_path)
    assert isinstance(judge, BaseEvaluator)
    trace = JudgementLog()
    result = asyncio.run(judge.aevaluate(query=QUERY, response=ANSWER, contexts=CONTEXTS, trace=trace))
    assert isinstance(result, EvaluationResult)
    assert result.score == pytest.approx(2 / 3) and result.passing is False and not result.invalid_result
    assert "Cats can fly over houses." in result.feedback
    assert len(trace.judgements) == 1
    sync = judge.evaluate(query=QUERY, response=ANSWER, contexts=CONTEXTS)  # cached replies, same verdicts
    assert sync.score == pytest.approx(2 / 3)

    garbage, _ = grounded(["??"], tmp_path / "b")
    unscored = asyncio.run(garbage.aevaluate(query=QUERY, response=ANSWER, contexts=CONTEXTS))
    assert unscored.score is None and unscored.invalid_result and "no verdict" in unscored.invalid_reason
    assert not math.isnan(unscored.score or 0.0)


@pytest.mark.unit
def test_prompts_can_be_read_and_replaced(tmp_path):
    judge, backend = grounded([verdict(True)], tmp_path)
    assert set(judge.get_prompts()) == {"split_prompt", "verify_prompt"}
    judge.update_prompts({"verify_prompt": PromptTemplate("CUSTOM {context} || {claim}")})
    judge.judge(QUERY, "Cats purr when content.", CONTEXTS, JudgementLog())
    assert backend.requests[0][-1]["content"].startswith("CUSTOM Cats purr when they are content.")


@pytest.mark.unit
def test_builds_through_the_judges_registry(tmp_path):
    with STAGES.registered("groundedness", GroundednessJudge):
        judge = STAGES.build({"type": "groundedness", "params": {"mode": "off"}})
    assert isinstance(judge, GroundednessJudge)


@pytest.mark.integration
def test_real_local_model_scores_or_marks_unknown_with_a_recorded_judgement(tmp_path):
    client = LLMClient(llms.build({"type": "local"}), cache_dir=tmp_path)
    judge = GroundednessJudge(GroundednessParams(max_tokens=40, context_chars=200), client)
    trace = JudgementLog()
    score, judgement = judge.judge(QUERY, "Cats purr when they are content.", CONTEXTS, trace)
    assert trace.judgements == [judgement]
    (check,) = judgement.decision["claims"]
    assert check["raw_reply"] is not None
    if score is None:
        assert check["verdict"] == "unknown" and judgement.fell_back and check["error"]
    else:
        assert score in (0.0, 1.0) and check["verdict"] in ("supported", "unsupported") and judgement.valid


# --- hallucination-correction options (the loop itself: tests/stages/answer/test_correction.py) -----------

@pytest.mark.unit
def test_correction_options_at_their_default_leave_the_key_unchanged():
    """A run id hashes the key: a run without correction keeps the id it had before the options."""
    added = {"on_fail", "accept_at", "regenerate_at", "min_retrieval_quality", "max_corrections", "nli_model_path",
             "entailment_threshold", "re_retrieve_strategy"}
    params = GroundednessParams()
    assert params.on_fail == "off" and GroundednessParams.added_fields >= added
    assert params.key_dump() == {k: v for k, v in params.model_dump(mode="json").items() if k not in added}
    assert GroundednessParams(on_fail="regenerate").key_dump()["on_fail"] == "regenerate"


@pytest.mark.unit
def test_unsupported_claims_of_a_judgement_in_order(tmp_path):
    judge, _ = grounded([verdict(False), "??", verdict(False)], tmp_path)
    _, judgement = judge.judge(QUERY, ANSWER, CONTEXTS, JudgementLog())
    assert unsupported_claims(judgement) == ["Cats purr when they are content.", "Cats can fly over houses."]
    assert unsupported_claims(None) == []  # the judge was off
