"""The family's joint test (``families.joint_adjust``): its wild bootstrap draws against a direct
CR2 of the reweighted data, and, where many documents make the bootstrap's law Gaussian, its
adjusted p against an independent computation of the same probability: scipy's multivariate
normal (Genz's quasi-Monte Carlo integration) with the correlation matrix built here from the
per-question data by a direct CR2 cross-product."""

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


def _exact_max(p: float, correlation: np.ndarray) -> float:
    """P(max |Z_k| >= z) for Z multivariate normal (covariance ``correlation``), z the score of p."""
    score = stats.norm.isf(p / 2)
    if len(correlation) == 1:
        return p
    law = stats.multivariate_normal(cov=correlation, seed=1)
    size = len(correlation)
    return 1 - law.cdf(np.full(size, score), lower_limit=np.full(size, -score))


def _exact_step_down(p: np.ndarray, correlation: np.ndarray) -> np.ndarray:
    """Step-down max-|z| (Westfall-Young): the i-th smallest p against the max over the tests from
    i on, then the running maximum."""
    order = np.argsort(p)
    steps = [_exact_max(p[order[i]], correlation[np.ix_(order[i:], order[i:])]) for i in range(len(p))]
    adjusted = np.empty(len(p))
    adjusted[order] = np.maximum.accumulate(steps)
    return adjusted


# Many small documents: the wild bootstrap's t statistics are then about multivariate normal.
MANY = list(np.random.default_rng(11).integers(1, 6, 150))


def _tests(values: np.ndarray, units: np.ndarray, signs=None, sample: str = "s") -> list[families.FamilyTest]:
    """The family's tests of ``values``' columns (each oriented by ``signs``) against 0."""
    orient = np.ones(values.shape[1]) if signs is None else np.asarray(signs, dtype="float64")
    influence = statistics.unit_influence(values, units) * orient
    share = statistics.unit_shares(values, units)
    column = statistics.column_stats(values, units)
    return [families.FamilyTest(sample, influence[:, i], share[:, i], float(orient[i] * column.mean[i]),
                                float(column.df[i])) for i in range(values.shape[1])]


def _shifted(values: np.ndarray, units: np.ndarray, scores) -> np.ndarray:
    """``values`` centred, then each column moved to the t statistic ``scores`` (the CR2 se does
    not depend on the mean)."""
    centred = values - np.nanmean(values, axis=0)
    return centred + np.asarray(scores) * statistics.column_stats(centred, units).se


def test_a_draw_is_the_cr2_t_of_the_residuals_reweighted_document_by_document():
    values, units = _clustered(4, [5, 9, 14, 3, 22, 7, 11, 6, 30, 4], 3, shared=0.5)
    values[::7, 1] = np.nan  # a column with fewer questions: its own shares
    weights = families._webb("s", 10)[:, :4]
    drawn = families.wild_t(statistics.unit_influence(values, units), statistics.unit_shares(values, units), weights)
    for draw in range(4):
        for k in range(3):
            present = ~np.isnan(values[:, k])
            y = (values[present, k] - values[present, k].mean()) * weights[units[present], draw]
            # The CR2 variance of the mean by its definition: sum over documents of (c_g R_g / N)^2.
            n, g = len(y), units[present]
            residual = y - y.mean()
            variance = sum((residual[g == u].sum() * np.sqrt(n / (n - (g == u).sum())) / n) ** 2 for u in np.unique(g))
            assert drawn[k, draw] == pytest.approx(y.mean() / np.sqrt(variance), rel=1e-9)


def test_the_joint_test_matches_scipys_multivariate_normal_on_correlated_contrasts():
    values, units = _clustered(3, MANY, 3, shared=0.6)
    correlation = _direct_correlation(values, units)
    influence = statistics.unit_influence(values, units)
    column = statistics.column_stats(values, units)
    assert influence.T @ influence == pytest.approx(np.outer(column.se, column.se) * correlation)
    assert correlation[0, 1] > 0.3  # the shared reference makes the contrasts correlated
    p = np.array([0.004, 0.03, 0.2])
    joint = families.joint_adjust(p, _tests(values, units))
    adjusted, critical = joint.adjusted, joint.critical
    exact = _exact_step_down(p, correlation)
    # Monte Carlo error of 10,000 draws: about 0.001 at 0.01, 0.002 at 0.05, 0.004 at 0.2.
    assert adjusted == pytest.approx(exact, abs=0.01)
    # Below Holm (the tests are correlated), at least p.
    assert (adjusted[:2] < np.array([3, 2]) * p[:2]).all() and (adjusted >= p).all()
    # The critical p (single step) solves P(max |T| >= t(critical)) = 0.05 over all three tests.
    assert _exact_max(critical, correlation) == pytest.approx(0.05, abs=0.007)


