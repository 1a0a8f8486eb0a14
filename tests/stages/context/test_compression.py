"""Contextual compression: the exact sentences each mode keeps, dropped chunks, unusable replies
falling back to the whole chunk (recorded invalid); one run on the real embedded model."""

from __future__ import annotations

import json
from typing import Any

import pytest
from llama_index.core.schema import NodeWithScore, TextNode

from ragkit.errors import ConfigError, LLMError
from ragkit.experiments.config import config_from_dict
from ragkit.llms import LLMClient
from ragkit.stages.base import STAGES, JudgementLog
from ragkit.stages.context.compression import CompressionJudge, CompressionParams, split_sentences
from tests.scripted_llm import ScriptedLLM

QUERY = "why do cats purr"
CATS = "Cats purr when they are content. Stocks fell after the rate rise.\nPurring cats also heal faster."
MARKET = "The central bank raised interest rates. Bond yields rose."


def node(chunk_id: str, text: str, score: float = 0.8) -> NodeWithScore:
    metadata = {"doc_id": f"doc-{chunk_id}", "start_char": 10, "end_char": 10 + len(text)}
    return NodeWithScore(node=TextNode(id_=chunk_id, text=text, metadata=metadata), score=score)


def judge(mode: str, replies: list[Any] | None = None, tmp_path=None, **params: Any
          ) -> tuple[CompressionJudge, ScriptedLLM | None]:
    backend = ScriptedLLM(replies) if replies is not None else None
    client = LLMClient(backend, tmp_path) if backend is not None else None
    return CompressionJudge(CompressionParams(mode=mode, **params), client), backend


@pytest.mark.unit
def test_the_sentence_splitter_is_the_documents_one():
    assert split_sentences(CATS) == ["Cats purr when they are content.", "Stocks fell after the rate rise.",
                                     "Purring cats also heal faster."]


@pytest.mark.unit
def test_heuristic_keeps_the_sentences_sharing_the_questions_words_and_drops_a_chunk_with_none():
    compression, _ = judge("heuristic")
    trace = JudgementLog()
    kept = compression.process(QUERY, [node("cats", CATS), node("market", MARKET, 0.4)], trace)
    # Question words {cat, purr}: sentence 1 has both, 2 none, 3 "cats" (plural folded; "purring" is not "purr").
    assert [n.node.node_id for n in kept] == ["cats"]
    (cats,) = kept
    assert cats.node.get_content() == "Cats purr when they are content. Purring cats also heal faster."
    assert cats.score == 0.8 and cats.node.metadata["doc_id"] == "doc-cats"
    assert cats.node.metadata["compressed_from_chars"] == len(CATS)
    first, second = trace.judgements
    assert first.judge == "compression" and first.valid and not first.fell_back
    assert (first.decision["kept"], first.decision["shared_words"], first.decision["action"]) == (
        [1, 3], [2, 0, 1], "compressed")
    assert (second.decision["kept"], second.decision["action"], second.decision["chars_after"]) == ([], "dropped", 0)


@pytest.mark.unit
def test_heuristic_min_overlap_is_the_share_of_the_questions_words_a_sentence_needs():
    compression, _ = judge("heuristic", min_overlap=1.0)  # both of {cat, purr}
    kept = compression.process(QUERY, [node("cats", CATS)], JudgementLog())
    assert kept[0].node.get_content() == "Cats purr when they are content."


@pytest.mark.unit
def test_a_chunk_kept_whole_is_the_same_node_and_the_input_is_never_changed():
    compression, _ = judge("heuristic")
    whole = node("whole", "Cats purr. Cats nap.")
    original = node("cats", CATS)
    kept = compression.process(QUERY, [whole, original], JudgementLog())
    assert kept[0] is whole
    assert original.node.get_content() == CATS and "compressed_from_chars" not in original.node.metadata


@pytest.mark.unit
def test_heuristic_with_a_question_of_no_content_words_keeps_every_chunk_and_is_recorded_invalid():
    compression, _ = judge("heuristic")
    trace = JudgementLog()
    nodes = [node("cats", CATS)]
    assert compression.process("what is it", nodes, trace) == nodes
    (record,) = trace.judgements
    assert record.fell_back and not record.valid and "no content words" in record.error


@pytest.mark.unit
def test_off_passes_the_chunks_on_untouched_and_records_nothing():
    compression, _ = judge("off")
    trace = JudgementLog()
    nodes = [node("cats", CATS), node("market", MARKET)]
    assert compression.process(QUERY, nodes, trace) == nodes and trace.judgements == []


