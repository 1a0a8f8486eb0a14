"""Per metric, a questions x runs array of valid values and one of the questions each run was asked.

Every per-run number of the Compare page (means with intervals, curves over k, the runs table,
quality against latency, factor effects and pair differences) is a reduction of these arrays.
They are built once per metric for a selection of runs and shared by every view of it
(``for_results``): at 1,000 runs x 1,000 questions each metric is a million score rows, and
grouping them again for every chart cost seconds per chart.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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


# Rows reduced together: each step's temporaries stay in the processor's cache. Steps over all of
# a read's rows at once (11.5M at 1,000 runs x 1,000 questions) wrote fresh arrays of tens of MB,
# and their page faults were a good part of building the matrices.
BATCH_ROWS = 1 << 16


def score_arrays(rows: pd.DataFrame, metrics: list[str], metric_of: np.ndarray, q: np.ndarray, r: np.ndarray,
                 n_questions: int, n_runs: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """metric -> (valid values, asked), questions x runs, for each of ``metrics`` with a row:
    each row's metric, question and run are given as positions (-1: not wanted). A row is valid
    when its `error` is empty and its `value` not NaN."""
    block = _ScoreBlock(len(metrics), 0, n_runs, n_questions)
    block.add(metric_of, r, q, *_frame_values(rows))
    return block.arrays(metrics)


def _frame_values(rows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(each row's value as float64, whether it has an error) of a pandas frame of score rows."""
    error = rows["error"]
    has_error = (error.cat.codes.to_numpy() >= 0 if isinstance(error.dtype, pd.CategoricalDtype)
                 else error.notna().to_numpy())
    return rows["value"].to_numpy(dtype="float64"), has_error


