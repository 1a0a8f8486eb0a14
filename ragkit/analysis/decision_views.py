"""The dashboard's views of a decision (``views.VIEWS`` takes these in): the recommendation, why
each question fails, and what makes the selected runs hard to compare. Each is a function of
``Results`` (cut to the selected runs) and plain, hashable arguments, as every view is."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from ragkit.analysis import failure_classes as classes
from ragkit.analysis import recommend, regression
from ragkit.analysis.loading import Results


def best(results: Results, metric: str, max_latency_ms: float | None = None,
         max_cost: float | None = None) -> recommend.Recommendation:
    """``ragkit best`` for the selected runs."""
    return recommend.recommend(results, recommend.BestParams(metric=metric, max_latency_ms=max_latency_ms,
                                                             max_cost=max_cost))


def failure_classes(results: Results, cut: int = classes.DEFAULT_CUT) -> pd.DataFrame:
    """``ragkit failures``: one class per question of each selected run."""
    return classes.failure_classes(results, cut)


def failure_class_counts(results: Results, cut: int = classes.DEFAULT_CUT) -> pd.DataFrame:
    """Runs x classes: how many questions of each run fall in each class."""
    return classes.class_counts(classes.failure_classes(results, cut))


def selection_differences(results: Results) -> list[str]:
    """What the Compare page warns about: several question sets, corpora or evaluation models."""
    return regression.selection_differences(results.runs)


VIEWS: dict[str, Callable[..., object]] = {view.__name__: view for view in (
    best, failure_classes, failure_class_counts, selection_differences,
)}
