"""The executor's per-question rows: failures and unscorable questions are rows, never gaps."""

from __future__ import annotations

import math

import pytest
from llama_index.core.schema import NodeWithScore, TextNode

from ragkit.experiments.config import GridPoint
from ragkit.experiments.executor import _answer_shard
from ragkit.experiments.plan import RunStep
from ragkit.pipeline import Pipeline
from ragkit.qa import AnswerSpan, Question
from ragkit.registry import ComponentSpec

pytestmark = pytest.mark.unit

RUN = RunStep(
    run_id="r1",
    point=GridPoint(chunker=ComponentSpec(type="document"), embedder=None,
                    retriever=ComponentSpec(type="bm25", params={"top_k": 2}), top_k=2),
    chunkset_id="c", index_id="i",
)


class StubRetriever:
    """Returns two fixed chunks, or raises for the question text 'boom'."""

    def retrieve(self, text: str) -> list[NodeWithScore]:
        if text == "boom":
            raise RuntimeError("index unavailable")
        nodes = [TextNode(id_="a:0", text="x", metadata={"doc_id": "a", "start_char": 0, "end_char": 10}),
                 TextNode(id_="b:0", text="y", metadata={"doc_id": "b", "start_char": 0, "end_char": 10})]
        return [NodeWithScore(node=node, score=1.0 / rank) for rank, node in enumerate(nodes, start=1)]


def test_scored_failed_and_unscorable_questions_each_leave_rows():
    questions = [
        Question(id="ok", text="fine", relevant_docs={"b": 1.0}, spans=[AnswerSpan(doc_id="b", start=2, end=4)]),
        Question(id="err", text="boom", relevant_docs={"a": 1.0}),
        Question(id="none", text="no truth", answers=["an answer found in no document"]),
    ]
    tables = _answer_shard(RUN, Pipeline(StubRetriever(), StubRetriever()), questions)
    scores = tables["scores"].set_index(["question_id", "metric"])

    # "ok": b is at rank 2 -> mrr 1/2, recall@1 0, recall@2 1; its span overlaps chunk b -> span_mrr 1/2
    assert scores.loc[("ok", "mrr"), "value"] == 0.5
    assert scores.loc[("ok", "recall@1"), "value"] == 0.0
    assert scores.loc[("ok", "recall@2"), "value"] == 1.0
    assert scores.loc[("ok", "span_mrr"), "value"] == 0.5

    failed = scores.loc[("err", "retrieval")]
    assert math.isnan(failed["value"]) and failed["error"] == "RuntimeError: index unavailable"
    unscorable = scores.loc[("none", "retrieval")]
    assert math.isnan(unscorable["value"]) and "no relevant documents" in unscorable["error"]

    retrievals = tables["retrievals"]
    assert set(retrievals["question_id"]) == {"ok", "none"}
    assert list(retrievals[retrievals["question_id"] == "ok"]["doc_id"]) == ["a", "b"]
    assert set(tables["stages"]["question_id"]) == {"ok", "none"}
