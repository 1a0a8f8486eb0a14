"""Per metric, a questions x runs array of valid values and one of the questions each run was asked.

Every per-run number of the Compare page (means with intervals, curves over k, the runs table,
quality against latency, factor effects and pair differences) is a reduction of these arrays.
They are built once per metric for a selection of runs and shared by every view of it
(``for_results``): at 1,000 runs x 1,000 questions each metric is a million score rows, and
grouping them again for every chart cost seconds per chart.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ragkit.analysis.loading import Results


def positions(column: pd.Series, index: pd.Index) -> np.ndarray:
    """Each value's position in ``index`` (-1 when absent); a categorical column is looked up
    by its categories, not row by row."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        # A missing value's code, -1, picks the appended -1.
        found = np.append(index.get_indexer(column.cat.categories.astype("string")), -1)
        return found[column.cat.codes.to_numpy()]
    return index.get_indexer(column.astype("string"))


def score_arrays(rows: pd.DataFrame, metrics: list[str], metric_of: np.ndarray, q: np.ndarray, r: np.ndarray,
                 n_questions: int, n_runs: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """metric -> (valid values, asked), questions x runs, for each of ``metrics`` with a row:
    each row's metric, question and run are given as positions (-1: not wanted). A row is valid
    when its `error` is empty and its `value` not NaN."""
    return scattered(metrics, metric_of, q, r, *row_values(rows), n_questions, n_runs)


def row_positions(rows, column: str, index: pd.Index) -> np.ndarray:
    """Each row's position in ``index`` (-1 when absent) of ``column`` of score rows: a pandas
    frame, or a pyarrow table as read (looked up per dictionary)."""
    if isinstance(rows, pd.DataFrame):
        return positions(rows[column], index)
    return chunked_positions(rows.column(column), index)


def row_values(rows) -> tuple[np.ndarray, np.ndarray]:
    """(each row's value as float64, whether it has an error) of score rows: a pandas frame or
    a pyarrow table."""
    if not isinstance(rows, pd.DataFrame):
        return rows.column("value").to_numpy().astype("float64", copy=False), rows.column("error").is_valid().to_numpy()
    error = rows["error"]
    has_error = (error.cat.codes.to_numpy() >= 0 if isinstance(error.dtype, pd.CategoricalDtype)
                 else error.notna().to_numpy())
    return rows["value"].to_numpy(dtype="float64"), has_error


def scattered(metrics: list[str], metric_of: np.ndarray, q: np.ndarray, r: np.ndarray, value: np.ndarray,
              has_error: np.ndarray, n_questions: int, n_runs: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``score_arrays`` from each row's positions, value and whether it has an error: one scatter
    into a metrics x runs x questions block (a pass per metric over millions of rows costs
    several). Runs outermost because a results part holds one run's questions in a row: the
    writes of consecutive rows fall side by side (questions outermost took half as long again).
    Each metric's arrays are handed out transposed, questions x runs, without a copy."""
    shape = (len(metrics), n_runs, n_questions)
    # Rows of other metrics, questions or runs, then rows without a valid value, go to one spare cell.
    spare = shape[0] * shape[1] * shape[2]
    cell = metric_of.astype("int64")  # in place from here: each temporary is tens of MB
    cell *= shape[1]
    cell += r
    cell *= shape[2]
    cell += q
    cell[(metric_of < 0) | (r < 0) | (q < 0)] = spare
    asked = np.zeros(spare + 1, dtype=bool)
    asked[cell] = True
    cell[has_error | np.isnan(value)] = spare
    values = np.full(spare + 1, np.nan)
    values[cell] = value
    values, asked = values[:spare].reshape(shape), asked[:spare].reshape(shape)
    found = np.flatnonzero(np.bincount(metric_of[metric_of >= 0], minlength=len(metrics)))
    return {metrics[at]: (values[at].T, asked[at].T) for at in found}


def _run_valid_means(metrics: list[str], metric_of: np.ndarray, r: np.ndarray, value: np.ndarray,
                     has_error: np.ndarray, n_runs: int) -> dict[str, np.ndarray]:
    """metric -> per run, the mean of its valid values (NaN for none), for each of ``metrics``
    with a row: one weighted count per (metric, run), no questions x runs array."""
    valid = (metric_of >= 0) & (r >= 0) & ~has_error & ~np.isnan(value)
    cell = metric_of[valid].astype("int64") * n_runs + r[valid]
    size = len(metrics) * n_runs
    sums = np.bincount(cell, weights=value[valid], minlength=size).reshape(len(metrics), n_runs)
    counts = np.bincount(cell, minlength=size).reshape(len(metrics), n_runs)
    with np.errstate(invalid="ignore"):
        means = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    found = np.flatnonzero(np.bincount(metric_of[(metric_of >= 0) & (r >= 0)], minlength=len(metrics)))
    return {metrics[at]: means[at] for at in found}


def chunked_positions(column, index: pd.Index) -> np.ndarray:
    """Each row's position in ``index`` (-1 when absent or null) of a pyarrow (chunked) string
    column. A dictionary chunk is looked up once per dictionary, in Arrow, and not again while
    the next chunk's dictionary equals it; a plain string chunk is looked up row by row."""
    import pyarrow as pa
    import pyarrow.compute as pc

    value_set = pa.array(index.astype(str).tolist(), pa.string())
    last: tuple | None = None
    # int32 halves the memory traffic of gathering tens of millions of positions.
    found = np.empty(len(column), dtype="int32")
    start = 0
    for chunk in column.chunks:
        end = start + len(chunk)
        if not pa.types.is_dictionary(chunk.type):
            found[start:end] = index.get_indexer(pd.Index(chunk.to_pandas(), dtype="string"))
        else:
            if last is None or not last[0].equals(chunk.dictionary):
                # The appended -1 is a null code's place (its code is replaced by the dictionary's length).
                per_entry = pc.fill_null(pc.index_in(chunk.dictionary, value_set=value_set), -1).to_numpy()
                last = (chunk.dictionary, np.append(per_entry, -1).astype("int32"))
            codes = chunk.indices.fill_null(len(chunk.dictionary)) if chunk.null_count else chunk.indices
            np.take(last[1], codes.to_numpy(), out=found[start:end])
        start = end
    return found


def nanmean_columns(matrix: np.ndarray) -> np.ndarray:
    """Each column's mean over its values that are not NaN; NaN for a column with none."""
    counts = (~np.isnan(matrix)).sum(axis=0)
    with np.errstate(invalid="ignore"):
        return np.where(counts > 0, np.nansum(matrix, axis=0) / np.maximum(counts, 1), np.nan)


class ScoreMatrices:
    """Per metric, questions x runs arrays of valid values (NaN otherwise) and of rows present
    (the question was asked), over one question order shared by every metric. A score row is
    valid when its `error` is empty and its `value` is not NaN (``means.valid_mask``)."""

    def __init__(self, results: Results, run_ids: list[str]) -> None:
        self.results = results
        self.run_ids = run_ids
        self.question_ids = results.question_ids
        self._cache: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._means: dict[tuple[str, float], np.ndarray] = {}
        self._valid_means: dict[str, np.ndarray] = {}  # metrics asked for their run means alone

    def load(self, metrics: list[str] | tuple[str, ...], means_only: list[str] | tuple[str, ...] = ()) -> None:
        """Read the rows of ``metrics`` and ``means_only`` in one pass and build the arrays of
        ``metrics``, and only the per-run valid means (``valid_means``) of the others: a curve
        over k needs no more, and its eight extra metrics were half of a page's matrices."""
        arrays = [str(m) for m in dict.fromkeys(metrics) if str(m) not in self._cache]
        means = [str(m) for m in dict.fromkeys(means_only)
                 if str(m) not in self._cache and str(m) not in self._valid_means and str(m) not in arrays]
        if not arrays and not means:
            return
        every = [*arrays, *means]
        tables = self.results.score_tables(every)
        for rows in tables if tables is not None else self.results.score_frames(every):
            self._build(rows, [m for m in arrays if m not in self._cache],
                        [m for m in means if m not in self._valid_means])
        for metric in arrays:  # not scored for these runs: nothing asked, nothing valid
            if metric not in self._cache:
                self._cache[metric] = (np.full((len(self.question_ids), len(self.run_ids)), np.nan),
                                       np.zeros((len(self.question_ids), len(self.run_ids)), dtype=bool))
        for metric in means:
            if metric not in self._valid_means:
                self._valid_means[metric] = np.full(len(self.run_ids), np.nan)

    def _build(self, rows, arrays: list[str], means: list[str]) -> None:
        """The arrays of ``arrays`` (``scattered``) and the valid means of ``means`` from a
        pandas frame or a pyarrow table as read (``Results.score_tables``; every lookup is then
        per dictionary, and no row becomes a Python object)."""
        if len(rows) == 0:
            return
        metric_of = row_positions(rows, "metric", pd.Index([*arrays, *means], dtype="string"))
        if not (metric_of >= 0).any():
            return
        r = row_positions(rows, "run_id", pd.Index(self.run_ids, dtype="string"))
        value, has_error = row_values(rows)
        if means:
            self._valid_means.update(_run_valid_means(means, metric_of - len(arrays), r, value, has_error,
                                                      len(self.run_ids)))
        if not arrays:
            return
        metric_of = np.where(metric_of < len(arrays), metric_of, -1)
        q = row_positions(rows, "question_id", self.question_ids)
        unknown = (q < 0) & (r >= 0) & (metric_of >= 0)
        if unknown.any():  # a question the questions table does not list: count it all the same
            column = rows["question_id"] if isinstance(rows, pd.DataFrame) else rows.column("question_id").to_pandas()
            listed = pd.Index(column, dtype="string")
            self._grow(pd.Index(listed[unknown].unique()))
            q = self.question_ids.get_indexer(listed)
        self._cache.update(scattered(arrays, metric_of, q, r, value, has_error, len(self.question_ids),
                                     len(self.run_ids)))

    def get(self, metric: str) -> tuple[np.ndarray, np.ndarray]:
        """(values, asked) of ``metric``: questions x runs, in ``question_ids`` x ``run_ids`` order."""
        if metric not in self._cache:
            self.load([metric])
        return self._cache[metric]

    def run_means(self, metric: str, failed: float) -> np.ndarray:
        """Per run, the mean over the questions it was asked, a failure counting as ``failed``;
        NaN for a run asked nothing. Computed once per metric for every run (a factor's levels
        are averaged from these for each of its pairs)."""
        key = (metric, failed)
        if key not in self._means:
            values, asked = self.get(metric)
            counts = asked.sum(axis=0)
            totals = np.where(asked, np.nan_to_num(values, nan=failed), 0.0).sum(axis=0)
            self._means[key] = np.where(counts > 0, totals / np.maximum(counts, 1), np.nan)
        return self._means[key]

    def valid_means(self, metric: str) -> np.ndarray:
        """Per run, the plain mean of its valid values; NaN for a run with none."""
        if metric not in self._cache and metric in self._valid_means:
            return self._valid_means[metric]
        return nanmean_columns(self.get(metric)[0])

    def _grow(self, question_ids: pd.Index) -> None:
        self.question_ids = self.question_ids.append(question_ids)
        extra = len(question_ids)
        for metric, (values, asked) in self._cache.items():
            self._cache[metric] = (np.vstack([values, np.full((extra, values.shape[1]), np.nan)]),
                                   np.vstack([asked, np.zeros((extra, asked.shape[1]), dtype=bool)]))


# Matrices kept per folder: the selections asked last (1,000 x 1,000 x 15 metrics is 135 MB).
KEPT_SELECTIONS = 2


def for_results(results: Results) -> ScoreMatrices:
    """The matrices of ``results``' runs, shared by every view of the same runs."""
    return results.derived("score_matrices",
                           lambda: ScoreMatrices(results, results.runs["run_id"].astype(str).tolist()
                                                 if "run_id" in results.runs.columns else []),
                           keep=KEPT_SELECTIONS)