class _ScoreBlock:
    """Score rows reduced batch by batch (``add``): for the first ``n_arrays`` metrics, a metrics
    x runs x questions block of valid values and one of rows present; for the ``n_means`` after
    them, per-run sums and counts of valid values. Runs before questions because a results part
    holds one run's questions in a row: consecutive rows write side by side. Each metric's
    arrays are handed out transposed, questions x runs, without a copy."""

    def __init__(self, n_arrays: int, n_means: int, n_runs: int, n_questions: int) -> None:
        self.n_arrays, self.n_means, self.n_runs, self.n_questions = n_arrays, n_means, n_runs, n_questions
        self.shape = (n_arrays, n_runs, n_questions)
        # Rows of other metrics, questions or runs, then rows without a valid value, go to one spare cell.
        self.spare = n_arrays * n_runs * n_questions
        self.values = np.full(self.spare + 1, np.nan)
        self.asked = np.zeros(self.spare + 1, dtype=bool)
        self.found = np.zeros(n_arrays + n_means, dtype=bool)  # metrics with a row of a wanted run
        self.sums = np.zeros(n_means * n_runs)
        self.counts = np.zeros(n_means * n_runs, dtype="int64")

    def add(self, metric_of: np.ndarray, r: np.ndarray, q: np.ndarray | None, value: np.ndarray,
            has_error: np.ndarray) -> None:
        """Rows given by position (metric, run, question; -1: not wanted), value and whether
        each has an error; ``q`` may be None when no row is of the first ``n_arrays`` metrics."""
        mine = (metric_of >= 0) & (r >= 0)
        self.found |= np.bincount(metric_of[mine], minlength=len(self.found)) > 0
        invalid = has_error | np.isnan(value)
        ranked = mine & (metric_of < self.n_arrays)
        if q is not None and ranked.any():
            cell = metric_of.astype("int64")
            cell *= self.n_runs
            cell += r
            cell *= self.n_questions
            cell += q
            cell[~ranked | (q < 0)] = self.spare
            self.asked[cell] = True
            cell[invalid] = self.spare
            self.values[cell] = value
        averaged = mine & (metric_of >= self.n_arrays)
        if averaged.any():
            valid = averaged & ~invalid
            cell = (metric_of[valid] - self.n_arrays).astype("int64") * self.n_runs + r[valid]
            self.sums += np.bincount(cell, weights=value[valid], minlength=len(self.sums))
            self.counts += np.bincount(cell, minlength=len(self.counts))

    def arrays(self, metrics: list[str]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """metric -> (values, asked), questions x runs, for the first ``n_arrays`` metrics found."""
        values, asked = self.values[:self.spare].reshape(self.shape), self.asked[:self.spare].reshape(self.shape)
        return {metrics[at]: (values[at].T, asked[at].T) for at in np.flatnonzero(self.found[:self.n_arrays])}

    def means(self, metrics: list[str]) -> dict[str, np.ndarray]:
        """metric -> per run, the mean of its valid values (NaN for none), for the ``n_means``
        metrics found (``metrics`` lists them alone)."""
        sums, counts = self.sums.reshape(self.n_means, self.n_runs), self.counts.reshape(self.n_means, self.n_runs)
        with np.errstate(invalid="ignore"):
            means = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
        return {metrics[at]: means[at] for at in np.flatnonzero(self.found[self.n_arrays:])}


class _Lookup:
    """Each row's position in ``index`` (-1 when absent or null) of a pyarrow string array: a
    dictionary array is looked up once per dictionary, in Arrow, and not again while the next
    array's dictionary equals it; a plain string array row by row."""

    def __init__(self, index: pd.Index) -> None:
        import pyarrow as pa

        self.index = index
        self.value_set = pa.array(index.astype("string").to_numpy(dtype=object, na_value=None), pa.string())
        # A missing value's place: the index's own missing entry when it has one (a score row without
        # a question id is counted as that question, as the row-based functions count it), else -1.
        self.missing_at = int(index.get_indexer(pd.Index([pd.NA], dtype="string"))[0])
        self._last: tuple | None = None

    def __call__(self, array) -> np.ndarray:
        import pyarrow as pa
        import pyarrow.compute as pc

        if not pa.types.is_dictionary(array.type):
            return self.index.get_indexer(pd.Index(array.to_pandas(), dtype="string")).astype("int32")
        if self._last is None or not self._last[0].equals(array.dictionary):
            # The appended entry is a null code's place (its code is replaced by the dictionary's length).
            per_entry = pc.fill_null(pc.index_in(array.dictionary, value_set=self.value_set), -1).to_numpy()
            self._last = (array.dictionary, np.append(per_entry, self.missing_at).astype("int32"))
        codes = array.indices.fill_null(len(array.dictionary)) if array.null_count else array.indices
        return self._last[1][codes.to_numpy()]


def _unknown_questions(block: _ScoreBlock, metric_of: np.ndarray, r: np.ndarray, q: np.ndarray,
                       question_ids: Callable[[], Any]) -> pd.Index:
    """The question ids of wanted rows that the questions table does not list (``question_ids``
    gives the rows' ids: converted only when one is unknown)."""
    unknown = (q < 0) & (r >= 0) & (metric_of >= 0) & (metric_of < block.n_arrays)
    if not unknown.any():
        return pd.Index([], dtype="string")
    return pd.Index(pd.Index(question_ids(), dtype="string")[unknown].unique())


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
        """The arrays of ``arrays`` and the valid means of ``means`` from a pandas frame or a
        pyarrow table as read (``Results.score_tables``; reduced a batch of rows at a time, every
        lookup per dictionary, no row a Python object)."""
        if len(rows) == 0:
            return
        while True:  # a question the questions table does not list is counted all the same: grow, then again
            block = _ScoreBlock(len(arrays), len(means), len(self.run_ids), len(self.question_ids))
            unknown = pd.Index([], dtype="string")
            for metric_of, r, q, value, has_error, question_ids in self._batches(rows, [*arrays, *means],
                                                                                 len(arrays)):
                block.add(metric_of, r, q, value, has_error)
                if q is not None:
                    unknown = unknown.append(_unknown_questions(block, metric_of, r, q, question_ids))
            if unknown.empty:
                break
            self._grow(pd.Index(unknown.unique()))
        self._cache.update(block.arrays(arrays))
        self._valid_means.update(block.means(means))

    def _batches(self, rows, metrics: list[str], n_arrays: int):
        """(metric, run and question positions, value, has error, the rows' question ids) per
        batch of rows; question positions only for a batch with a row of the first ``n_arrays``
        metrics (None otherwise), the question ids as a callable (needed only when one is unknown)."""
        metric_index, run_index = pd.Index(metrics, dtype="string"), pd.Index(self.run_ids, dtype="string")
        if isinstance(rows, pd.DataFrame):
            column = rows["question_id"]
            yield (positions(rows["metric"], metric_index), positions(rows["run_id"], run_index),
                   positions(column, self.question_ids), *_frame_values(rows), lambda: column)
            return
        metric_of, run_of, question_of = _Lookup(metric_index), _Lookup(run_index), _Lookup(self.question_ids)
        for batch in rows.to_batches(max_chunksize=BATCH_ROWS):
            m = metric_of(batch.column("metric"))
            ranked = (m >= 0) & (m < n_arrays)
            column = batch.column("question_id")
            yield (m, run_of(batch.column("run_id")), question_of(column) if ranked.any() else None,
                   batch.column("value").to_numpy(zero_copy_only=False).astype("float64", copy=False),
                   batch.column("error").is_valid().to_numpy(zero_copy_only=False), column.to_pandas)

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
