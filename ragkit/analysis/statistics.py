"""Means, confidence intervals and tests that respect how questions cluster.

Questions drawn from one document are not independent: a chunker that splits that document badly
fails all of them together. Every interval and p-value here therefore treats the *unit* (the
question's source document, or the question itself when no document is known) as the
independent draw, with the bias-reduced cluster-robust variance of a mean (CR2, Bell and
McCaffrey 2002; clubSandwich's ``vcovCR(type = "CR2")`` of an intercept-only regression) and
Satterthwaite degrees of freedom computed under a random-effects working model whose intra-unit
correlation is estimated from the data, as Imbens and Kolesar (2016) recommend:

    mean   = sum of values / N                                  (every question weighs the same)
    V      = sum over units g of (S_g - n_g * mean)^2 / (N * (N - n_g))
    rho    = [sum_g (R_g^2 - sum_{i in g} e_i^2) / sum_g n_g (n_g - 1)] / [sum_i e_i^2 / N], in [0, 1]
    df     = tr(B)^2 / tr(B^2)
    95% CI = mean +- t(0.975, df) * sqrt(V);   p = 2 * P(T_df > |mean| / sqrt(V))

with S_g and n_g the sum and count of unit g's values, R_g = S_g - n_g mean, e_i = value - mean,
N the count of all values and G the number of units. Derivation: the design is a column of
ones, so the leverage block of unit g is H_gg = 1 1' / N, and A_g = (I - H_gg)^(-1/2) scales the
sum of g's residuals by c_g = (1 - n_g / N)^(-1/2). V = sum_g (p_g' e)^2 with
p_g = c_g (1_g - n_g / N 1) / N; under errors of covariance Omega = (1 - rho) I + rho (within
units), E[V] and Var[V] / 2 are tr(B) and tr(B^2) for B_gh = p_g' Omega p_h, which is
B_gh = c_g c_h (u_g [g = h] - (n_h u_g + n_g u_h) / N + n_g n_h W / N^2) / N^2 with
u_g = n_g (1 - rho + rho n_g) and W = sum_g u_g (``_satterthwaite_df`` sums it without a G x G
array). With rho = 0 this is clubSandwich's ``coef_test(test = "Satterthwaite")`` (Bell-McCaffrey
df, identity working model; equal units then give the CR1 variance and G - 1 df); with one
question per unit, the one-sample t interval and t-test.

Why this df: uneven documents leave fewer effective degrees of freedom than G - 1 (one large
document dominates the mean), and the more so the more a document's questions move together.
CR1 with G - 1 df rejected a true null 8% of the time on the quickstart's 18 documents (5 to 53
questions each); CR2 with the identity model's df (rho = 0) 5.7% there, 5.5% on COVID-QA's 98
articles, and a joint test over a factor table built on it 7.5-8.5% at 8 levels; the estimated
working model gives 4.4% on the quickstart, 4.1% on COVID-QA and 5.3% on SciFact (single
comparisons, 20,000 null replications). It errs on the safe side where one document dominates:
3.2-3.5% on 40 documents of gamma-distributed sizes (1 to 71 questions), where the Satterthwaite
approximation itself is conservative (a fixed rho of 0.05 or 0.1, nearer the true 0.1, gives 2.7%
and 1.8%): no single df rule measured here holds [4%, 6%] on every structure, and this one never
exceeds it (benchmarks/README.md, "Null size and power", has the measured tables). The test suite
checks these closed forms against a direct matrix implementation (full H_gg, symmetric inverse
square roots, generic design, a working covariance matrix) and clubSandwich's stated formulas.

It is analytic, so p-values are exact enough that a clear effect survives Holm over hundreds of
comparisons (a resampled p cannot go below 1 / resamples), and it is vectorised over thousands of
columns at once. ``ColumnStats.se`` and ``ColumnStats.df`` give the estimate's standard error and
degrees of freedom per column (``interval`` turns them into an interval at any level).

Why not the bootstrap here: a percentile bootstrap over G units has no small-sample correction
and under-covers with the 20-40 documents typical of QA sets; a wild cluster bootstrap needs
thousands of resamples per comparison for a p small enough to survive Holm. ``families`` uses
one where it pays: the dependence of a family's tests, the p each test of a family on 14 documents
or more enters with, and the adjusted p of a test alone (where this df is conservative).

**Zero standard error** (the rule, ``ZERO_SE_RULE``): when every unit's values sum to exactly
n_g * mean (every document's mean difference equal, while questions inside a document may vary),
V is 0 and t = mean / 0. That is no certainty: CR2 sees only the spread *between* units and there
is none to see. Such a column gets no interval and no p (NaN, ``p_note`` says why). When every
single value is 0 (two runs that scored identically on every question, as top_k 5 and 10 do on
recall@5 by construction) there is nothing to test: the interval is [0, 0], p is NaN with the note
``IDENTICAL_NOTE``, and a family leaves the row out of its count. "Zero" allows for rounding
(se <= 1e-12 x the largest |value|), so equal document means that differ only in the last bit
are zero too. A p that underflows to 0 from a finite t is reported as the smallest positive
double instead: every p is > 0 or NaN with a note.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

CONFIDENCE = 0.95
# Relative size below which a standard error is rounding, not spread (see the module docstring).
ZERO_SE_TOLERANCE = 1e-12
ZERO_SE_RULE = ("zero standard error (every unit's mean is the same, so CR2 sees no spread between units): no "
                "interval or p, never p = 0")
IDENTICAL_NOTE = "identical on every question (e.g. by construction): nothing to test"
ONE_UNIT_NOTE = "one unit: no spread between units to measure"
NO_VALUES_NOTE = "no values"
T_TEST = "t test"  # ``one_sided``'s rule for a column with a t statistic
QUESTION_UNIT = "question"
DOCUMENT_UNIT = "document"


@dataclass(frozen=True)
class ColumnStats:
    """Per column of a (questions x columns) matrix: values counted, units, mean, its standard
    error (CR2) and degrees of freedom (Bell-McCaffrey), CI, p (H0: mean 0), why p is missing where
    it is (``p_note``, "" where p is known), and how many units had a positive, zero and negative
    mean."""

    n: np.ndarray
    n_units: np.ndarray
    mean: np.ndarray
    se: np.ndarray
    df: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    p_value: np.ndarray
    p_note: np.ndarray
    units_positive: np.ndarray
    units_zero: np.ndarray
    units_negative: np.ndarray

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame({name: getattr(self, name) for name in self.__dataclass_fields__})


def unit_codes(question_ids: pd.Index | list[str], units: pd.Series | None) -> np.ndarray:
    """Integer unit per question: from ``units`` (question_id -> unit name); a question it does not
    name is a unit of its own."""
    ids = pd.Index(question_ids).astype("string")
    if units is None or units.empty:
        return np.arange(len(ids))
    named = pd.Series(ids, index=ids).map(units.astype("string")).to_numpy(dtype=object)
    known = ~pd.isna(named)
    codes = np.empty(len(ids), dtype="int64")
    codes[known] = pd.factorize(named[known])[0]
    # Each question with no unit is a unit of its own, numbered after the named ones.
    codes[~known] = codes[known].max(initial=-1) + 1 + np.arange((~known).sum())
    return codes


def cr2_variance_df(sums: np.ndarray, counts: np.ndarray,
                    squares: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(mean, CR2 variance of the mean, degrees of freedom, working intra-unit correlation rho) per
    column, from each unit's sum, count and sum of squares of values (units x columns; a unit with
    count 0 is absent from that column). The module docstring has the formulas; NaN where fewer
    than two units have values."""
    with np.errstate(invalid="ignore", divide="ignore"):
        n = counts.sum(axis=0)
        mean = sums.sum(axis=0) / n
        g = (counts > 0).sum(axis=0)
        # N - n_g is 0 only for a lone unit (g < 2: no variance to speak of); keep it finite here.
        rest = np.where(counts < n, n - counts, 1.0)
        residual = np.where(counts > 0, sums - counts * mean, 0.0)
        variance = (residual ** 2 / rest).sum(axis=0) / n
        # The working model's correlation: the residuals' mean cross-product within units over
        # their mean square (Imbens and Kolesar 2016), 0 when no unit has two values.
        own = np.where(counts > 0, squares - 2 * mean * sums + counts * mean ** 2, 0.0)
        within = (residual ** 2 - own).sum(axis=0) / (counts * (counts - 1)).sum(axis=0)
        rho = np.clip(np.nan_to_num(within / (own.sum(axis=0) / n), nan=0.0, posinf=0.0, neginf=0.0), 0.0, 1.0)
        df = _satterthwaite_df(counts, n, rest, rho)
    few = g < 2
    return mean, np.where(few, np.nan, variance), np.where(few, np.nan, df), rho


