"""PartStore: a results folder's files, written and committed: run files, question sets, parts
and their commit markers.

Each (run, shard of questions) writes one Parquet part per table, then a commit marker; readers
only see parts whose marker exists. A run killed mid-shard leaves uncommitted parts that the
next attempt overwrites, so resuming never loses nor duplicates a row. A finished run's parts are
compacted into one per table (``ragkit.results.compaction``).

The folder is local or on S3-compatible object storage (``ragkit.storage.folders``): a part or marker is
written whole or not at all on both, so the same commit protocol holds.

Two tables are not per shard: ``runs`` (one file per run) and ``questions`` (one file per
question set, ``questions/<questions_key>.parquet``, written whole before any question is
answered). Both are written atomically, so a file that exists is complete.

Reading tables as the analysis sees them (through merged copies, without stale rows) is
``ragkit.results.result_store.ResultStore``, built on this class.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pandas as pd

from ragkit.hashing import content_key
from ragkit.results.copies import copied_parts, merged_copy, merged_runs, note_unreadable_copy
from ragkit.results.integrity import MISSING, digest, note, readable_parts, remember_digests, warning_lines
from ragkit.results.schema import (
    BASELINES_FILE,
    COMMITS,
    COMPACTED,
    FILES_KEY,
    PART_TABLES,
    RUN_ROWS_KEY,
    conform,
    empty_table,
    run_of_part,
)
from ragkit.storage.folders import Entry, as_location, open_folder
from ragkit.storage.locks import hold

# results location -> (its run files' names and tags, the runs table they gave): a folder of a
# thousand runs has a thousand run files, and opening a folder reads the table several times.
_RUNS: dict[str, tuple[tuple, pd.DataFrame]] = {}
# (results location, part) -> (its marker's tag, run id, the metrics it lists or None)
_MARKER_METRICS: dict[tuple[str, str], tuple[str, str, list[str] | None]] = {}


def read_parquet_file(entry: Entry, filesystem):
    """One whole Parquet file (several times faster than ``pq.read_table`` for a small one);
    the page checksums of a merged copy are checked."""
    import pyarrow.parquet as pq

    return pq.ParquetFile(entry.path, filesystem=filesystem, page_checksum_verification=True).read()


class PartStore:
    """A results folder's files and commits (``ResultStore`` adds the reads). ``root``: a local
    folder, or an ``s3://bucket/prefix`` on S3-compatible object storage."""

    def __init__(self, root: str | Path) -> None:
        self.root = as_location(root)
        self.files = open_folder(self.root)

    def writer_lock(self):
        """Held by the one process that writes this folder, for its whole run: a second writer is
        refused at once, naming the holder, rather than answering the same questions twice.

        Object storage has no lock to hold: its lock file is on this machine (in the data
        directory), which covers every process here; on a cluster only the driver writes results
        (the Ray executor's workers return their rows to it)."""
        if isinstance(self.root, Path):
            lock = self.root / ".lock"
        else:
            from ragkit.settings import get_settings

            lock = get_settings().resolved_data_dir() / "locks" / f"results-{content_key(self.root)}.lock"
        return hold(lock, f"results folder {self.root}", timeout=0,
                    advice="wait for that run to finish or write to another folder")

    def write_parquet(self, relative: str, frame: pd.DataFrame) -> dict[str, Any]:
        """Write ``frame``; its size and checksum, which a commit marker records."""
        buffer = io.BytesIO()
        frame.to_parquet(buffer, index=False)
        self.files.write_bytes(relative, buffer.getvalue())
        return digest(buffer.getvalue())

    def write_json(self, relative: str, value: dict) -> None:
        self.files.write_bytes(relative, json.dumps(value, indent=2, ensure_ascii=False, default=str).encode())

    def write_run(self, run_id: str, row: dict) -> None:
        self.write_parquet(f"runs/{run_id}.parquet", pd.DataFrame([row]))

    def write_baselines(self, named: dict[str, str], first_listed: dict[str, str] | None = None) -> None:
        """Per factor, the reference level the experiment named (``baseline:``) and its first level as
        the experiment lists it, for the report to read: beside the runs, not in them, so run ids and
        rows stay as they were."""
        self.write_json(BASELINES_FILE, {
            "named": {str(factor): str(level) for factor, level in named.items()},
            "first_listed": {str(factor): str(level) for factor, level in (first_listed or {}).items()},
        })

    def read_baselines(self) -> dict[str, dict[str, str]]:
        """``{"named": {factor: level}, "first_listed": {factor: level}}``, empty without the file."""
        stored = json.loads(self.files.read_bytes(BASELINES_FILE)) if self.files.exists(BASELINES_FILE) else {}
        return {part: {str(k): str(v) for k, v in stored.get(part, {}).items()} for part in ("named", "first_listed")}

    def write_questions(self, questions_key: str, frame: pd.DataFrame) -> None:
        """The question set's ``questions`` rows, one file per question set."""
        self.write_parquet(f"questions/{questions_key}.parquet", conform(frame, "questions"))

    def commit_shard(self, run_id: str, question_ids: list[str], tables: dict[str, pd.DataFrame],
                     question_keys: list[str] | None = None, run_rows: bool | None = None) -> None:
        """One part per table for these questions, then the commit marker. ``question_keys`` (the
        questions' content keys, in order) go on every row of those questions and in the marker.
        ``run_rows``: whether the part carries the run's run-level rows (build costs, chunking
        decisions), said in the marker so a run whose carrying part is set aside carries them again."""
        keys = dict(zip(question_ids, question_keys)) if question_keys is not None else {}
        part = f"{run_id}-{content_key(question_ids, question_keys, length=12)}"
        files = {}
        for name in PART_TABLES:
            frame = tables.get(name)
            frame = empty_table(name) if frame is None or frame.empty else frame
            if keys and "question_id" in frame.columns:
                frame = frame.assign(question_key=frame["question_id"].map(keys))
            files[name] = self.write_parquet(f"{name}/{part}.parquet", conform(frame, name))
        scores = tables.get("scores")
        metrics: list[str] = []
        if scores is not None and not scores.empty:
            metrics = sorted(scores["metric"].dropna().astype(str).unique())
        # The marker goes last: until it exists the shard does not count as written. It lists the
        # part's metrics, so a page lists a folder's metrics without reading its scores.
        # Each part's size and checksum, checked whenever the part is read (ragkit.results.integrity).
        marker: dict = {"run_id": run_id, "question_ids": question_ids, "metrics": metrics, FILES_KEY: files}
        if question_keys is not None:
            marker["question_keys"] = list(question_keys)
        if run_rows is not None:
            marker[RUN_ROWS_KEY] = run_rows
        self.write_json(f"{COMMITS}/{part}.json", marker)

    def marker_record(self, part: str) -> tuple[dict | None, str | None]:
        """(a part's commit marker, None) or (None, why it cannot be read); (None, None) when it
        was removed by a compaction since listed."""
        missing: tuple[type[Exception], ...] = (FileNotFoundError, *self.files.missing_errors)
        try:
            record = json.loads(self.files.read_bytes(f"{COMMITS}/{part}.json"))
        except missing:
            return None, None
        except ValueError as error:  # not JSON (UnicodeDecodeError is a ValueError too)
            problem = f"its commit marker is not readable ({type(error).__name__})"
        else:
            if isinstance(record, dict) and isinstance(record.get("run_id"), str) \
                    and isinstance(record.get("question_ids"), list):
                note(self, f"{COMMITS}/{part}.json", None)
                return record, None
            problem = "its commit marker is not a ragkit commit record"
        note(self, f"{COMMITS}/{part}.json", problem)
        return None, problem

    def unreadable(self) -> list[str]:
        """One line per file of this folder a read in this process could not use, saying what
        was done instead (ragkit.results.integrity.warning_lines)."""
        return warning_lines(self)

    def committed_markers(self) -> list[tuple[str, dict]]:
        """(part, marker record) of every committed part that no compacted part replaces."""
        tags = {entry.stem: entry.tag for entry in self.files.list(COMMITS, ".json")}
        found = []
        for part in sorted(self.committed_parts()):
            record = self.marker_record(part)[0]
            if record is not None:
                self.remember_metrics(part, tags.get(part, ""), record)
                found.append((part, record))
        return found

    def remember_metrics(self, part: str, tag: str, record: dict) -> tuple[str, str, list[str] | None]:
        """What ``metric_names`` needs of a marker, kept per process under its tag (and, from a
        marker read whole, the digests a read checks its parts against)."""
        known = _MARKER_METRICS[(str(self.root), part)] = (tag, record["run_id"], record.get("metrics"))
        if "question_ids" in record:
            remember_digests(self, part, tag, record)
        return known

    def remembered_metrics(self, part: str) -> tuple[str, str, list[str] | None] | None:
        """(marker tag, run id, metrics or None) that ``remember_metrics`` kept of ``part``."""
        return _MARKER_METRICS.get((str(self.root), part))

    def completed_questions(self) -> dict[str, set[str]]:
        """run id -> the ids of the questions it has committed (at any content)."""
        done: dict[str, set[str]] = {}
        for _, record in self.committed_markers():
            done.setdefault(record["run_id"], set()).update(record["question_ids"])
        return done

    def completed_keys(self) -> dict[str, set[tuple[str, str | None]]]:
        """run id -> the (question id, question content key) pairs it has committed; the key is
        None in parts written before keys were recorded."""
        done: dict[str, set[tuple[str, str | None]]] = {}
        for _, record in self.committed_markers():
            keys = record.get("question_keys") or [None] * len(record["question_ids"])
            done.setdefault(record["run_id"], set()).update(zip(record["question_ids"], keys))
        return done

    def runs_with_run_rows(self) -> set[str]:
        """The runs a committed part carries the run-level rows of; a marker written before markers
        said so counts as carrying them (they went with a run's first shard, and no later one)."""
        return {record["run_id"] for _, record in self.committed_markers() if record.get(RUN_ROWS_KEY, True)}

    def committed_parts(self) -> set[str]:
        """Parts with a commit marker, less those a compacted part replaces (left behind by a
        compaction that stopped before removing them)."""
        parts = {entry.stem for entry in self.files.list(COMMITS, ".json")}
        by_run: dict[str, list[str]] = {}
        for part in parts:
            by_run.setdefault(run_of_part(part), []).append(part)
        replaced: set[str] = set()
        # Only a run with a compacted part and others beside it can have leftovers: a finished,
        # compacted run has one marker, which is not read here.
        for run_parts in by_run.values():
            if len(run_parts) < 2:
                continue
            for part in run_parts:
                compacted = part.rsplit("-", 1)[-1].startswith(COMPACTED)
                if compacted and (record := self.marker_record(part)[0]) is not None:
                    replaced.update(record.get("replaces", []))
        return parts - replaced

    def listed_parts(self, name: str, run_ids: list[str] | None = None) -> list[Entry]:
        entries = self.files.list(name, ".parquet")
        if name in PART_TABLES:
            committed = self._committed_of(run_ids)
            found = [entry for entry in entries if entry.stem in committed]
            if len(found) < len(committed):
                self._note_missing(name, committed - {entry.stem for entry in found}, run_ids)
            return found
        return entries

    def _committed_of(self, run_ids: list[str] | None) -> set[str]:
        committed = self.committed_parts()
        if run_ids is not None:  # parts are named <run id>-<shard key>: other runs' files are not opened
            wanted = set(run_ids)
            committed = {part for part in committed if run_of_part(part) in wanted}
        return committed

    def _note_missing(self, name: str, absent: set[str], run_ids: list[str] | None) -> None:
        """Name the committed parts of ``name`` that have no file. Listed again first: a compaction
        removes the old markers, then their parts, between this read's two listings."""
        listed = {entry.stem for entry in self.files.list(name, ".parquet")}
        for part in sorted(absent & self._committed_of(run_ids) - listed):
            note(self, f"{name}/{part}.parquet", MISSING)

    def committed_entries(self, name: str) -> list[Entry]:
        """The committed parts of a part table that pass their check (the files a reader of every
        run opens, and a merged copy copies)."""
        return readable_parts(self, name, self.listed_parts(name))

    def runs_table(self) -> pd.DataFrame:
        """The runs table (a ``run_id`` column alone when the folder has no run file)."""
        entries = self.files.list("runs", ".parquet")
        return self.read_runs(entries) if entries else pd.DataFrame({"run_id": pd.Series(dtype="string")})

    def read_runs(self, entries: list[Entry]) -> pd.DataFrame:
        """The runs table from its files ``entries`` (one small file per run, whose columns differ
        by component: Arrow aligns them), through its merged copy while that copies exactly them."""
        signature = (str(self.root), tuple((entry.stem, entry.tag) for entry in entries))
        if _RUNS.get(signature[0], (None,))[0] != signature:
            copy = merged_copy(self, "runs")
            table = None
            if copy is not None and copy.parts == dict(signature[1]):
                table = self._read_copy(copy.entry, "runs")
                if table is not None and copied_parts(table.schema) != copy.parts:  # replaced since listed
                    table = None
            if table is None:
                tables = self.read_files("runs", entries)
                if not tables:
                    return pd.DataFrame({"run_id": pd.Series(dtype="string")})
                table = merged_runs(tables)
            _RUNS[signature[0]] = (signature, table.to_pandas())
        return _RUNS[signature[0]][1].copy()

    def read_files(self, name: str, entries: list[Entry]) -> list:
        """Whole files of the runs or questions table as Arrow tables; one Arrow cannot read is
        left out and named (``ragkit run`` writes its run's rows and question set again)."""
        import pyarrow as pa

        tables = []
        for entry in entries:
            try:
                tables.append(read_parquet_file(entry, self.files.filesystem))
            except FileNotFoundError:  # replaced while read: the read retries
                raise
            except (pa.ArrowException, OSError, ValueError) as error:
                note(self, f"{name}/{entry.stem}.parquet", f"not readable as Parquet ({type(error).__name__})")
            else:
                note(self, f"{name}/{entry.stem}.parquet", None)
        return tables

    def _read_copy(self, entry: Entry, name: str):
        """A merged copy read whole, or None when it is gone or cannot be read (named: it is only
        derived, and the files it copies are read instead)."""
        import pyarrow as pa

        try:
            table = read_parquet_file(entry, self.files.filesystem)
        except FileNotFoundError:  # removed since listed
            return None
        except (pa.ArrowException, OSError, ValueError) as error:
            note_unreadable_copy(self, name, error)
            return None
        return table

    def exists(self) -> bool:
        return self.files.exists("runs")
