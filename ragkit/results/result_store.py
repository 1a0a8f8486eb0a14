"""ResultStore: a results folder's tables as readers see them.

A part table is read from the folder's merged copy where it is current (``ragkit.results.copies``)
and from its committed parts otherwise, each part checked as it is opened: one that fails its
check is left out and named (``ragkit.results.integrity``), never a reason to stop. Rows of
questions no longer in their run's question set are dropped (``ragkit.results.staleness``).
Writing, commits and markers are ``PartStore``'s (``ragkit.results.parts``).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

import ragkit.results.compaction as compaction
import ragkit.results.copy_writer as merging
import ragkit.results.staleness as staleness
from ragkit.results.copies import read_copied_rows
from ragkit.results.integrity import readable_parts
from ragkit.results.parts import PartStore
from ragkit.results.schema import TABLES, arrow_schema, conform, empty_table, read_schema
from ragkit.results.staleness import marker_metrics
from ragkit.storage.folders import Entry


class ResultStore(PartStore):
    """A results folder: ``PartStore``'s writes and commits, and its tables as readers see them.
    ``root``: a local folder, or an ``s3://bucket/prefix`` on S3-compatible object storage.

    Long tidy tables, committed rows only (``TABLES`` names them)::

        >>> store = ResultStore("results/quickstart")
        >>> runs = store.read("runs")  # one row per run: its id and every configuration field
        >>> scores = store.read("scores", metrics=["recall@5"])  # run_id, question_id, metric, value, error
        >>> scores.groupby("run_id")["value"].mean()
    """

    def read(self, name: str, categorical: tuple[str, ...] = (), metrics: list[str] | None = None,
             columns: list[str] | None = None, run_ids: list[str] | None = None,
             question_id: str | None = None) -> pd.DataFrame:
        """A table; ``categorical`` string columns come back as pandas categories, read as
        dictionaries (no Python string per row: much faster for big tables). ``metrics`` keeps
        only those rows of a table with a metric column, filtered while reading; ``columns``
        reads only those columns of a part table; ``run_ids`` opens only those runs' parts (and,
        for ``questions``, only their question sets); ``question_id`` keeps that question's rows
        of a part table and its run-level rows (no question id), filtered while reading.

        Rows of questions no longer in their run's question set (``stale_keys``) are not read."""
        if name not in TABLES:
            raise ValueError(f"unknown results table '{name}'. Valid tables: {', '.join(TABLES)}")
        try:
            return self._read(name, categorical, metrics, columns, run_ids, question_id, as_arrow=False)
        except OSError:  # a part compacted away between listing and reading (FileNotFoundError is one)
            return self._read(name, categorical, metrics, columns, run_ids, question_id, as_arrow=False)

    def read_table(self, name: str, columns: list[str], categorical: tuple[str, ...] = (),
                   metrics: list[str] | None = None, run_ids: list[str] | None = None):
        """``read`` of a part table as a pyarrow Table, its chunks as read (each ``categorical``
        column a dictionary array with each chunk's own dictionary): for readers that reduce
        millions of rows to arrays themselves, where pandas' conversion (categories unified
        across a thousand chunks) is most of the read (ragkit.analysis.matrices)."""
        if name not in TABLES or name in ("runs", "questions"):
            valid = [table for table in TABLES if table not in ("runs", "questions")]
            raise ValueError(f"unknown part table '{name}'. Valid tables: {', '.join(valid)}")
        try:
            return self._read(name, categorical, metrics, columns, run_ids, None, as_arrow=True)
        except OSError:  # a part compacted away between listing and reading (FileNotFoundError is one)
            return self._read(name, categorical, metrics, columns, run_ids, None, as_arrow=True)

    def _read(self, name: str, categorical: tuple[str, ...], metrics: list[str] | None, columns: list[str] | None,
              run_ids: list[str] | None, question_id: str | None, as_arrow: bool) -> Any:
        parts = self.listed_parts(name, run_ids)
        if name == "questions":
            parts = self._question_sets(parts, run_ids)
        if not parts and as_arrow:
            return read_schema(name, categorical).empty_table().select(columns)
        if not parts:
            table = empty_table(name) if name != "runs" else pd.DataFrame({"run_id": pd.Series(dtype="string")})
            return table if columns is None else table[columns]
        if name == "runs":  # one small file per run, whose columns differ by component
            return self.read_runs(parts)
        if name == "questions":  # question sets of several plans may share questions
            frames = [conform(table.to_pandas(), name) for table in self.read_files(name, parts)]
            if not frames:
                return empty_table(name) if columns is None else empty_table(name)[columns]
            frame = pd.concat(frames, ignore_index=True)
            return frame.drop_duplicates("question_id", keep="last", ignore_index=True)
        # Part tables share one schema: one multi-file read is several times faster than a concat.
        import pyarrow as pa
        import pyarrow.dataset as ds

        schema = read_schema(name, categorical)
        options = ds.ParquetReadOptions(dictionary_columns=list(categorical))
        where = ds.field("metric").isin(list(metrics)) if metrics is not None else None
        if question_id is not None:
            one = (ds.field("question_id") == question_id) | ds.field("question_id").is_null()
            where = one if where is None else where & one
        stale = self.stale_keys()
        tables = []
        if question_id is None and columns is not None and "question_key" not in columns:
            merged, parts = read_copied_rows(self, name, parts, stale, columns, categorical, metrics)
            tables = [merged] if merged is not None else []
        parts = readable_parts(self, name, parts)  # each part opened from its own file is checked
        if not parts and not tables:
            return self._read(name, categorical, metrics, columns, [], question_id, as_arrow)  # no part readable
        if parts:
            dataset = ds.dataset([entry.path for entry in parts], format=ds.ParquetFileFormat(read_options=options),
                                 schema=schema, filesystem=self.files.filesystem)
            if stale:
                key_columns = ["run_id", "question_id", "question_key"]
                read_columns = None if columns is None else list(dict.fromkeys([*columns, *key_columns]))
                frame = dataset.to_table(columns=read_columns, filter=where).unify_dictionaries().to_pandas()
                triples = pd.MultiIndex.from_frame(frame[key_columns].astype("object"))
                dropped = triples.isin(list(stale))
                frame = frame.loc[~dropped].reset_index(drop=True)
                # No copy read (a copy is read for given columns only): this frame is the table.
                if (not tables or columns is None) and not as_arrow:
                    return frame if columns is None else frame[columns]
                selected = pa.schema([schema.field(column) for column in columns or schema.names])
                tables.append(pa.Table.from_pandas(frame[selected.names], schema=selected, preserve_index=False))
            else:
                tables.append(dataset.to_table(columns=columns, filter=where))
        table = tables[0] if len(tables) == 1 else pa.concat_tables(tables)
        if as_arrow:
            return table
        # Each file has its own dictionary; one shared set of categories per column for pandas.
        return table.unify_dictionaries().to_pandas()

    def _question_sets(self, parts: list[Entry], run_ids: list[str] | None) -> list[Entry]:
        """The question-set files the runs name (every file when a run names none); the file
        written last comes last, so its rows win where sets share a question id."""
        runs = self.read("runs", run_ids=None)
        if run_ids is not None and not runs.empty:
            runs = runs[runs["run_id"].isin(run_ids)]
        if runs.empty or "questions_key" not in runs.columns or runs["questions_key"].isna().any():
            return parts
        named = set(runs["questions_key"].astype(str))
        chosen = [entry for entry in parts if entry.stem in named]
        return sorted(chosen, key=lambda entry: entry.mtime)

    def metric_names(self, run_ids: list[str] | None = None) -> list[str]:
        """The distinct metrics in ``scores`` (of ``run_ids`` only, when given): from the commit
        markers, and from the metric column of parts committed before markers listed them."""
        names: set[str] = set()
        unlisted: list[str] = []
        wanted = set(run_ids) if run_ids is not None else None
        for part, run_id, metrics in marker_metrics(self):
            if wanted is not None and run_id not in wanted:
                continue
            if metrics is not None:
                names.update(metrics)
            else:
                unlisted.append(part)
        if unlisted:
            import pyarrow.compute as pc
            import pyarrow.dataset as ds

            wanted = set(unlisted)
            readable = readable_parts(self, "scores", self.listed_parts("scores"))
            parts = [entry.path for entry in readable if entry.stem in wanted]
            if parts:
                dataset = ds.dataset(parts, format="parquet", schema=arrow_schema("scores"),
                                     filesystem=self.files.filesystem)
                found = pc.unique(dataset.to_table(columns=["metric"]).column("metric")).to_pylist()
                names.update(str(n) for n in found if n is not None)
        return sorted(names)

    def stale_keys(self) -> set[tuple[str, str, str]]:
        """See ``ragkit.results.staleness.stale_keys``."""
        return staleness.stale_keys(self)

    def current_keys(self) -> dict[str, set[tuple[str, str]]]:
        """See ``ragkit.results.staleness.current_keys``."""
        return staleness.current_keys(self)

    def compact_run(self, run_id: str) -> bool:
        """See ``ragkit.results.compaction.compact_run``."""
        return compaction.compact_run(self, run_id)

    def finish_compactions(self, finished: set[str]) -> list[str]:
        """See ``ragkit.results.compaction.finish_compactions``."""
        return compaction.finish_compactions(self, finished)

    def compact(self) -> tuple[int, int]:
        """See ``ragkit.results.compaction.compact``."""
        return compaction.compact(self)

    def merge(self, min_parts: int = 1) -> dict[str, int]:
        """Write the merged read copies that are out of date (ragkit.results.copy_writer), when the folder has
        at least ``min_parts`` committed score parts; the caller holds ``writer_lock``. Table ->
        parts copied."""
        if len(self.committed_entries("scores")) < min_parts:
            return {}
        return merging.merge(self)