def _satterthwaite_df(counts: np.ndarray, n: np.ndarray, rest: np.ndarray, rho: np.ndarray) -> np.ndarray:
    """tr(B)^2 / tr(B^2) for B = diag(d) + L, the G x G matrix of the module docstring, in sums
    over units (no G x G array): d_g = c_g^2 u_g, L = -(y x' + x y') / N + (W / N^2) x x' with
    x = c n, y = c u, u_g = n_g (1 - rho + rho n_g), W = sum u_g, c_g^2 = N / (N - n_g)."""
    c = np.sqrt(n / rest)
    u = counts * (1 - rho + rho * counts)
    x, y, d = c * counts, c * u, c ** 2 * u
    alpha, beta = -1 / n, u.sum(axis=0) / n ** 2
    s_xx, s_xy, s_yy = (x * x).sum(axis=0), (x * y).sum(axis=0), (y * y).sum(axis=0)
    trace = d.sum(axis=0) + 2 * alpha * s_xy + beta * s_xx
    low_rank = alpha ** 2 * (2 * s_xy ** 2 + 2 * s_xx * s_yy) + 4 * alpha * beta * s_xx * s_xy + beta ** 2 * s_xx ** 2
    square = ((d ** 2).sum(axis=0) + 2 * (2 * alpha * (d * x * y).sum(axis=0) + beta * (d * x * x).sum(axis=0))
              + low_rank)
    return trace ** 2 / square