@pytest.mark.unit
def test_llm_keeps_the_sentences_it_names_in_chunk_order_once_each(tmp_path):
    compression, backend = judge("llm", [json.dumps({"sentences": [3, 1, 3]}), json.dumps({"sentences": []})],
                                 tmp_path)
    trace = JudgementLog()
    kept = compression.process(QUERY, [node("cats", CATS), node("market", MARKET)], trace)
    assert [n.node.get_content() for n in kept] == ["Cats purr when they are content. Purring cats also heal faster."]
    prompt = backend.requests[0][-1]["content"]
    assert "Question: why do cats purr\n[1] Cats purr when they are content.\n[2] Stocks fell" in prompt
    assert "[3] Purring cats also heal faster.\nReply as JSON" in prompt
    # The schema bounds the numbers by the chunk's sentences (a constrained backend cannot name a 4th).
    items = backend.calls[0]["json_schema"]["properties"]["sentences"]
    assert (items["items"]["minimum"], items["items"]["maximum"]) == (1, 3)
    first, second = trace.judgements
    assert (first.decision["kept"], first.decision["action"], first.valid) == ([1, 3], "compressed", True)
    assert first.raw_reply == json.dumps({"sentences": [3, 1, 3]})
    assert (second.decision["kept"], second.decision["action"], second.valid) == ([], "dropped", True)


@pytest.mark.unit
@pytest.mark.parametrize("reply", ["Sentences 1 and 3.", json.dumps({"sentences": [4]}), json.dumps({"keep": [1]}),
                                   LLMError("the server went away")])
def test_an_unusable_reply_keeps_the_chunk_whole_and_is_recorded_invalid(tmp_path, reply):
    compression, _ = judge("llm", [reply, json.dumps({"sentences": [2]})], tmp_path)
    trace = JudgementLog()
    cats, market = node("cats", CATS), node("market", MARKET)
    kept = compression.process(QUERY, [cats, market], trace)
    assert kept[0] is cats  # the judge-off output for that chunk
    assert kept[1].node.get_content() == "Bond yields rose."  # the next chunk is judged as usual
    bad, good = trace.judgements
    assert bad.fell_back and not bad.valid and bad.error and bad.decision["kept"] == "whole"
    assert good.valid and not good.fell_back


@pytest.mark.unit
def test_it_is_a_context_stage_after_rerank_and_enrichment_with_a_bounded_one_line_error():
    from ragkit.stages.roles import in_pipeline_order

    assert STAGES.get("compression") is CompressionJudge
    order = [cls.name for cls in in_pipeline_order(STAGES.get(name) for name in ("compression", "enrichment",
                                                                                 "rerank"))]
    assert order == ["rerank", "enrichment", "compression"]
    with pytest.raises(ConfigError) as error:
        config_from_dict({"name": "x", "dataset": {"path": "q.jsonl"}, "retrievers": ["bm25"],
                          "judges": {"compression": {"mode": "heuristic", "params": {"min_overlap": 1.5}}}})
    assert "min_overlap" in str(error.value) and "\n" not in str(error.value)
    with pytest.raises(ConfigError) as error:
        config_from_dict({"name": "x", "dataset": {"path": "q.jsonl"}, "retrievers": ["bm25"],
                          "judges": {"compression": "cross_encoder"}})
    assert "off, heuristic, llm" in str(error.value)


@pytest.mark.integration
def test_the_embedded_model_picks_sentences_or_falls_back(local_backend, tmp_path):
    """Mechanics on the real SmolLM2-135M: each chunk's decision is a valid choice of its sentences
    (kept, cut to them, or dropped) or a recorded fallback to the whole chunk."""
    compression = CompressionJudge(CompressionParams(mode="llm", max_tokens=16), LLMClient(local_backend, tmp_path))
    trace = JudgementLog()
    chunks = [node("cats", CATS)]
    kept = compression.process(QUERY, chunks, trace)
    assert len(trace.judgements) == 1 and len(kept) <= 1
    for chunk, record in zip(chunks, trace.judgements):
        sentences = split_sentences(chunk.node.get_content())
        if record.fell_back:
            assert not record.valid and record.decision["kept"] == "whole"
        else:
            assert record.valid and set(record.decision["kept"]) <= set(range(1, len(sentences) + 1))
            every = record.decision["kept"] == list(range(1, len(sentences) + 1))  # then the chunk as it was
            expected = chunk.node.get_content() if every else " ".join(
                sentences[number - 1] for number in record.decision["kept"])
            out = [n for n in kept if n.node.node_id == chunk.node.node_id]
            assert [n.node.get_content() for n in out] == ([expected] if expected else [])
