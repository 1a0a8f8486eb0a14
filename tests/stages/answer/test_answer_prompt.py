"""The agentic design's answer prompt: the XML layout and the quality-aware instructions (issue 43
item 9), with scripted replies; the pipeline passing the gate's quality; one real-model answer."""

from __future__ import annotations

import json
from typing import Any

import pytest
from llama_index.core.schema import NodeWithScore, TextNode

from ragkit.llms import LLMClient
from ragkit.pipeline.answer_checks import quality_for
from ragkit.stages.answer.answer_prompt import QUALITY_TEXT, quality_tier, xml_sources
from ragkit.stages.answer.generator import Generator, GeneratorParams, build_prompt
from ragkit.stages.base import JudgementLog
from tests.scripted_llm import ScriptedLLM

QUERY = "why do cats purr"
NODES = [
    NodeWithScore(node=TextNode(id_="dogs", text="Dogs bark at strangers.", metadata={"file_name": "dogs.txt"}),
                  score=0.5),
    NodeWithScore(node=TextNode(id_="cats", text="Cats purr when content </source> & calm.",
                                metadata={"file_name": "cats.md"}), score=0.4),
]


def generator(tmp_path, replies: list[Any] | None = None, **params: Any) -> tuple[Generator, ScriptedLLM]:
    backend = ScriptedLLM(replies or [json.dumps({"answer": "Cats purr when content [2].", "citations": [2]})])
    return Generator(GeneratorParams(**params), LLMClient(backend, tmp_path)), backend


@pytest.mark.unit
@pytest.mark.parametrize(("quality", "tier"), [
    (None, None), (0.95, "high"), (0.81, "high"), (0.8, "medium"), (0.61, "medium"), (0.6, "low"), (0.0, "low"),
])
def test_the_tiers_are_above_0_8_and_above_0_6(quality, tier):
    assert quality_tier(quality, 0.8, 0.6) == tier


@pytest.mark.unit
@pytest.mark.parametrize(("quality", "tier"), [(0.9, "high"), (0.7, "medium"), (0.3, "low")])
def test_the_instruction_follows_the_retrieval_quality(tmp_path, quality, tier):
    gen, backend = generator(tmp_path, quality_instructions=True)
    trace = JudgementLog()
    gen.generate(QUERY, NODES, trace, retrieval_quality=quality)
    prompt = backend.requests[0][-1]["content"]
    assert QUALITY_TEXT[tier] in prompt
    assert [text for text in QUALITY_TEXT.values() if text in prompt] == [QUALITY_TEXT[tier]]
    assert prompt.index(QUALITY_TEXT[tier]) < prompt.index("Reply as JSON")  # just before the ask
    decision = trace.judgements[0].decision
    assert (decision["retrieval_quality"], decision["quality_tier"]) == (quality, tier)


@pytest.mark.unit
def test_an_unknown_quality_or_the_option_off_adds_no_instruction(tmp_path):
    gen, backend = generator(tmp_path, replies=["x"] * 2, quality_instructions=True, constrained=False)
    gen.generate(QUERY, NODES, JudgementLog(), retrieval_quality=None)
    off, off_backend = generator(tmp_path / "off", replies=["x"], constrained=False)
    off.generate(QUERY, NODES, JudgementLog(), retrieval_quality=0.95)
    plain = build_prompt(QUERY, ["Dogs bark at strangers.", "Cats purr when content </source> & calm."], False)
    assert backend.requests[0][-1]["content"] == plain == off_backend.requests[0][-1]["content"]


@pytest.mark.unit
def test_the_xml_layout_puts_each_part_in_its_element(tmp_path):
    gen, backend = generator(tmp_path, prompt_layout="xml", show_file_name=True, quality_instructions=True)
    answer = gen.generate(QUERY, NODES, JudgementLog(), feedback=["Cats bark."], retrieval_quality=0.9)
    prompt = backend.requests[0][-1]["content"]
    assert answer.citations == ["cats"]  # the numbers are the source ids
    body = prompt.split("</example>\n", 1)[1]
    assert body == (
        '<sources>\n<source id="1" file="dogs.txt">Dogs bark at strangers.</source>\n'
        '<source id="2" file="cats.md">Cats purr when content &lt;/source&gt; &amp; calm.</source>\n</sources>\n'
        f"<question>{QUERY}</question>\n"
        "<feedback>These statements were not supported by the sources; do not repeat them unless a source states "
        "them:\n<claim>Cats bark.</claim>\n</feedback>\n"
        f"<quality>{QUALITY_TEXT['high']}</quality>\n"
        "<instructions>Reply as JSON with answer and citations.</instructions>")
    assert prompt.startswith('<example>\n<sources>\n<source id="1">Stocks fell')
    assert "(file:" not in prompt  # the file is an attribute, not a label in the text


@pytest.mark.unit
def test_the_xml_sources_go_to_the_system_message_with_context_in_system(tmp_path):
    gen, backend = generator(tmp_path, prompt_layout="xml", context_in="system", system_prompt="Be a librarian.")
    gen.generate(QUERY, NODES, JudgementLog())
    system, user = backend.requests[0][0]["content"], backend.requests[0][-1]["content"]
    assert system == "Be a librarian.\n\n" + xml_sources(
        ["Dogs bark at strangers.", "Cats purr when content </source> & calm."])
    assert "Dogs bark" not in user and f"<question>{QUERY}</question>" in user


@pytest.mark.unit
def test_the_options_at_their_default_keep_the_key_and_bad_tiers_are_refused():
    params = GeneratorParams()
    assert not {"prompt_layout", "quality_instructions", "quality_high", "quality_low"} & set(params.key_dump())
    assert "prompt_layout" in GeneratorParams(prompt_layout="xml").key_dump()
    with pytest.raises(ValueError, match="quality_low"):
        GeneratorParams(quality_low=0.9, quality_high=0.8)


@pytest.mark.unit
def test_the_pipeline_gives_the_quality_only_to_a_generator_that_reads_it():
    class Plugin:
        inputs = ("question", "history", "nodes")

    assert quality_for(Generator, 0.7) == {"retrieval_quality": 0.7}
    assert quality_for(Plugin(), 0.7) == {}


@pytest.mark.integration
@pytest.mark.slow  # about 30 s on a shared CPU, the model's load included
def test_real_local_model_answers_from_the_xml_prompt(tmp_path, local_backend):
    client = LLMClient(local_backend, cache_dir=tmp_path)
    trace = JudgementLog()
    gen = Generator(GeneratorParams(max_tokens=40, constrained=False, prompt_layout="xml", quality_instructions=True),
                    client)
    answer = gen.generate(QUERY, NODES, trace, retrieval_quality=0.7)
    assert answer.prompt.startswith("<example>") and QUALITY_TEXT["medium"] in answer.prompt
    (judgement,) = trace.judgements
    assert judgement.raw_reply is not None and judgement.decision["quality_tier"] == "medium"
    assert set(answer.citations) <= {"dogs", "cats"} and answer.valid == bool(answer.text)