def interval(mean, se, df, confidence: float | np.ndarray = CONFIDENCE) -> tuple[np.ndarray, np.ndarray]:
    """The two-sided t interval mean +- t(0.5 + confidence / 2, df) * se, elementwise (NaN where any
    input is); ``confidence`` may be an array (a simultaneous interval per row)."""
    from scipy import special

    with np.errstate(invalid="ignore"):
        half = special.stdtrit(df, 0.5 + np.asarray(confidence, dtype="float64") / 2) * se  # stats.t.ppf
    mean = np.asarray(mean, dtype="float64")
    return mean - half, mean + half


def _unit_totals(values: np.ndarray, units: np.ndarray):
    """(values as a 2-D float array, where present, and per unit x column the sum, count and sum of
    squares of the present values)."""
    from scipy import sparse

    values = np.asarray(values, dtype="float64")
    if values.ndim == 1:
        values = values[:, None]
    present = ~np.isnan(values)
    n_units_total = int(units.max()) + 1 if len(units) else 0
    # units x questions indicator: unit sums and counts for every column in two sparse products.
    membership = sparse.csr_matrix((np.ones(len(units)), (units, np.arange(len(units)))),
                                   shape=(n_units_total, len(units)))
    filled = np.where(present, values, 0.0)
    return (values, present, np.asarray(membership @ filled), np.asarray(membership @ present.astype("float64")),
            np.asarray(membership @ filled ** 2))


def unit_influence(values: np.ndarray, units: np.ndarray) -> np.ndarray:
    """Each unit's share of each column's mean error (units x columns): c_g R_g / N, whose squares
    sum to the CR2 variance ``column_stats`` uses (``cr2_variance_df``), 0 for a unit absent from a
    column. Columns of one sample share the units, so the sum of products of two columns'
    influences is the CR2 covariance of their means: what a joint test of several means needs
    (``families``)."""
    _, _, sums, counts, _ = _unit_totals(values, units)
    with np.errstate(invalid="ignore", divide="ignore"):
        n = counts.sum(axis=0)
        mean = sums.sum(axis=0) / n
        rest = np.where(counts < n, n - counts, 1.0)
        influence = np.where(counts > 0, (sums - counts * mean) * np.sqrt(n / rest), 0.0) / n
    return np.nan_to_num(influence)