def _exact_one_sided_step_down(p: np.ndarray, correlation: np.ndarray) -> np.ndarray:
    """Step-down max-t over one-sided tests: P(max_k Z_k >= z) = 1 - P(all Z_k < z) from scipy's
    multivariate normal, the i-th smallest p against the tests from i on, then the running maximum."""
    order = np.argsort(p)
    steps = []
    for i in range(len(p)):
        rest = order[i:]
        score = stats.norm.isf(p[order[i]])
        law = stats.multivariate_normal(cov=correlation[np.ix_(rest, rest)], seed=1)
        steps.append(p[order[i]] if len(rest) == 1 else 1 - law.cdf(np.full(len(rest), score)))
    adjusted = np.empty(len(p))
    adjusted[order] = np.maximum.accumulate(steps)
    return adjusted


def test_the_one_sided_joint_test_matches_scipys_multivariate_normal_with_oriented_tests():
    """The regression gate's form: one-sided p, each test oriented by the sign of its influence (a
    test of "below" negates it)."""
    values, units = _clustered(5, MANY, 3, shared=0.6)
    signs = np.array([1.0, 1.0, -1.0])
    correlation = _direct_correlation(values, units) * np.outer(signs, signs)
    p = np.array([0.003, 0.02, 0.1])
    adjusted = families.joint_adjust(p, _tests(values, units, signs), one_sided=True).adjusted
    assert adjusted == pytest.approx(_exact_one_sided_step_down(p, correlation), abs=0.01)
    # Between p and Holm (a test of the other side brings nearly a whole test more).
    assert (adjusted >= p).all() and (adjusted <= np.array([3, 2, 1]) * p).all()
    # The orientation counts: with the third test on the same side as the others, the tests move
    # together and the first two need less adjustment.
    aligned = families.joint_adjust(p, _tests(values, units), one_sided=True).adjusted
    assert (aligned[:2] < adjusted[:2]).all()


def _bootstrap_p_by_hand(values: np.ndarray, units: np.ndarray, weights: np.ndarray, one_sided: bool = False) -> float:
    """The restricted wild cluster bootstrap p of one column's mean against 0 from its definition:
    in every draw each question's value times its unit's weight (the null imposed: values, not
    residuals), the CR2 t of that sample (sum over units of (c_g R_g / N)^2, unit by unit), and the
    share of draws at least as extreme as the data's t."""
    samples = np.column_stack([values, values[:, None] * weights[units]])  # the data, then each draw
    n = len(values)
    residual = samples - samples.mean(axis=0)
    variance = np.zeros(samples.shape[1])
    for unit in np.unique(units):
        mine = units == unit
        variance += (residual[mine].sum(axis=0) * np.sqrt(n / (n - mine.sum())) / n) ** 2
    t = samples.mean(axis=0) / np.sqrt(variance)
    observed, drawn = t[0], t[1:]
    return float(np.mean(drawn >= observed) if one_sided else np.mean(np.abs(drawn) >= abs(observed)))


def test_a_test_alone_is_its_restricted_wild_bootstrap_p():
    values, units = _clustered(0, [4, 7, 2, 9, 5, 3, 8, 6, 12, 3, 5, 7], 1, shared=0.0)
    values = _shifted(values, units, [2.4])
    test = _tests(values, units)[0]
    single = families.joint_adjust(np.array([0.5]), [test])
    assert single.adjusted[0] == single.p[0] and single.critical == pytest.approx(0.05)
    # Recomputed draw by draw over the same 10,000 draws.
    weights = families._webb("s", 12)
    share = test.influence + test.share / np.sqrt(1 - test.share) * test.mean  # c_g S_g / N: the unit sums
    assert 0.005 < single.p[0] < 0.1
    assert _bootstrap_p_by_hand(values[:, 0], units, weights) == pytest.approx(single.p[0], abs=1e-12)
    # One-sided: the draws' t above the data's, about half the two-sided p here (t > 0).
    one = families.joint_adjust(np.array([0.5]), [test], one_sided=True)
    assert one.p[0] == pytest.approx(single.p[0] / 2, rel=0.35) and one.p[0] < single.p[0]
    # The bootstrap-t bound: a |t| beyond it has fewer than 5% of the draws as far out, one at it 5%.
    drawn = np.sort(np.abs(families.wild_t(share[:, None], test.share[:, None], weights)[0]))
    assert single.bound[0] == pytest.approx(drawn[-500], abs=2e-9) and (drawn > single.bound[0]).sum() < 500
    assert (abs(test.mean) / np.sqrt((test.influence ** 2).sum()) > single.bound[0]) == (single.p[0] < 0.05)


