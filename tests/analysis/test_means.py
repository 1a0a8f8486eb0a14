"""ragkit.analysis means, curves, latency, Pareto fronts and loading: hand-computed cases."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from ragkit.analysis.latency import latency_by_stage, pareto_front, pipeline_stages, run_latency
from ragkit.analysis.loading import load_results
from ragkit.analysis.means import available_metrics, curve, metric_means
from ragkit.results import ResultStore
from tests.analysis.helpers import run_row, score_rows

pytestmark = pytest.mark.unit


def test_metric_means_exclude_failed_rows_and_count_them():
    scores = score_rows([("r1", "q1", "mrr", 1.0), ("r1", "q2", "mrr", 0.5), ("r1", "q3", "mrr", 0.0),
                         ("r1", "q4", "mrr", np.nan, "timeout"), ("r2", "q1", "mrr", 0.25)])
    means = metric_means(scores, ["mrr"]).set_index("run_id")
    assert means.loc["r1", "mean"] == pytest.approx(0.5)
    assert (means.loc["r1", "n"], means.loc["r1", "n_failed"]) == (3, 1)
    # t interval over 3 questions: 0.5 +- t(0.975, 2) * 0.5 / sqrt(3)
    half = stats.t.ppf(0.975, 2) * 0.5 / np.sqrt(3)
    assert (means.loc["r1", "ci_low"], means.loc["r1", "ci_high"]) == pytest.approx((0.5 - half, 0.5 + half))
    # One question: a mean, but no interval.
    assert means.loc["r2", "mean"] == 0.25 and np.isnan(means.loc["r2", "ci_low"])


def test_a_metric_every_question_failed_has_no_mean_and_counts_the_failures():
    scores = score_rows([("r", "q1", "faithfulness", np.nan, "timeout"), ("r", "q2", "faithfulness", np.nan)])
    row = metric_means(scores, ["faithfulness"]).iloc[0]
    assert np.isnan(row["mean"]) and (row["n"], row["n_failed"]) == (0, 2)


def test_means_grouped_by_document_get_wider_intervals_than_by_question():
    rng = np.random.default_rng(1)
    documents = {f"q{i}": f"d{i // 10}" for i in range(200)}
    document_effect = rng.normal(0, 0.2, 20)
    scores = score_rows([("r", q, "recall@5", float(0.5 + document_effect[i // 10] + rng.normal(0, 0.1)))
                         for i, q in enumerate(documents)])
    by_question = metric_means(scores, ["recall@5"]).iloc[0]
    by_document = metric_means(scores, ["recall@5"], pd.Series(documents)).iloc[0]
    assert by_question["mean"] == pytest.approx(by_document["mean"])
    assert (by_question["n_units"], by_document["n_units"]) == (200, 20)
    assert by_document["ci_high"] - by_document["ci_low"] > 2 * (by_question["ci_high"] - by_question["ci_low"])


def test_available_metrics_read_document_then_span_then_final_then_generation():
    names = ["span_mrr", "recall@10", "mrr", "recall@3", "span_recall@5", "f1@10", "f1@3", "ndcg@1", "mrr@5",
             "recall@512tok", "final_tokens", "faithfulness", "recall@256tok"]
    assert available_metrics(score_rows([("r", "q", m, 1.0) for m in names])) == [
        "recall@3", "recall@10", "recall@256tok", "recall@512tok", "f1@3", "f1@10", "ndcg@1", "mrr", "mrr@5",
        "span_recall@5", "span_mrr", "final_tokens", "faithfulness"]


def test_curve_means_each_k_and_ignores_other_families_and_budgets():
    scores = score_rows([("r", "q1", "recall@1", 0.0), ("r", "q2", "recall@1", 1.0), ("r", "q1", "recall@2", 1.0),
                         ("r", "q2", "recall@2", 1.0), ("r", "q1", "span_recall@1", 0.0), ("r", "q1", "mrr", 1.0),
                         ("r", "q1", "recall@256tok", 0.0)])
    points = curve(scores, "recall")
    assert points[["k", "mean"]].values.tolist() == [[1, 0.5], [2, 1.0]]
    assert curve(scores, "span_recall")["mean"].tolist() == [0.0]


def test_latency_averages_question_stages_and_keeps_build_stages_apart():
    stages = pd.DataFrame({
        "run_id": ["r"] * 6, "question_id": ["q1", "q2", None, None, None, "q1"],
        "stage": ["retrieve", "retrieve", "chunk", "embed", "index", "eval:faithfulness"],
        "seconds": [0.01, 0.03, 1.0, 5.0, 0.5, 9.0], "cached": False,
    }).astype({"question_id": "string"})
    latency = latency_by_stage(stages).set_index("stage")
    assert latency.loc["retrieve", "seconds"] == pytest.approx(0.02)
    assert bool(latency.loc["retrieve", "per_question"]) is True
    assert latency.loc["embed", "seconds"] == 5.0 and not latency.loc["embed", "per_question"]
    # Evaluation measures the answer; it is not part of answering.
    assert run_latency(stages)["r"] == pytest.approx(0.02)


def test_a_stage_repeated_in_a_question_or_needed_by_some_counts_per_question_answered():
    # q1 corrects twice (two regenerate rows), q2 never: regenerate costs (1 + 3) / 2 questions.
    stages = pd.DataFrame({
        "run_id": "r", "question_id": ["q1", "q1", "q1", "q2"],
        "stage": ["generate", "correct:regenerate", "correct:regenerate", "generate"],
        "seconds": [2.0, 1.0, 3.0, 4.0], "cached": False,
    }).astype({"question_id": "string"})
    latency = latency_by_stage(stages).set_index("stage")
    assert latency.loc["correct:regenerate", "seconds"] == pytest.approx(2.0)
    assert latency.loc["generate", "seconds"] == pytest.approx(3.0)
    # Per question: q1 took 6 s and q2 4 s.
    assert run_latency(stages)["r"] == pytest.approx(5.0)


def test_latency_counts_the_questions_the_pipeline_answered_not_those_only_evaluated():
    # q1: retrieve 0.04 s + generate 0.02 s, then evaluated; q2 has evaluation rows only. The
    # pipeline answered one question: 0.06 s per question, not 0.03 s.
    stages = pd.DataFrame({
        "run_id": "r", "question_id": ["q1", "q1", "q1", "q2"],
        "stage": ["retrieve", "generate", "eval:faithfulness", "eval:faithfulness"],
        "seconds": [0.04, 0.02, 3.0, 3.0], "cached": False,
    }).astype({"question_id": "string"})
    assert run_latency(stages)["r"] == pytest.approx(0.06)
    latency = latency_by_stage(pipeline_stages(stages)).set_index("stage")
    assert latency["seconds"].to_dict() == pytest.approx({"retrieve": 0.04, "generate": 0.02})


def test_pareto_front_of_four_points():
    frame = pd.DataFrame({"quality": [0.9, 0.8, 0.7, 0.95], "cost": [10.0, 5.0, 6.0, 30.0]})
    # (0.7, 6) is beaten by (0.8, 5); the other three each trade quality for cost.
    assert pareto_front(frame, "quality", "cost").tolist() == [True, True, False, True]


def test_pareto_front_keeps_ties_and_skips_missing():
    frame = pd.DataFrame({"quality": [0.5, 0.5, np.nan], "cost": [1.0, 1.0, 0.1]})
    assert pareto_front(frame, "quality", "cost").tolist() == [True, True, False]


def test_load_results_labels_runs_and_reads_other_tables_on_first_use(tmp_path):
    store = ResultStore(tmp_path)
    for run_id, top_k in (("r1", 5), ("r2", 10)):
        store.write_run(run_id, run_row(run_id, top_k=top_k))
        store.commit_shard(run_id, ["q1"], {"scores": score_rows([(run_id, "q1", "mrr", 1.0)])})
    results = load_results(tmp_path)
    assert results.runs["label"].tolist() == ["token · - · bm25 · k=10", "token · - · bm25 · k=5"]
    assert len(results.scores) == 2
    assert "retrievals" not in results.__dict__  # not read until asked for
    assert results.retrievals.empty and results.unit == "question"
    assert results.subset(["r1"]).scores["run_id"].tolist() == ["r1"]


def test_load_results_of_a_missing_folder_names_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere"):
        load_results(tmp_path / "nowhere")


def test_metric_means_read_categories_as_they_read_strings():
    rng = np.random.default_rng(3)
    rows = [(f"r{rng.integers(5)}", f"q{rng.integers(40)}", str(rng.choice(["mrr", "recall@5"])),
             float(rng.uniform()) if rng.uniform() > 0.1 else np.nan, None if rng.uniform() > 0.05 else "timeout")
            for _ in range(300)]
    scores = score_rows(rows).drop_duplicates(["run_id", "question_id", "metric"], ignore_index=True)
    units = pd.Series([f"d{i % 7}" for i in range(40)], index=[f"q{i}" for i in range(40)])
    as_strings = metric_means(scores, ["mrr", "recall@5"], units)
    categorical = scores.astype({"run_id": "category", "question_id": "category", "metric": "category"})
    # Unused categories, in another order than the rows, are not runs or questions.
    categorical["question_id"] = categorical["question_id"].cat.add_categories(["unused"]).cat.reorder_categories(
        ["unused", *sorted(categorical["question_id"].cat.categories, reverse=True)])
    pd.testing.assert_frame_equal(metric_means(categorical, ["mrr", "recall@5"], units), as_strings)
