"""Generator: citations mapped to chunk ids, reply modes, context caps and bad replies; one real-model run."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from llama_index.core.schema import NodeWithScore, TextNode

from ragkit.errors import LLMError
from ragkit.llms import LLMClient, llms
from ragkit.stages.answer.generator import Answer, Generator, GeneratorParams, cited_numbers
from ragkit.stages.base import STAGES, JudgementLog
from tests.scripted_llm import ScriptedLLM

QUERY = "why do cats purr"
TEXTS = {
    "dogs": "Dogs bark at strangers and are loyal companions.",
    "cats": "Cats purr when they are content, and felines sleep most of the day.",
    "market": "The stock market fell after the central bank raised interest rates.",
}
NODES = [NodeWithScore(node=TextNode(id_=chunk_id, text=text), score=0.5) for chunk_id, text in TEXTS.items()]


def generator(replies: list[Any], tmp_path, **params: Any) -> tuple[Generator, ScriptedLLM, LLMClient]:
    backend = ScriptedLLM(replies)
    client = LLMClient(backend, tmp_path)
    return Generator(GeneratorParams(**params), client), backend, client


def answer_json(answer: str, citations: list[Any]) -> str:
    return json.dumps({"answer": answer, "citations": citations})


@pytest.mark.unit
def test_citations_map_to_the_chunks_shown(tmp_path):
    gen, backend, client = generator([answer_json("Cats purr when content [2].", [2])], tmp_path)
    trace = JudgementLog()
    answer = gen.generate(QUERY, NODES, trace)
    assert isinstance(answer, Answer)
    assert (answer.text, answer.citations, answer.valid) == ("Cats purr when content [2].", ["cats"], True)
    assert answer.prompt == backend.requests[0][-1]["content"]
    assert "[2] Cats purr" in answer.prompt and f"Question: {QUERY}" in answer.prompt
    assert backend.calls[0]["json_schema"] is not None
    (judgement,) = trace.judgements
    assert judgement.judge == "generator" and judgement.valid and not judgement.fell_back
    assert judgement.decision["prompt"] == answer.prompt and judgement.decision["citations"] == ["cats"]
    assert [usage.stage for usage in client.usage_by_stage()] == ["generate"]


@pytest.mark.unit
@pytest.mark.parametrize(
    ("reply", "expected_ids", "dropped"),
    [
        (answer_json("Cats purr [2] and dogs bark [1].", []), ["cats", "dogs"], []),  # from the markers
        (answer_json("Cats purr [2].", [3, 2]), ["market", "cats"], []),  # listed order first, each once
        (answer_json("Cats purr [7].", [0, 2]), ["cats"], [0, 7]),  # out of range dropped, recorded
        (answer_json("I do not know.", []), [], []),
    ],
)
def test_citations_from_the_list_and_the_markers(tmp_path, reply, expected_ids, dropped):
    gen, _, _ = generator([reply], tmp_path)
    trace = JudgementLog()
    answer = gen.generate(QUERY, NODES, trace)
    assert answer.citations == expected_ids and answer.valid
    assert sorted(trace.judgements[0].decision["dropped_citations"]) == dropped


@pytest.mark.unit
def test_free_text_mode_reads_citation_markers_and_sends_no_schema(tmp_path):
    gen, backend, _ = generator(["Cats purr when content [2, 3]. Also [1]."], tmp_path, constrained=False)
    answer = gen.generate(QUERY, NODES, JudgementLog())
    assert answer.citations == ["cats", "market", "dogs"] and answer.valid
    assert backend.calls[0]["json_schema"] is None
    assert "cite sources like [1]" in answer.prompt


@pytest.mark.unit
def test_a_reply_in_a_code_fence_is_read(tmp_path):
    gen, _, _ = generator(["```json\n" + answer_json("Cats purr [2].", [2]) + "\n```"], tmp_path)
    answer = gen.generate(QUERY, NODES, JudgementLog())
    assert (answer.text, answer.citations, answer.valid) == ("Cats purr [2].", ["cats"], True)


@pytest.mark.unit
def test_unparseable_json_keeps_the_raw_text_marked_invalid(tmp_path):
    raw = '{"answer": "Cats purr when content [2].", "citations": [2'
    gen, _, _ = generator([raw], tmp_path)
    trace = JudgementLog()
    answer = gen.generate(QUERY, NODES, trace)
    assert answer.text == raw and answer.citations == ["cats"]
    assert not answer.valid and answer.error
    assert not trace.judgements[0].valid and trace.judgements[0].fell_back
    assert trace.judgements[0].raw_reply == raw


@pytest.mark.unit
@pytest.mark.parametrize("reply", ["", "   ", answer_json("  ", [1])])
def test_an_empty_reply_is_an_invalid_empty_answer(tmp_path, reply):
    gen, _, _ = generator([reply], tmp_path)
    trace = JudgementLog()
    answer = gen.generate(QUERY, NODES, trace)
    assert answer.text == "" and answer.citations == [] and not answer.valid
    assert not trace.judgements[0].valid


@pytest.mark.unit
def test_a_backend_error_is_an_invalid_answer_not_a_crash(tmp_path):
    gen, _, _ = generator([LLMError("llm 'scripted': down")], tmp_path)
    trace = JudgementLog()
    answer = gen.generate(QUERY, NODES, trace)
    assert answer.text == "" and not answer.valid and "down" in answer.error
    assert trace.judgements[0].fell_back and trace.judgements[0].error


@pytest.mark.unit
def test_the_context_is_capped_per_chunk_in_count_and_in_total(tmp_path):
    nodes = [NodeWithScore(node=TextNode(id_=f"c{i}", text=f"chunk{i} " + "x" * 500), score=1.0) for i in range(8)]
    gen, _, _ = generator([answer_json("a [3].", [3])], tmp_path, max_chunks=4, chunk_chars=100,
                          max_context_chars=250)
    trace = JudgementLog()
    answer = gen.generate(QUERY, nodes, trace)
    assert trace.judgements[0].decision["shown"] == ["c0", "c1", "c2"]  # 100 + 100 + 50 chars
    assert "chunk3" not in answer.prompt and "[3] chunk2 " in answer.prompt
    assert answer.citations == ["c2"]


@pytest.mark.unit
def test_no_chunks_still_asks_and_cites_nothing(tmp_path):
    gen, _, _ = generator([answer_json("I cannot tell [1].", [1])], tmp_path)
    answer = gen.generate(QUERY, [], JudgementLog())
    assert "(no sources)" in answer.prompt and answer.citations == []


@pytest.mark.unit
def test_cited_numbers():
    assert cited_numbers("a [1] b [2,3] c [ 4 ] d [1] e [x] f [10]") == [1, 2, 3, 10]


@pytest.mark.unit
def test_the_generator_has_no_off_mode_and_needs_an_llm():
    with pytest.raises(ValueError, match="no mode 'off'"):
        Generator(GeneratorParams(mode="off"))
    with pytest.raises(ValueError, match="needs an LLM client"):
        Generator(GeneratorParams())


@pytest.mark.unit
def test_builds_through_the_judges_registry(tmp_path):
    client = LLMClient(ScriptedLLM(["x"]), tmp_path)
    with STAGES.registered("generator", Generator):
        gen = STAGES.build({"type": "generator", "params": {"constrained": False}}, llm=client)
    assert isinstance(gen, Generator) and gen.llm is client


@pytest.mark.integration
def test_real_local_model_answers_with_a_recorded_judgement(tmp_path):
    client = LLMClient(llms.build({"type": "local"}), cache_dir=tmp_path)
    trace = JudgementLog()
    answer = Generator(GeneratorParams(max_tokens=48, chunk_chars=120), client).generate(QUERY, NODES, trace)
    assert isinstance(answer.text, str) and answer.prompt
    assert set(answer.citations) <= set(TEXTS)
    (judgement,) = trace.judgements
    assert judgement.judge == "generator" and judgement.raw_reply is not None
    assert judgement.valid == answer.valid
    assert answer.valid or (judgement.fell_back and answer.error)


# --- options added with the agentic loops ---------------------------------------------------------

@pytest.mark.unit
def test_default_prompt_is_the_one_before_the_options_existed():
    from ragkit.stages.answer.generator import build_prompt

    before = (
        "Example:\nSources:\n[1] Stocks fell after the rate rise.\n[2] Air scatters blue light more than red light."
        "\nQuestion: Why is the sky blue?\nAir scatters blue light more than red [2].\n\n"
        "Sources:\n[1] a\n[2] b\nQuestion: q\nAnswer in one or two sentences and cite sources like [1]."
    )
    assert build_prompt("q", ["a", "b"], constrained=False) == before
    assert build_prompt("q", ["a", "b"], constrained=False, feedback=(), conversation="") == before


@pytest.mark.unit
def test_abstain_text_answers_without_a_call_when_no_chunk_is_left(tmp_path):
    gen, backend, _ = generator(["unused"], tmp_path, abstain_text="not in the documents")
    trace = JudgementLog()
    answer = gen.generate(QUERY, [], trace)
    assert (answer.text, answer.abstained, answer.valid, answer.citations) == ("not in the documents", True, True, [])
    assert backend.requests == []
    (judgement,) = trace.judgements
    assert judgement.decision["action"] == "abstained" and judgement.valid


@pytest.mark.unit
def test_without_abstain_text_an_empty_context_still_asks_the_model(tmp_path):
    gen, backend, _ = generator([answer_json("I cannot tell.", [])], tmp_path)
    answer = gen.generate(QUERY, [], JudgementLog())
    assert len(backend.requests) == 1 and not answer.abstained and "(no sources)" in answer.prompt


@pytest.mark.unit
def test_system_prompt_replaces_the_system_message(tmp_path):
    gen, backend, _ = generator([answer_json("Content [2].", [2])], tmp_path, system_prompt="Be terse.")
    gen.generate(QUERY, NODES, JudgementLog())
    messages = backend.requests[0]
    assert messages[0] == {"role": "system", "content": "Be terse."}


@pytest.mark.unit
def test_feedback_and_history_add_their_blocks(tmp_path):
    from ragkit.questions import Turn

    gen, backend, _ = generator([answer_json("Content [2].", [2])], tmp_path, history_turns=1, turn_chars=20)
    history = [Turn(role="user", content="Tell me about cats."), Turn(role="assistant", content="Cats are " + "x" * 50)]
    trace = JudgementLog()
    answer = gen.generate(QUERY, NODES, trace, feedback=["Cats bark."], history=history)
    prompt = backend.requests[0][-1]["content"]
    assert "Conversation so far:\nassistant: Cats are xxxxxxxxxxx\nSources:" in prompt
    assert "tell me about cats" not in prompt.lower()  # only the last turn is shown
    assert "do not repeat them unless a source states them:\n- Cats bark.\nReply as JSON" in prompt
    assert answer.prompt == prompt and trace.judgements[0].decision["feedback"] == ["Cats bark."]


@pytest.mark.unit
def test_converse_answers_without_sources_and_abstain_says_not_found(tmp_path):
    gen, backend, _ = generator(["Hello! How can I help?"], tmp_path)
    trace = JudgementLog()
    reply = gen.converse("hi there", [], trace)
    assert reply.text == "Hello! How can I help?" and reply.valid and reply.citations == []
    assert "Sources" not in backend.requests[0][-1]["content"]
    assert trace.judgements[0].decision["route"] == "conversational"
    abstained = gen.abstain("who won the cup", "no web search provider", trace)
    assert (abstained.text, abstained.abstained) == ("not found", True) and len(backend.requests) == 1
    assert trace.judgements[-1].decision["reason"] == "no web search provider"


@pytest.mark.unit
def test_the_options_at_their_default_leave_the_key_unchanged():
    added = {"system_prompt", "abstain_text", "history_turns", "turn_chars", "context_fit", "temperature",
             "show_file_name", "context_in", "prompt_layout", "quality_instructions", "quality_high", "quality_low"}
    params = GeneratorParams()
    assert GeneratorParams.added_fields >= added
    assert params.key_dump() == {k: v for k, v in params.model_dump(mode="json").items() if k not in added}


@pytest.mark.unit
def test_abstain_uses_abstain_text_when_set_and_history_reaches_converse(tmp_path):
    from ragkit.stages.answer.generator import CONVERSE_SYSTEM

    @dataclass
    class Turn:  # any object with role and content will do
        role: str
        content: str

    gen, backend, _ = generator(["Fine, thanks."], tmp_path, abstain_text="Not in the documents.")
    trace = JudgementLog()
    assert gen.abstain("q", "the gate failed", trace).text == "Not in the documents." and backend.requests == []
    gen.converse("and you?", [Turn("user", "hi"), Turn("assistant", "Hello!")], trace)
    system, user = backend.requests[0]
    assert system == {"role": "system", "content": CONVERSE_SYSTEM}
    assert user["content"] == ("Conversation so far:\nuser: hi\nassistant: Hello!\nuser: and you?\n"
                               "Reply in one or two sentences.")
    assert backend.calls[0]["json_schema"] is None
    assert [usage.stage for usage in gen.llm_client().usage_by_stage()] == ["generate"]


@pytest.mark.integration
def test_real_local_model_converses_with_a_recorded_judgement(tmp_path):
    client = LLMClient(llms.build({"type": "local"}), cache_dir=tmp_path)
    trace = JudgementLog()
    reply = Generator(GeneratorParams(max_tokens=32), client).converse("hello, how are you?", [], trace)
    (judgement,) = trace.judgements
    assert judgement.judge == "generator" and judgement.raw_reply is not None
    assert reply.valid == bool(reply.text) and judgement.decision["route"] == "conversational"
