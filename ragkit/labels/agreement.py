"""How far an LLM's decisions agree with people's: accuracy, Cohen's kappa (Krippendorff's alpha
with several annotators), the confusion table and the bias, with CIs resampled by document.

Statistics come from maintained libraries: scikit-learn's ``cohen_kappa_score`` (unweighted) for
kappa and the ``krippendorff`` package's ``alpha`` (ordinal for grades, nominal for yes/no), both
imported when first needed. One exception, for speed: the bootstrap's resampled kappas are
computed for all resamples at once from summed confusion tables (``resampled_kappas``, checked
equal to scikit-learn's weighted kappa by a test).

CIs: a cluster bootstrap over the questions' source documents (questions drawn from one
document are not independent), ``resamples`` = 1000 by default, 95% percentile intervals. A
resample in which a statistic is undefined (every item in one category) is left out of its
interval and counted (``resamples_used``). With few documents a percentile interval is too
narrow: below ``MIN_CLUSTERS`` documents an agreement carries a warning (``notes``) beside the
number of documents it resampled.

Readability: each agreement keeps both sides' grade distributions. When the judge or the people
used one category only, kappa is 0 by construction (or undefined when both did) and agreement
cannot be measured; ``notes`` says so in words and ``readable`` is False, so the tables, the
report and the dashboard never show such a judge's figures as if they ranked anything.

Bias: the judge's mean minus the person's mean on the same items and the same 0-1 (or grade)
scale; positive means the judge is more generous.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pandas as pd

DEFAULT_RESAMPLES = 1000
LEVEL = 0.95
# Below this many documents (clusters) a bootstrap interval is flagged: with a handful of
# clusters the resamples repeat the same few documents and the percentile interval is too
# narrow (Cameron, Gelbach and Miller 2008 find cluster bootstraps unreliable below ~10-20
# clusters); 10 is the smallest count at which the intervals are shown without a warning.
MIN_CLUSTERS = 10


@dataclass
class Agreement:
    decision: str
    n_items: int
    n_units: int
    annotators: int
    accuracy: float
    kappa: float
    kappa_ci: tuple[float, float]
    bias: float
    bias_ci: tuple[float, float]
    judge_mean: float
    human_mean: float
    alpha: float = np.nan  # over every coder (people and judge), when several people labelled
    alpha_ci: tuple[float, float] = (np.nan, np.nan)
    human_alpha: float = np.nan  # among the people alone: the ceiling a judge can reach
    resamples: int = 0
    resamples_used: int = 0
    confusion: pd.DataFrame = field(default_factory=pd.DataFrame)
    grades: str = "human vs judge"
    left_out: int = 0  # the judge's invalid (unparseable, failed or fallen-back) replies on labelled items, left out
    unlocated: int | None = None  # judged chunks whose span the results folder does not hold
    item: str = "item"  # what one item is ("chunk", "answer"), for the notes
    human_counts: dict[str, int] = field(default_factory=dict)  # category name -> items, the people's
    judge_counts: dict[str, int] = field(default_factory=dict)  # category name -> items, the judge's
    judge_scale: dict[str, int] = field(default_factory=dict)  # the judge's own grades before mapping, if any

    @property
    def judge_constant(self) -> bool:
        return sum(count > 0 for count in self.judge_counts.values()) == 1

    @property
    def human_constant(self) -> bool:
        return sum(count > 0 for count in self.human_counts.values()) == 1

    @property
    def readable(self) -> bool:
        """Whether kappa can say anything: both sides used two categories or more, and it is defined."""
        return bool(self.n_items > 0 and not self.judge_constant and not self.human_constant
                    and np.isfinite(self.kappa))

    def degeneracy(self) -> str | None:
        """Why agreement cannot be measured, in words; None when it can."""
        if self.readable:
            return None
        if self.n_items == 0:
            return f"no labelled {self.item} has a valid judge grade: agreement cannot be measured"
        items = f"every {self.item}" if self.n_items != 1 else f"the one {self.item}"
        judge = _only(self.judge_scale) or f"'{_only(self.judge_counts)}'"
        if self.judge_constant and self.judge_scale and not _only(self.judge_scale):  # e.g. 0 and 1, both 'not'
            used = [grade for grade, count in self.judge_scale.items() if count]
            judge = f"grades {' and '.join(used)} (all '{_only(self.judge_counts)}')"
        human = f"'{_only(self.human_counts)}'"
        if self.judge_constant and self.human_constant:
            return (f"the judge gave {judge} and the people gave {human} to {items}: agreement cannot be "
                    "measured; kappa is undefined")
        if self.judge_constant:
            return f"the judge gave {judge} to {items}: agreement cannot be measured; kappa is 0 by construction"
        if self.human_constant:
            return (f"the people gave {human} to {items}: agreement cannot be measured; kappa is 0 by "
                    "construction")
        return "kappa is undefined on these items: agreement cannot be measured"

    def notes(self) -> list[str]:
        """Every warning a reader needs before reading this agreement's figures, as sentences."""
        found = []
        reason = self.degeneracy()
        if reason:
            found.append(f"{self.decision}: {reason}.")
        if self.n_units < MIN_CLUSTERS:
            found.append(f"{self.decision}: CIs from {self.n_units} document(s), fewer than {MIN_CLUSTERS}: a "
                         "cluster bootstrap over so few documents gives intervals that are too narrow; read them "
                         "as rough.")
        if self.left_out:
            found.append(f"{self.decision}: {self.left_out} invalid judge repl{'y' if self.left_out == 1 else 'ies'} "
                         f"on labelled {self.item}s left out (no grade, never counted as one).")
        return found

    def as_row(self) -> dict:
        return {"decision": self.decision, "items": self.n_items, "documents": self.n_units,
                "annotators": self.annotators, "accuracy": self.accuracy, "kappa": self.kappa,
                "kappa_ci_low": self.kappa_ci[0], "kappa_ci_high": self.kappa_ci[1], "alpha": self.alpha,
                "alpha_ci_low": self.alpha_ci[0], "alpha_ci_high": self.alpha_ci[1], "human_alpha": self.human_alpha,
                "judge_mean": self.judge_mean, "human_mean": self.human_mean, "bias": self.bias,
                "bias_ci_low": self.bias_ci[0], "bias_ci_high": self.bias_ci[1], "resamples": self.resamples,
                "resamples_used": self.resamples_used, "invalid_left_out": self.left_out,
                "unlocated": self.unlocated, "human_grades": dict(self.human_counts),
                "judge_grades": dict(self.judge_scale or self.judge_counts), "readable": self.readable,
                "notes": self.notes()}