def test_duplicates_count_once():
    influence, share = np.random.default_rng(0).normal(size=12), np.full(12, 1 / 12)
    test = families.FamilyTest("s", influence, share, 1.0, 8.0)
    twice = families.joint_adjust(np.array([0.02, 0.02]), [test, test])
    assert twice.adjusted == pytest.approx([0.02, 0.02], abs=0.003) and twice.critical == pytest.approx(0.05, abs=0.003)


def test_the_same_data_give_the_same_numbers_whatever_the_order_of_the_family():
    values, units = _clustered(6, [4, 7, 2, 9, 5, 3, 8, 6, 12, 3, 5, 7], 4, shared=0.4)
    tests = _tests(values, units)
    p = np.array([0.3, 0.01, 0.002, 0.04])
    first, again = families.joint_adjust(p, tests), families.joint_adjust(p[::-1], tests[::-1])
    np.testing.assert_array_equal(first.adjusted, again.adjusted[::-1])
    assert first.critical == again.critical
    # The same sample's weights in every family, independent of another sample's.
    assert (families._webb("s", 12) == families._webb("s", 12)).all()
    assert np.corrcoef(families._webb("s", 12)[0], families._webb("t", 12)[0])[0, 1] == pytest.approx(0, abs=0.05)


def test_tests_of_different_samples_are_independent():
    rng = np.random.default_rng(1)
    p = np.array([0.01, 0.5])
    share = np.full(10, 0.1)
    tests = [families.FamilyTest(key, rng.normal(size=10), share, 0.0, 5.0) for key in ("a", "b")]
    adjusted = families.joint_adjust(p, tests).adjusted
    assert adjusted[0] == pytest.approx(1 - (1 - 0.01) ** 2, abs=0.003)


def test_beyond_the_draws_a_tests_p_is_its_t_tests_scaled_to_the_draws_tail():
    """Below TAIL the draws cannot resolve a p: the t test's p scaled by the draws' share over the t
    test's p at their TAIL_DRAWS-th extreme, so p stays > 0, ordered like |t|, about TAIL at the edge."""
    from scipy import special

    values, units = _clustered(2, [3, 5, 2, 8, 4, 6, 7, 3, 5, 2, 9, 4, 6, 3, 5], 1, shared=0.0)
    scores = np.array([2.0, 3.0, 4.0, 6.0, 10.0, 40.0])
    tests = [_tests(_shifted(values, units, [score]), units)[0] for score in scores]
    found = np.array([families.joint_adjust(np.array([0.5]), [test]).p[0] for test in tests])
    assert (found > 0).all() and (np.diff(found) < 0).all() and found[-1] < 1e-9
    t_test = 2 * special.stdtr(tests[0].df, -scores)
    far = found < families.TAIL
    assert far.sum() >= 3 and found[~far].min() >= families.TAIL
    # Beyond the draws: the t test's p times TAIL over the t test's p at the test's own
    # TAIL_DRAWS-th largest |t*| (the restricted draws depend on the data, so each test has its own).
    for test, p, t_p in zip(np.array(tests)[far], found[far], t_test[far]):
        ordered = families.bootstrap_p([test])[2][0]
        edge = ordered[families.DRAWS - families.TAIL_DRAWS]
        assert p == pytest.approx(t_p * families.TAIL / (2 * special.stdtr(test.df, -edge)), rel=1e-9)
        assert (ordered >= abs(test.mean) / np.sqrt((test.influence ** 2).sum())).sum() < families.TAIL_DRAWS


