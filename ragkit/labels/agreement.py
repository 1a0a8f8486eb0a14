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
narrow; the table says how many documents it resampled.

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
    left_out: int | None = None  # the judge's invalid (unparseable or fallen-back) replies left out, where counted
    unlocated: int | None = None  # judged chunks whose span the results folder does not hold


    def as_row(self) -> dict:
        return {"decision": self.decision, "items": self.n_items, "documents": self.n_units,
                "annotators": self.annotators, "accuracy": self.accuracy, "kappa": self.kappa,
                "kappa_ci_low": self.kappa_ci[0], "kappa_ci_high": self.kappa_ci[1], "alpha": self.alpha,
                "alpha_ci_low": self.alpha_ci[0], "alpha_ci_high": self.alpha_ci[1], "human_alpha": self.human_alpha,
                "judge_mean": self.judge_mean, "human_mean": self.human_mean, "bias": self.bias,
                "bias_ci_low": self.bias_ci[0], "bias_ci_high": self.bias_ci[1], "resamples": self.resamples,
                "resamples_used": self.resamples_used, "invalid_left_out": self.left_out,
                "unlocated": self.unlocated}


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
    unweighted formula; a test checks the two agree with weights). scikit-learn per resample
    took 5 ms, 5 s per decision at 1000 resamples; this takes milliseconds. NaN where undefined."""
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
        confusion=confusion_table(human, judge, names))
    if several and ratings is not None:
        result.alpha = alpha(ratings, categories, level)
        columns = [np.flatnonzero(unit_of_item == unit) for unit in range(len(units))]
        alphas = np.array([alpha(ratings[:, np.concatenate([columns[u] for u in np.repeat(np.arange(len(units)), d)])],
                                 categories, level) for d in draws])
        result.alpha_ci = _percentile(alphas)
        if human_ratings is not None:
            result.human_alpha = alpha(human_ratings, categories, level)
    return result
