"""Families of tests: which comparisons are corrected together, named by the question they answer.

A comparison row's adjusted p depends on its family, so the family is fixed by the question asked,
never by what a view happens to show:

- **the factor table on one metric** (``kind == "factor"``): "which levels differ from their
  factor's reference on METRIC?", every level of every factor;
- **the single-factor pairs on one metric** (``kind == "pair"``): "which pairs of runs differ on
  METRIC?", every pair given;
- **a view's own question on one metric**: the judge table's "what does each judge do?" (its
  judge pairs), `ragkit best`'s "which runners-up are worse than the best?".

The same rows get the same adjusted p whether the report prints the pairs (``--no-detail``), a
page shows one tab or another, or other metrics are chosen beside this one (``FAMILY_RULE``).

Within a family, each row contributes its difference over scored questions and its strict
difference as two tests of **one** joint test, so "either flags" keeps the family-wise error rate;
where the two are the same test (no question failed on either side: the same questions, the same
values), it counts once and both get the same adjusted p. A row with no p (nothing to test:
identical on every question, one unit, a zero standard error; ``statistics``) is not counted.

**The joint test** (``joint_adjust``) is the step-down minP test (Westfall and Young 1993) with
the tests' dependence taken from a wild cluster bootstrap. The family's comparisons share the
reference run and the questions, so their tests are correlated (a row's difference and strict
difference nearly always move together), and Holm, which assumes the worst, flags a true null
family far less often than alpha (2-4% at 5%; benchmarks/README.md). Each draw multiplies every
unit's residuals by one Webb weight (+-sqrt(3/2), +-1, +-sqrt(1/2), each 1/6; Webb 2014, for few
units), the same weight for every test of the sample, and recomputes each test's CR2 t statistic
(``wild_t``, from ``statistics.unit_influence`` and ``statistics.unit_shares``); a draw's p*_k is
the share of test k's draws at least as extreme as this one (t statistics compared at
``DECIMALS`` decimals, so draws equal but for rounding tie). Only the dependence comes from these
draws; each test enters with its own p (``adjust``):

- on at least ``SIGN_FLIP_UNITS`` units holding its questions, its **sign-flip p**: the restricted wild
  cluster bootstrap with random signs (each unit's *sum* of the tested values, the null imposed,
  times +-1; the randomisation test of Canay, Romano and Shaikh 2017, valid where the units' sums
  are symmetric about 0 under the null), the share of ``DRAWS`` draws whose |t*| reaches the
  data's. The family rejects where p_(1) is below the alpha quantile of the draws' min p*, near
  alpha / m, and there the t test's p is conservative: on the eleven cases screened
  (benchmarks/README.md) a null p below 1% 0.53-0.97% of the time, and families flagged at 5%
  3.0-4.8% of the time; Webb's restricted draws 0.90-1.30% (families 4.6-6.2%), the sign flips
  0.83-1.20% (families 4.3-5.4%);
- on fewer units (2^13 sign vectors or fewer: their p cannot resolve the family's critical p), its
  t test's p (CR2, ``statistics``' df), conservative.

Each test studentised on its own, as the data are: a multivariate t with one shared chi-square
(every test's variance estimate moving together) over-rejected, 6-7% on the quickstart's 8-level
factor table. Tests computed on different questions (slices) get independent weights, which errs
on the safe side (Sidak). With p_(1) <= ... <= p_(m) the family's p-values, the adjusted p of
the i-th is the running maximum over steps j <= i of P(min over k >= j of p*_(k) <= p_(j)), from
``DRAWS`` draws. Below ``TAIL`` (where fewer than ``TAIL_DRAWS`` draws reach) a step's
probability is p_(j) times the effective number of tests measured at ``TAIL``, so p-values far
below 1 / ``DRAWS`` stay ordered and exact enough to survive the family. An adjusted p is never
below the p the test entered with nor above Holm's over those p. It can be below the row's ``p``
column (the t test's: the same comparison has the same p in every view). A family of more than
``JOINT_MAX`` tests (tens of thousands of pairs) falls back to Holm over the t tests' p.

**A test alone** (a family of one: a single comparison, a pair without failures on a metric only
it is compared on, one gate row) takes the bootstrap's own p as its adjusted p: the restricted
wild cluster bootstrap with Webb weights (the null imposed: each unit's *sum* of the tested
values, not its residuals, times its weight; MacKinnon and Webb 2018), its p the share of draws
whose |t*| (t* one-sided) reaches the data's |t|. The t test's p is conservative where one
document dominates (3.2% at 5% on 40 documents of gamma-distributed sizes, 3.6% on COVID-QA's 98
articles); this bootstrap's 4.4-5.2% on every structure measured, at 5%, where Webb's weights are
accurate (their excess is at 1%, the families' critical p) and, with six values, resolve p on
few documents, where signs cannot. Beyond the draws (fewer than ``TAIL_DRAWS`` at least as
extreme), a bootstrap p (either weights) is the t test's p times ``TAIL`` over the t test's p at
the ``TAIL_DRAWS``-th most extreme draw: continuous with the draws' share at ``TAIL``, ordered as
|t|, never 0.

**Determinism.** The weights of a sample come from ``SEED`` and the sample's key (its questions
and units, ``differences.sample_key``): the same data give the same numbers every run, in every
family and view they appear in; different samples get independent weights.

Beside each unadjusted interval (the CR2 t interval, ``statistics``) sits a **simultaneous** one
that agrees with the adjusted p. In a family of several tests, with c the alpha quantile of
min_k p*_k (between alpha / m and alpha), a test entering with its sign-flip p gets its
bootstrap-t interval at c (the difference +- b se, b the |t| that a share c of its sign-flip
draws reach: it excludes 0 where its p is below c), one entering with its t test's p the t
interval at level 1 - c; so the intervals of a family cover all their differences at once with
probability about 1 - alpha, and the step-down may reject a row whose interval still touches 0,
never the other way round. A test alone gets its bootstrap-t interval at alpha; it excludes 0
exactly where p (adj.) < alpha. Either way one that excludes 0 always sits
beside an adjusted p < alpha. A test alone's unadjusted t interval can disagree with its p (adj.)
near alpha (it may exclude 0 beside p (adj.) 0.06, or touch 0 beside 0.04): the simultaneous
interval is the one to read beside p (adj.). (Above ``JOINT_MAX``: Bonferroni's level 1 - alpha /
m beside Holm.)
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ragkit.analysis import statistics
from ragkit.analysis.differences import INFLUENCE

ALPHA = 1 - statistics.CONFIDENCE
# Units from which a family's test enters with its sign-flip p: 2^14 sign vectors outnumber the
# draws, so the draws resolve p well below alpha / m (fewer units: the t test's p).
SIGN_FLIP_UNITS = 14
JOINT = ("step-down minP joint test over the family (dependence from a wild bootstrap over the shared documents; "
         f"each test's sign-flip bootstrap p on {SIGN_FLIP_UNITS} documents or more, else its t test's; "
         "a test alone: its wild cluster bootstrap p)")
HOLM = "Holm (family too large for the joint test)"
# Draws of the max |Z| per family: the adjusted p's Monte Carlo error is about 0.002 at 0.05.
DRAWS = 10_000
TAIL_DRAWS = 50
TAIL = TAIL_DRAWS / DRAWS
# Decimals at which t statistics are compared: draws equal but for rounding tie (a test with
# t = 0 has draws of 1e-16; one unit carrying the whole difference, draws of the data's |t|).
DECIMALS = 9
SEED = 20_161_103
JOINT_MAX = 1_000
FAMILY_RULE = ("one family per question asked: per metric, the factor table's rows (every level against its "
               "factor's reference); per metric, the single-factor pairs; the difference over scored questions "
               "and the strict difference of a row are two tests of its family (one where they are the same "
               "test); rows without a p (identical on every question, one unit, zero standard error) are not "
               "counted; whatever a view shows, a row's family is the same")
KIND_NAMES = {"factor": "factor table", "pair": "pairs"}
FAMILY_COLUMNS = ["family", "family_tests", "p_adj", "strict_p_adj", "sim_ci_low", "sim_ci_high",
                  "strict_sim_ci_low", "strict_sim_ci_high"]


def method(tests: int) -> str:
    """The adjustment a family of ``tests`` tests gets: ``JOINT``, or ``HOLM`` above ``JOINT_MAX``."""
    return JOINT if tests <= JOINT_MAX else HOLM


WEBB = np.sqrt(np.array([1.5, 1.0, 0.5]))


@dataclass(frozen=True, eq=False)
class FamilyTest:
    """One test of a family, as the joint test needs it: ``sample`` (a key of its questions and
    units: tests of one sample share the units' weights), ``influence`` (per unit, c_g R_g / N,
    ``statistics.unit_influence``), ``share`` (n_g / N, ``statistics.unit_shares``), ``mean`` (the
    estimate minus the value tested: the t statistic is mean / sqrt(sum influence^2)) and ``df``
    (``statistics``' degrees of freedom, which shape the p beyond the draws' reach). One-sided: the
    influence and mean oriented so that the test rejects where the mean is large."""

    sample: str
    influence: np.ndarray
    share: np.ndarray
    mean: float
    df: float


@dataclass(frozen=True)
class Joint:
    """A family's outcome per test: ``p`` (the p each test entered with: a test alone, its wild
    bootstrap p; several, their t tests'), ``adjusted`` (its adjusted p), ``bound`` (a test alone:
    the |t| beyond which its bootstrap p is below alpha, the simultaneous interval being mean +-
    bound x se; NaN otherwise: the t interval at level 1 - ``critical`` agrees with the adjusted
    p) and the family's single-step ``critical`` p."""

    p: np.ndarray
    adjusted: np.ndarray
    bound: np.ndarray
    critical: float


