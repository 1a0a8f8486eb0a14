"""Condense: follow-ups rewritten into standalone queries, no call without history, bad replies
recorded invalid; one real-model run."""

from __future__ import annotations

import json

import pytest

from ragkit.errors import LLMError
from ragkit.llms import LLMClient, llms
from ragkit.questions import Turn
from ragkit.stages.base import JudgementLog
from ragkit.stages.query.condense import CondenseJudge, CondenseParams, heuristic_rewrite
from tests.factories import scripted_llm_class

ScriptedLLM = scripted_llm_class()
HISTORY = [Turn(role="user", content="Tell me about the MERS coronavirus."),
           Turn(role="assistant", content="MERS is a respiratory disease first seen in 2012.")]


@pytest.mark.unit
@pytest.mark.parametrize(("question", "history", "expected"), [
    ("What is its incubation period?", HISTORY, "What is its incubation period? mers coronavirus"),
    ("What about MERS transmission?", HISTORY, "What about MERS transmission? coronavirus"),
    ("What is its incubation period?", [Turn(role="assistant", content="Hello!")], "What is its incubation period?"),
])
def test_heuristic_adds_the_last_user_turns_missing_words(question, history, expected):
    assert heuristic_rewrite(question, history) == expected


@pytest.mark.unit
@pytest.mark.parametrize("mode", ["heuristic", "llm"])
def test_without_history_the_question_is_unchanged_with_no_call_and_no_record(tmp_path, mode):
    backend = ScriptedLLM(["{}"])
    judge = CondenseJudge(CondenseParams(mode=mode), LLMClient(backend, tmp_path))
    trace = JudgementLog()
    assert judge.rewrite("why do cats purr", [], trace) == "why do cats purr"
    assert backend.requests == [] and trace.judgements == []


@pytest.mark.unit
@pytest.mark.parametrize(("reply", "expected", "valid"), [
    (json.dumps({"question": "What is the  incubation period of MERS?"}), "What is the incubation period of MERS?",
     True),
    (json.dumps({"question": "  "}), "What is its incubation period?", False),
    ("MERS incubation", "What is its incubation period?", False),
    (LLMError("timed out"), "What is its incubation period?", False),
])
def test_llm_rewrites_or_keeps_the_question(tmp_path, reply, expected, valid):
    backend = ScriptedLLM([reply])
    judge = CondenseJudge(CondenseParams(mode="llm", history_turns=1, turn_chars=30), LLMClient(backend, tmp_path))
    trace = JudgementLog()
    assert judge.rewrite("What is its incubation period?", HISTORY, trace) == expected
    (judgement,) = trace.judgements
    assert judgement.judge == "condense" and judgement.valid is valid
    prompt = backend.requests[0][-1]["content"]
    # only the last turn, cut to 30 characters
    assert "Conversation so far:\nassistant: MERS is a respiratory disease \nFollow-up:" in prompt
    assert "Tell me about" not in prompt.split("Follow-up: What is its incubation")[1]


@pytest.mark.integration
def test_real_local_model_gives_a_recorded_standalone_question(tmp_path):
    client = LLMClient(llms.build({"type": "local"}), cache_dir=tmp_path)
    trace = JudgementLog()
    standalone = CondenseJudge(CondenseParams(mode="llm"), client).rewrite("What is its incubation period?",
                                                                           HISTORY, trace)
    (judgement,) = trace.judgements
    assert judgement.raw_reply is not None and standalone.strip()
    assert judgement.valid or (judgement.fell_back and standalone == "What is its incubation period?")
