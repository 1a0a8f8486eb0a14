"""Rerank judge: batched 0-100 scores on a scripted LLM, the BM25 heuristic, fallbacks; one real-model run."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from ragkit.errors import LLMError
from ragkit.llms import LLMClient
from ragkit.stages.base import STAGES, JudgementLog
from ragkit.stages.context.rerank import RerankJudge, RerankJudgeParams, bm25_scores, terms
from tests.factories import scripted_llm_class

TEXTS = {
    "dogs": "Dogs bark at strangers and are loyal companions.",
    "cats": "Cats purr when they are content, and cats sleep most of the day.",
    "market": "The stock market fell after the central bank raised interest rates.",
    "kittens": "Kittens start to purr when they are a few days old.",
}
QUERY = "why do cats purr"


ScriptedLLM = scripted_llm_class()


def nodes() -> list[NodeWithScore]:
    return [NodeWithScore(node=TextNode(id_=key, text=text), score=0.9 - 0.1 * rank)
            for rank, (key, text) in enumerate(TEXTS.items())]


def ids(result: list[NodeWithScore]) -> list[str]:
    return [n.node.node_id for n in result]


def scores(*values: Any) -> str:
    return json.dumps({"scores": list(values)})


def reranker(replies: list[Any], tmp_path, trace: JudgementLog | None = None, **params: Any):
    backend = ScriptedLLM(replies)
    return RerankJudge(RerankJudgeParams(**params), LLMClient(backend, tmp_path), trace=trace), backend


@pytest.mark.unit
def test_is_a_llamaindex_postprocessor_keeping_the_top_n_by_llm_score(tmp_path):
    trace = JudgementLog()
    judge, backend = reranker([scores(10, 80, 0, 95)], tmp_path, trace, top_n=2)
    assert isinstance(judge, BaseNodePostprocessor)
    result = judge.postprocess_nodes(nodes(), query_str=QUERY)
    assert ids(result) == ["kittens", "cats"] and [n.score for n in result] == [95.0, 80.0]
    assert len(backend.requests) == 1
    (judgement,) = trace.judgements
    assert judgement.valid and judgement.decision["scores"] == {"dogs": 10, "cats": 80, "market": 0, "kittens": 95}
    assert judgement.decision["kept"] == ["kittens", "cats"]
    prompt = backend.requests[0][-1]["content"]
    assert "[4] Kittens" in prompt and "Question: why do cats purr" in prompt


@pytest.mark.unit
def test_ties_keep_the_retrieval_order(tmp_path):
    judge, _ = reranker([scores(50, 50, 50, 50)], tmp_path, top_n=3)
    assert ids(judge.postprocess_nodes(nodes(), QueryBundle(QUERY))) == ["dogs", "cats", "market"]


@pytest.mark.unit
def test_batches_are_scored_in_separate_calls_and_ranked_together(tmp_path):
    trace = JudgementLog()
    judge, backend = reranker([scores(10, 20, 30), scores(99)], tmp_path, trace, top_n=4, batch_size=3)
    assert ids(judge.postprocess_nodes(nodes(), query_str=QUERY)) == ["kittens", "market", "cats", "dogs"]
    assert len(backend.requests) == 2 and len(trace.judgements) == 2
    assert "[1] Kittens" in backend.requests[1][-1]["content"]


@pytest.mark.unit
@pytest.mark.parametrize(
    "bad",
    [
        "",
        '{"scores": [10, 80,',
        "Chunk 2 is the best.",
        scores(10, 80),  # too few scores
        scores(10, 80, 0, 95, 5),  # too many
        scores(10, 80, 0, 250),  # out of range
        '{"scores": "high"}',
    ],
)
def test_an_unusable_reply_keeps_the_original_nodes(tmp_path, bad):
    trace = JudgementLog()
    judge, _ = reranker([bad], tmp_path, trace, top_n=2)
    original = nodes()
    assert judge.postprocess_nodes(original, query_str=QUERY) == original
    (judgement,) = trace.judgements
    assert (judgement.valid, judgement.fell_back) == (False, True) and judgement.error


@pytest.mark.unit
def test_a_bad_second_batch_falls_back_whole(tmp_path):
    trace = JudgementLog()
    judge, _ = reranker([scores(10, 20), "nonsense"], tmp_path, trace, batch_size=2)
    original = nodes()
    assert judge.postprocess_nodes(original, query_str=QUERY) == original
    assert [(j.valid, j.fell_back) for j in trace.judgements] == [(True, False), (False, True)]


@pytest.mark.unit
def test_a_fenced_reply_is_read(tmp_path):
    judge, _ = reranker(["```json\n" + scores(1, 2, 3, 4) + "\n```"], tmp_path, top_n=1)
    assert ids(judge.postprocess_nodes(nodes(), query_str=QUERY)) == ["kittens"]


@pytest.mark.unit
def test_a_backend_error_falls_back(tmp_path):
    trace = JudgementLog()
    judge, _ = reranker([LLMError("server gone")], tmp_path, trace)
    original = nodes()
    assert judge.postprocess_nodes(original, query_str=QUERY) == original
    assert trace.judgements[0].fell_back and "server gone" in trace.judgements[0].error


@pytest.mark.unit
def test_use_trace_switches_where_decisions_go(tmp_path):
    judge, _ = reranker([scores(1, 2, 3, 4)], tmp_path)
    first, second = JudgementLog(), JudgementLog()
    judge.use_trace(first)
    judge.postprocess_nodes(nodes(), query_str=QUERY)
    judge.use_trace(second)
    judge.postprocess_nodes(nodes(), query_str=QUERY)  # a cache hit, still recorded
    assert len(first.judgements) == len(second.judgements) == 1 and second.judgements[0].cache_hit


@pytest.mark.unit
def test_mode_off_is_the_identity():
    trace = JudgementLog()
    judge = RerankJudge(RerankJudgeParams(mode="off", top_n=1), trace=trace)
    original = nodes()
    assert judge.postprocess_nodes(original, query_str=QUERY) == original and trace.judgements == []


@pytest.mark.unit
def test_heuristic_is_bm25_and_needs_no_llm():
    trace = JudgementLog()
    judge = RerankJudge(RerankJudgeParams(mode="heuristic", top_n=2), trace=trace)
    result = judge.postprocess_nodes(nodes(), query_str=QUERY)
    # "cats" holds both query terms (cats twice), "kittens" only "purr"; stop words do not count
    assert ids(result) == ["cats", "kittens"]
    (judgement,) = trace.judgements
    assert judgement.valid and judgement.raw_reply is None and judgement.decision["method"] == "bm25"
    assert judgement.decision["scores"]["dogs"] == 0.0


@pytest.mark.unit
def test_bm25_matches_a_hand_computed_case():
    # two documents, query term "purr" in one: df=1, N=2, idf = ln(1 + 1.5/1.5) = ln 2;
    # doc lengths 2 and 2 (stop words dropped), tf=1: tf*(k1+1)/(tf+k1) = 1
    assert terms("The cat is purring, the cat purr") == ["cat", "purring", "cat", "purr"]
    assert bm25_scores("purr", ["cat purr", "dog bark"]) == pytest.approx([math.log(2), 0.0])
    assert bm25_scores("purr", []) == []


@pytest.mark.unit
def test_needs_a_query():
    judge = RerankJudge(RerankJudgeParams(mode="heuristic"))
    with pytest.raises(ValueError, match="needs the query"):
        judge.postprocess_nodes(nodes())


@pytest.mark.unit
def test_registered_by_name_and_params_bounded():
    with STAGES.registered("rerank-test", RerankJudge):
        built = STAGES.build({"type": "rerank-test", "params": {"mode": "heuristic", "top_n": 3}})
    assert isinstance(built, RerankJudge) and built.spec_dict()["params"]["top_n"] == 3
    with pytest.raises(ValueError):
        RerankJudgeParams(top_n=0)


@pytest.mark.integration
def test_real_local_model_gives_a_recorded_well_formed_result(tmp_path, local_backend):
    client = LLMClient(local_backend, cache_dir=tmp_path)
    trace = JudgementLog()
    judge = RerankJudge(RerankJudgeParams(top_n=2, max_tokens=48, chunk_chars=120), client, trace=trace)
    original = nodes()
    result = judge.postprocess_nodes(original, query_str=QUERY)
    (judgement,) = trace.judgements
    assert judgement.raw_reply is not None
    if judgement.valid:
        assert len(result) == 2 and set(ids(result)) <= set(TEXTS)
        assert all(0 <= n.score <= 100 for n in result)
    else:
        assert judgement.fell_back and result == original
