"""The family's joint test (``families.joint_adjust``) against an independent computation of the
same probability: scipy's multivariate t distribution (Genz's quasi-Monte Carlo integration) with
the correlation matrix built here from the per-question data by a direct CR2 cross-product."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from ragkit.analysis import families, statistics
from ragkit.analysis.differences import with_stats

pytestmark = pytest.mark.unit


def _clustered(seed: int, sizes: list[int], columns: int, shared: float) -> tuple[np.ndarray, np.ndarray]:
    """Questions x columns of differences sharing a reference (``shared`` of each column's noise is
    common to all columns), questions in documents of ``sizes``."""
    rng = np.random.default_rng(seed)
    units = np.repeat(np.arange(len(sizes)), sizes)
    document = rng.normal(0, 0.3, (len(sizes), columns + 1))[units]
    noise = rng.normal(0, 1, (len(units), columns + 1)) + document
    return noise[:, 1:] * (1 - shared) + noise[:, [0]] * shared, units


def _direct_correlation(values: np.ndarray, units: np.ndarray) -> np.ndarray:
    """CR2 covariance of the column means from its definition (A_g = (I - H_gg)^(-1/2) scales unit
    g's residual sum by sqrt(N / (N - n_g))), then correlation."""
    n = len(units)
    residual = values - values.mean(axis=0)
    covariance = np.zeros((values.shape[1], values.shape[1]))
    for g in np.unique(units):
        mine = units == g
        share = residual[mine].sum(axis=0) * np.sqrt(n / (n - mine.sum())) / n
        covariance += np.outer(share, share)
    scale = np.sqrt(np.diag(covariance))
    return covariance / np.outer(scale, scale)


def _exact_max(p: float, correlation: np.ndarray, df: float) -> float:
    """P(max |T_k| >= t) for T multivariate t (shape ``correlation``, ``df``), t the score of p."""
    score = stats.t.isf(p / 2, df)
    if len(correlation) == 1:
        return p
    law = stats.multivariate_t(shape=correlation, df=df, seed=1)
    size = len(correlation)
    return 1 - law.cdf(np.full(size, score), lower_limit=np.full(size, -score), maxpts=200_000)


def _exact_step_down(p: np.ndarray, correlation: np.ndarray, df: float) -> np.ndarray:
    """Step-down max-|t| (Westfall-Young): the i-th smallest p against the max over the tests from
    i on, then the running maximum."""
    order = np.argsort(p)
    steps = [_exact_max(p[order[i]], correlation[np.ix_(order[i:], order[i:])], df) for i in range(len(p))]
    adjusted = np.empty(len(p))
    adjusted[order] = np.maximum.accumulate(steps)
    return adjusted


def test_the_joint_test_matches_scipys_multivariate_t_on_correlated_contrasts():
    values, units = _clustered(3, [5, 9, 14, 3, 22, 7, 11, 6, 30, 4, 8, 12], 3, shared=0.6)
    column = statistics.column_stats(values, units)
    influence = statistics.unit_influence(values, units)
    correlation = _direct_correlation(values, units)
    assert influence.T @ influence == pytest.approx(np.outer(column.se, column.se) * correlation)
    assert correlation[0, 1] > 0.3  # the shared reference makes the contrasts correlated
    df = np.full(3, float(np.median(column.df)))
    p = np.array([0.004, 0.03, 0.2])
    adjusted, critical = families.joint_adjust(p, [("s", influence[:, i]) for i in range(3)], df)
    exact = _exact_step_down(p, correlation, df[0])
    # Monte Carlo error of 10,000 draws: about 0.001 at 0.01, 0.002 at 0.05, 0.004 at 0.2.
    assert adjusted == pytest.approx(exact, abs=0.008)
    # Below Holm (the tests are correlated), at least p.
    assert (adjusted[:2] < np.array([3, 2]) * p[:2]).all() and (adjusted >= p).all()
    # The critical p (single step) solves P(max |T| >= t(critical)) = 0.05 over all three tests.
    assert _exact_max(critical, correlation, df[0]) == pytest.approx(0.05, abs=0.007)


def _exact_one_sided_step_down(p: np.ndarray, correlation: np.ndarray, df: float) -> np.ndarray:
    """Step-down max-t over one-sided tests: P(max_k T_k >= t) = 1 - P(all T_k < t) from scipy's
    multivariate t, the i-th smallest p against the tests from i on, then the running maximum."""
    order = np.argsort(p)
    steps = []
    for i in range(len(p)):
        rest = order[i:]
        score = stats.t.isf(p[order[i]], df)
        law = stats.multivariate_t(shape=correlation[np.ix_(rest, rest)], df=df, seed=1)
        steps.append(p[order[i]] if len(rest) == 1 else 1 - law.cdf(np.full(len(rest), score), maxpts=200_000))
    adjusted = np.empty(len(p))
    adjusted[order] = np.maximum.accumulate(steps)
    return adjusted


def test_the_one_sided_joint_test_matches_scipys_multivariate_t_with_oriented_tests():
    """The regression gate's form: one-sided p, each test oriented by the sign of its influence; a
    test of "below" (negated influence) is negatively correlated with a test of "above" on the same
    values."""
    values, units = _clustered(5, [5, 9, 14, 3, 22, 7, 11, 6, 30, 4, 8, 12], 3, shared=0.6)
    column = statistics.column_stats(values, units)
    influence = statistics.unit_influence(values, units) * np.array([1.0, 1.0, -1.0])
    correlation = _direct_correlation(values, units) * np.outer([1, 1, -1], [1, 1, -1])
    df = np.full(3, float(np.median(column.df)))
    p = np.array([0.003, 0.02, 0.1])
    adjusted, _ = families.joint_adjust(p, [("s", influence[:, i]) for i in range(3)], df, one_sided=True)
    exact = _exact_one_sided_step_down(p, correlation, df[0])
    assert adjusted == pytest.approx(exact, abs=0.008)
    assert (adjusted >= p).all() and (adjusted[:2] < np.array([3, 2]) * p[:2]).all()
    # The orientation counts: with the third test on the same side as the others, the tests move
    # together and the first two need less adjustment.
    aligned, _ = families.joint_adjust(p, [("s", influence[:, i] * [1, 1, -1][i]) for i in range(3)], df,
                                       one_sided=True)
    assert (aligned[:2] < adjusted[:2]).all()


def test_one_test_is_its_own_p_and_duplicates_count_once():
    influence = np.random.default_rng(0).normal(size=12)
    single, critical = families.joint_adjust(np.array([0.02]), [("s", influence)], np.array([8.0]))
    assert single[0] == 0.02 and critical == pytest.approx(0.05)
    twice, critical = families.joint_adjust(np.array([0.02, 0.02]), [("s", influence), ("s", influence)],
                                            np.array([8.0, 8.0]))
    assert twice == pytest.approx([0.02, 0.02], abs=0.003) and critical == pytest.approx(0.05, abs=0.003)


def test_tests_of_different_samples_are_independent():
    rng = np.random.default_rng(1)
    p = np.array([0.01, 0.5])
    adjusted, _ = families.joint_adjust(p, [("a", rng.normal(size=10)), ("b", rng.normal(size=10))],
                                        np.array([9.0, 9.0]))
    assert adjusted[0] == pytest.approx(1 - (1 - 0.01) ** 2, abs=0.003)


def test_tiny_p_values_keep_their_order_and_stay_between_p_and_m_p():
    influence = np.random.default_rng(2).normal(size=(15, 3))
    p = np.array([1e-12, 1e-6, 1e-3])
    adjusted, _ = families.joint_adjust(p, [("s", influence[:, i]) for i in range(3)], np.full(3, 12.0))
    assert (adjusted >= p).all() and (adjusted <= 3 * p).all() and (np.diff(adjusted) > 0).all()


def test_a_simultaneous_interval_that_excludes_zero_sits_beside_an_adjusted_p_below_alpha():
    values, units = _clustered(7, [4, 8, 15, 6, 10, 3, 20, 9, 5, 12], 6, shared=0.5)
    values = values + np.array([0.0, 0.0, 0.5, 0.8, 1.2, 2.0])
    rows = pd.DataFrame({"kind": ["factor"] * 6, "metric": ["m"] * 6})
    table = families.with_families(with_stats(rows, values, values, units, "document"))
    assert (table["family_tests"] == 6).all()  # the strict difference is the same test here
    excludes = (table["sim_ci_low"] > 0) | (table["sim_ci_high"] < 0)
    assert (table.loc[excludes, "p_adj"] < 0.05).all()
    assert excludes.any() and (table["p_adj"] >= 0.05).any()
    assert ((table["sim_ci_low"] <= table["ci_low"]) & (table["sim_ci_high"] >= table["ci_high"])).all()
    assert "unit_influence" not in table.columns
