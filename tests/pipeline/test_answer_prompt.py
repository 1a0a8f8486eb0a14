"""The quality gate's retrieval quality reaches the generator's quality-aware instruction through
the pipeline (issue 43 item 9); without a gate the prompt gets none."""

from __future__ import annotations

import pytest

from ragkit.llms import LLMClient
from ragkit.pipeline.pipeline import Pipeline
from ragkit.stages.answer.answer_prompt import QUALITY_TEXT
from ragkit.stages.answer.generator import Generator, GeneratorParams
from tests.doubles import NamedRetriever
from tests.pipeline.test_loops import Gate
from tests.scripted_llm import ScriptedLLM

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("quality", "tier"), [(0.9, "high"), (0.7, "medium"), (0.2, "low"), (None, None)])
def test_the_gates_quality_picks_the_instruction(tmp_path, quality, tier):
    backend = ScriptedLLM(["Cats purr [1]."])
    generator = Generator(GeneratorParams(constrained=False, quality_instructions=True, prompt_layout="xml"),
                          LLMClient(backend, tmp_path))
    gate = Gate(True, web_fallback=False)
    gate.outcome.quality = quality
    retriever = NamedRetriever()
    trace = Pipeline(retriever, retriever, stages=(gate, generator)).answer("cats")
    prompt = backend.requests[0][-1]["content"]
    assert ("<quality>" in prompt) is (tier is not None)
    if tier is not None:
        assert f"<quality>{QUALITY_TEXT[tier]}</quality>" in prompt
    (judgement,) = [j for j in trace.judgements if j.judge == "generator"]
    assert judgement.decision["quality_tier"] == tier


def test_without_a_gate_no_instruction(tmp_path):
    backend = ScriptedLLM(["Cats purr [1]."])
    generator = Generator(GeneratorParams(constrained=False, quality_instructions=True), LLMClient(backend, tmp_path))
    retriever = NamedRetriever()
    Pipeline(retriever, retriever, stages=(generator,)).answer("cats")
    assert not any(text in backend.requests[0][-1]["content"] for text in QUALITY_TEXT.values())
