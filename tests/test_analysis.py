"""ragkit.analysis: hand-computed means, curves, Pareto fronts, factor pairs and paired differences."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ragkit import analysis
from ragkit.results import ResultStore

pytestmark = pytest.mark.unit


def _scores(rows: list[tuple]) -> pd.DataFrame:
    """rows of (run_id, question_id, metric, value[, error])."""
    records = [dict(zip(("run_id", "question_id", "metric", "value", "error"), row + (None,) * (5 - len(row))))
               for row in rows]
    return pd.DataFrame.from_records(records).astype(
        {"run_id": "string", "question_id": "string", "metric": "string", "value": "float64", "error": "string"})


def _run(run_id: str, chunker: str = "token", retriever: str = "bm25", top_k: int = 5, **params) -> dict:
    row = {"run_id": run_id, "experiment": "t", "corpus": "c", "corpus_id": "c1", "questions_key": "q1",
           "chunkset_id": f"cs-{chunker}", "index_id": f"ix-{chunker}-{retriever}", "chunker": chunker,
           "embedder": None, "retriever": retriever, "top_k": top_k, "retriever.top_k": top_k}
    row.update(params)
    return row


def test_metric_means_excludes_failed_rows_and_counts_them():
    scores = _scores([("r1", "q1", "mrr", 1.0), ("r1", "q2", "mrr", 0.5), ("r1", "q3", "mrr", 0.0),
                      ("r1", "q4", "mrr", np.nan, "timeout"), ("r2", "q1", "mrr", 0.25)])
    means = analysis.metric_means(scores, ["mrr"]).set_index("run_id")
    assert means.loc["r1", "mean"] == pytest.approx(0.5)
    assert (means.loc["r1", "n"], means.loc["r1", "n_failed"]) == (3, 1)
    assert means.loc["r1", "ci_low"] <= 0.5 <= means.loc["r1", "ci_high"]
    # One question: the interval collapses onto the mean.
    assert (means.loc["r2", "mean"], means.loc["r2", "ci_low"], means.loc["r2", "ci_high"]) == (0.25, 0.25, 0.25)


def test_bootstrap_ci_is_reproducible_and_shrinks_with_more_questions():
    rng = np.random.default_rng(1)
    small = _scores([("r", f"q{i}", "hit@1", float(v)) for i, v in enumerate(rng.integers(0, 2, 40))])
    large = _scores([("r", f"q{i}", "hit@1", float(v)) for i, v in enumerate(rng.integers(0, 2, 4000))])
    first = analysis.metric_means(small, ["hit@1"]).iloc[0]
    again = analysis.metric_means(small, ["hit@1"]).iloc[0]
    assert (first["ci_low"], first["ci_high"]) == (again["ci_low"], again["ci_high"])
    wide = analysis.metric_means(large, ["hit@1"]).iloc[0]
    assert wide["ci_low"] <= wide["mean"] <= wide["ci_high"]
    assert wide["ci_high"] - wide["ci_low"] < (first["ci_high"] - first["ci_low"]) / 3


def test_runs_with_different_question_counts_get_their_own_intervals():
    scores = _scores([("a", f"q{i}", "mrr", float(i % 2)) for i in range(10)]
                     + [("b", f"q{i}", "mrr", 1.0) for i in range(7)])
    means = analysis.metric_means(scores, ["mrr"]).set_index("run_id")
    assert means.loc["a", "mean"] == pytest.approx(0.5)
    assert (means.loc["b", "ci_low"], means.loc["b", "ci_high"]) == (1.0, 1.0)


def test_available_metrics_reads_doc_level_then_span_level_by_k():
    names = ["span_mrr", "recall@10", "mrr", "recall@3", "span_recall@5", "f1@10", "f1@3", "ndcg@1"]
    assert analysis.available_metrics(_scores([("r", "q", m, 1.0) for m in names])) == [
        "recall@3", "recall@10", "f1@3", "f1@10", "ndcg@1", "mrr", "span_recall@5", "span_mrr"]


def test_curve_means_each_k_and_ignores_other_families():
    scores = _scores([("r", "q1", "recall@1", 0.0), ("r", "q2", "recall@1", 1.0), ("r", "q1", "recall@2", 1.0),
                      ("r", "q2", "recall@2", 1.0), ("r", "q1", "span_recall@1", 0.0), ("r", "q1", "mrr", 1.0)])
    points = analysis.curve(scores, "recall")
    assert points[["k", "mean"]].values.tolist() == [[1, 0.5], [2, 1.0]]
    assert analysis.curve(scores, "span_recall")["mean"].tolist() == [0.0]


def test_latency_averages_question_stages_and_keeps_build_stages_apart():
    stages = pd.DataFrame({
        "run_id": ["r"] * 5, "question_id": ["q1", "q2", None, None, None],
        "stage": ["retrieve", "retrieve", "chunk", "embed", "index"], "seconds": [0.01, 0.03, 1.0, 5.0, 0.5],
        "cached": False,
    }).astype({"question_id": "string"})
    latency = analysis.latency_by_stage(stages).set_index("stage")
    assert latency.loc["retrieve", "seconds"] == pytest.approx(0.02)
    assert bool(latency.loc["retrieve", "per_question"]) is True
    assert latency.loc["embed", "seconds"] == 5.0 and not latency.loc["embed", "per_question"]
    assert analysis.run_latency(stages)["r"] == pytest.approx(0.02)


def test_pareto_front_of_four_points():
    frame = pd.DataFrame({"quality": [0.9, 0.8, 0.7, 0.95], "cost": [10.0, 5.0, 6.0, 30.0]})
    # (0.7, 6) is beaten by (0.8, 5); the other three each trade quality for cost.
    assert analysis.pareto_front(frame, "quality", "cost").tolist() == [True, True, False, True]


def test_pareto_front_drops_duplicates_of_nothing_and_skips_missing():
    frame = pd.DataFrame({"quality": [0.5, 0.5, np.nan], "cost": [1.0, 1.0, 0.1]})
    assert analysis.pareto_front(frame, "quality", "cost").tolist() == [True, True, False]


def test_single_factor_pairs_on_a_two_by_two_grid():
    runs = pd.DataFrame([
        _run("a", "token", "bm25", 5, **{"chunker.chunk_size": 256}),
        _run("b", "token", "bm25", 10, **{"chunker.chunk_size": 256}),
        _run("c", "sentence", "bm25", 5),
        _run("d", "sentence", "bm25", 10),
    ])
    pairs = analysis.single_factor_pairs(runs)
    assert len(pairs) == 4
    found = {(p.run_a, p.run_b, p.factor, p.value_a, p.value_b) for p in pairs.itertuples()}
    assert found == {("a", "b", "top_k", "5", "10"), ("c", "d", "top_k", "5", "10"),
                     ("c", "a", "chunker", "sentence", "token"), ("d", "b", "chunker", "sentence", "token")}


def test_component_params_count_with_their_component():
    runs = pd.DataFrame([
        _run("dense", retriever="dense"),
        _run("hybrid", retriever="hybrid", **{"retriever.rrf_k": 60}),
        _run("hybrid30", retriever="hybrid", **{"retriever.rrf_k": 30}),
    ])
    pairs = analysis.single_factor_pairs(runs).set_index(["run_a", "run_b"])
    assert set(pairs["factor"]) == {"retriever"}
    assert pairs.loc[("dense", "hybrid"), "value_b"] == "hybrid"
    assert pairs.loc[("hybrid", "hybrid30"), "value_a"] == "hybrid(rrf_k=60)"


def test_new_config_columns_pair_automatically():
    runs = pd.DataFrame([
        _run("off", **{"judge.retrieval.enabled": False}),
        _run("on", **{"judge.retrieval.enabled": True}),
        _run("on_k10", top_k=10, **{"judge.retrieval.enabled": True}),
    ])
    pairs = analysis.single_factor_pairs(runs)
    assert pairs[["run_a", "run_b", "factor", "value_a", "value_b"]].values.tolist() == [
        ["off", "on", "judge.retrieval.enabled", "False", "True"], ["on", "on_k10", "top_k", "5", "10"]]


def test_paired_difference_by_hand():
    scores = _scores([("a", "q1", "mrr", 0.5), ("a", "q2", "mrr", 1.0), ("a", "q3", "mrr", 0.0),
                      ("b", "q1", "mrr", 1.0), ("b", "q2", "mrr", 1.0), ("b", "q3", "mrr", 0.5, "err"),
                      ("b", "q4", "mrr", 1.0)])
    diff = analysis.paired_difference(scores, "a", "b", "mrr")
    # Only q1 and q2 are scored by both: differences 0.5 and 0.
    assert diff["mean_diff"] == pytest.approx(0.25)
    assert (diff["n"], diff["wins"], diff["ties"], diff["losses"]) == (2, 1, 1, 0)
    assert diff["ci_low"] <= 0.25 <= diff["ci_high"]


def test_a_known_shift_gives_a_paired_ci_excluding_zero():
    rng = np.random.default_rng(0)
    base = rng.uniform(0, 1, 200)
    rows = [("a", f"q{i}", "ndcg@10", v) for i, v in enumerate(base)]
    rows += [("b", f"q{i}", "ndcg@10", v + 0.05 + rng.normal(0, 0.02)) for i, v in enumerate(base)]
    diff = analysis.paired_difference(_scores(rows), "a", "b", "ndcg@10")
    assert 0 < diff["ci_low"] < 0.05 < diff["ci_high"]


def test_factor_effects_agree_with_paired_difference():
    runs = pd.DataFrame([_run("a", top_k=5), _run("b", top_k=10)])
    rng = np.random.default_rng(3)
    rows = [(run, f"q{i}", "mrr", float(v)) for run in "ab" for i, v in enumerate(rng.uniform(0, 1, 50))]
    scores = _scores(rows)
    stages = pd.DataFrame({"run_id": ["a", "b"], "question_id": ["q0", "q0"], "stage": "retrieve",
                           "seconds": [0.01, 0.03], "cached": False})
    effects = analysis.factor_effects(scores, stages, runs, ["mrr"])
    single = analysis.paired_difference(scores, "a", "b", "mrr")
    row = effects.iloc[0]
    assert row["mean_diff"] == pytest.approx(single["mean_diff"])
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((single["ci_low"], single["ci_high"]), abs=0.02)
    assert row["latency_ms_diff"] == pytest.approx(20.0)


def test_load_results_labels_runs(tmp_path):
    store = ResultStore(tmp_path)
    for run_id, top_k in (("r1", 5), ("r2", 10)):
        store.write_run(run_id, _run(run_id, top_k=top_k))
        store.commit_shard(run_id, ["q1"], {"scores": _scores([(run_id, "q1", "mrr", 1.0)])})
    results = analysis.load_results(tmp_path)
    assert results.runs["label"].tolist() == ["token · - · bm25 · k=10", "token · - · bm25 · k=5"]
    assert len(results.scores) == 2 and results.retrievals.empty


def test_load_results_of_a_missing_folder_names_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere"):
        analysis.load_results(tmp_path / "nowhere")
