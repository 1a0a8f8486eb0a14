"""What the dashboard's pages show, each a function of ``Results`` (already cut to the selected
runs) and plain, hashable arguments, so that one cached helper in ``dashboard/state.py`` serves
them all and every number a page shows is also a library call (and a CLI command's output)."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from ragkit.analysis import decision_views, failures, judges, latency, matrices
from ragkit.analysis.comparison import Comparer, with_adjusted
from ragkit.analysis.loading import Results
from ragkit.analysis.means import matrix_curve, matrix_means, matrix_table, metric_means
from ragkit.metrics.names import parse_metric, sort_key
from ragkit.results.schema import JUDGE_SD_SUFFIX

# The Compare page compares more single-factor pairs than this (its detail table) only when asked:
# a thousand runs have tens of thousands of pairs, seconds of work before anyone looks.
PAIRS_SHOWN_UNASKED = 2000


def means(results: Results, metrics: tuple[str, ...]) -> pd.DataFrame:
    """Per run and metric: mean, CI over the resampling unit, scored and failed counts."""
    return matrix_means(matrices.for_results(results), list(metrics), results.units)


def latency_means(results: Results) -> pd.DataFrame:
    """Per run: pipeline ms per question with its interval (evaluation and builds left out)."""
    return metric_means(latency.latency_scores(results.stages), [latency.LATENCY_METRIC], results.units)


def factor_effects(results: Results, metrics: tuple[str, ...]) -> pd.DataFrame:
    """Each factor level against the factor's reference level, adjusted per metric over the factor
    table (``families``)."""
    return with_adjusted(Comparer(results).factor_effects(list(metrics)))


def factor_references(results: Results) -> pd.DataFrame:
    """Each factor's reference level and why (factor, level, source): the experiment's named
    baseline, else the factor's first level."""
    references = Comparer(results).references()
    return pd.DataFrame([vars(reference) for reference in references], columns=["factor", "level", "source"])


def pair_effects(results: Results, metrics: tuple[str, ...]) -> pd.DataFrame:
    """Every single-factor pair, adjusted per metric over the pairs (``families``)."""
    return with_adjusted(Comparer(results).pair_comparisons(list(metrics)))


def single_factor_pairs(results: Results) -> pd.DataFrame:
    """The runs' single-factor pairs, computed once for these runs and shared with the comparisons."""
    return Comparer(results).pairs


def judge_effects(results: Results, metrics: tuple[str, ...]) -> pd.DataFrame:
    return judges.judge_effects(results, list(metrics))


def scored_and_failed(results: Results, metrics: tuple[str, ...]) -> pd.DataFrame:
    spreads = [metric + JUDGE_SD_SUFFIX for metric in metrics]
    return failures.scored_and_failed(results.scores_of([*metrics, *spreads]), list(metrics))


def failure_reasons(results: Results, metrics: tuple[str, ...]) -> pd.DataFrame:
    return failures.failure_reasons(results.scores_of(metrics), list(metrics))


def metric_names(results: Results) -> list[str]:
    """Every metric these runs scored, in reading order."""
    return sorted(results.metric_names, key=sort_key)


def _family(results: Results, family: str) -> list[str]:
    return [name for name in results.metric_names if parse_metric(name).family == family and parse_metric(name).k]


def read_metrics(results: Results, metrics: tuple[str, ...], curve_family: str | None = None) -> int:
    """Read the score rows of ``metrics`` and of a curve family in one pass (every read is a pass
    over all parts, so a page asks once for what it will show) into the selection's score
    matrices; the number of rows read."""
    curve = _family(results, curve_family) if curve_family else []
    # What a page reads next (latency, judge replies), read meanwhile on another core.
    results.prefetch("stages", "judgements")
    matrices.for_results(results).load(list(metrics), means_only=curve)  # a curve needs run means only
    wanted = [*metrics, *curve]
    tables = results.score_tables(wanted)
    return sum(table.num_rows for table in tables) if tables is not None else len(results.scores_of(wanted))


def curve_points(results: Results, family: str) -> pd.DataFrame:
    """Mean of ``family@k`` per run at every k scored."""
    return matrix_curve(matrices.for_results(results), _family(results, family), family)


def quality_latency(results: Results, metric: str) -> pd.DataFrame:
    shared = matrices.for_results(results)
    quality = pd.Series(shared.valid_means(metric), index=shared.run_ids).dropna()
    return latency.quality_front(quality, _run_latency(results))


def _run_latency(results: Results) -> pd.Series:
    """Per run: pipeline seconds per question, shared by every view of the same runs."""
    return latency.latency_per_run(latency.shared_stage_latency(results))


def runs_by_metrics(results: Results, metrics: tuple[str, ...]) -> pd.DataFrame:
    return matrix_table(matrices.for_results(results), results.runs, list(metrics))


def stage_latency(results: Results) -> pd.DataFrame:
    """Per run and stage: the pipeline's mean seconds per question, and its one-off build
    seconds (evaluation left out)."""
    return latency.shared_stage_latency(results)


def llm_usage(results: Results) -> pd.DataFrame:
    return latency.llm_usage(results.stages)


def evaluation_cost(results: Results) -> pd.DataFrame:
    return latency.evaluation_cost(results.stages)


def judge_replies(results: Results) -> pd.DataFrame:
    return judges.judge_replies(results.judgements)


def question_rows(results: Results, table: str, question_id: str) -> pd.DataFrame:
    """The ``answers`` or ``judgements`` rows of one question, and their run-level rows (no
    question id, e.g. per-document chunking decisions)."""
    return results.question_rows(table, question_id)


def export(results: Results, fmt: str, name: str) -> tuple[bytes, str, str]:
    from ragkit.analysis.export import export_bytes

    return export_bytes(results, fmt, name=name)


VIEWS: dict[str, Callable[..., object]] = {view.__name__: view for view in (
    means, latency_means, factor_effects, factor_references, pair_effects, single_factor_pairs, judge_effects,
    scored_and_failed, failure_reasons,
    metric_names, read_metrics, curve_points, quality_latency, runs_by_metrics, stage_latency, llm_usage,
    evaluation_cost,
    judge_replies, question_rows, export,
)}
# The decision views (`ragkit best`, failure classes, comparability warnings) live in their own module.
VIEWS.update(decision_views.VIEWS)
