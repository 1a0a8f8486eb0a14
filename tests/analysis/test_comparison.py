"""ragkit.analysis.comparison: pairs with failures and strict differences, common depth, factor
effects against a reference level, families per kind and metric. Hand-computed cases."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from ragkit.analysis.comparison import Comparer, check_baselines, compare, compared_metric
from ragkit.analysis.means import metric_means
from ragkit.analysis.statistics import IDENTICAL_NOTE, holm
from ragkit.metrics.retrieval import run_metrics
from tests.analysis.helpers import judge_run, results_of, run_row, score_rows

pytestmark = pytest.mark.unit


def test_a_pair_counts_failures_per_side_and_gives_the_strict_difference():
    scores = score_rows([("a", "q1", "mrr", 0.5), ("a", "q2", "mrr", 1.0), ("a", "q3", "mrr", 0.0),
                         ("a", "q4", "mrr", np.nan, "RuntimeError: boom"),
                         ("b", "q1", "mrr", 1.0), ("b", "q2", "mrr", 1.0), ("b", "q3", "mrr", np.nan, "timeout"),
                         ("b", "q4", "mrr", 1.0)])
    row = compare(results_of([run_row("a", chunker="sentence"), run_row("b", chunker="token")], scores),
                  ["mrr"], factor_rows=False).iloc[0]
    # Scored by both: q1 (+0.5) and q2 (0). Asked both: q1..q4 with failures as 0: +0.5, 0, 0, +1.
    assert (row["run_a"], row["run_b"], row["factor"]) == ("a", "b", "chunker")
    assert row["diff"] == pytest.approx(0.25) and row["n"] == 2
    assert row["strict_diff"] == pytest.approx(0.375)
    assert (row["n_scored_a"], row["n_scored_b"], row["n_failed_a"], row["n_failed_b"]) == (3, 3, 1, 1)
    assert (row["wins"], row["ties"], row["losses"]) == (1, 1, 0)
    assert row["unit"] == "question" and row["metric_compared"] == "mrr"


def test_a_judge_that_crashes_on_the_hard_half_cannot_come_out_ahead():
    # Judge on answers exactly as judge off, but crashes on the ten hard questions; judge off
    # scores 0.4 on those. Over the survivors alone the judge would look 0.3 better.
    rows = []
    for i in range(20):
        hard = i < 10
        rows.append(("off", f"q{i}", "recall@5", 0.4 if hard else 1.0))
        rows.append(("on", f"q{i}", "recall@5", np.nan, "RuntimeError: judge crashed") if hard
                    else ("on", f"q{i}", "recall@5", 1.0))
    results = results_of([judge_run("off", "off"), judge_run("on", "llm")], score_rows(rows))
    means = metric_means(results.scores, ["recall@5"]).set_index("run_id")
    assert means.loc["on", "mean"] > means.loc["off", "mean"]  # the naive reading
    assert means.loc["on", "n_failed"] == 10
    pair = compare(results, ["recall@5"], factor_rows=False).iloc[0]
    assert pair["diff"] == 0.0 and pair["n"] == 10
    assert pair["strict_diff"] == pytest.approx(-0.2) and pair["n_failed_b"] == 10
    # Its strict difference has its own interval and test: -0.4 on the ten hard questions, 0 on the rest.
    strict = stats.ttest_1samp([-0.4] * 10 + [0.0] * 10, 0.0)
    assert pair["strict_p"] == pytest.approx(strict.pvalue) and pair["strict_p"] < 0.05
    assert (pair["strict_ci_low"], pair["strict_ci_high"]) == pytest.approx(tuple(strict.confidence_interval()))
    # over the survivors the two runs are identical: nothing to test, not a p of 1 counted by Holm
    assert np.isnan(pair["p"]) and pair["p_note"] == IDENTICAL_NOTE and pair["family_tests"] == 1
    factor = compare(results, ["recall@5"], pair_rows=False).iloc[0]
    assert (factor["level_a"], factor["level_b"]) == ("off", "llm"), "tested against the reference, judge off"
    assert factor["strict_diff"] == pytest.approx(-0.2)


def test_a_lower_is_better_rate_counts_a_failure_as_worst():
    # abstention_wrong: 1 when an answerable question was wrongly abstained on. "on" abstains on
    # q0 only; "off" never abstains but crashes on q1-q3: counted as 1 (worst), "off" is worse.
    rows = [("on", "q0", "abstention_wrong", 1.0)] + [("on", f"q{i}", "abstention_wrong", 0.0) for i in range(1, 6)]
    rows += [("off", "q0", "abstention_wrong", 0.0)] + [
        ("off", f"q{i}", "abstention_wrong", np.nan, "RuntimeError: boom") for i in range(1, 4)] + [
        ("off", f"q{i}", "abstention_wrong", 0.0) for i in range(4, 6)]
    results = results_of([judge_run("off", "off"), judge_run("on", "llm")], score_rows(rows))
    pair = compare(results, ["abstention_wrong"], factor_rows=False).iloc[0]
    assert pair["strict_diff"] == pytest.approx((1.0 - 3.0) / 6)  # on - off with failures as 1
    factor = compare(results, ["abstention_wrong"], pair_rows=False).iloc[0]
    assert factor["level_b"] == "llm" and factor["level_a"] == "off"
    assert factor["strict_diff"] == pytest.approx((1.0 - 3.0) / 6)
    # Over the scored questions "on" is worse (it abstained wrongly on q0), strictly it is better.
    assert factor["diff"] == pytest.approx(1 / 3) and bool(factor["signs_disagree"])


def _truncation_results(n_questions: int = 40):
    """Judge off passes on 10 chunks; a truncation-only judge keeps the same order and drops to 5."""
    rng = np.random.default_rng(7)
    rows = []
    for i in range(n_questions):
        ranking = [(f"d{doc}", 0, 100) for doc in rng.integers(0, 12, 10)]
        relevant = {f"d{doc}": 1.0 for doc in rng.choice(12, 2, replace=False)}
        for run_id, kept in (("off", ranking), ("on", ranking[:5])):
            rows += [(run_id, f"q{i}", name, value) for name, value in run_metrics(kept, relevant, None, 10).items()]
    runs = [{**judge_run("off", "off"), "top_k": 10, "depth": 10}, {**judge_run("on", "llm"), "top_k": 10, "depth": 5}]
    return results_of(runs, score_rows(rows))


@pytest.mark.parametrize(("metric", "compared"), [("recall@10", "recall@5"), ("mrr", "mrr@5"), ("ndcg@10", "ndcg@5"),
                                                  ("recall@3", "recall@3")])
def test_a_truncation_only_judge_shows_no_effect_at_the_common_depth(metric, compared):
    row = compare(_truncation_results(), [metric], factor_rows=False).iloc[0]
    assert row["metric_compared"] == compared
    assert row["diff"] == 0.0 and row["strict_diff"] == 0.0 and np.isnan(row["p"]) and row["p_note"] == IDENTICAL_NOTE
    assert (row["ci_low"], row["ci_high"], row["family_tests"]) == (0.0, 0.0, 0)
    assert row["n"] == 40


def test_asked_depth_shows_what_truncation_loses():
    row = compare(_truncation_results(), ["recall@10"], factor_rows=False, depth_rule="asked").iloc[0]
    assert row["metric_compared"] == "recall@10"
    assert row["diff"] < 0 and row["wins"] == 0 and row["losses"] > 0


@pytest.mark.parametrize(("metric", "depths", "factor", "expected"), [
    ("recall@10", (10, 5), "judge.rerank", ("recall@5", 5)),
    ("recall@3", (10, 5), "judge.rerank", ("recall@3", 3)),
    ("span_mrr", (10, 4), "judge.retrieval", ("span_mrr@4", 4)),
    ("mrr", (10, 10), "retriever", ("mrr", None)),
    # top_k is itself about depth: compared as asked.
    ("recall@10", (5, 10), "top_k", ("recall@10", 10)),
    # budgets and final-context metrics are not cut by depth
    ("span_recall@512tok", (10, 5), "judge.rerank", ("span_recall@512tok", None)),
    ("final_span_recall", (10, 5), "judge.rerank", ("final_span_recall", None)),
    ("faithfulness", (10, 5), "judge.rerank", ("faithfulness", None)),
])
def test_compared_metric_rule(metric, depths, factor, expected):
    assert compared_metric(metric, *depths, factor) == expected


def _factor_grid():
    """Chunkers A, B, C at top_k 5 and 10; three questions, each its own unit."""
    values = {"A5": [0.2, 0.4, 0.6], "A10": [0.4, 0.6, 0.8], "B5": [0.6, 0.8, 1.0], "B10": [0.8, 1.0, 1.0],
              "C5": [0.2, 0.2, 0.2], "C10": [0.4, 0.4, 0.4]}
    runs = [run_row(name, chunker=name[0], top_k=int(name[1:])) for name in values]
    scores = score_rows([(name, f"q{i}", "ndcg@5", v) for name, vs in values.items() for i, v in enumerate(vs)])
    return results_of(runs, scores)


def test_factor_effects_by_hand():
    effects = Comparer(_factor_grid()).factor_effects(["ndcg@5"])
    # Reference: the first level of each factor (chunker A, top_k 5), whatever scores best.
    # B vs A per question, mean over the two k: (0.4 + 0.4) / 2, (0.4 + 0.4) / 2, (0.4 + 0.2) / 2.
    chunker = effects[effects["factor"] == "chunker"]
    assert chunker["level_a"].tolist() == ["A", "A"]
    assert chunker["level_b"].tolist() == ["B", "C"]  # best level first: B (0.867), then C (0.3)
    b_vs_a = chunker.iloc[0]
    per_question = np.array([0.4, 0.4, 0.3])
    interval = stats.ttest_1samp(per_question, 0.0).confidence_interval(0.95)
    assert b_vs_a["settings"] == 2 and b_vs_a["n"] == 3
    assert b_vs_a["diff"] == pytest.approx(per_question.mean())
    assert (b_vs_a["ci_low"], b_vs_a["ci_high"]) == pytest.approx((interval.low, interval.high))
    assert (b_vs_a["units_b_better"], b_vs_a["n_units"]) == (3, 3)
    # C vs A: (0 + 0) / 2, (-0.2 - 0.2) / 2, (-0.4 - 0.4) / 2
    assert chunker.iloc[1]["diff"] == pytest.approx(np.mean([0.0, -0.2, -0.4]))
    # top_k: 10 vs 5 over the three chunkers; 10 is better everywhere.
    top_k = effects[effects["factor"] == "top_k"].iloc[0]
    assert (top_k["level_a"], top_k["level_b"]) == ("5", "10") and top_k["settings"] == 3 and top_k["diff"] > 0
    assert "A" not in set(chunker["level_b"])  # the reference is not a row


def test_a_named_baseline_is_the_reference_and_an_unknown_one_is_refused():
    from ragkit.errors import ConfigError

    results = _factor_grid()
    named = Comparer(results, baselines={"chunker": "C"}).factor_effects(["ndcg@5"])
    chunker = named[named["factor"] == "chunker"]
    assert set(chunker["level_a"]) == {"C"} and chunker["level_b"].tolist() == ["B", "A"]
    reference = {r.factor: r for r in Comparer(results, baselines={"chunker": "C"}).references()}
    assert reference["chunker"].level == "C" and "--baseline" in reference["chunker"].source
    assert reference["top_k"].level == "5" and "first level" in reference["top_k"].source
    with pytest.raises(ConfigError, match=r"unknown level 'D' of chunker\. Valid levels: A, B, C"):
        check_baselines({"chunker": "D"}, results.runs)
    with pytest.raises(ConfigError, match=r"unknown factor 'chunkr'\. Valid factors: .*chunker"):
        check_baselines({"chunkr": "A"}, results.runs)


def test_families_are_per_kind_and_metric_whatever_else_is_asked():
    grid = _factor_grid()
    table = compare(grid, ["ndcg@5"])
    assert set(table["kind"]) == {"factor", "pair"}
    for kind, family in table.groupby("kind"):
        # p and strict p of a row are two tests of one family, one where they are the same test
        separate = ~((family["n"] == family["n_strict"]) & (family["p"] == family["strict_p"])).to_numpy()
        tests = np.r_[family["p"].to_numpy(dtype=float), family["strict_p"].to_numpy(dtype=float)[separate]]
        # the joint test (tests/analysis/test_families.py checks its value) lies between p and Holm
        adjusted, known = family["p_adj"].to_numpy(), family["p"].notna().to_numpy()
        assert np.isnan(adjusted[~known]).all()
        assert (adjusted[known] >= family["p"].to_numpy()[known] - 1e-15).all()
        assert (adjusted[known] <= holm(tests)[:len(family)][known] + 1e-15).all()
        m = int(np.count_nonzero(~np.isnan(tests)))
        assert (family["family_tests"] == m).all()
        assert set(family["family"]) == {("factor table" if kind == "factor" else "pairs") + " on ndcg@5"}
        # simultaneous intervals: each row's t interval at one level for the whole family, between
        # the unadjusted 95% and Bonferroni's 1 - 0.05 / m
        tested = family[family["p"].notna()]
        level = 1 - 2 * stats.t.sf(((tested["sim_ci_high"] - tested["diff"]) / tested["se"]).to_numpy(),
                                   tested["df"].to_numpy())
        assert level == pytest.approx(np.full(len(tested), level[0]))
        assert 0.95 - 1e-9 <= level[0] <= 1 - 0.05 / m + 1e-9
        assert (tested["sim_ci_high"] - tested["sim_ci_low"] >= tested["ci_high"] - tested["ci_low"]).all()
        # one that excludes 0 always sits beside p (Holm) < 0.05
        excludes = (tested["sim_ci_low"] > 0) | (tested["sim_ci_high"] < 0)
        assert (~excludes | (tested["p_adj"] < 0.05)).all()
    # The factor table's numbers do not depend on whether the pairs are asked for too.
    alone = compare(grid, ["ndcg@5"], pair_rows=False)
    shown = table[table["kind"] == "factor"].reset_index(drop=True)
    for column in ("p_adj", "strict_p_adj", "sim_ci_low", "sim_ci_high", "family_tests"):
        assert alone[column].to_numpy(dtype=float) == pytest.approx(shown[column].to_numpy(dtype=float), nan_ok=True)


def test_questions_of_one_document_resample_together_and_the_unit_is_named():
    rng = np.random.default_rng(3)
    documents = {f"q{i}": f"doc{i // 8}" for i in range(160)}
    effect = rng.normal(0.1, 0.15, 20)
    rows = []
    for i, question in enumerate(documents):
        base = rng.uniform(0.2, 0.8)
        rows += [("a", question, "recall@5", base), ("b", question, "recall@5", base + effect[i // 8])]
    runs = [run_row("a", chunker="sentence"), run_row("b", chunker="token")]
    by_document = compare(results_of(runs, score_rows(rows), documents), ["recall@5"], factor_rows=False).iloc[0]
    by_question = compare(results_of(runs, score_rows(rows)), ["recall@5"], factor_rows=False).iloc[0]
    assert (by_document["unit"], by_document["n_units"]) == ("document", 20)
    assert (by_question["unit"], by_question["n_units"]) == ("question", 160)
    assert by_document["diff"] == pytest.approx(by_question["diff"])
    assert by_document["ci_high"] - by_document["ci_low"] > 2 * (by_question["ci_high"] - by_question["ci_low"])


def test_run_means_by_hand_count_failures_as_given_and_skip_questions_not_asked():
    # run a: 1.0, 0.5, failed -> (1 + 0.5 + 0) / 3 with failures as 0; run b asked q0 only: 0.25;
    # run c asked nothing of this metric: NaN.
    rows = [("a", "q0", "mrr", 1.0), ("a", "q1", "mrr", 0.5), ("a", "q2", "mrr", np.nan, "RuntimeError: x"),
            ("b", "q0", "mrr", 0.25), ("c", "q0", "recall@5", 1.0)]
    results = results_of([judge_run("a", "off"), judge_run("b", "llm"), judge_run("c", "heuristic")],
                         score_rows(rows))
    matrices = Comparer(results).matrices
    means = dict(zip(matrices.run_ids, matrices.run_means("mrr", 0.0)))
    assert means["a"] == pytest.approx(0.5) and means["b"] == pytest.approx(0.25) and np.isnan(means["c"])
    worst = dict(zip(matrices.run_ids, matrices.run_means("mrr", 1.0)))
    assert worst["a"] == pytest.approx(2.5 / 3) and worst["b"] == pytest.approx(0.25)


def test_pairs_compared_in_blocks_are_the_pairs_compared_at_once(monkeypatch):
    from ragkit.analysis import comparison

    rng = np.random.default_rng(11)
    runs = [run_row(f"r{i:02d}", str(rng.choice(["A", "B", "C"])), str(rng.choice(["bm25", "dense"])),
                    int(rng.choice([5, 10]))) for i in range(24)]
    scores = score_rows([(run["run_id"], f"q{q}", metric, float(rng.uniform()) if rng.uniform() > 0.1 else np.nan)
                         for run in runs for q in range(12) for metric in ("ndcg@5", "mrr") if rng.uniform() > 0.05])
    results = results_of(runs, scores, {f"q{q}": f"d{q % 4}" for q in range(12)})
    at_once = compare(results, ["ndcg@5", "mrr"])
    monkeypatch.setattr(comparison, "PAIR_BLOCK", 3)
    in_blocks = compare(results, ["ndcg@5", "mrr"])
    assert len(at_once) > 3 * 2 * 3
    pd.testing.assert_frame_equal(in_blocks, at_once, check_exact=True)


def test_question_means_reduce_the_pair_differences_as_they_go():
    """A level's effect is reduced over its pairs while they are compared: the same per-question
    means and totals as the questions x pairs differences averaged afterwards."""
    from ragkit.analysis import differences
    from ragkit.analysis.matrices import nanmean_columns

    rng = np.random.default_rng(5)
    metrics = ("ndcg@5", "mrr", "abstention_wrong")  # a lower-is-better one too: failures count as 1
    runs = [run_row(f"r{i:02d}", str(rng.choice(["A", "B"])), top_k=int(rng.choice([5, 10]))) for i in range(10)]
    rows = [(run["run_id"], f"q{q}", metric, float(rng.uniform()) if rng.uniform() > 0.2 else np.nan,
             "timeout" if rng.uniform() < 0.05 else None)
            for run in runs for q in range(15) for metric in metrics if rng.uniform() > 0.1]
    rows += [("r00", "q-only-r00", metric, 0.5) for metric in metrics]
    matrices = Comparer(results_of(runs, score_rows(rows))).matrices
    # No pair compares r00 (position 0 in run order): its question is in no pair's count.
    runs_a, runs_b = rng.integers(1, 10, 40), rng.integers(1, 10, 40)
    assert matrices.run_ids[0] == "r00"
    compared = rng.choice(np.array(metrics, dtype=object), 40)
    by_pair = differences.pair_differences(matrices, runs_a, runs_b, compared)
    reduced = differences.question_means(matrices, runs_a, runs_b, compared)
    for name in ("diff", "strict"):
        expected = nanmean_columns(by_pair[name].T)
        only_r00 = list(matrices.question_ids).index("q-only-r00")
        assert np.isnan(reduced[name][only_r00]) and np.isnan(expected).sum() == 1
        np.testing.assert_allclose(reduced[name], expected, rtol=1e-12)
    for name in differences.CASE_COUNTS:
        assert int(reduced[name]) == int(by_pair[name].sum())
        assert name.startswith("n_only") or int(reduced[name]) > 0


def test_a_setting_where_neither_run_has_the_metric_is_not_counted():
    results = _factor_grid()
    # mrr only at top_k 5 (and for C at 10 too): B vs A is compared in one setting, not two.
    rows = [(run, f"q{i}", "mrr", 0.5 + 0.1 * i) for run in ("A5", "B5", "C5", "C10") for i in range(3)]
    scores = pd.concat([results.scores, score_rows(rows)], ignore_index=True)
    effects = Comparer(results_of([run_row(r, chunker=r[0], top_k=int(r[1:])) for r in results.runs["run_id"]],
                                  scores)).factor_effects(["mrr"]).set_index(["factor", "level_b"])
    assert effects.loc[("chunker", "B"), "settings"] == 1
    # C vs A at k = 10: only C has mrr there, so the setting counts, its questions as one-sided
    assert effects.loc[("chunker", "C"), "settings"] == 2
    assert (effects.loc[("chunker", "C"), "n_only_a"], effects.loc[("chunker", "C"), "n_only_b"]) == (0, 3)
