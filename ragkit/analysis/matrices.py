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


def metric_positions(scores: pd.DataFrame, metrics: list[str]) -> np.ndarray:
    """Each row's metric as its position in ``metrics`` (-1 for other metrics): a categorical
    column is decided per category, not per row."""
    return positions(scores["metric"], pd.Index(metrics, dtype="string"))


def score_arrays(rows: pd.DataFrame, metrics: list[str], metric_of: np.ndarray, q: np.ndarray, r: np.ndarray,
                 n_questions: int, n_runs: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """metric -> (valid values, asked), questions x runs, for each of ``metrics`` with a row:
    each row's metric, question and run are given as positions (-1: not wanted). A row is valid
    when its `error` is empty and its `value` not NaN."""
    error = rows["error"]
    has_error = (error.cat.codes.to_numpy() >= 0 if isinstance(error.dtype, pd.CategoricalDtype)
                 else error.notna().to_numpy())
    return scattered(metrics, metric_of, q, r, rows["value"].to_numpy(dtype="float64"), has_error,
                     n_questions, n_runs)


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

    def load(self, metrics: list[str] | tuple[str, ...]) -> None:
        """Read the rows of ``metrics`` in one pass and build every array they make."""
        missing = [str(m) for m in dict.fromkeys(metrics) if str(m) not in self._cache]
        if not missing:
            return
        tables = self.results.score_tables(missing)
        if tables is not None:  # as read from the folder
            for table in tables:
                self._build_arrow(table, [m for m in missing if m not in self._cache])
        else:
            for rows in self.results.score_frames(missing):
                self._build(rows, [m for m in missing if m not in self._cache])
        for metric in missing:  # not scored for these runs: nothing asked, nothing valid
            if metric not in self._cache:
                self._cache[metric] = (np.full((len(self.question_ids), len(self.run_ids)), np.nan),
                                       np.zeros((len(self.question_ids), len(self.run_ids)), dtype=bool))

    def _build(self, rows: pd.DataFrame, metrics: list[str]) -> None:
        """The arrays of ``metrics`` from ``rows`` (``score_arrays``)."""
        metric_of = metric_positions(rows, metrics)
        if not (metric_of >= 0).any():
            return
        r = positions(rows["run_id"], pd.Index(self.run_ids))
        q = positions(rows["question_id"], self.question_ids)
        unknown = (q < 0) & (r >= 0) & (metric_of >= 0)
        if unknown.any():  # a question the questions table does not list: count it all the same
            self._grow(pd.Index(rows["question_id"][unknown].astype("string").unique()))
            q = positions(rows["question_id"], self.question_ids)
        self._cache.update(score_arrays(rows, metrics, metric_of, q, r, len(self.question_ids), len(self.run_ids)))

    def _build_arrow(self, table, metrics: list[str]) -> None:
        """``_build`` from a pyarrow table as read (``Results.score_tables``): every lookup is per
        dictionary, and no row becomes a Python object."""
        if table.num_rows == 0:
            return
        metric_of = chunked_positions(table.column("metric"), pd.Index(metrics, dtype="string"))
        if not (metric_of >= 0).any():
            return
        r = chunked_positions(table.column("run_id"), pd.Index(self.run_ids, dtype="string"))
        q = chunked_positions(table.column("question_id"), self.question_ids)
        unknown = (q < 0) & (r >= 0) & (metric_of >= 0)
        if unknown.any():  # a question the questions table does not list: count it all the same
            listed = pd.Index(table.column("question_id").to_pandas(), dtype="string")
            self._grow(pd.Index(listed[unknown].unique()))
            q = self.question_ids.get_indexer(listed)
        value = table.column("value").to_numpy().astype("float64", copy=False)
        has_error = table.column("error").is_valid().to_numpy()
        self._cache.update(scattered(metrics, metric_of, q, r, value, has_error, len(self.question_ids),
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
