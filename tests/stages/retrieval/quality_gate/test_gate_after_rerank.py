"""The quality gate after reranking (``position: after_rerank``) in the pipeline, on scripted LLMs:
the gate sees exactly the reranked top 4 of each attempt, rerank runs once per attempt and not
again after the gate, and each step is a stages row of its own with nothing counted twice."""

from __future__ import annotations

import itertools
import json

import pytest
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from ragkit.llms import LLMClient
from ragkit.pipeline.pipeline import Pipeline
from ragkit.stages.context.rerank import RerankJudge, RerankJudgeParams
from ragkit.stages.retrieval.quality_gate.stage import QualityGate, QualityGateParams
from tests.factories import scripted_llm_class

pytestmark = pytest.mark.unit

ScriptedLLM = scripted_llm_class()
QUESTION = "why do cats purr"
# The rerank LLM's scores for chunks c0..c9 in retrieval order: its top 4 are c1, c3, c5, c7.
RERANK_SCORES = [10, 90, 20, 80, 30, 70, 40, 60, 50, 0]
RERANKED_TOP_4 = ["c1", "c3", "c5", "c7"]


class TenChunks(BaseRetriever):
    """Ten chunks for any query (named after the query from the second query on), logs the queries."""

    def __init__(self) -> None:
        super().__init__()
        self.queries: list[str] = []

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        self.queries.append(query_bundle.query_str)
        prefix = "" if len(self.queries) == 1 else f"{query_bundle.query_str}:"
        return [NodeWithScore(node=TextNode(id_=f"{prefix}c{n}", text=f"text of {prefix}c{n}"), score=1.0 - n / 10)
                for n in range(10)]


def scored(score: int, query: str = "") -> str:
    return json.dumps({"score": score, "issue": "none" if score >= 60 else "partial", "missing_aspects": [],
                       "reformulated_query": query, "reason": "r"})


def pipeline(tmp_path, gate_replies: list[str], position: str, clock=None, **gate_params) -> tuple[Pipeline, ...]:
    rerank_llm = ScriptedLLM([json.dumps({"scores": RERANK_SCORES})])
    gate_llm = ScriptedLLM(gate_replies)
    rerank = RerankJudge(RerankJudgeParams(top_n=4, batch_size=10), LLMClient(rerank_llm, tmp_path / "r"))
    gate = QualityGate(QualityGateParams(mode="llm", verdict="scored", position=position, **gate_params),
                       LLMClient(gate_llm, tmp_path / "g"))
    retriever = TenChunks()
    extra = {"clock": clock} if clock is not None else {}
    built = Pipeline(retriever, retriever, stages=(rerank, gate),
                     clients=(rerank.llm, gate.llm), **extra)
    return built, retriever, rerank_llm, gate_llm


def shown_ids(prompt: str) -> list[str]:
    return [line.split("text of ", 1)[1] for line in prompt.splitlines() if line.startswith("[") and "text of " in line]


def test_after_rerank_the_gate_judges_exactly_the_reranked_top_4(tmp_path):
    built, _, rerank_llm, gate_llm = pipeline(tmp_path, [scored(80)], "after_rerank")
    trace = built.answer(QUESTION)
    assert shown_ids(gate_llm.requests[0][-1]["content"]) == RERANKED_TOP_4
    assert [node.node.node_id for node in trace.nodes] == RERANKED_TOP_4
    assert len(rerank_llm.requests) == 1  # not reranked again after the gate
    assert [row["stage"] for row in trace.stages] == ["judge:rerank", "judge:quality_gate"]
    gate_decision = next(j.decision for j in trace.judgements if j.judge == "quality_gate")
    assert gate_decision["position"] == "after_rerank" and gate_decision["reranked_by"] == ["rerank"]


def test_before_rerank_the_gate_judges_the_first_4_retrieved(tmp_path):
    built, _, _, gate_llm = pipeline(tmp_path, [scored(80)], "before_rerank")
    trace = built.answer(QUESTION)
    assert shown_ids(gate_llm.requests[0][-1]["content"]) == ["c0", "c1", "c2", "c3"]
    assert [node.node.node_id for node in trace.nodes] == RERANKED_TOP_4  # reranked after the gate
    assert [row["stage"] for row in trace.stages] == ["judge:quality_gate", "judge:rerank"]
    assert "position" not in next(j.decision for j in trace.judgements if j.judge == "quality_gate")


def test_every_attempt_is_reranked_in_a_row_of_its_own_and_nothing_counts_twice(tmp_path):
    ticks = itertools.count(1)  # every clock reading is one second later
    built, retriever, rerank_llm, gate_llm = pipeline(
        tmp_path, [scored(20, "cats purring"), scored(90)], "after_rerank", clock=lambda: float(next(ticks)),
        max_retries=1)
    trace = built.answer(QUESTION)
    assert retriever.queries == [QUESTION, "cats purring"]
    # The retry's reranked top 4 is what the final check saw, and (scoring better) what goes on.
    assert shown_ids(gate_llm.requests[1][-1]["content"]) == [f"cats purring:{c}" for c in RERANKED_TOP_4]
    assert [node.node.node_id for node in trace.nodes] == [f"cats purring:{c}" for c in RERANKED_TOP_4]
    rows = {(row["stage"], index): row for index, row in enumerate(trace.stages)}
    assert [stage for stage, _ in rows] == ["judge:rerank", "judge:rerank", "judge:quality_gate"]
    reranks = [row for (stage, _), row in rows.items() if stage == "judge:rerank"]
    (gate_row,) = [row for (stage, _), row in rows.items() if stage == "judge:quality_gate"]
    assert [row["llm_calls"] for row in reranks] == [1, 1] and gate_row["llm_calls"] == 2
    # Clock readings: gate 1 | rerank 2-3 | rerank 4-5 | gate 6: the gate's own time is 5 - 2 = 3.
    assert [row["seconds"] for row in reranks] == [1.0, 1.0] and gate_row["seconds"] == 3.0
    assert len(rerank_llm.requests) == 2  # the rerank prompt differs per attempt (other chunks)
