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
    # Same retriever: the smaller differing parameter is the baseline.
    assert pairs.loc[("hybrid30", "hybrid"), ["value_a", "value_b"]].tolist() == ["hybrid(rrf_k=30)",
                                                                                  "hybrid(rrf_k=60)"]


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
    # Not one of 999 sign-flip resamples reaches the observed mean: the smallest p there is.
    assert diff["p_value"] == pytest.approx(2 / 1000)


def test_factor_effects_agree_with_paired_difference():
    # Two pairs with the same questions go through one vectorised test and must still each
    # equal their own computation.
    runs = pd.DataFrame([_run("a", top_k=5), _run("b", top_k=10), _run("c", chunker="sentence", top_k=5)])
    rng = np.random.default_rng(3)
    rows = [(run, f"q{i}", "mrr", float(v)) for run in "abc" for i, v in enumerate(rng.uniform(0, 1, 50))]
    scores = _scores(rows)
    stages = pd.DataFrame({"run_id": ["a", "b", "c"], "question_id": "q0", "stage": "retrieve",
                           "seconds": [0.01, 0.03, 0.02], "cached": False})
    effects = analysis.factor_effects(scores, stages, runs, ["mrr"])
    assert len(effects) == 2
    for row in effects.itertuples():
        single = analysis.paired_difference(scores, row.run_a, row.run_b, "mrr")
        assert row.mean_diff == pytest.approx(single["mean_diff"])
        assert (row.ci_low, row.ci_high, row.p_value) == pytest.approx(
            (single["ci_low"], single["ci_high"], single["p_value"]))
        assert (row.n, row.wins, row.ties, row.losses) == (single["n"], single["wins"], single["ties"],
                                                           single["losses"])
    assert effects.set_index("run_b").loc["b", "latency_ms_diff"] == pytest.approx(20.0)


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


def _judge_run(run_id: str, mode: str, **params) -> dict:
    """A run with the rerank judge in `mode`; parameters and the LLM only when it is on."""
    row = _run(run_id, **{"judge.rerank": mode, "generator": False})
    if mode != "off":
        row["judge.rerank.top_n"] = params.get("top_n", 5)
    if mode == "llm":
        row["llm.rerank"] = params.get("llm", "local:smollm2")
    return row


@pytest.mark.parametrize(("listed_first", "listed_second", "baseline"), [
    # (run "x" config, run "y" config, which run must be run_a); x is listed first on purpose.
    ({"judge.rerank": "llm"}, {"judge.rerank": "off"}, "y"),
    ({"judge.rerank": "heuristic"}, {"judge.rerank": "off"}, "y"),
    ({"judge.rerank": "llm"}, {"judge.rerank": "heuristic"}, "y"),
    ({"judge.rerank": "off"}, {"judge.rerank": "llm"}, "x"),
    ({"generator": True}, {"generator": False}, "y"),
    ({"judge.retrieval.enabled": True}, {"judge.retrieval.enabled": False}, "y"),
    ({"top_k": 10, "retriever.top_k": 10}, {"top_k": 5, "retriever.top_k": 5}, "y"),
    ({"top_k": 2, "retriever.top_k": 2}, {"top_k": 10, "retriever.top_k": 10}, "x"),
    ({"chunker": "token"}, {"chunker": "sentence"}, "y"),
])
def test_pair_direction_puts_the_baseline_first(listed_first, listed_second, baseline):
    common = {"judge.rerank": "off", "generator": False, "judge.retrieval.enabled": False}
    runs = pd.DataFrame([_run("x", **{**common, **listed_first}), _run("y", **{**common, **listed_second})])
    runs["chunker"] = [listed_first.get("chunker", "token"), listed_second.get("chunker", "token")]
    pairs = analysis.single_factor_pairs(runs)
    assert len(pairs) == 1
    assert pairs.iloc[0]["run_a"] == baseline


def test_judge_mode_pairs_as_one_factor_with_its_parameters_and_llm():
    runs = pd.DataFrame([
        _judge_run("llm", "llm"), _judge_run("off", "off"), _judge_run("heuristic", "heuristic"),
        _judge_run("llm_top10", "llm", top_n=10), _judge_run("llm_other_model", "llm", llm="ollama:qwen2.5"),
    ])
    pairs = analysis.single_factor_pairs(runs)
    found = {(p.run_a, p.run_b): (p.factor, p.value_a, p.value_b) for p in pairs.itertuples()}
    assert found[("off", "llm")] == ("judge.rerank", "off", "llm")
    assert found[("off", "heuristic")] == ("judge.rerank", "off", "heuristic")
    assert found[("heuristic", "llm")] == ("judge.rerank", "heuristic", "llm")
    assert found[("llm", "llm_top10")] == ("judge.rerank", "llm(top_n=5)", "llm(top_n=10)")
    assert found[("llm", "llm_other_model")] == ("judge.rerank", "llm(llm=local:smollm2)",
                                                 "llm(llm=ollama:qwen2.5)")
    assert set(pairs["factor"]) == {"judge.rerank"}


def test_the_generator_llm_joins_the_generator_factor():
    runs = pd.DataFrame([_run("on", generator=True, **{"llm.generator": "local:smollm2"}),
                         _run("off", generator=False)])
    pairs = analysis.single_factor_pairs(runs)
    assert pairs[["run_a", "run_b", "factor", "value_a", "value_b"]].values.tolist() == [
        ["off", "on", "generator", "False", "True"]]


