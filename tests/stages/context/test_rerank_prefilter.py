"""The first rerank stage fires in the agentic reference pipeline: a BM25 prefilter keeps 15 of 30
candidates and the LLM scores only those; the experiment gives the prefilter more than 15 in
every run where it is on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from ragkit.experiments.config import load_config
from ragkit.experiments.config.grid import expand_grid
from ragkit.llms import LLMClient
from ragkit.stages.base import JudgementLog
from ragkit.stages.context.rerank import RerankJudge, RerankJudgeParams
from tests.factories import scripted_llm_class

ScriptedLLM = scripted_llm_class()
AGENTIC = Path(__file__).resolve().parents[3] / "experiments" / "reference" / "agentic.yaml"
QUERY = "why do cats purr"


def thirty() -> list[NodeWithScore]:
    """30 candidates in retrieval order; the odd ones (c1, c3 ... c29) are the 15 that mention
    cats purring, the even ones share no word with the question (BM25 0)."""
    return [NodeWithScore(node=TextNode(id_=f"c{n}", text=f"cats purr softly, note {n}" if n % 2
                                        else f"the stock market fell, note {n}"), score=1.0 - n / 100)
            for n in range(30)]


@pytest.mark.unit
def test_the_prefilter_keeps_15_of_30_and_the_llm_sees_only_those(tmp_path):
    backend = ScriptedLLM([json.dumps({"scores": list(range(0, 105, 7))})])
    trace = JudgementLog()
    params = RerankJudgeParams(mode="llm", prefilter="bm25", prefilter_n=15, top_n=4, batch_size=15)
    kept = RerankJudge(params, LLMClient(backend, tmp_path), trace=trace).postprocess_nodes(
        thirty(), query_bundle=QueryBundle(QUERY))
    prefilter, llm = trace.judgements
    odd = {f"c{n}" for n in range(1, 30, 2)}
    assert prefilter.decision["stage"] == "prefilter" and len(prefilter.decision["scores"]) == 30
    assert set(prefilter.decision["kept"]) == odd  # not the first 15 retrieved
    assert set(llm.decision["shown"]) == odd and len(backend.requests) == 1
    # The LLM scored the 15 shown 0, 7 ... 98 in order: the last four shown are kept, best first.
    assert [n.node.node_id for n in kept] == llm.decision["shown"][-1:-5:-1]


@pytest.mark.unit
def test_every_agentic_run_with_the_prefilter_gives_it_more_than_it_keeps():
    points = expand_grid(load_config(AGENTIC))
    with_prefilter = [p for p in points if (spec := p.judge("rerank")) is not None and spec.params.get("prefilter_n")]
    assert with_prefilter
    for point in with_prefilter:
        keep = point.judge("rerank").params["prefilter_n"]
        multi_query = point.judge("multi_query")
        candidates = multi_query.params["top_k"] if multi_query is not None else point.top_k
        assert candidates > keep, (candidates, keep)
