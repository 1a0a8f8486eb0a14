"""The self-RAG verifier's reformulation rules (quality gate, llm mode): in the prompt of every
round when on, absent when off, and out of the spec where they cannot apply."""

from __future__ import annotations

import json

import pytest
from llama_index.core.schema import NodeWithScore, TextNode

from ragkit.errors import ConfigError
from ragkit.llms import LLMClient
from ragkit.stages.base import STAGES, JudgementLog
from ragkit.stages.retrieval.quality_gate.reformulation_rules import RULES
from ragkit.stages.retrieval.quality_gate.stage import QualityGate, QualityGateParams
from tests.scripted_llm import ScriptedLLM

QUERY = "how long is the default visibility timeout"
RULES_HEADER = "Rules for reformulated_query:"


def retrieve(query: str) -> list[NodeWithScore]:
    return [NodeWithScore(node=TextNode(id_=f"{query}:0", text="jobs are retried five times"), score=0.2)]


def run_gate(replies: list[str], tmp_path, **params) -> tuple[ScriptedLLM, JudgementLog]:
    backend = ScriptedLLM(replies)
    gate = QualityGate(QualityGateParams(max_retries=2, **params), LLMClient(backend, tmp_path))
    trace = JudgementLog()
    gate.run(QUERY, retrieve, trace)
    return backend, trace


def prompts(backend: ScriptedLLM) -> list[str]:
    return [messages[-1]["content"] for messages in backend.requests]


@pytest.mark.unit
@pytest.mark.parametrize(("verdict", "replies"), [
    ("binary", [json.dumps({"sufficient": False, "reformulated_query": "visibility_timeout default seconds"}),
                json.dumps({"sufficient": True})]),
    ("scored", [json.dumps({"score": 10, "issue": "off_topic", "reformulated_query": "visibility_timeout default"}),
                json.dumps({"score": 90})]),
])
def test_design_rules_close_the_prompt_of_every_round(tmp_path, verdict, replies):
    backend, trace = run_gate(replies, tmp_path, verdict=verdict, reformulation_rules="design")
    sent = prompts(backend)
    assert len(sent) == 2
    for prompt in sent:
        assert prompt.endswith("\n" + RULES["design"])
        rules = prompt[prompt.index(RULES_HEADER):].splitlines()
        assert rules[1].startswith("1. Keep the question's intent") and rules[-1] == (
            "6. One line of at most 12 words, no explanation.")
    assert [j.decision.get("reformulation_rules") for j in trace.judgements] == ["design", "design"]


@pytest.mark.unit
def test_off_sends_todays_prompt(tmp_path):
    replies = [json.dumps({"sufficient": False, "reformulated_query": "visibility timeout"}),
               json.dumps({"sufficient": True})]
    with_rules, _ = run_gate(replies, tmp_path / "on", reformulation_rules="design")
    without, trace = run_gate(replies, tmp_path / "off")
    assert all(RULES_HEADER not in prompt for prompt in prompts(without))
    assert [p + "\n" + RULES["design"] for p in prompts(without)] == prompts(with_rules)
    assert all("reformulation_rules" not in j.decision for j in trace.judgements)


@pytest.mark.unit
def test_the_rules_enter_the_spec_only_in_llm_mode_and_bad_values_name_the_choices():
    def resolved(**params):
        return STAGES.resolve({"type": "quality_gate", "params": params}).params

    assert resolved(mode="heuristic", reformulation_rules="design") == resolved(mode="heuristic")
    assert resolved(mode="off", reformulation_rules="design") == resolved(mode="off")
    assert resolved(mode="llm", reformulation_rules="design") != resolved(mode="llm")
    assert "reformulation_rules" not in resolved(mode="llm", reformulation_rules="none")
    with pytest.raises(ConfigError) as error:
        STAGES.resolve({"type": "quality_gate", "params": {"mode": "llm", "reformulation_rules": "strict"}})
    assert "'none' or 'design'" in str(error.value) and "\n" not in str(error.value)


@pytest.mark.integration
def test_real_local_model_reads_the_rules_and_its_verdict_is_recorded(local_backend, tmp_path):
    gate = QualityGate(QualityGateParams(max_retries=1, max_tokens=48, chunk_chars=80, reformulation_rules="design"),
                       LLMClient(local_backend, cache_dir=tmp_path))
    trace = JudgementLog()
    result = gate.run(QUERY, retrieve, trace)
    assert result and 1 <= len(trace.judgements) <= 2
    first = trace.judgements[0]
    assert first.raw_reply is not None
    assert first.decision.get("reformulation_rules") == "design" or first.fell_back
