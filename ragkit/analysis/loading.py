"""The tables of a results folder, read once and only when a view needs them.

`runs` (with a readable `label`) is read up front. Every other table is read on first use and
only for the runs in `runs`: a grid of 50 runs x 1,000 questions has millions of score rows,
answers carry every prompt and retrievals a row per chunk. Scores can also be read for a few
metrics only (``scores_of``), filtered while reading: what a page that compares three metrics
needs, at a third of the cost of the whole table.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ragkit.analysis.defaults import with_added_defaults
from ragkit.analysis.run_names import run_labels
from ragkit.analysis.statistics import DOCUMENT_UNIT, QUESTION_UNIT
from ragkit.errors import ConfigError
from ragkit.results import PART_TABLES, SCHEMAS, ResultStore, empty_table
from ragkit.storage.folders import as_location

LAZY_TABLES = ("stages", "retrievals", "judgements", "answers", "questions")
# Categories: integer codes instead of a Python string per row (an error column of millions of
# Nones alone took most of a read's conversion to pandas).
SCORE_CATEGORIES = ("run_id", "question_id", "metric", "error")
# Tables of a row per question and stage: categories make their group-bys integer work (a stage
# name is decided once per category, not per row). Views return plain strings.
TABLE_CATEGORIES = {"stages": ("run_id", "question_id", "stage")}


# One background reader for every folder (``Results.prefetch``): reads are mostly Arrow work that
# releases the GIL, so one overlaps a page's numpy work on a second core.
_PREFETCH = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ragkit-prefetch")


def analysed_columns(name: str) -> list[str]:
    """The columns of a part table that analysis reads: not ``question_key`` (a string per row,
    the costliest column of a large table, which only the store needs to drop stale rows)."""
    return [column for column in SCHEMAS[name] if column != "question_key"]


class Results:
    """One results folder's tables. Tables passed in are used as given (tests); the others are
    read from ``root`` on first use (empty without a root). A subset shares its source's reads."""

    def __init__(self, runs: pd.DataFrame, scores: pd.DataFrame | None = None, root: str | Path | None = None,
                 source: Results | None = None, **tables: pd.DataFrame) -> None:
        unknown = set(tables) - set(LAZY_TABLES)
        if unknown:
            raise TypeError(f"unknown results tables {sorted(unknown)}; valid: {', '.join(LAZY_TABLES)}")
        self.runs = runs
        self.root = root
        self._given = tables
        self._source = source
        self._batches: list[Any] = []  # score rows read for some metrics, one pyarrow table per read
        self._frames: dict[int, pd.DataFrame] = {}  # batch -> its pandas frame, converted when first asked
        self._batch_of: dict[str, int] = {}  # metric -> the batch holding its rows
        self._pending: dict[str, Future] = {}  # lazy tables being read in the background (``prefetch``)
        if scores is not None:
            self.__dict__["scores"] = scores

    @property
    def _run_ids(self) -> list[str]:
        """The runs to read: only their files are opened."""
        return self.runs["run_id"].astype(str).tolist() if "run_id" in self.runs.columns else []

    def _mine(self, frame: pd.DataFrame) -> pd.DataFrame:
        column = frame["run_id"]
        if isinstance(column.dtype, pd.CategoricalDtype):  # decided per category, not per row
            per_category = column.cat.categories.isin(self.runs["run_id"])
            mine = pd.Series(np.append(per_category, False)[column.cat.codes.to_numpy()], index=frame.index)
        else:
            mine = column.isin(self.runs["run_id"])
        if mine.all() and isinstance(frame.index, pd.RangeIndex) and frame.index.start == 0:
            return frame  # every run's rows (a page's default): no copy of millions of rows
        return frame[mine].reset_index(drop=True)

    @cached_property
    def scores(self) -> pd.DataFrame:
        if self._source is not None:
            return self._mine(self._source.scores)
        if self.root is None:
            return empty_table("scores")
        # Categories make the filters and group-bys over millions of score rows integer work.
        return self._mine(ResultStore(self.root).read("scores", categorical=SCORE_CATEGORIES, run_ids=self._run_ids,
                                                      columns=analysed_columns("scores")))

    def score_frames(self, metrics: list[str] | tuple[str, ...]) -> list[pd.DataFrame]:
        """The frames that hold the score rows of ``metrics``, reading (once) just those rows when
        the whole table has not been read; a frame may hold other metrics' rows too (one pass
        over its codes finds each metric's rows, ``matrices.positions``, where a filter per
        metric over millions of rows costs a copy each)."""
        return [frame for frame, _ in self._score_batches(metrics)]

    def score_tables(self, metrics: list[str] | tuple[str, ...]) -> list[Any] | None:
        """The pyarrow tables, as read from the folder, that hold the score rows of ``metrics``
        (``ResultStore.read_table``: a table may hold other metrics' and, for a subset, other
        runs' rows too); None when the rows are in memory instead (``score_frames``). The
        selection's score matrices are built from these: converting millions of rows to pandas
        first cost more than the whole build."""
        wanted = list(dict.fromkeys(str(m) for m in metrics))
        if "scores" in self.__dict__:
            return None
        if self._source is not None:
            return self._source.score_tables(wanted)
        if self.root is None:
            return None
        return [self._batches[batch] for batch in self._read_batches(wanted)]

    def _read_batches(self, wanted: list[str]) -> list[int]:
        """The batches holding ``wanted``'s rows, reading (once) those not read yet."""
        missing = [m for m in wanted if m not in self._batch_of]
        if missing:
            self._batches.append(ResultStore(self.root).read_table(
                "scores", analysed_columns("scores"), categorical=SCORE_CATEGORIES, metrics=missing,
                run_ids=self._run_ids) if self.root is not None else empty_table("scores"))
            self._batch_of.update(dict.fromkeys(missing, len(self._batches) - 1))
        return list(dict.fromkeys(self._batch_of[m] for m in wanted))

    def _batch_frame(self, batch: int) -> pd.DataFrame:
        if batch not in self._frames:
            read = self._batches[batch]
            # Each file has its own dictionary; one shared set of categories per column for pandas.
            self._frames[batch] = read if isinstance(read, pd.DataFrame) else read.unify_dictionaries().to_pandas()
        return self._frames[batch]

    def _score_batches(self, metrics: list[str] | tuple[str, ...]) -> list[tuple[pd.DataFrame, bool]]:
        """(frame, whether it holds only ``metrics``' rows) for the frames holding their rows."""
        wanted = list(dict.fromkeys(str(m) for m in metrics))
        if "scores" in self.__dict__:
            return [(self.scores, False)]
        if self._source is not None:
            return [(self._mine(frame), only) for frame, only in self._source._score_batches(wanted)]
        return [(self._batch_frame(batch),
                 all(m in wanted for m, read_in in self._batch_of.items() if read_in == batch))
                for batch in self._read_batches(wanted)]

    def scores_of(self, metrics: list[str] | tuple[str, ...]) -> pd.DataFrame:
        """The score rows of ``metrics`` only; reads (once) just those rows when the whole table
        has not been read. Rows read together stay one frame, so asking again is a filter."""
        wanted = list(dict.fromkeys(str(m) for m in metrics))
        pieces = [frame if only else frame[frame["metric"].isin(wanted)].reset_index(drop=True)
                  for frame, only in self._score_batches(wanted)]  # a whole batch: no copy
        if len(pieces) == 1:
            return pieces[0]
        # Batches have their own categories: plain strings concatenate quickly.
        return pd.concat([piece.astype(dict.fromkeys(SCORE_CATEGORIES, "string")) for piece in pieces],
                         ignore_index=True)

    @cached_property
    def metric_names(self) -> list[str]:
        """Every metric scored for these runs, read from the metric column alone when the whole
        table has not been read."""
        if "scores" in self.__dict__ or self.root is None:
            return sorted(self.scores["metric"].dropna().astype("string").unique().tolist())
        return ResultStore(self.root).metric_names(self.runs["run_id"].astype(str).tolist())

    @cached_property
    def question_ids(self) -> pd.Index:
        """Every question of these results: the questions table, else the scores' question ids."""
        questions = self.questions
        if not questions.empty:
            return pd.Index(questions["question_id"].astype("string").unique())
        column = self.scores["question_id"]
        if isinstance(column.dtype, pd.CategoricalDtype):
            column = column.cat.remove_unused_categories().cat.categories.to_series()
        return pd.Index(pd.unique(column.astype("string").dropna()))

    def prefetch(self, *names: str) -> None:
        """Start reading these lazy tables in a background thread, for the folder's every view:
        a page that will show latency asks for ``stages`` while its score matrices are built.
        Asking for a table then waits for that read (and raises what it raised)."""
        unknown = set(names) - set(LAZY_TABLES)
        if unknown:
            raise ValueError(f"unknown results tables {sorted(unknown)}; valid: {', '.join(LAZY_TABLES)}")
        if self._source is not None:
            self._source.prefetch(*names)
            return
        for name in names:
            if self.root is not None and name not in self.__dict__ and name not in self._given \
                    and name not in self._pending:
                self._pending[name] = _PREFETCH.submit(self._read_table, name)

    def _read_table(self, name: str) -> pd.DataFrame:
        assert self.root is not None  # a Results without a folder reads nothing (``_table``)
        columns = analysed_columns(name) if name in PART_TABLES else None
        return ResultStore(self.root).read(name, run_ids=self._run_ids, columns=columns,
                                           categorical=TABLE_CATEGORIES.get(name, ()))

    def _table(self, name: str) -> pd.DataFrame:
        if name in self._given:
            table = self._given[name]
        elif self._source is not None:
            table = getattr(self._source, name)
        elif self.root is None:
            return empty_table(name)
        elif (pending := self._pending.pop(name, None)) is not None:  # one pop: sessions share a Results
            # Still queued behind another read (one background reader serves every folder): read
            # it here rather than wait for the queue.
            table = self._read_table(name) if pending.cancel() else pending.result()
        else:
            table = self._read_table(name)
        return self._mine(table) if "run_id" in table.columns else table

    def question_rows(self, name: str, question_id: str) -> pd.DataFrame:
        """One question's rows of a per-question table, with the run-level rows (no question id):
        filtered while reading when the whole table has not been read (answers carry every
        prompt: a drill-down reads one question's, not the folder's)."""
        if name in self.__dict__ or name in self._given or self.root is None:
            frame = getattr(self, name)
        elif self._source is not None:
            frame = self._mine(self._source.question_rows(name, question_id))
        else:
            frame = self._mine(ResultStore(self.root).read(name, run_ids=self._run_ids, question_id=question_id))
        return frame[frame["question_id"].isna() | (frame["question_id"] == question_id)].reset_index(drop=True)

    @cached_property
    def stages(self) -> pd.DataFrame:
        return self._table("stages")

    @cached_property
    def retrievals(self) -> pd.DataFrame:
        return self._table("retrievals")

    @cached_property
    def judgements(self) -> pd.DataFrame:
        return self._table("judgements")

    @cached_property
    def answers(self) -> pd.DataFrame:
        return self._table("answers")

    @cached_property
    def questions(self) -> pd.DataFrame:
        return self._table("questions")

    @cached_property
    def units(self) -> pd.Series:
        """question_id -> the unit statistics resample: the question's source document; empty when
        the folder does not record it (each question is then its own unit)."""
        questions = self.questions
        if questions.empty or "document" not in questions.columns:
            return pd.Series(dtype="string")
        known = questions.dropna(subset=["document"]).drop_duplicates("question_id")
        return pd.Series(known["document"].astype("string").to_numpy(), index=known["question_id"].astype("string"))

    @cached_property
    def baselines(self) -> dict[str, dict[str, str]]:
        """``named``: factor -> the reference level the experiment named (``baseline:``);
        ``first_listed``: factor -> its first level as the experiment lists it (empty when unknown)."""
        if self._source is not None:
            return self._source.baselines
        return ResultStore(self.root).read_baselines() if self.root is not None else {"named": {}, "first_listed": {}}

    @property
    def unit(self) -> str:
        """What one independent draw is: "document" when questions have a source document, else "question"."""
        return DOCUMENT_UNIT if not self.units.empty else QUESTION_UNIT

    def derived(self, name: str, compute: Callable[[], Any], keep: int | None = None) -> Any:
        """``compute()`` for these runs, kept on the folder's root Results: views of the same runs
        (each with its own subset) share it instead of computing it again. ``keep``: at most
        that many selections' values of ``name`` are kept, the least recently asked dropped
        first (a dashboard session changes its selection often; large values must not pile up)."""
        root = self
        while root._source is not None:
            root = root._source
        cache = root.__dict__.setdefault("_derived", {})
        key = (name, tuple(self.runs["run_id"].astype(str)) if "run_id" in self.runs.columns else ())
        if key not in cache:
            cache[key] = compute()
        cache[key] = cache.pop(key)  # the most recently asked last
        if keep is not None:
            mine = [other for other in cache if other[0] == name]
            for other in mine[:-keep]:
                del cache[other]
        return cache[key]

    def subset(self, run_ids: list[str] | None) -> Results:
        """Only the given runs (all when None); an unknown run id is an error naming the valid ones."""
        if run_ids is None:
            return self
        unknown = sorted(set(run_ids) - set(self.runs["run_id"]))
        if unknown:
            raise ConfigError(f"unknown run id(s): {', '.join(unknown)}. "
                              f"Valid run ids: {', '.join(self.runs['run_id'])}")
        return Results(self.runs[self.runs["run_id"].isin(run_ids)].reset_index(drop=True), root=self.root,
                       source=self)


def load_results(results_dir: str | Path) -> Results:
    """A results folder's runs (with a readable `label`); every other table on first use."""
    store = ResultStore(as_location(results_dir))
    if not store.exists():
        raise FileNotFoundError(f"no results folder at {results_dir} (expected a 'runs' subfolder)")
    runs = store.read("runs")
    if not runs.empty:
        runs = with_added_defaults(runs)
        runs = runs.assign(label=run_labels(runs).astype("string"))
        runs = runs.sort_values("label", kind="stable").reset_index(drop=True)
    return Results(runs, root=store.root)
