"""The generator's context sizing (``context_fit``) and answer temperature: a 1,000-character chunk
reaches an Ollama-sized prompt whole, the bundled SmolLM2 keeps its 400/2,000 limits, and every
answer records what was cut."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from llama_index.core.schema import NodeWithScore, TextNode

from ragkit.llms import LLMClient, llms
from ragkit.llms.base import BackendReply
from ragkit.stages.answer.context_fit import (
    CHARS_PER_TOKEN,
    LINE_OVERHEAD_CHARS,
    TEMPLATE_TOKENS,
    cut_record,
    whole_chunks_first,
    window_budget_chars,
)
from ragkit.stages.answer.generator import Generator, GeneratorParams
from ragkit.stages.base import JudgementLog
from tests.scripted_llm import ScriptedLLM, ScriptedParams

QUERY = "what does the long passage say"
# 1,000 characters, no run of whitespace (the prompt shows each chunk on one line, spaces collapsed).
LONG = ("word " * 200).strip()[:999] + "."


def node(chunk_id: str, text: str) -> NodeWithScore:
    return NodeWithScore(node=TextNode(id_=chunk_id, text=text), score=0.5)


class WindowParams(ScriptedParams):
    context_window: int = 8192  # as Ollama's num_ctx would declare it


class WindowedLLM(ScriptedLLM):
    """A scripted backend that declares an Ollama-sized window and records the temperature of each call."""

    Params: ClassVar[type[ScriptedParams]] = WindowParams

    def __init__(self, replies: list[Any], **params: Any) -> None:
        super().__init__(replies)
        self.params = WindowParams(**params)
        self.temperatures: list[float] = []

    def _chat(self, messages, *, json_schema, max_tokens) -> BackendReply:
        self.temperatures.append(self.params.temperature)
        return super()._chat(messages, json_schema=json_schema, max_tokens=max_tokens)


def generate(backend: Any, tmp_path, nodes: list[NodeWithScore], **params: Any) -> tuple[str, dict]:
    gen = Generator(GeneratorParams(constrained=False, **params), LLMClient(backend, tmp_path))
    trace = JudgementLog()
    answer = gen.generate(QUERY, nodes, trace)
    return answer.prompt, trace.judgements[-1].decision


@pytest.mark.unit
def test_a_1000_character_chunk_reaches_an_ollama_sized_prompt_whole(tmp_path):
    prompt, decision = generate(WindowedLLM(["It says words [1]."]), tmp_path, [node("long", LONG)],
                                context_fit="window")
    assert f"[1] {LONG}\n" in prompt
    assert decision["context"] == {"sizing": "window", "window_tokens": 8192,
                                   "budget_chars": decision["context"]["budget_chars"], "chunks_whole": 1,
                                   "chunks_cut": 0, "chunks_left_out": 0, "chars_dropped": 0}
    # The same backend under the fixed limits (the default): the chunk is cut to 400 characters.
    prompt, decision = generate(WindowedLLM(["It says words [1]."]), tmp_path / "fixed", [node("long", LONG)])
    assert f"[1] {LONG[:400]}\n" in prompt and LONG[:401] not in prompt
    assert decision["context"] == {"sizing": "fixed", "chunk_chars": 400, "budget_chars": 2000, "chunks_whole": 0,
                                   "chunks_cut": 1, "chunks_left_out": 0, "chars_dropped": 600}


@pytest.mark.unit
def test_the_window_budget_counts_the_prompt_and_the_answer():
    # 4,096 tokens - 80 answer - 32 template - ceil(600 / 3) = 200 prompt = 3,784 tokens of sources.
    assert (CHARS_PER_TOKEN, TEMPLATE_TOKENS) == (3, 32)
    assert window_budget_chars(4096, 80, 600) == 3784 * 3
    assert window_budget_chars(4096, 80, 601) == 3783 * 3  # a started token counts whole
    assert window_budget_chars(256, 200, 300) == 0  # never negative


@pytest.mark.unit
def test_whole_chunks_first_then_the_next_cut_to_what_is_left_and_the_rest_left_out():
    nodes = [node(name, name[0] * 100) for name in ("a1", "b2", "c3", "d4")]
    assert LINE_OVERHEAD_CHARS == 6
    # 250: a (100 + 6) leaves 144, b (106) leaves 38, c gets 38 - 6 = 32 characters; d is left out.
    shown = whole_chunks_first(nodes, max_chunks=5, budget_chars=250)
    assert [(n.node.node_id, len(text)) for n, text in shown] == [("a1", 100), ("b2", 100), ("c3", 32)]
    assert cut_record(nodes, shown) == {"chunks_whole": 2, "chunks_cut": 1, "chunks_left_out": 1,
                                        "chars_dropped": 68 + 100}
    # Exactly enough for two whole chunks: nothing is cut, the rest is left out.
    shown = whole_chunks_first(nodes, max_chunks=5, budget_chars=212)
    assert [len(text) for _, text in shown] == [100, 100]
    assert cut_record(nodes, shown)["chunks_cut"] == 0
    # max_chunks still caps how many are shown, however large the window.
    assert len(whole_chunks_first(nodes, max_chunks=3, budget_chars=10**6)) == 3


@pytest.mark.unit
def test_a_small_window_cuts_the_context_and_the_answer_says_what_was_cut(tmp_path):
    nodes = [node(f"c{number}", LONG) for number in range(3)]
    backend = WindowedLLM(["It says words [1]."], context_window=900)
    prompt, decision = generate(backend, tmp_path, nodes, context_fit="window", max_tokens=100)
    record = decision["context"]
    assert record["window_tokens"] == 900 and record["chunks_whole"] == 1 and record["chunks_cut"] == 1
    assert record["chunks_left_out"] == 1
    # The first chunk whole, the second cut to the rest of the budget (each line costs its "[n] " too).
    shown_chars = record["budget_chars"] - 2 * LINE_OVERHEAD_CHARS
    assert record["chars_dropped"] == 3 * 1000 - shown_chars
    assert f"[1] {LONG}\n[2] {LONG[:shown_chars - 1000]}\nQuestion" in prompt
    # The prompt the model got stays within the window by the estimate.
    assert len(backend.requests[0][0]["content"]) + len(prompt) <= (900 - 100 - TEMPLATE_TOKENS) * CHARS_PER_TOKEN


@pytest.mark.unit
def test_file_names_shown_take_room_in_the_window(tmp_path):
    """``show_file_name`` puts "(file: NAME) " before each chunk: the window's budget counts it, so
    the prompt stays within the window's estimate and the cut chunk is shorter by the names."""
    named = [NodeWithScore(node=TextNode(id_=f"c{number}", text=LONG, metadata={"file_name": f"report-{number}.pdf"}),
                           score=0.5) for number in range(3)]
    backend = WindowedLLM(["It says words [1]."], context_window=900)
    prompt, decision = generate(backend, tmp_path, named, context_fit="window", max_tokens=100, show_file_name=True)
    labels = [f"(file: report-{number}.pdf) " for number in range(2)]
    shown_chars = decision["context"]["budget_chars"] - 2 * LINE_OVERHEAD_CHARS - sum(map(len, labels))
    assert f"[1] {labels[0]}{LONG}\n[2] {labels[1]}{LONG[:shown_chars - 1000]}\nQuestion" in prompt
    assert len(backend.requests[0][0]["content"]) + len(prompt) <= (900 - 100 - TEMPLATE_TOKENS) * CHARS_PER_TOKEN
    # Fixed limits do not count the name: the same 400 characters with or without it.
    prompt, _ = generate(ScriptedLLM(["It says words [1]."]), tmp_path / "fixed", named[:1], show_file_name=True)
    assert f"[1] (file: report-0.pdf) {LONG[:400]}\n" in prompt


