"""ragkit.analysis.statistics: the cluster-robust (CR2, Bell-McCaffrey df) mean, CI and p-value,
checked by hand, against scipy, against a direct matrix implementation of CR2 and its
Satterthwaite df written here for any design, against clubSandwich's closed forms for the
intercept, and by simulation (coverage and false positives); Holm by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from ragkit.analysis.statistics import (
    IDENTICAL_NOTE,
    ONE_UNIT_NOTE,
    ZERO_SE_RULE,
    column_stats,
    holm,
    interval,
    unit_codes,
)
from tests.analysis.helpers import cr2_by_matrices, random_effects_working_model

pytestmark = pytest.mark.unit


def test_cluster_robust_interval_by_hand():
    # Units {1, 2} and {3, 4}: mean 2.5; unit sums 3 and 7 minus n_g * mean = -2 and 2;
    # V = G / (G - 1) * (4 + 4) / N^2 = 2 * 8 / 16 = 1, so se = 1 with G - 1 = 1 degree of freedom.
    result = column_stats(np.array([1.0, 2.0, 3.0, 4.0]), np.array([0, 0, 1, 1]))
    critical = stats.t.ppf(0.975, 1)  # 12.706
    assert result.mean[0] == 2.5 and result.n[0] == 4 and result.n_units[0] == 2
    assert (result.ci_low[0], result.ci_high[0]) == pytest.approx((2.5 - critical, 2.5 + critical))
    # p = 2 * P(T_1 > 2.5) = 1 - 2 / pi * atan(2.5)
    assert result.p_value[0] == pytest.approx(1 - 2 / np.pi * np.arctan(2.5))
    assert (result.units_positive[0], result.units_zero[0], result.units_negative[0]) == (2, 0, 0)


def test_one_question_per_unit_is_the_one_sample_t_test():
    rng = np.random.default_rng(4)
    values = rng.normal(0.1, 0.3, 37)
    result = column_stats(values, np.arange(37))
    test = stats.ttest_1samp(values, 0.0)
    interval = test.confidence_interval(0.95)
    assert result.p_value[0] == pytest.approx(test.pvalue)
    assert (result.ci_low[0], result.ci_high[0]) == pytest.approx((interval.low, interval.high))


def _uneven(seed: int, n_units: int = 14):
    rng = np.random.default_rng(seed)
    sizes = 1 + rng.negative_binomial(2, 2 / 7, n_units)  # clubSandwich's test: 1 + rnbinom(size 2, mu 5)
    units = np.repeat(np.arange(n_units), sizes)
    values = rng.normal(0, np.sqrt(0.2), n_units)[units] + rng.normal(0, np.sqrt(0.8), len(units))
    return values, units, sizes


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_equals_a_direct_matrix_implementation_of_cr2_and_satterthwaite(seed):
    values, units, _ = _uneven(seed)
    working = random_effects_working_model(values, units)
    mean, se, df = cr2_by_matrices(values, np.ones((len(values), 1)), units, np.array([1.0]), working)
    result = column_stats(values, units)
    assert (result.mean[0], result.se[0], result.df[0]) == pytest.approx((mean, se, df), rel=1e-10)
    assert result.p_value[0] == pytest.approx(2 * stats.t.sf(abs(mean / se), df), rel=1e-9)
    low, high = mean + np.array([-1, 1]) * stats.t.ppf(0.975, df) * se
    assert (result.ci_low[0], result.ci_high[0]) == pytest.approx((low, high), rel=1e-10)
    # Uneven documents: fewer degrees of freedom than documents - 1.
    assert df < len(np.unique(units)) - 1


def test_with_no_correlation_inside_units_the_df_are_clubsandwichs():
    """Residuals that correlate negatively inside units (rho clipped to 0): the working model is
    the identity, clubSandwich's own, whose closed forms its tests state (next test)."""
    units = np.repeat(np.arange(6), [2, 3, 2, 5, 2, 4])
    values = np.array([1.0, -1.0, 2.0, -1.0, -1.0, 0.5, -0.5, 3.0, -1.0, -1.0, -0.5, -0.5, 1.0, -1.0,
                       0.25, -0.25, 0.5, -0.5])
    assert (random_effects_working_model(values, units) == np.eye(len(values))).all()
    assert column_stats(values, units).df[0] == pytest.approx(
        cr2_by_matrices(values, np.ones((len(values), 1)), units, np.array([1.0]))[2], rel=1e-10)