@functools.lru_cache(maxsize=16)
def _webb(sample: str, units: int) -> np.ndarray:
    """units x DRAWS Webb weights (+-sqrt(3/2), +-1, +-sqrt(1/2), each 1/6), from ``SEED`` and the
    sample's key: the same sample always gets the same weights, different samples independent ones."""
    key = int.from_bytes(hashlib.sha256(sample.encode()).digest()[:8], "little")
    rng = np.random.default_rng([SEED, key, units])
    return WEBB[rng.integers(0, 3, (units, DRAWS))] * rng.choice([-1.0, 1.0], (units, DRAWS))


@functools.lru_cache(maxsize=16)
def _signs(sample: str, units: int) -> np.ndarray:
    """units x DRAWS random signs (+-1, each 1/2: Rademacher weights, the sign-flip test's), from
    ``SEED`` and the sample's key like ``_webb``'s, independent of them."""
    key = int.from_bytes(hashlib.sha256(sample.encode()).digest()[:8], "little")
    return np.random.default_rng([SEED, key, units, 2]).choice([-1.0, 1.0], (units, DRAWS))


WEIGHTS = {"webb": _webb, "signs": _signs}


def wild_t(influence: np.ndarray, share: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """tests x draws: each test's CR2 t statistic on its residuals multiplied unit by unit by
    ``weights`` (units x draws: the wild cluster bootstrap), from its ``influence`` (units x tests,
    ``statistics.unit_influence``: c_g R_g / N) and ``share`` (n_g / N, ``statistics.unit_shares``).
    With r_g = R_g / N and c_g^2 = 1 / (1 - share_g): the draw's mean is m* = sum_g w_g r_g, its
    unit residual sums w_g r_g - share_g m*, and V* = sum_g c_g^2 (w_g r_g - share_g m*)^2. Given
    c_g S_g / N (the unit sums, not their residuals), the same is the restricted bootstrap's t."""
    c = 1 / np.sqrt(np.clip(1 - share, 1e-12, None))
    # einsum, not @: products this thin gain nothing from BLAS threads, which stall on a busy machine.
    mean = np.einsum("gk,gd->kd", influence / c, weights)
    variance = (np.einsum("gk,gd->kd", influence ** 2, weights ** 2)
                - 2 * mean * np.einsum("gk,gd->kd", influence * share * c, weights)
                + mean ** 2 * (c ** 2 * share ** 2).sum(axis=0)[:, None])
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.nan_to_num(mean / np.sqrt(np.clip(variance, 0, None)))


def _t_tail(t: np.ndarray, df: np.ndarray, one_sided: bool) -> np.ndarray:
    """The t test's p of statistic ``t`` (one-sided: above; else |t|), never 0."""
    from scipy import special

    p = special.stdtr(df, -t) if one_sided else 2 * special.stdtr(df, -np.abs(t))
    return np.maximum(p, np.finfo("float64").tiny)


def _t_bound(p: np.ndarray, df: np.ndarray, one_sided: bool) -> np.ndarray:
    """The |t| (one-sided: t) whose t test p is ``p`` (``_t_tail``'s inverse)."""
    from scipy import special

    return special.stdtrit(df, 1 - (p if one_sided else p / 2))


def bootstrap_p(tests: list[FamilyTest], one_sided: bool = False, restricted: bool = True,
                weights: str = "webb") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(p per test, tests x DRAWS p* of each draw, tests x DRAWS extremes sorted) of the wild
    cluster bootstrap: ``restricted``, each unit's sum of the tested values reweighted (the null
    imposed), else its residuals; ``weights`` a key of ``WEIGHTS`` (Webb's, or random signs). A
    test's p is the share of its draws at least as extreme as its own t (|t|, or t one-sided), a
    draw's p* the same share for the draw's t. Where fewer than ``TAIL_DRAWS`` draws reach the
    test's t: the t test's p scaled by the draws' tail at ``TAIL`` (module docstring)."""
    m = len(tests)
    samples = np.array([test.sample for test in tests], dtype=object)
    observed = np.empty(m)
    drawn = np.empty((m, DRAWS))
    ordered = np.empty((m, DRAWS))
    for key in dict.fromkeys(samples.tolist()):
        mine = np.flatnonzero(samples == key)
        share = np.column_stack([tests[i].share for i in mine])
        influence = np.column_stack([tests[i].influence for i in mine])
        means = np.array([tests[i].mean for i in mine])
        # c_g S_g / N = c_g R_g / N + c_g share_g mean: the unit sums behind the residuals.
        basis = influence + share / np.sqrt(np.clip(1 - share, 1e-12, None)) * means if restricted else influence
        # One set of unit weights per sample, shared by its tests: their dependence is the units'.
        t = wild_t(basis, share, WEIGHTS[weights](str(key), share.shape[0]))
        with np.errstate(invalid="ignore", divide="ignore"):
            observed[mine] = np.nan_to_num(means / np.sqrt((influence ** 2).sum(axis=0)))
        extreme = np.round(t if one_sided else np.abs(t), DECIMALS)
        for row, values, ranked in zip(mine, extreme, np.argsort(extreme, axis=1)):
            ordered[row] = values[ranked]
            # Ties share the count: draws at least as extreme count alike.
            drawn[row, ranked] = (DRAWS - np.searchsorted(ordered[row], ordered[row], side="left")) / DRAWS
    extreme_observed = observed if one_sided else np.abs(observed)
    reach = np.round(extreme_observed, DECIMALS)
    counts = DRAWS - np.array([np.searchsorted(ordered[k], reach[k], side="left") for k in range(m)])
    df = np.array([test.df for test in tests], dtype="float64")
    with np.errstate(invalid="ignore", divide="ignore"):
        edge = _t_tail(ordered[:, DRAWS - TAIL_DRAWS], df, one_sided)
        scaled = _t_tail(extreme_observed, df, one_sided) * TAIL / edge
    p = np.where(counts < TAIL_DRAWS, np.minimum(np.nan_to_num(scaled, nan=TAIL), TAIL), counts / DRAWS)
    return np.maximum(p, np.finfo("float64").tiny), drawn, ordered


def _draws_bound(ordered: np.ndarray, tests: list[FamilyTest], level: float, one_sided: bool) -> np.ndarray:
    """Per test, the |t| (t one-sided) beyond which its bootstrap p (``bootstrap_p``, whose sorted
    extremes are ``ordered``) is below ``level``: the bootstrap-t interval is mean +- bound x se."""
    above = int(np.ceil(level * DRAWS - 1e-9))
    if above > TAIL_DRAWS:
        # Past the rounding: a |t| beyond it rounds beyond the draw, so its p is below the level.
        return ordered[:, DRAWS - above] + 10.0 ** -DECIMALS
    df = np.array([test.df for test in tests], dtype="float64")
    edge = _t_tail(ordered[:, DRAWS - TAIL_DRAWS], df, one_sided)
    return _t_bound(level * edge / TAIL, df, one_sided)


def joint_adjust(p: np.ndarray, tests: list[FamilyTest], alpha: float = ALPHA, one_sided: bool = False) -> Joint:
    """One family's ``Joint`` (module docstring): a test alone, its restricted wild bootstrap p
    (``bootstrap_p``) and the bound of its bootstrap-t interval at ``alpha``; several, the ``p``
    they enter with (``adjust`` chooses them) adjusted by the step-down minP test on the
    unrestricted bootstrap's dependence, with the single-step critical p (a test whose p is below
    it is rejected at ``alpha`` by both; bound NaN: for a t test's p, the t interval at level
    1 - critical agrees with it).

    ``one_sided``: each test rejects where its (oriented) mean is large, and a draw's extreme is its
    largest t, not its largest |t|, as the regression gate needs."""
    m = len(tests)
    if m == 1:
        own, _, ordered = bootstrap_p(tests, one_sided, restricted=True)
        return Joint(own, own.copy(), _draws_bound(ordered, tests, alpha, one_sided), alpha)
    _, drawn, _ = bootstrap_p(tests, one_sided, restricted=False)
    order = np.argsort(p, kind="stable")
    ordered_p = p[order]
    # Step i compares p_(i) with the most extreme draw among the tests not yet rejected (i..m).
    remaining = np.minimum.accumulate(drawn[order[::-1]], axis=0)[::-1]
    found = (remaining <= ordered_p[:, None]).mean(axis=1)
    # Beyond the draws' reach: p times the effective number of tests where the draws still count.
    edge = np.partition(remaining, TAIL_DRAWS - 1, axis=1)[:, TAIL_DRAWS - 1]
    found = np.where(ordered_p < edge, ordered_p * TAIL / edge, found)
    found = np.clip(found, ordered_p, np.minimum((m - np.arange(m)) * ordered_p, 1.0))
    adjusted = np.empty(m)
    adjusted[order] = np.maximum.accumulate(found)
    # The single-step critical p: fewer than alpha x DRAWS draws have a smaller min p*.
    rank = int(np.ceil(alpha * DRAWS)) - 1
    critical = float(np.clip(np.partition(remaining[0], rank)[rank], alpha / m, alpha))
    return Joint(p.copy(), adjusted, np.full(m, np.nan), critical)


def adjust(p: np.ndarray, tests: list[FamilyTest] | None, alpha: float = ALPHA, one_sided: bool = False) -> Joint:
    """One family's ``Joint`` from its t tests' ``p``, by ``method``: ``joint_adjust``, each test
    of several entering with its sign-flip p where its questions lie in at least
    ``SIGN_FLIP_UNITS`` units (then its bound is its bootstrap-t bound at the critical p), else with its t test's; or,
    above ``JOINT_MAX`` tests or where the ``tests`` are unknown (None), Holm over the t tests'
    ``p`` with Bonferroni's critical p alpha / m (bound NaN: the t interval at that level)."""
    if tests is None or len(p) > JOINT_MAX:
        return Joint(p.copy(), statistics.holm(p), np.full(len(p), np.nan), alpha / len(p))
    if len(tests) == 1:
        return joint_adjust(p, tests, alpha, one_sided)
    # Each test with enough units enters with its sign-flip p (module docstring). Its units are the
    # ones holding its questions: a unit of the sample without any (share 0) flips nothing.
    flipped = np.flatnonzero([np.count_nonzero(test.share) >= SIGN_FLIP_UNITS for test in tests])
    marginal = p.astype("float64").copy()
    ordered = None
    if len(flipped):
        chosen = [tests[i] for i in flipped]
        own, _, ordered = bootstrap_p(chosen, one_sided, restricted=True, weights="signs")
        marginal[flipped] = own
    joint = joint_adjust(marginal, tests, alpha, one_sided)
    bound = joint.bound.copy()
    if ordered is not None:
        # Their intervals: bootstrap-t at the family's critical p, so one that excludes 0 is a
        # test whose sign-flip p is below the critical p, which the step-down rejects.
        bound[flipped] = _draws_bound(ordered, chosen, joint.critical, one_sided)
    return Joint(marginal, joint.adjusted, bound, joint.critical)


def family_names(table: pd.DataFrame, question: str | None = None) -> pd.Series:
    """Each row's family: "<factor table | pairs> on <metric>", or "<question> on <metric>" for a
    view that asks a question of its own (the judge table's judge pairs, `ragkit best`'s
    runners-up)."""
    kinds = table["kind"].astype(str).map(lambda kind: KIND_NAMES.get(kind, kind)) if question is None else question
    return kinds + " on " + table["metric"].astype(str)


def same_test(table: pd.DataFrame) -> np.ndarray:
    """Rows whose strict difference is the difference over scored questions (no failure on either
    side): the same questions, mean and p, so one test, not two."""
    return ((table["n_strict"].to_numpy() == table["n"].to_numpy())
            & (table["strict_diff"].to_numpy(dtype="float64") == table["diff"].to_numpy(dtype="float64"))
            & (table["strict_p"].to_numpy(dtype="float64") == table["p"].to_numpy(dtype="float64")))


def with_families(table: pd.DataFrame, alpha: float = ALPHA, question: str | None = None) -> pd.DataFrame:
    """``table`` (the engine's rows, with ``se``/``df``, ``strict_se``/``strict_df`` and their
    ``INFLUENCE``, which the result drops) with its ``FAMILY_COLUMNS``: each row's family
    (``family_names``), the family's number of tests, the adjusted p of both differences over the
    family (``p_adj``, ``strict_p_adj``: the joint test, or Holm above ``JOINT_MAX`` tests) and
    the simultaneous intervals that agree with it."""
    out = table.drop(columns=[INFLUENCE], errors="ignore")
    if not len(table):
        for column in FAMILY_COLUMNS:
            out[column] = pd.Series(dtype="object" if column == "family" else "float64")
        return out
    names = family_names(table, question).to_numpy(dtype=object)
    p = table["p"].to_numpy(dtype="float64")
    strict_p = table["strict_p"].to_numpy(dtype="float64")
    influences: list = table[INFLUENCE].tolist() if INFLUENCE in table.columns else [None] * len(table)
    once = same_test(table)
    columns = {f"{prefix}{name}": np.full(len(table), np.nan)
               for prefix in ("", "strict_") for name in ("p_adj", "bound", "level")}
    tests = np.zeros(len(table), dtype="int64")
    for name in dict.fromkeys(names.tolist()):
        rows = np.flatnonzero(names == name)
        separate = rows[~once[rows]]
        members = [(row, "") for row in rows if not np.isnan(p[row])]
        members += [(row, "strict_") for row in separate if not np.isnan(strict_p[row])]
        tests[rows] = len(members)
        if not members:
            continue
        known = np.array([p[row] if prefix == "" else strict_p[row] for row, prefix in members])
        entries = None
        if all(influences[row] is not None for row, _ in members):
            entries = [FamilyTest(influences[row].sample,
                                  influences[row].diff if prefix == "" else influences[row].strict,
                                  influences[row].diff_share if prefix == "" else influences[row].strict_share,
                                  float(table[f"{prefix}diff"].iat[row]), float(table[f"{prefix}df"].iat[row]))
                       for row, prefix in members]
        joint = adjust(known, entries, alpha)
        for position, (row, prefix) in enumerate(members):
            columns[f"{prefix}p_adj"][row] = joint.adjusted[position]
            columns[f"{prefix}bound"][row] = joint.bound[position]
            columns[f"{prefix}level"][row] = 1 - joint.critical
    for row in np.flatnonzero(once):
        for name in ("p_adj", "bound", "level"):
            columns[f"strict_{name}"][row] = columns[name][row]
    out["family"] = names
    out["family_tests"] = tests
    for prefix in ("", "strict_"):
        tested = ~np.isnan(table[f"{prefix}p"].to_numpy(dtype="float64"))
        out[f"{prefix}p_adj"] = columns[f"{prefix}p_adj"]
        diff = table[f"{prefix}diff"].to_numpy(dtype="float64")
        se = table[f"{prefix}se"].to_numpy(dtype="float64")
        low, high = statistics.interval(diff, se, table[f"{prefix}df"].to_numpy(dtype="float64"),
                                        columns[f"{prefix}level"])
        bound = columns[f"{prefix}bound"]
        # A test alone: its bootstrap-t interval; several: the t interval at the family's critical level.
        known = ~np.isnan(bound)
        low, high = np.where(known, diff - bound * se, low), np.where(known, diff + bound * se, high)
        # Where the row has no p the unadjusted interval says why ([0, 0] for identical rows, else none).
        out[f"{prefix}sim_ci_low"] = np.where(tested, low, table[f"{prefix}ci_low"].to_numpy(dtype="float64"))
        out[f"{prefix}sim_ci_high"] = np.where(tested, high, table[f"{prefix}ci_high"].to_numpy(dtype="float64"))
    return out


def describe(table: pd.DataFrame) -> dict:
    """What the correction of ``table`` ran over: per family its rows and tests, and the rule."""
    families: list[dict] = []
    if len(table) and "family" in table.columns:
        for name, rows in table.groupby("family", sort=False):
            tests = int(rows["family_tests"].iloc[0])
            families.append({"family": str(name), "rows": len(rows), "tests": tests, "adjustment": method(tests)})
    return {"rule": FAMILY_RULE, "alpha": ALPHA, "families": families,
            "tests": sum(int(family["tests"]) for family in families), "rows": len(table),
            "adjustment": f"{JOINT} ({DRAWS} draws, fixed seed; Holm for a family of more than {JOINT_MAX} tests)",
            "simultaneous_intervals": "each row's interval at the joint test's critical value (bootstrap-t from "
                                      "its sign flips where it entered with them, else the t interval; Bonferroni's "
                                      f"1 - {ALPHA:g} / tests where Holm adjusts; a test alone: its bootstrap-t "
                                      "interval, the difference +- the |t| 5% of its draws reach x se): one that "
                                      f"excludes 0 has an adjusted p < {ALPHA:g}"}