@pytest.mark.unit
def test_which_backends_declare_a_window():
    assert llms.build({"type": "ollama"}).context_window() == 4096
    assert llms.build({"type": "ollama", "params": {"context_window": 32768}}).context_window() == 32768
    assert llms.build({"type": "local"}).context_window() is None  # the bundled SmolLM2-135M: fixed limits
    assert llms.build({"type": "local", "params": {"model_path": "/models/own.gguf"}}).context_window() == 4096
    assert llms.build({"type": "openai", "params": {"model": "m"}}).context_window() is None


@pytest.mark.unit
def test_window_mode_on_a_backend_without_a_window_keeps_the_fixed_limits_and_says_why(tmp_path):
    prompt, decision = generate(ScriptedLLM(["It says words [1]."]), tmp_path, [node("long", LONG)],
                                context_fit="window")
    assert f"[1] {LONG[:400]}\n" in prompt
    assert decision["context"]["sizing"] == "fixed" and "no context window" in decision["context"]["reason"]


@pytest.mark.unit
def test_the_answers_temperature_reaches_the_backend_and_leaves_the_llm_as_it_was(tmp_path):
    backend = WindowedLLM(["It says words [1].", "It says words [1]."])
    client = LLMClient(backend, tmp_path)
    Generator(GeneratorParams(temperature=0.1), client).generate(QUERY, [node("long", LONG)], JudgementLog())
    Generator(GeneratorParams(), client).generate(QUERY, [node("long", LONG)], JudgementLog())
    assert backend.temperatures == [0.1, 0.0]  # two calls: another temperature is another cache key
    assert backend.params.temperature == 0.0
    assert [usage.llm_calls for usage in client.usage_by_stage()] == [2]  # both recorded on the run's client


@pytest.mark.integration
def test_the_embedded_model_keeps_the_old_limits_in_window_mode(local_backend, tmp_path):
    """On the real SmolLM2-135M, ``context_fit: window`` shows what the fixed limits show: 400 characters."""
    gen = Generator(GeneratorParams(constrained=False, context_fit="window", max_tokens=8),
                    LLMClient(local_backend, tmp_path))
    trace = JudgementLog()
    answer = gen.generate(QUERY, [node("long", LONG)], trace)
    assert f"[1] {LONG[:400]}\nQuestion" in answer.prompt
    record = trace.judgements[-1].decision["context"]
    assert record["sizing"] == "fixed" and (record["chunk_chars"], record["budget_chars"]) == (400, 2000)
    assert (record["chunks_cut"], record["chars_dropped"]) == (1, 600)
    assert answer.error is None or answer.text  # the model answered something (mechanics only)
