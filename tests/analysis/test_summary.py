"""Run summary: labels name the judges that are on; failed metrics are counted with their reason."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from ragkit.analysis.failures import metric_failures
from ragkit.analysis.run_names import run_labels

pytestmark = pytest.mark.unit


def test_labels_name_only_the_judges_that_are_on_and_whether_answers_are_generated():
    runs = pd.DataFrame({
        "chunker": ["token", "token"], "embedder": ["minilm", "minilm"], "retriever": ["hybrid", "hybrid"],
        "top_k": [10, 10], "judge.rerank": ["off", "llm"], "judge.rerank.top_n": [math.nan, 5.0],
        "generator": [True, True],
    })
    assert run_labels(runs).tolist() == [
        "token · minilm · hybrid · k=10 · +answers",
        "token · minilm · hybrid · k=10 · +rerank(llm) · +answers",
    ]


def test_a_component_parameter_left_at_none_reads_none_and_whole_floats_read_as_integers():
    runs = pd.DataFrame({
        "chunker": ["recursive"] * 2, "embedder": ["minilm"] * 2, "retriever": ["dense"] * 2, "top_k": [5, 5],
        "retriever.score_threshold": [math.nan, 0.7], "chunker.chunk_size": [1000.0, 1000.0],
    })
    assert run_labels(runs).tolist() == [
        "recursive · minilm · dense(score_threshold=none) · k=5",
        "recursive · minilm · dense(score_threshold=0.7) · k=5",
    ]


def test_metric_failures_count_scored_and_failed_questions_with_the_commonest_reason():
    nan = math.nan
    scores = pd.DataFrame([
        ("q1", "faithfulness", nan, "unparseable judge output (after retries): '{{'"),
        ("q2", "faithfulness", nan, "unparseable judge output (after retries): 'Sure!'"),
        ("q3", "faithfulness", nan, "timeout after 60 s"),
        ("q4", "faithfulness", 0.5, None),
        ("q1", "recall@5", 1.0, None),
        ("q1", "answer_overlap", nan, "no reference answer"),
    ], columns=["question_id", "metric", "value", "error"])
    table = metric_failures(scores).set_index("metric")
    assert table.loc["faithfulness"].tolist() == [1, 3, "unparseable judge output (after retries)", 2]
    assert table.loc["answer_overlap"].tolist() == [0, 1, "no reference answer", 1]
    assert "recall@5" not in table.index


def test_no_failures_give_an_empty_table():
    scores = pd.DataFrame([("q1", "mrr", 1.0, None)], columns=["question_id", "metric", "value", "error"])
    assert metric_failures(scores).empty
