"""The router in two decisions (``decisions: two``): relevance first, then conversational or web,
each decision its own recorded judgement. The exact call sequence on a scripted LLM, the
heuristic as a table, and one real-model run for the mechanics."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from ragkit.errors import LLMError
from ragkit.llms import LLMClient
from ragkit.stages.base import JudgementLog
from ragkit.stages.query.router.stage import RouteDecision, RouterJudge, RouterParams
from tests.factories import scripted_llm_class
from tests.stages.query.router.test_router import SUMMARY, Turn

ScriptedLLM = scripted_llm_class()


def two_step(replies: list[Any], tmp_path, **params: Any) -> tuple[RouterJudge, Any]:
    backend = ScriptedLLM(replies)
    judge = RouterJudge(RouterParams(mode="llm", decisions="two", **params), LLMClient(backend, tmp_path),
                        summary=SUMMARY)
    return judge, backend


def relevance(value: str, confidence: float = 0.8, reason: str = "r") -> str:
    return json.dumps({"relevance": value, "confidence": confidence, "reason": reason})


def source(route: str, confidence: float = 0.7, reason: str = "s") -> str:
    return json.dumps({"route": route, "confidence": confidence, "reason": reason})


def prompts(backend) -> list[str]:
    return [request[-1]["content"] for request in backend.requests]


@pytest.mark.unit
@pytest.mark.parametrize("verdict", ["yes", "maybe"])
def test_relevant_question_is_one_call_and_goes_to_the_documents(tmp_path, verdict):
    judge, backend = two_step([relevance(verdict, 0.9, "about cats")], tmp_path)
    trace = JudgementLog()
    decision = judge.route("Why do cats purr?", [], trace)
    assert decision == RouteDecision("documents", verdict, 0.9, True, "about cats")
    assert len(backend.requests) == 1  # the second decision is never asked
    (judgement,) = trace.judgements
    assert judgement.decision == {"step": "relevance", "route": "documents", "relevance": verdict,
                                  "confidence": 0.9, "reason": "about cats", "method": "llm"}
    assert judgement.valid and judgement.raw_reply == relevance(verdict, 0.9, "about cats")
    assert "Is the message about the documents?" in prompts(backend)[0]
    assert f"Documents: {SUMMARY}" in prompts(backend)[0]


@pytest.mark.unit
@pytest.mark.parametrize("route", ["conversational", "web"])
def test_irrelevant_question_asks_the_source_second(tmp_path, route):
    judge, backend = two_step([relevance("no", 0.8, "off topic"), source(route, 0.6, "why")], tmp_path,
                              history_turns=1)
    trace = JudgementLog()
    decision = judge.route("Who won yesterday?", [Turn("user", "hi"), Turn("assistant", "hello")], trace)
    assert decision == RouteDecision(route, "no", 0.6, True, "why")
    first, second = prompts(backend)
    assert "Is the message about the documents?" in first and "Documents: " in first
    assert "The documents do not cover this message." in second and "Documents: " not in second
    assert "Conversation so far:\nassistant: hello\n" in second and "Message: Who won yesterday?" in second
    assert [j.decision["step"] for j in trace.judgements] == ["relevance", "source"]
    assert trace.judgements[0].decision["route"] is None and trace.judgements[0].decision["relevance"] == "no"
    assert trace.judgements[1].decision == {"step": "source", "route": route, "relevance": "no",
                                            "confidence": 0.6, "reason": "why", "method": "llm"}
    assert [j.raw_reply for j in trace.judgements] == [relevance("no", 0.8, "off topic"), source(route, 0.6, "why")]


@pytest.mark.unit
def test_the_designs_source_decision_sees_the_question_alone(tmp_path):
    judge, backend = two_step([relevance("no"), source("web")], tmp_path, history_turns=2, source_sees="question")
    judge.route("Who won yesterday?", [Turn("user", "hi"), Turn("assistant", "hello")], JudgementLog())
    first, second = prompts(backend)
    assert "Conversation so far:" in first  # the relevance decision still reads the conversation
    assert "Conversation so far" not in second and "hello" not in second and "Message: Who won yesterday?" in second


@pytest.mark.unit
@pytest.mark.parametrize(("replies", "calls", "failed_step"), [
    (["not json"], 1, "relevance"),
    ([relevance("probably")], 1, "relevance"),
    ([relevance("no"), source("documents")], 2, "source"),  # the source decision has no documents route
    ([relevance("no"), "I'd search the web"], 2, "source"),
    ([LLMError("server gone")], 1, "relevance"),
    ([relevance("no"), LLMError("server gone")], 2, "source"),
])
def test_an_unusable_reply_at_either_decision_takes_the_documents_route_recorded_invalid(
        tmp_path, replies, calls, failed_step):
    judge, backend = two_step(replies, tmp_path)
    trace = JudgementLog()
    decision = judge.route("Who won yesterday?", [], trace)
    assert decision == RouteDecision("documents", "maybe", None, False, "unusable reply")
    assert len(backend.requests) == calls
    last = trace.judgements[-1]
    assert len(trace.judgements) == calls
    assert (last.valid, last.fell_back, last.decision["step"], last.decision["action"]) == \
        (False, True, failed_step, "fell back")


@pytest.mark.unit
def test_one_decision_stays_the_default_and_asks_once(tmp_path):
    assert RouterParams().decisions == "one"
    assert "decisions" not in RouterParams(mode="llm").key_dump()  # off state: no run id changes
    assert RouterParams(mode="llm", decisions="two").key_dump()["decisions"] == "two"
    backend = ScriptedLLM([json.dumps({"route": "web", "relevance": "no", "confidence": 0.7, "reason": "n"})])
    judge = RouterJudge(RouterParams(mode="llm"), LLMClient(backend, tmp_path), summary=SUMMARY)
    trace = JudgementLog()
    assert judge.route("Who won yesterday?", [], trace).route == "web"
    assert len(backend.requests) == 1 and "step" not in trace.judgements[0].decision
    with pytest.raises(ValidationError, match="'one' or 'two'"):
        RouterParams(decisions="three")


@pytest.mark.unit
@pytest.mark.parametrize(("question", "route", "steps", "relevance"), [
    ("Why do cats purr?", "documents", ["relevance"], "yes"),
    ("What does a cat like besides chocolate and music?", "documents", ["relevance"], "maybe"),
    ("Thanks a lot!", "conversational", ["relevance", "source"], "no"),
    ("Hi! Who won the football match yesterday?", "web", ["relevance", "source"], "no"),
    ("What is the capital of France?", "web", ["relevance", "source"], "no"),
])
def test_heuristic_in_two_decisions(question, route, steps, relevance):
    trace = JudgementLog()
    decision = RouterJudge(RouterParams(mode="heuristic", decisions="two"), summary=SUMMARY).route(
        question, [], trace)
    assert (decision.route, decision.relevance, decision.valid) == (route, relevance, True)
    assert [j.decision["step"] for j in trace.judgements] == steps
    assert trace.judgements[0].decision["relevance"] == relevance
    assert trace.judgements[-1].decision["route"] == route
    assert all(j.valid and not j.fell_back for j in trace.judgements)


@pytest.mark.unit
def test_heuristic_in_two_decisions_without_content_words_falls_back_at_the_first():
    trace = JudgementLog()
    decision = RouterJudge(RouterParams(mode="heuristic", decisions="two"), summary=SUMMARY).route(
        "What is it?", [], trace)
    assert (decision.route, decision.valid) == ("documents", False)
    (judgement,) = trace.judgements
    assert judgement.fell_back and judgement.decision["step"] == "relevance"


@pytest.mark.integration
@pytest.mark.slow  # up to two real calls: over 20 s on a loaded 2-core machine
def test_real_local_model_two_decisions_are_recorded_in_order(tmp_path, local_backend):
    client = LLMClient(local_backend, cache_dir=tmp_path)
    judge = RouterJudge(RouterParams(mode="llm", decisions="two", max_tokens=48), client, summary=SUMMARY)
    trace = JudgementLog()
    decision = judge.route("Thanks, bye!", [], trace)
    steps = [j.decision["step"] for j in trace.judgements]
    assert steps in (["relevance"], ["relevance", "source"])
    assert all(j.raw_reply is not None for j in trace.judgements)
    if not all(j.valid for j in trace.judgements):
        assert decision == RouteDecision("documents", "maybe", None, False, "unusable reply")
        assert trace.judgements[-1].fell_back
    elif steps == ["relevance"]:
        assert decision.route == "documents" and decision.relevance in ("yes", "maybe")
    else:
        assert trace.judgements[0].decision["relevance"] == "no"
        assert decision.route in ("conversational", "web") and decision.relevance == "no"
        assert trace.judgements[1].decision["route"] == decision.route