def test_tiny_p_values_keep_their_order_and_stay_between_p_and_m_p():
    values, units = _clustered(2, [3, 5, 2, 8, 4, 6, 7, 3, 5, 2, 9, 4, 6, 3, 5], 3, shared=0.3)
    p = np.array([1e-12, 1e-6, 1e-3])
    adjusted = families.joint_adjust(p, _tests(values, units)).adjusted
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


def test_a_family_without_influences_or_over_the_joint_limit_is_adjusted_by_holm(monkeypatch):
    """Hand-computed Holm: p (0.01, 0.04, 0.03) -> 0.01 x 3 = 0.03, 0.03 x 2 = 0.06, max(0.04 x 1, 0.06)."""
    p = np.array([0.01, 0.04, 0.03])
    holm = families.adjust(p, None)
    np.testing.assert_allclose(holm.adjusted, [0.03, 0.06, 0.06])
    assert holm.critical == pytest.approx(0.05 / 3) and (holm.p == p).all()  # Bonferroni's level beside Holm
    rng = np.random.default_rng(3)
    tests = [families.FamilyTest("s", rng.normal(size=12), np.full(12, 1 / 12), 0.0, 8.0) for _ in p]
    joint = families.adjust(p, tests)
    assert np.all(joint.adjusted <= holm.adjusted + 1e-12) and np.all(joint.adjusted >= p)  # between p and Holm
    monkeypatch.setattr(families, "JOINT_MAX", 2)
    np.testing.assert_allclose(families.adjust(p, tests).adjusted, [0.03, 0.06, 0.06])


SIGN_FLIP_SIZES = [4, 7, 2, 9, 5, 3, 8, 6, 12, 3, 5, 7, 4, 10, 6, 2, 8, 5]  # 18 documents: >= SIGN_FLIP_UNITS


def test_a_familys_tests_on_enough_units_enter_with_their_sign_flip_p_and_fewer_keep_their_t_p():
    assert len(SIGN_FLIP_SIZES) >= families.SIGN_FLIP_UNITS > 12
    values, units = _clustered(8, SIGN_FLIP_SIZES, 3, shared=0.4)
    values = _shifted(values, units, [2.2, 1.0, -2.8])
    tests = _tests(values, units)
    t_p = 2 * stats.t.sf(np.abs([test.mean / np.sqrt((test.influence ** 2).sum()) for test in tests]),
                         [test.df for test in tests])
    joint = families.adjust(t_p, tests)
    signs = families._signs("s", len(SIGN_FLIP_SIZES))
    assert set(np.unique(signs)) == {-1.0, 1.0}
    by_hand = [_bootstrap_p_by_hand(values[:, k], units, signs) for k in range(3)]
    assert joint.p == pytest.approx(by_hand, abs=1e-12)
    assert not np.allclose(joint.p, t_p, rtol=0.02)  # another p than the t test's
    assert (joint.adjusted >= joint.p).all() and (joint.adjusted <= 3 * joint.p + 1e-12).all()
    # Twelve documents: the t tests' p enter unchanged.
    few, few_units = _clustered(8, SIGN_FLIP_SIZES[:12], 3, shared=0.4)
    p = np.array([0.01, 0.2, 0.03])
    assert (families.adjust(p, _tests(few, few_units)).p == p).all()
    # Eighteen documents in the sample, but the tests' questions in twelve of them: t p too.
    sparse = values.copy()
    sparse[units >= 12] = np.nan
    assert (families.adjust(p, _tests(sparse, units)).p == p).all()


def test_a_sign_flip_familys_simultaneous_interval_agrees_with_its_adjusted_p():
    """Its bootstrap-t bound at the family's critical p: an interval that excludes 0 is a test whose
    sign-flip p is below the critical p, which the step-down rejects."""
    values, units = _clustered(9, SIGN_FLIP_SIZES, 6, shared=0.5)
    values = values + np.array([0.0, 0.1, 0.45, 0.6, 0.8, 1.5])
    rows = pd.DataFrame({"kind": ["factor"] * 6, "metric": ["m"] * 6})
    table = families.with_families(with_stats(rows, values, values, units, "document"))
    excludes = (table["sim_ci_low"] > 0) | (table["sim_ci_high"] < 0)
    assert excludes.any() and (~excludes).any()
    assert (table.loc[excludes, "p_adj"] < 0.05).all()
    # At the family's critical p, not at 5%: each simultaneous interval wider than its own 95% one.
    assert ((table["sim_ci_high"] - table["diff"]) > (table["ci_high"] - table["diff"]) * 1.02).all()
