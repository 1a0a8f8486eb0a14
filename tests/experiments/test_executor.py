"""The executor's per-question rows: failures and unscorable questions are rows, never gaps."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from llama_index.core.schema import NodeWithScore, TextNode

from ragkit.experiments.answering import answer_shard
from ragkit.experiments.config import GridPoint, config_from_dict
from ragkit.experiments.evaluate import QuestionEvaluator
from ragkit.experiments.plan import RunStep
from ragkit.experiments.rows import question_row
from ragkit.experiments.runner import run_experiment
from ragkit.metrics.generation import EvaluationParams
from ragkit.pipeline.pipeline import Pipeline
from ragkit.questions import AnswerSpan, Question
from ragkit.registry import ComponentSpec
from ragkit.results import ResultStore
from tests.factories import write_beir

BM25_TOP_2 = GridPoint(chunker=ComponentSpec(type="document"), embedder=None,
                       retriever=ComponentSpec(type="bm25", params={"top_k": 2}), top_k=2)
RUN = RunStep(run_id="r1", point=BM25_TOP_2, chunkset_id="c", index_id="i")
# The same run with the groundedness judge on and scored at depth 1 as well (a sibling's depth).
JUDGED = RunStep(
    run_id="r2", chunkset_id="c", index_id="i", plan_depths=(1, 2),
    point=BM25_TOP_2.model_copy(update={"judges": (ComponentSpec(type="groundedness", params={"mode": "llm"}),)}),
)


class StubRetriever:
    """Returns two fixed chunks, or raises for the question text 'boom'."""

    def retrieve(self, text: str) -> list[NodeWithScore]:
        if text == "boom":
            raise RuntimeError("index unavailable")
        # cl100k: "hello" + " world" (2 tokens), "hello" + " world" + " hello" + " world" (4)
        nodes = [TextNode(id_="a:0", text="hello world", metadata={"doc_id": "a", "start_char": 0, "end_char": 11}),
                 TextNode(id_="b:0", text="hello world hello world",
                          metadata={"doc_id": "b", "start_char": 0, "end_char": 23})]
        return [NodeWithScore(node=node, score=1.0 / rank) for rank, node in enumerate(nodes, start=1)]


def answer(run: RunStep, questions: list[Question], evaluator: QuestionEvaluator | None = None) -> dict:
    return answer_shard(run, Pipeline(StubRetriever(), StubRetriever()), questions, evaluator)


@pytest.mark.unit
def test_scored_failed_and_unscorable_questions_each_leave_rows():
    questions = [
        Question(id="ok", text="fine", relevant_docs={"b": 1.0}, spans=[AnswerSpan(doc_id="b", start=2, end=4)]),
        Question(id="err", text="boom", relevant_docs={"a": 1.0}),
        Question(id="none", text="no truth", answers=["an answer found in no document"]),
    ]
    tables = answer(RUN, questions)
    scores = tables["scores"].set_index(["question_id", "metric"])

    # "ok": b is at rank 2 -> mrr 1/2, recall@1 0, recall@2 1; its span overlaps chunk b -> span_mrr 1/2
    assert scores.loc[("ok", "mrr"), "value"] == 0.5
    assert scores.loc[("ok", "mrr@1"), "value"] == 0.0
    assert scores.loc[("ok", "recall@1"), "value"] == 0.0
    assert scores.loc[("ok", "recall@2"), "value"] == 1.0
    assert scores.loc[("ok", "span_mrr"), "value"] == 0.5
    assert scores.loc[("ok", "final_chunks"), "value"] == 2
    assert scores.loc[("ok", "final_tokens"), "value"] == 2 + 4
    assert scores.loc[("ok", "span_recall@256tok"), "value"] == 1.0

    failed = scores.xs("err", level="question_id")
    assert len(failed) > 1 and failed["value"].isna().all()
    assert (failed["error"] == "RuntimeError: index unavailable").all()
    unscorable = scores.loc[("none", "retrieval")]
    assert math.isnan(unscorable["value"]) and "no relevant documents" in unscorable["error"]
    assert scores.loc[("none", "final_chunks"), "value"] == 2  # the context is still described

    retrievals = tables["retrievals"]
    assert set(retrievals["question_id"]) == {"ok", "none"}
    assert list(retrievals[retrievals["question_id"] == "ok"]["doc_id"]) == ["a", "b"]
    assert list(retrievals[retrievals["question_id"] == "ok"]["tokens"]) == [2, 4]
    assert set(tables["stages"]["question_id"]) == {"ok", "none"}


@pytest.mark.unit
@pytest.mark.parametrize("evaluation", [None, EvaluationParams(metrics=["faithfulness", "answer_overlap"], repeats=2)])
def test_a_failed_question_has_an_error_row_for_every_metric_a_scored_one_has(evaluation):
    truth = {"relevant_docs": {"b": 1.0, "c": 2.0}, "spans": [AnswerSpan(doc_id="b", start=2, end=4)],
             "answers": ["y"]}
    questions = [Question(id="ok", text="fine", **truth), Question(id="err", text="boom", **truth)]
    evaluator = None if evaluation is None else QuestionEvaluator(evaluation, None, None, {})
    scores = answer(JUDGED, questions, evaluator)["scores"]
    by_question = {question_id: set(group["metric"]) for question_id, group in scores.groupby("question_id")}

    assert by_question["err"] == by_question["ok"]
    expected = {"mrr@1", "span_mrr@1", "recall@2", "span_ndcg@2", "recall@2048tok", "span_recall@256tok",
                "final_span_precision", "groundedness"}
    if evaluation is not None:
        expected |= {"faithfulness", "faithfulness.judge_sd", "faithfulness.invalid_share", "answer_overlap"}
    assert expected <= by_question["err"]
    failed = scores[scores["question_id"] == "err"]
    assert failed["value"].isna().all() and (failed["error"] == "RuntimeError: index unavailable").all()


@pytest.mark.unit
def test_the_questions_row_names_the_source_document_or_the_question_itself():
    spanned = Question(id="q1", text="t", relevant_docs={"d1": 1.0, "d2": 1.0},
                       spans=[AnswerSpan(doc_id="d2", start=0, end=3, group=0),
                              AnswerSpan(doc_id="d1", start=4, end=9, group=1)])
    assert question_row(spanned) == {"question_id": "q1", "text": "t", "document": "d2", "n_relevant_docs": 2,
                                     "n_answer_groups": 2, "question_key": spanned.content_key()}
    orphan = Question(id="q2", text="t", answers=["a"])
    assert question_row(orphan) == {"question_id": "q2", "text": "t", "document": "q2", "n_relevant_docs": 0,
                                    "n_answer_groups": 1, "question_key": orphan.content_key()}
    assert spanned.content_key() != spanned.model_copy(update={"text": "u"}).content_key()


@pytest.mark.integration
def test_a_run_records_questions_depth_common_cut_offs_and_tokens(tmp_path):
    """bm25 at top_k 5 with the rerank judge off and on at top_n 2 (heuristic: no LLM)."""
    config = config_from_dict({
        "name": "depths", "dataset": {"path": str(write_beir(tmp_path / "beir"))}, "embedders": [],
        "retrievers": ["bm25"], "chunkers": ["document"], "top_k": 5,
        "judges": {"rerank": {"mode": ["off", "heuristic"], "params": {"top_n": 2}}},
    })
    run_experiment(config, tmp_path / "out")
    store = ResultStore(tmp_path / "out")

    runs = store.read("runs").set_index("judge.rerank")
    assert runs.loc["off", "depth"] == 5 and runs.loc["heuristic", "depth"] == 2
    scores = store.read("scores")
    metrics = scores.groupby("run_id")["metric"].agg(set)
    for run_id in runs["run_id"]:  # both are scored at the common depth 2, not only on the curve
        assert {"precision@2", "mrr@2", "map@2"} <= metrics[run_id]
    assert "precision@5" in metrics[runs.loc["heuristic", "run_id"]]  # other depths up to top_k

    questions = store.read("questions")
    assert sorted(questions["question_id"]) == ["q1", "q2", "q3"]
    assert questions.set_index("question_id").loc["q1", "document"] == "d1"
    assert len(list((tmp_path / "out" / "questions").glob("*.parquet"))) == 1

    retrievals = store.read("retrievals")
    assert (retrievals["tokens"] > 0).all()
    tokens = retrievals.groupby(["run_id", "question_id"])["tokens"].sum()
    final = scores[scores["metric"] == "final_tokens"].set_index(["run_id", "question_id"])["value"]
    pd.testing.assert_series_equal(final.sort_index(), tokens.sort_index().astype(float), check_names=False)