def unit_shares(values: np.ndarray, units: np.ndarray) -> np.ndarray:
    """Each unit's share of each column's values, n_g / N (units x columns; 0 where absent): with
    ``unit_influence``, what a wild cluster bootstrap of the column's t statistic needs
    (``families``)."""
    _, _, _, counts, _ = _unit_totals(values, units)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.nan_to_num(counts / counts.sum(axis=0))


def column_stats(values: np.ndarray, units: np.ndarray, confidence: float = CONFIDENCE) -> ColumnStats:
    """Cluster-robust (CR2, Satterthwaite df under the estimated working model) mean, CI and
    p-value of each column of ``values`` (questions x columns; NaN = no value), questions grouped
    into units by the integer codes ``units``.

    A column with no value has NaN everywhere; with one unit, a mean but no interval or p-value;
    with a zero standard error, no interval or p either (``ZERO_SE_RULE``), except when every value
    is 0: the interval [0, 0] and no p (``IDENTICAL_NOTE``). ``p_note`` names the reason wherever p
    is NaN. A p that underflows to 0 is the smallest positive double.
    """
    # Here, not at the top, and scipy.special rather than scipy.stats (the same functions under
    # stats.t, a tenth of the import): a finished run's summary must start at once.
    from scipy import special

    values, present, sums, counts, squares = _unit_totals(values, units)
    n = counts.sum(axis=0)
    has_unit = counts > 0
    g = has_unit.sum(axis=0)
    mean, variance, df, _ = cr2_variance_df(sums, counts, squares)
    se = np.sqrt(variance)
    with np.errstate(invalid="ignore", divide="ignore"):
        t_value = np.abs(mean) / se
        p = 2 * special.stdtr(df, -t_value)  # stats.t.sf
        unit_means = np.where(has_unit, sums / np.where(has_unit, counts, 1), np.nan)
        largest = np.nanmax(np.where(present, np.abs(values), 0.0), axis=0, initial=0.0)
    low, high = interval(mean, se, df, confidence)
    # No spread between units (rounding allowed for): t is 0/0 or x/0, which proves nothing.
    flat = (g >= 2) & (se <= ZERO_SE_TOLERANCE * largest)
    all_zero = flat & (largest == 0)
    p = np.where(flat, np.nan, np.maximum(p, np.finfo("float64").tiny))
    low, high = np.where(all_zero, 0.0, low), np.where(all_zero, 0.0, high)
    undefined = (g < 2) | (flat & ~all_zero)
    low, high, p = (np.where(undefined, np.nan, column) for column in (low, high, p))
    note = np.where(n == 0, NO_VALUES_NOTE, np.where(g < 2, ONE_UNIT_NOTE, np.where(
        all_zero, IDENTICAL_NOTE, np.where(flat, ZERO_SE_RULE, ""))))
    return ColumnStats(
        n=n.astype("int64"), n_units=g.astype("int64"), mean=mean, se=se, df=df, ci_low=low, ci_high=high,
        p_value=p, p_note=note.astype(object),
        units_positive=(unit_means > 0).sum(axis=0), units_zero=(unit_means == 0).sum(axis=0),
        units_negative=(unit_means < 0).sum(axis=0),
    )


def one_sided(column: ColumnStats, op: str) -> tuple[np.ndarray, np.ndarray]:
    """(one-sided p, the rule that decided it) per column of a mean against 0: below 0 for ``<``,
    above for ``>`` (the regression gate tests differences shifted by its threshold). The t test
    where it has a p; where the values have no spread between units (``ZERO_SE_RULE``: every
    question moved alike, or every document's mean) or are all exactly 0 (``IDENTICAL_NOTE``), the
    mean's side decides: p 0 beyond 0, 1 not, the same verdict for the same shift whether or not
    questions vary inside documents. NaN (no verdict) with fewer than two units."""
    beyond = column.mean < 0 if op == "<" else column.mean > 0
    # One-sided p from the two-sided one: half of it on the side tested, 1 - half on the other.
    p_one = np.where(beyond, column.p_value / 2, 1 - column.p_value / 2)
    flat = (column.n_units >= 2) & np.isnan(column.p_value)
    p_one = np.where(flat, np.where(beyond, 0.0, 1.0), p_one)
    how = np.where(flat, "no spread between units: the mean's side decides",
                   np.where(np.isnan(p_one), column.p_note.astype(str), T_TEST))
    return p_one, how


