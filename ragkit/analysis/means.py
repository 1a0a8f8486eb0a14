"""Per-run means of metrics, with intervals, counts of scored and failed questions, and curves.

A score row counts when its `error` is empty and its `value` is not NaN; every other row is a
failure: counted in `n_failed`, never averaged as 0.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ragkit.analysis import statistics
from ragkit.analysis.matrices import ScoreMatrices, score_arrays
from ragkit.analysis.run_names import run_labels
from ragkit.metrics.names import sort_key

MEAN_COLUMNS = ["run_id", "metric", "mean", "ci_low", "ci_high", "n", "n_failed", "n_units"]


def valid_mask(scores: pd.DataFrame) -> pd.Series:
    return scores["error"].isna() & scores["value"].notna()


def available_metrics(scores: pd.DataFrame) -> list[str]:
    """Metric names in reading order (ragkit.metrics.names.sort_key)."""
    return sorted(scores["metric"].dropna().astype(str).unique().tolist(), key=sort_key)


def metric_means(scores: pd.DataFrame, metrics: list[str] | tuple[str, ...], units: pd.Series | None = None,
                 confidence: float = statistics.CONFIDENCE) -> pd.DataFrame:
    """Per run and metric: the mean over the questions scored, its cluster-robust CI over
    ``units`` (question_id -> source document; each question alone when None), how many
    questions counted (n) and failed (n_failed), and over how many units."""
    chosen = scores[scores["metric"].isin(list(metrics))]
    if chosen.empty:
        return _empty_means()
    run_ids, run_of = _first_seen(chosen["run_id"])
    question_ids, question_of = _first_seen(chosen["question_id"])
    codes = statistics.unit_codes(question_ids, units)
    names, metric_of = _first_seen(chosen["metric"])
    arrays = score_arrays(chosen, names.tolist(), metric_of, question_of, run_of, len(question_ids), len(run_ids))
    return _means_table([_run_stats(values, asked, run_ids, metric, codes, confidence)
                         for metric, (values, asked) in arrays.items()])


def matrix_means(matrices: ScoreMatrices, metrics: list[str] | tuple[str, ...], units: pd.Series | None = None,
                 confidence: float = statistics.CONFIDENCE) -> pd.DataFrame:
    """``metric_means`` from a selection's score matrices (``matrices.for_results``), which every
    other view of the selection shares: no pass over the score rows."""
    matrices.load(list(metrics))
    codes = statistics.unit_codes(matrices.question_ids, units)
    run_ids = pd.Index(matrices.run_ids).astype("string")
    return _means_table([_run_stats(*matrices.get(str(metric)), run_ids, str(metric), codes, confidence)
                         for metric in dict.fromkeys(metrics)])


def _run_stats(values: np.ndarray, asked: np.ndarray, run_ids: pd.Index, metric: str, codes: np.ndarray,
               confidence: float) -> pd.DataFrame:
    """MEAN_COLUMNS of every run asked ``metric`` (questions x runs arrays)."""
    present = asked.any(axis=0)
    column = statistics.column_stats(values, codes, confidence)
    return pd.DataFrame({
        "run_id": run_ids[present], "metric": metric, "mean": column.mean[present],
        "ci_low": column.ci_low[present], "ci_high": column.ci_high[present], "n": column.n[present],
        "n_failed": (asked & np.isnan(values)).sum(axis=0)[present], "n_units": column.n_units[present],
    })


def _means_table(frames: list[pd.DataFrame]) -> pd.DataFrame:
    frames = [frame for frame in frames if not frame.empty]
    if not frames:
        return _empty_means()
    table = pd.concat(frames, ignore_index=True).astype({"n": "int64", "n_failed": "int64", "n_units": "int64"})
    return table.sort_values(["run_id", "metric"], kind="stable").reset_index(drop=True)[MEAN_COLUMNS]


def _empty_means() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype="float64" if c not in ("run_id", "metric") else "string")
                         for c in MEAN_COLUMNS})


def _first_seen(column: pd.Series) -> tuple[pd.Index, np.ndarray]:
    """The distinct values of ``column`` as strings, in order of first appearance, and each row's
    position among them; a categorical column is read through its codes, not row by row."""
    if isinstance(column.dtype, pd.CategoricalDtype) and not column.isna().any():
        row_codes = column.cat.codes.to_numpy()
        seen = pd.unique(row_codes)
        position = np.full(len(column.cat.categories), -1)
        position[seen] = np.arange(len(seen))
        return pd.Index(column.cat.categories[seen]).astype("string"), position[row_codes]
    values = column.astype("string")
    distinct = pd.Index(pd.unique(values))
    return distinct, distinct.get_indexer(values)


def metric_table(scores: pd.DataFrame, runs: pd.DataFrame, metrics: list[str] | None = None) -> pd.DataFrame:
    """Runs x metrics of plain means (no CIs), one row per run with its label: the sortable table."""
    metrics = metrics if metrics is not None else available_metrics(scores)
    valid = scores[valid_mask(scores) & scores["metric"].isin(metrics)]
    wide = valid.pivot_table(index="run_id", columns="metric", values="value", aggfunc="mean", observed=True)
    wide = wide.reindex(columns=[m for m in metrics if m in wide.columns])
    labels = runs.set_index("run_id")["label"] if "label" in runs else run_labels(runs).set_axis(runs["run_id"])
    out = pd.DataFrame({"run_id": runs["run_id"].to_numpy(), "label": labels.reindex(runs["run_id"]).to_numpy()})
    return out.join(wide, on="run_id").reset_index(drop=True)


def curve(scores: pd.DataFrame, family: str) -> pd.DataFrame:
    """Mean of `family@k` per run for every k scored in chunks, e.g. family "recall"."""
    pattern = re.compile(rf"^{re.escape(family)}@(\d+)$")
    # Parse the few distinct names, not every row.
    ks = {name: int(match[1]) for name in scores["metric"].dropna().unique() if (match := pattern.match(str(name)))}
    chosen = scores[scores["metric"].isin(list(ks)) & valid_mask(scores)]
    chosen = chosen.assign(k=chosen["metric"].astype("string").map(ks).astype("int64"))
    out = chosen.groupby(["run_id", "k"], observed=True)["value"].mean().rename("mean").reset_index()
    return out.sort_values(["run_id", "k"], kind="stable").reset_index(drop=True)


def matrix_table(matrices: ScoreMatrices, runs: pd.DataFrame, metrics: list[str]) -> pd.DataFrame:
    """``metric_table`` from a selection's score matrices."""
    matrices.load(metrics)
    labels = runs.set_index("run_id")["label"] if "label" in runs else run_labels(runs).set_axis(runs["run_id"])
    out = pd.DataFrame({"run_id": runs["run_id"].to_numpy(), "label": labels.reindex(runs["run_id"]).to_numpy()})
    for metric in dict.fromkeys(metrics):
        run_means = pd.Series(matrices.valid_means(metric), index=matrices.run_ids)
        if run_means.notna().any():  # as a pivot: no column for a metric no run scored
            out[metric] = run_means.reindex(out["run_id"].astype(str)).to_numpy()
    return out


def matrix_curve(matrices: ScoreMatrices, metrics: list[str], family: str) -> pd.DataFrame:
    """``curve`` from a selection's score matrices: ``metrics`` are the family's names."""
    pattern = re.compile(rf"^{re.escape(family)}@(\d+)$")
    ks = {name: int(match[1]) for name in metrics if (match := pattern.match(str(name)))}
    matrices.load([], means_only=list(ks))
    frames = []
    for name, k in ks.items():
        run_means = matrices.valid_means(name)
        known = ~np.isnan(run_means)
        frames.append(pd.DataFrame({"run_id": np.asarray(matrices.run_ids, dtype=object)[known], "k": k,
                                    "mean": run_means[known]}))
    if not frames:
        return pd.DataFrame({"run_id": pd.Series(dtype=object), "k": pd.Series(dtype="int64"),
                             "mean": pd.Series(dtype="float64")})
    out = pd.concat(frames, ignore_index=True).astype({"k": "int64"})
    return out.sort_values(["run_id", "k"], kind="stable").reset_index(drop=True)