def _only(counts: dict[str, int]) -> str | None:
    used = [name for name, count in counts.items() if count > 0]
    return used[0] if len(used) == 1 else None


def grade_counts(classes: np.ndarray, names: list[str]) -> dict[str, int]:
    """Category name -> how many items got it, every category shown (0 where none)."""
    return {name: int((classes == number).sum()) for number, name in enumerate(names)}


def kappa(human: np.ndarray, judge: np.ndarray, categories: list, weights: np.ndarray | None = None) -> float:
    """Cohen's kappa by scikit-learn; NaN where it is undefined (one category only)."""
    from sklearn.metrics import cohen_kappa_score

    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore")  # undefined (one category): NaN, counted by the caller
        return float(cohen_kappa_score(human, judge, labels=categories, sample_weight=weights))


def resampled_kappas(human: np.ndarray, judge: np.ndarray, unit_of_item: np.ndarray, draws: np.ndarray,
                     n_categories: int) -> np.ndarray:
    """Cohen's kappa of every resample at once: a resample's confusion table is the sum of its
    drawn documents' tables, and kappa = (p_o - p_e) / (1 - p_e) of it (scikit-learn's
    unweighted formula; a test checks the two agree with weights), vectorised over resamples
    because a call per resample is too slow at 1000 resamples. NaN where undefined."""
    cells = n_categories * n_categories
    per_unit = np.zeros((draws.shape[1], cells))
    np.add.at(per_unit, (unit_of_item, human * n_categories + judge), 1.0)
    tables = (draws @ per_unit).reshape(len(draws), n_categories, n_categories)
    total = tables.sum(axis=(1, 2))
    with np.errstate(invalid="ignore", divide="ignore"):
        observed = np.trace(tables, axis1=1, axis2=2) / total
        expected = (tables.sum(axis=2) * tables.sum(axis=1)).sum(axis=1) / total**2
        values = (observed - expected) / (1 - expected)
    return np.where(np.isfinite(values) & (total > 0), values, np.nan)


