"""Router: the heuristic as a table of hand-made questions, the llm mode on a scripted LLM; one real-model run."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import ValidationError

from ragkit.errors import LLMError
from ragkit.llms import LLMClient
from ragkit.stages.base import STAGES, JudgementLog
from ragkit.stages.query.router.stage import RouteDecision, RouterJudge, RouterParams
from tests.factories import scripted_llm_class

ScriptedLLM = scripted_llm_class()

SUMMARY = ("3 documents about pets and astronomy.\nTitles: Cats; Dogs; The Sun\n"
           "Frequent distinctive words: cats, purr, fish, dogs, bark, walks, park, star, solar, system")


@dataclass(frozen=True)
class Turn:
    """The shape the router reads from a conversation turn (``ragkit.questions.model.Turn`` has it too)."""

    role: str
    content: str


def heuristic(**params: Any) -> RouterJudge:
    return RouterJudge(RouterParams(mode="heuristic", **params), summary=SUMMARY)


def scripted(replies: list[Any], tmp_path, summary: str = SUMMARY, **params: Any) -> tuple[RouterJudge, Any]:
    backend = ScriptedLLM(replies)
    return RouterJudge(RouterParams(mode="llm", **params), LLMClient(backend, tmp_path), summary=summary), backend


def route_reply(route: str = "documents", relevance: str = "yes", confidence: Any = 0.8, reason: str = "r") -> str:
    return json.dumps({"route": route, "relevance": relevance, "confidence": confidence, "reason": reason})


@pytest.mark.unit
@pytest.mark.parametrize(("question", "route", "relevance"), [
    ("Hello!", "conversational", "no"),
    ("hi there, good morning", "conversational", "no"),
    ("Thanks a lot!", "conversational", "no"),
    ("how are you?", "conversational", "no"),
    ("Why do cats purr?", "documents", "yes"),
    ("Hi! Why do dogs bark in the park?", "documents", "yes"),  # a greeting before a real question
    ("What does a cat like besides chocolate and music?", "documents", "maybe"),
    ("Who won the football match yesterday?", "web", "no"),
    ("What is the capital of France?", "web", "no"),
])
def test_heuristic_routes_a_table_of_questions(question, route, relevance):
    trace = JudgementLog()
    decision = heuristic().route(question, [], trace)
    assert (decision.route, decision.relevance, decision.valid) == (route, relevance, True)
    (judgement,) = trace.judgements
    assert judgement.valid and not judgement.fell_back and judgement.raw_reply is None
    assert judgement.decision["route"] == route and judgement.decision["method"] == "heuristic"


@pytest.mark.unit
def test_heuristic_confidence_and_the_words_it_counted():
    trace = JudgementLog()
    # content words: cats -> cat, purr, chocolate; cat and purr are in the vocabulary: 2/3
    decision = heuristic().route("Do cats purr at chocolate?", [], trace)
    assert decision == RouteDecision("documents", "yes", pytest.approx(0.6667), True,
                                     "2/3 content words in the corpus vocabulary")
    record = trace.judgements[0].decision
    assert record["matched"] == ["cat", "purr"] and record["unmatched"] == ["chocolate"]
    web = heuristic().route("football scores", [], JudgementLog())
    assert (web.route, web.confidence) == ("web", 1.0)
    small_talk = heuristic().route("thanks!", [], JudgementLog())
    assert small_talk.confidence == 0.9


@pytest.mark.unit
def test_heuristic_thresholds_are_params():
    question = "Do cats purr at chocolate?"  # share 2/3
    assert heuristic(yes_share=0.7).route(question, [], JudgementLog()).relevance == "maybe"
    assert heuristic(yes_share=0.9, maybe_share=0.8).route(question, [], JudgementLog()).route == "web"
    with pytest.raises(ValidationError, match="must not exceed yes_share"):
        RouterParams(yes_share=0.3, maybe_share=0.5)
    with pytest.raises(ValidationError):
        RouterParams(yes_share=1.5)


@pytest.mark.unit
@pytest.mark.parametrize(("question", "summary", "problem"), [
    ("What is it?", SUMMARY, "no content words"),
    ("Why do cats purr?", "", "no corpus summary"),
])
def test_heuristic_without_anything_to_compare_takes_the_documents_route(question, summary, problem):
    trace = JudgementLog()
    decision = RouterJudge(RouterParams(mode="heuristic"), summary=summary).route(question, [], trace)
    assert (decision.route, decision.valid) == ("documents", False)
    (judgement,) = trace.judgements
    assert judgement.fell_back and not judgement.valid and problem in (judgement.error or "")


@pytest.mark.unit
def test_off_takes_the_documents_route_and_records_nothing():
    trace = JudgementLog()
    decision = RouterJudge(RouterParams(mode="off")).route("hello", [Turn("user", "hi")], trace)
    assert (decision.route, decision.valid) == ("documents", True) and trace.judgements == []


@pytest.mark.unit
def test_llm_reply_is_the_decision_and_the_prompt_shows_summary_and_history(tmp_path):
    judge, backend = scripted([route_reply("web", "no", 0.7, "news")], tmp_path, history_turns=2)
    history = [Turn("user", "first question"), Turn("assistant", "an   answer"), Turn("user", "a follow-up")]
    trace = JudgementLog()
    decision = judge.route("Who won yesterday?", history, trace)
    assert decision == RouteDecision("web", "no", 0.7, True, "news")
    (judgement,) = trace.judgements
    assert judgement.valid and judgement.decision["route"] == "web" and judgement.raw_reply
    prompt = backend.requests[0][-1]["content"]
    assert f"Documents: {SUMMARY}" in prompt and "Message: Who won yesterday?" in prompt
    assert "Conversation so far:\nassistant: an answer\nuser: a follow-up\n" in prompt  # the last two turns
    assert "first question" not in prompt


@pytest.mark.unit
def test_llm_prompt_has_no_conversation_without_history_and_caps_the_summary(tmp_path):
    judge, backend = scripted([route_reply()], tmp_path, summary="x" * 500, summary_chars=100)
    judge.route("Why do cats purr?", [], JudgementLog())
    prompt = backend.requests[0][-1]["content"]
    assert "Conversation so far" not in prompt
    assert f"Documents: {'x' * 100}\n" in prompt


@pytest.mark.unit
def test_llm_confidence_may_be_left_out(tmp_path):
    judge, _ = scripted(['{"route": "conversational", "relevance": "no"}'], tmp_path)
    decision = judge.route("hi", [], JudgementLog())
    assert (decision.route, decision.confidence, decision.valid) == ("conversational", None, True)


@pytest.mark.unit
@pytest.mark.parametrize("bad", [
    route_reply(route="wikipedia"),
    route_reply(relevance="probably"),
    route_reply(confidence=90),
    "I would use the documents.",
    "",
])
def test_llm_unusable_reply_takes_the_documents_route_recorded_invalid(tmp_path, bad):
    judge, _ = scripted([bad], tmp_path)
    trace = JudgementLog()
    decision = judge.route("Who won yesterday?", [], trace)
    assert (decision.route, decision.valid, decision.confidence) == ("documents", False, None)
    (judgement,) = trace.judgements
    assert (judgement.valid, judgement.fell_back) == (False, True) and judgement.error
    assert judgement.decision["action"] == "fell back" and judgement.raw_reply == bad


@pytest.mark.unit
def test_llm_error_takes_the_documents_route(tmp_path):
    judge, _ = scripted([LLMError("server gone")], tmp_path)
    trace = JudgementLog()
    assert judge.route("Who won yesterday?", [], trace).route == "documents"
    (judgement,) = trace.judgements
    assert judgement.fell_back and not judgement.valid and "server gone" in (judgement.error or "")


@pytest.mark.unit
def test_built_by_name_with_the_summary_as_a_dependency():
    judge = STAGES.build({"type": "router", "params": {"mode": "heuristic", "summary": "llm"}}, llm=None,
                         summary=SUMMARY)
    assert isinstance(judge, RouterJudge) and judge.params.summary == "llm"
    assert judge.route("Why do cats purr?", [], JudgementLog()).route == "documents"
    with pytest.raises(ValueError, match="needs an LLM client"):
        RouterJudge(RouterParams(mode="llm"))
    with pytest.raises(ValidationError):
        RouterParams(summary="magic")


@pytest.mark.integration
def test_real_local_model_gives_a_recorded_well_formed_decision(tmp_path, local_backend):
    client = LLMClient(local_backend, cache_dir=tmp_path)
    judge = RouterJudge(RouterParams(mode="llm", max_tokens=64), client, summary=SUMMARY)
    trace = JudgementLog()
    decision = judge.route("Why do cats purr?", [Turn("user", "hello"), Turn("assistant", "Hi!")], trace)
    (judgement,) = trace.judgements
    assert judgement.raw_reply is not None
    assert decision.route in ("documents", "conversational", "web") and decision.relevance in ("yes", "no", "maybe")
    if judgement.valid:
        assert decision.valid and judgement.decision["route"] == decision.route
        assert decision.confidence is None or 0.0 <= decision.confidence <= 1.0
    else:
        assert judgement.fell_back and decision == RouteDecision("documents", "maybe", None, False, "unusable reply")