def holm(p_values) -> np.ndarray:
    """Holm's step-down adjustment of a family of p-values (controls the family-wise error rate).

    The i-th smallest of m p-values becomes max over j <= i of (m - j + 1) * p_(j), capped at 1.
    NaN p-values (comparisons with nothing to test) stay NaN and do not count in m.
    """
    p = np.asarray(p_values, dtype="float64")
    adjusted = np.full(p.shape, np.nan)
    known = np.flatnonzero(~np.isnan(p))
    order = known[np.argsort(p[known], kind="stable")]
    scaled = (len(order) - np.arange(len(order))) * p[order]
    adjusted[order] = np.minimum(np.maximum.accumulate(scaled), 1.0)
    return adjusted


def describe_method(unit: str, confidence: float = CONFIDENCE) -> str:
    """One sentence naming the procedure and its unit, for every table that shows its numbers."""
    return (f"{confidence:.0%} CI and p: cluster-robust t over {unit}s (each {unit} is one independent draw; "
            f"bias-reduced CR2 variance with Bell-McCaffrey degrees of freedom, fewer than {unit}s - 1 when "
            f"{unit}s differ in size); p tests a zero mean, two-sided. A {ZERO_SE_RULE}. Rows {IDENTICAL_NOTE} "
            "are not tested.")


# --- power: the smallest difference a comparison could detect -------------------------------------

POWER = 0.8


@dataclass(frozen=True)
class Detectable:
    """Per column, the minimum detectable difference (``mde``) of a two-sided test at level
    ``alpha`` with probability ``power``, and the standard error and degrees of freedom it rests on
    (``mde`` is NaN where ``column_stats`` gives no interval, or the standard error is zero)."""

    mde: np.ndarray
    se: np.ndarray
    df: np.ndarray
    n: np.ndarray
    n_units: np.ndarray
    power: float
    alpha: float


def detectable_difference(values: np.ndarray, units: np.ndarray, power: float = POWER,
                          alpha: float = 1 - CONFIDENCE, tested: ColumnStats | None = None) -> Detectable:
    """The smallest true mean a column's test detects with probability ``power`` (two-sided, level
    ``alpha``): ``MDE = (t(1 - alpha/2, df) + t(power, df)) * SE``, with the SE and df of
    ``column_stats`` (``tested``, when the caller has it already). A zero standard error (no spread
    between units) gives NaN: nothing says what could be detected.
    """
    if not 0.5 < power < 1:
        raise ValueError(f"power must be between 0.5 and 1, got {power}")
    column = tested if tested is not None else column_stats(values, units, 1 - alpha)
    return Detectable(mde=mde_of(column.se, column.df, power, alpha), se=column.se, df=column.df, n=column.n,
                      n_units=column.n_units, power=power, alpha=alpha)


def mde_of(se: float | np.ndarray, df: float | np.ndarray, power: float = POWER,
           alpha: float = 1 - CONFIDENCE) -> np.ndarray:
    """``(t(1 - alpha/2, df) + t(power, df)) * se``: the MDE of a test with this SE and df; NaN
    where the SE is unknown or zero."""
    from scipy import special

    se = np.asarray(se, dtype="float64")
    df = np.asarray(df, dtype="float64")
    usable = np.isfinite(se) & (se > 0) & np.isfinite(df) & (df > 0)
    with np.errstate(invalid="ignore"):
        found = (special.stdtrit(np.where(usable, df, 1.0), 1 - alpha / 2)
                 + special.stdtrit(np.where(usable, df, 1.0), power)) * np.where(usable, se, np.nan)
    return np.where(usable, found, np.nan)