def test_equals_clubsandwichs_closed_forms_for_the_intercept():
    # clubSandwich's tests/testthat/test_intercept_formulas.R states what coef_test(lm(Y ~ 1),
    # vcov = "CR2", test = "Satterthwaite") gives, in unit means y_j and sizes n_j:
    # V = sum n_j^2 (y_j - y)^2 / (1 - n_j / N) / N^2 and
    # df = N^2 / (N^2 sum n_j^2 / (N - n_j)^2 - 2 N sum n_j^3 / (N - n_j)^2 + (sum n_j^2 / (N - n_j))^2).
    values, units, sizes = _uneven(20190513)
    n = len(values)
    unit_means = np.bincount(units, weights=values) / sizes
    variance = np.sum(sizes ** 2 * (unit_means - values.mean()) ** 2 / (1 - sizes / n)) / n ** 2
    df = n ** 2 / (n ** 2 * np.sum(sizes ** 2 / (n - sizes) ** 2) - 2 * n * np.sum(sizes ** 3 / (n - sizes) ** 2)
                   + np.sum(sizes ** 2 / (n - sizes)) ** 2)
    assert column_stats(values, units).se[0] ** 2 == pytest.approx(variance, rel=1e-10)
    # The df there are the identity working model's: the reference implementation's, which with no
    # correlation inside units are ragkit's (previous test).
    identity = cr2_by_matrices(values, np.ones((n, 1)), units, np.array([1.0]))
    assert (identity[1] ** 2, identity[2]) == pytest.approx((variance, df), rel=1e-10)


def test_the_matrix_implementation_is_cr2_for_a_general_design():
    """The reference above on a design with a cluster-level and a question-level covariate: CR2's
    defining property, E[V] = c' (X'X)^-1 c exactly under independent unit-variance errors,
    computed exactly as the sum of V over the N unit error vectors (V is a quadratic form in the
    errors: its residuals are (I - H) e). Without the adjustment (CR0) it falls short."""
    rng = np.random.default_rng(5)
    _, units, _ = _uneven(7, n_units=12)
    x = np.column_stack([np.ones(len(units)), rng.normal(size=12)[units], rng.normal(size=len(units))])
    contrast = np.array([0.0, 1.0, 0.0])
    expected = contrast @ np.linalg.inv(x.T @ x) @ contrast
    basis = sum(cr2_by_matrices(e, x, units, contrast)[1] ** 2 for e in np.eye(len(units)))
    assert basis == pytest.approx(expected, rel=1e-9)
    m = np.linalg.inv(x.T @ x)
    hat = x @ m @ x.T
    cr0 = sum((contrast @ m @ x[units == g].T @ ((np.eye(len(units)) - hat) @ e)[units == g]) ** 2
              for e in np.eye(len(units)) for g in range(12))
    assert cr0 < 0.95 * expected


def test_equal_units_give_the_cr1_variance_and_units_minus_one_df():
    rng = np.random.default_rng(8)
    units = np.repeat(np.arange(9), 4)
    values = rng.normal(0.05, 0.2, len(units)) + rng.normal(0, 0.1, 9)[units]
    sums = np.bincount(units, weights=values)
    cr1 = 9 / 8 * np.sum((sums - 4 * values.mean()) ** 2) / len(values) ** 2
    result = column_stats(values, units)
    assert (result.se[0] ** 2, result.df[0]) == pytest.approx((cr1, 8.0), rel=1e-10)


def test_interval_at_another_level():
    low, high = interval(np.array([1.0]), np.array([0.5]), np.array([7.3]), 0.99)
    assert (low[0], high[0]) == pytest.approx((1 - stats.t.ppf(0.995, 7.3) * 0.5, 1 + stats.t.ppf(0.995, 7.3) * 0.5))


def test_columns_are_independent_and_missing_values_are_skipped():
    values = np.array([[1.0, np.nan], [2.0, 5.0], [3.0, 7.0], [np.nan, 9.0]])
    both = column_stats(values, np.arange(4))
    first = column_stats(np.array([1.0, 2.0, 3.0]), np.arange(3))
    second = column_stats(np.array([5.0, 7.0, 9.0]), np.arange(3))
    assert both.n.tolist() == [3, 3]
    assert (both.mean[0], both.ci_low[0], both.p_value[0]) == pytest.approx(
        (first.mean[0], first.ci_low[0], first.p_value[0]))
    assert (both.mean[1], both.ci_high[1], both.p_value[1]) == pytest.approx(
        (second.mean[0], second.ci_high[0], second.p_value[0]))


@pytest.mark.parametrize(("values", "units", "mean", "low", "high", "p"), [
    # one unit: a mean, but nothing to say how far it could be off
    ([0.2, 0.4], [0, 0], 0.3, np.nan, np.nan, np.nan),
    # every value 0 (two runs scoring identically): nothing to test, interval [0, 0], no p
    ([0.0, 0.0, 0.0], [0, 1, 2], 0.0, 0.0, 0.0, np.nan),
    # no spread between units but a nonzero mean: a zero standard error proves nothing (not p 0)
    ([0.5, 0.5, 0.5], [0, 1, 2], 0.5, np.nan, np.nan, np.nan),
    # nothing at all
    ([np.nan, np.nan], [0, 1], np.nan, np.nan, np.nan, np.nan),
])
def test_degenerate_columns(values, units, mean, low, high, p):
    result = column_stats(np.array(values), np.array(units))
    assert (result.mean[0], result.ci_low[0], result.ci_high[0], result.p_value[0]) == pytest.approx(
        (mean, low, high, p), nan_ok=True)