Level = Literal["nominal", "ordinal"]


def alpha(ratings: np.ndarray, categories: list, level: Level) -> float:
    """Krippendorff's alpha by the krippendorff package over a coders x items matrix (NaN: no rating)."""
    import krippendorff

    pairable = (~np.isnan(ratings)).sum(axis=0) >= 2
    if pairable.sum() < 1 or len(np.unique(ratings[:, pairable][~np.isnan(ratings[:, pairable])])) < 2:
        return np.nan  # no item two coders rated, or one value only: alpha is undefined
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(krippendorff.alpha(reliability_data=ratings[:, pairable], value_domain=categories,
                                        level_of_measurement=level))


def confusion_table(human: np.ndarray, judge: np.ndarray, names: list[str]) -> pd.DataFrame:
    """Counts: rows the person's category, columns the judge's, every category shown."""
    table = pd.crosstab(pd.Categorical(human, categories=range(len(names))),
                        pd.Categorical(judge, categories=range(len(names))), dropna=False)
    table.index = [f"human {name}" for name in names]
    table.columns = [f"judge {name}" for name in names]
    return table


def _percentile(values: np.ndarray) -> tuple[float, float]:
    values = values[np.isfinite(values)]
    if len(values) == 0:
        return np.nan, np.nan
    tail = (1 - LEVEL) / 2 * 100
    return float(np.percentile(values, tail)), float(np.percentile(values, 100 - tail))


def measure(decision: str, items: pd.DataFrame, names: list[str], level: Level = "ordinal",
            ratings: np.ndarray | None = None, human_ratings: np.ndarray | None = None,
            resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> Agreement:
    """Agreement of one decision. ``items``: one row per item with ``unit`` (source document),
    ``human_class`` / ``judge_class`` (category numbers 0..len(names)-1) and ``human_value`` /
    ``judge_value`` (the bias's scale). ``ratings``: coders x items (people then the judge, NaN
    where one did not rate), for alpha when several people labelled; ``human_ratings`` the same
    without the judge. Columns of both follow ``items``' rows."""
    categories = list(range(len(names)))
    human = items["human_class"].to_numpy(dtype=int)
    judge = items["judge_class"].to_numpy(dtype=int)
    gap = items["judge_value"].to_numpy(dtype=float) - items["human_value"].to_numpy(dtype=float)
    units, unit_of_item = np.unique(items["unit"].astype(str).to_numpy(), return_inverse=True)
    rng = np.random.default_rng(seed)
    # A resample draws documents with replacement: each item counts as often as its document was drawn.
    draws = rng.multinomial(len(units), np.full(len(units), 1 / len(units)), size=resamples) if len(units) else \
        np.zeros((resamples, 0), dtype=int)
    weights = draws[:, unit_of_item].astype(float)
    kappas = resampled_kappas(human, judge, unit_of_item, draws, len(categories))
    totals = weights.sum(axis=1)
    biases = np.divide(weights @ gap, totals, out=np.full(resamples, np.nan), where=totals > 0)
    several = ratings is not None and ratings.shape[0] > 2
    result = Agreement(
        decision=decision, n_items=len(items), n_units=len(units),
        annotators=int(ratings.shape[0] - 1) if ratings is not None else 1,
        accuracy=float((human == judge).mean()) if len(items) else np.nan,
        kappa=kappa(human, judge, categories) if len(items) else np.nan, kappa_ci=_percentile(kappas),
        bias=float(gap.mean()) if len(items) else np.nan, bias_ci=_percentile(biases),
        judge_mean=float(items["judge_value"].mean()), human_mean=float(items["human_value"].mean()),
        resamples=resamples, resamples_used=int(np.isfinite(kappas).sum()),
        confusion=confusion_table(human, judge, names), human_counts=grade_counts(human, names),
        judge_counts=grade_counts(judge, names))
    if several and ratings is not None:
        result.alpha = alpha(ratings, categories, level)
        columns = [np.flatnonzero(unit_of_item == unit) for unit in range(len(units))]
        alphas = np.array([alpha(ratings[:, np.concatenate([columns[u] for u in np.repeat(np.arange(len(units)), d)])],
                                 categories, level) for d in draws])
        result.alpha_ci = _percentile(alphas)
        if human_ratings is not None:
            result.human_alpha = alpha(human_ratings, categories, level)
    return result