@pytest.mark.parametrize(("p_values", "expected"), [
    # sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 = 0.02, 0.03, 0.06, 0.04 -> running max
    ([0.01, 0.04, 0.03, 0.005], [0.03, 0.06, 0.06, 0.02]),
    # NaN is not a comparison: m = 2
    ([0.02, np.nan, 0.04], [0.04, np.nan, 0.04]),
    # capped at 1, and the running max keeps the order
    ([0.5, 0.6], [1.0, 1.0]),
    ([0.3], [0.3]),
    # equal p-values: 3 * 0.01, then max(3 * 0.01, 2 * 0.01), max(..., 1 * 0.01)
    ([0.01, 0.01, 0.01], [0.03, 0.03, 0.03]),
    ([np.nan], [np.nan]),
    ([], []),
])
def test_holm_by_hand(p_values, expected):
    assert analysis.holm(p_values) == pytest.approx(np.array(expected, dtype="float64"), nan_ok=True)


def _pair_scores(a: list[float], b: list[float], metric: str = "mrr") -> pd.DataFrame:
    """Runs a and b; question ids sort in list order, so resamples match a direct scipy call."""
    return _scores([("a", f"q{i:04d}", metric, v) for i, v in enumerate(a)]
                   + [("b", f"q{i:04d}", metric, v) for i, v in enumerate(b)])


@pytest.mark.parametrize(("differences", "p_value"), [
    # Exact tests (2^n sign patterns <= 999): p = 2 * share of patterns with a mean >= the observed one.
    ([1.0, 1.0, 1.0], 2 * 1 / 8),
    ([1.0, 1.0, 0.0, 0.0], 2 * 4 / 16),  # zeros flip onto themselves
    ([0.5, 0.5, -0.25], 2 * 2 / 8),  # means 1.25 and 0.75 reach the observed 0.75
    ([0.1, 0.2, 0.3, 0.4, 0.5], 2 * 1 / 32),
    ([1.0, -1.0], 1.0),
    ([0.0, 0.0, 0.0], 1.0),
    ([0.3], 1.0),  # one question: both signs are as extreme
])
def test_permutation_p_value_by_hand(differences, p_value):
    base = [0.5] * len(differences)
    diff = analysis.paired_difference(_pair_scores(base, [0.5 + d for d in differences]), "a", "b", "mrr")
    assert diff["p_value"] == pytest.approx(p_value)


def test_identical_configs_give_p_one_and_a_ci_at_zero():
    rng = np.random.default_rng(5)
    values = rng.uniform(0, 1, 300).tolist()
    diff = analysis.paired_difference(_pair_scores(values, values), "a", "b", "mrr")
    assert diff["p_value"] == 1.0
    assert (diff["ci_low"], diff["mean_diff"], diff["ci_high"]) == (0.0, 0.0, 0.0)
    assert (diff["wins"], diff["ties"], diff["losses"]) == (0, 300, 0)


def test_as_many_wins_as_losses_give_p_one_and_a_ci_covering_zero():
    a = [1.0, 0.0] * 100
    b = [0.0, 1.0] * 100
    diff = analysis.paired_difference(_pair_scores(a, b), "a", "b", "mrr")
    assert diff["mean_diff"] == 0.0 and diff["p_value"] == 1.0
    assert diff["ci_low"] < 0 < diff["ci_high"]
    assert (diff["wins"], diff["ties"], diff["losses"]) == (100, 0, 100)


def test_paired_statistics_equal_a_direct_scipy_computation():
    from scipy import stats

    rng = np.random.default_rng(11)
    a = rng.uniform(0, 1, 40)
    b = np.clip(a + rng.normal(0.03, 0.1, 40), 0, 1)
    diff = analysis.paired_difference(_pair_scores(a.tolist(), b.tolist()), "a", "b", "mrr")
    interval = stats.bootstrap((a, b), lambda x, y, axis: (y - x).mean(axis=axis), paired=True, vectorized=True,
                               n_resamples=1000, confidence_level=0.95, method="percentile",
                               rng=np.random.default_rng(0)).confidence_interval
    test = stats.permutation_test((b - a,), lambda d, axis: d.mean(axis=axis), permutation_type="samples",
                                  vectorized=True, n_resamples=999, alternative="two-sided",
                                  rng=np.random.default_rng(0))
    assert (diff["ci_low"], diff["ci_high"]) == pytest.approx((interval.low, interval.high))
    assert diff["p_value"] == pytest.approx(test.pvalue)
    assert 0.001 < diff["p_value"] < 1  # a resampled, not an exact, and not a trivial p-value


def test_factor_effects_holm_corrects_over_every_row_returned():
    runs = pd.DataFrame([_judge_run("off", "off"), _judge_run("llm", "llm"), _judge_run("heuristic", "heuristic")])
    rng = np.random.default_rng(2)
    base = rng.uniform(0, 1, 60)
    shift = {"off": 0.0, "heuristic": 0.02, "llm": 0.2}
    rows = [(run, f"q{i}", metric, float(np.clip(v + shift[run] + rng.normal(0, 0.05), 0, 1)))
            for run in shift for metric in ("mrr", "recall@5") for i, v in enumerate(base)]
    stages = pd.DataFrame({"run_id": list(shift), "question_id": "q0", "stage": "retrieve",
                           "seconds": [0.01, 0.02, 0.5], "cached": False})
    effects = analysis.factor_effects(_scores(rows), stages, runs, ["mrr", "recall@5"])
    assert len(effects) == 6  # 3 pairs x 2 metrics form the family
    assert effects["p_holm"].to_numpy() == pytest.approx(analysis.holm(effects["p_value"]))
    assert (effects["p_holm"] >= effects["p_value"]).all()
    turned_on = effects[(effects["run_a"] == "off") & (effects["run_b"] == "llm")]
    assert (turned_on["ci_low"] > 0).all() and (turned_on["p_holm"] < 0.05).all()