def test_equal_document_means_with_varying_questions_give_no_p_of_zero():
    # Documents {0.0, 0.2}, {0.1, 0.1}, {0.3, -0.1}: every document's mean is 0.1 while questions vary,
    # so the CR2 variance is 0 and t = 0.1 / 0. The fourth column has mean 0 the same way.
    units = np.array([0, 0, 1, 1, 2, 2])
    values = np.array([[0.0, 0.2, 0.1, 0.1, 0.3, -0.1],
                       # 0.1 + 0.2 is 0.30000000000000004: equal means up to rounding count as equal
                       [0.1, 0.2, 0.3, 0.0, 0.15, 0.15],
                       [0.1, 0.2, 0.3, 0.0, 0.15, 0.16],
                       [0.1, -0.1, 0.2, -0.2, 0.0, 0.0]]).T
    result = column_stats(values, units)
    assert result.mean[:2] == pytest.approx([0.1, 0.15])
    assert np.isnan(result.p_value[[0, 1, 3]]).all() and np.isnan(result.ci_low[[0, 1, 3]]).all()
    assert list(result.p_note[[0, 1, 3]]) == [ZERO_SE_RULE] * 3
    # a real (small) spread between documents gives an ordinary, positive p
    assert 0 < result.p_value[2] < 1 and result.p_note[2] == ""
    assert column_stats(np.array([0.2, 0.4]), np.array([0, 0])).p_note[0] == ONE_UNIT_NOTE
    assert column_stats(np.zeros(4), np.array([0, 0, 1, 2])).p_note[0] == IDENTICAL_NOTE


def test_a_p_never_underflows_to_zero():
    # Mean 1, spread 1e-9 over 60 units: t is about 1e10 with 59 degrees of freedom, so
    # 2 * P(T_59 > t) is about 1e-590, below the smallest double: it is reported as that, not as 0.
    values = 1.0 + 1e-9 * np.random.default_rng(1).normal(size=60)
    result = column_stats(values, np.arange(60))
    assert stats.t.sf(result.mean[0] / (np.std(values, ddof=1) / np.sqrt(60)), 59) == 0.0
    assert result.p_value[0] == np.finfo("float64").tiny and result.p_note[0] == ""


def test_unit_codes_group_named_questions_and_keep_the_rest_apart():
    units = pd.Series({"q1": "docA", "q2": "docA", "q3": "docB"})
    codes = unit_codes(["q1", "q2", "q3", "q4", "q5"], units)
    assert codes[0] == codes[1] != codes[2]
    assert len({codes[2], codes[3], codes[4]}) == 3
    assert unit_codes(["a", "b"], None).tolist() == [0, 1]


def _clustered_samples(effect: float, n_units: int, simulations: int, seed: int, document_sd: float = 0.15,
                       question_sd: float = 0.3, sizes: tuple[int, int] = (2, 13)):
    """(values: questions x simulations, unit codes): a document effect shared by its questions
    (intra-class correlation 0.2 by default) plus question noise, 2-12 questions per document."""
    rng = np.random.default_rng(seed)
    per_unit = rng.integers(*sizes, n_units)
    units = np.repeat(np.arange(n_units), per_unit)
    document = rng.normal(0, document_sd, (n_units, simulations))[units]
    question = rng.normal(0, question_sd, (len(units), simulations))
    return effect + document + question, units


def test_document_level_interval_covers_the_truth_95_percent_and_question_level_does_not():
    values, units = _clustered_samples(effect=0.1, n_units=36, simulations=1000, seed=12)
    clustered = column_stats(values, units)
    naive = column_stats(values, np.arange(len(units)))
    covered = np.mean((clustered.ci_low <= 0.1) & (0.1 <= clustered.ci_high))
    covered_naive = np.mean((naive.ci_low <= 0.1) & (0.1 <= naive.ci_high))
    print(f"coverage over 1000 simulations: documents {covered:.3f}, questions {covered_naive:.3f}")
    assert 0.93 <= covered <= 0.97
    assert covered_naive < 0.88


def test_false_positive_rate_under_no_effect_is_near_five_percent():
    values, units = _clustered_samples(effect=0.0, n_units=30, simulations=2000, seed=21)
    rejected = np.mean(column_stats(values, units).p_value < 0.05)
    print(f"false positives at 0.05 over 2000 simulations: {rejected:.3f}")
    assert 0.035 <= rejected <= 0.065


def test_a_clear_effect_survives_holm_over_hundreds_of_comparisons():
    # The dense -> hybrid span_recall@5: +0.17 over ~250 COVID-QA questions from 18
    # articles; paired differences vary mostly by question, a little by article.
    values, units = _clustered_samples(effect=0.17, n_units=18, simulations=200, seed=3, document_sd=0.05,
                                       question_sd=0.35, sizes=(10, 18))
    p = column_stats(values, units).p_value
    survives = np.array([holm(np.r_[p_one, [0.5] * 349])[0] < 0.05 for p_one in p])
    assert survives.mean() > 0.9


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
    assert holm(p_values) == pytest.approx(np.array(expected, dtype="float64"), nan_ok=True)


def test_holm_agrees_with_statsmodels():
    from statsmodels.stats.multitest import multipletests

    p = np.random.default_rng(2).uniform(0, 0.1, 40)
    assert holm(p) == pytest.approx(multipletests(p, method="holm")[1])
