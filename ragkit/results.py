"""ResultStore: long, tidy, append-only result tables under one folder.

Each (run, shard of questions) writes one Parquet part per table, then a commit marker; readers
only see parts whose marker exists. A run killed mid-shard leaves uncommitted parts that the
next attempt overwrites, so resuming never loses nor duplicates a row.

The folder is local or on S3-compatible object storage (``ragkit.folders``): a part or marker is
written whole or not at all on both, so the same commit protocol holds.

Two tables are not per shard: ``runs`` (one file per run) and ``questions`` (one file per
question set, ``questions/<questions_key>.parquet``, written whole before any question is
answered). Both are written atomically, so a file that exists is complete.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ragkit.folders import Entry, as_location, open_folder
from ragkit.hashing import content_key
from ragkit.integrity import FILES_KEY, MISSING, digest, note, readable_parts, remember_digests
from ragkit.locks import hold

COMMITS = "_commits"
# A compacted part is named <run id>-all<key>: "l" is not a hex digit, so no shard part looks like one.
COMPACTED = "all"
PART_TABLES = ("scores", "retrievals", "stages", "judgements", "answers")
TABLES = ("runs", *PART_TABLES, "questions")

# Every per-question row carries ``question_key``, the content key of the question it answers
# (``Question.content_key``): results are keyed per (run, question content), so a run's rows are
# those of the questions in its current question set, at their current content. It is null on
# run-level rows and in results written before it existed.
SCHEMAS: dict[str, dict[str, str]] = {
    "scores": {"run_id": "string", "question_id": "string", "metric": "string", "value": "float64", "error": "string",
               "question_key": "string"},
    "retrievals": {
        "run_id": "string", "question_id": "string", "rank": "int64", "chunk_id": "string", "doc_id": "string",
        "start_char": "int64", "end_char": "int64", "score": "float64",
        # cl100k tokens of the chunk's text (ragkit.metrics.final_context); null in older results.
        "tokens": "int64", "question_key": "string",
    },
    "stages": {
        # seconds: what the stage costs the configuration; a reused index counts its build time and
        # a cached LLM reply the time it took to generate.
        "run_id": "string", "question_id": "string", "stage": "string", "seconds": "float64", "cached": "bool",
        # LLM usage of the stage's calls: what the replies cost when produced (also on a cache hit),
        # and backend_calls, the calls this run actually sent. invalid_replies counts replies that
        # failed the JSON schema ragkit asked for; ragas parses its own replies, so an evaluation
        # judge's unparseable reply shows as the metric's NaN + error in scores instead.
        "llm_calls": "int64", "backend_calls": "int64", "invalid_replies": "int64",
        "prompt_tokens": "int64", "completion_tokens": "int64", "question_key": "string",
    },
    # Every judge decision; question_id is empty for per-document (chunking) decisions.
    "judgements": {
        "run_id": "string", "question_id": "string", "judge": "string", "input_summary": "string",
        "decision": "string", "raw_reply": "string", "valid": "bool", "error": "string", "fell_back": "bool",
        "seconds": "float64", "cache_hit": "bool", "question_key": "string",
    },
    "answers": {
        "run_id": "string", "question_id": "string", "answer": "string", "citations": "string",
        "contexts": "string", "prompt": "string", "valid": "bool", "error": "string", "question_key": "string",
    },
    # One row per question, whatever the run: document is the question's source document (the
    # cluster statistics resample), or the question's own id when it has none.
    "questions": {
        "question_id": "string", "text": "string", "document": "string", "n_relevant_docs": "int64",
        "n_answer_groups": "int64", "question_key": "string",
    },
}
# The stages columns that count LLM usage, summed per stage and per run.
USAGE_FIELDS = ("llm_calls", "backend_calls", "invalid_replies", "prompt_tokens", "completion_tokens")
# Evaluation stages: "eval:<metric>" (the evaluation's LLM calls) and "eval" (its other work). They
# measure the answer after the fact, so latency and pipeline cost leave them out.
EVAL_STAGE = "eval"
# Score rows a metric judged r >= 2 times adds: the judge's own spread and its invalid share.
JUDGE_SD_SUFFIX = ".judge_sd"
INVALID_SHARE_SUFFIX = ".invalid_share"


def is_evaluation_stage(stage: pd.Series) -> pd.Series:
    """True for the rows of ``stage`` that are ``eval`` or ``eval:<metric>``."""
    if isinstance(stage.dtype, pd.CategoricalDtype):  # decided once per category, not per row
        per_category = is_evaluation_stage(pd.Series(stage.cat.categories)).to_numpy()
        # A missing stage (code -1) picks the appended False.
        return pd.Series(np.append(per_category, False)[stage.cat.codes.to_numpy()], index=stage.index)
    # A table has a handful of distinct stages and up to millions of rows: decide per distinct one.
    codes, distinct = pd.factorize(stage.astype("string"), use_na_sentinel=True)
    names = pd.Series(distinct, dtype="string")
    per_value = ((names == EVAL_STAGE) | names.str.startswith(EVAL_STAGE + ":")).fillna(False).to_numpy(dtype=bool)
    return pd.Series(np.append(per_value, False)[codes], index=stage.index)


_ARROW_TYPES = {"string": "string", "float64": "float64", "int64": "int64", "bool": "bool_"}


def empty_table(name: str) -> pd.DataFrame:
    return pd.DataFrame({col: pd.Series(dtype=dtype) for col, dtype in SCHEMAS[name].items()})


# results location -> (what its markers, runs and question sets were, the stale keys they gave)
_STALE: dict[str, tuple[tuple, set[tuple[str, str, str]]]] = {}
# results location -> (its run files' names and tags, the runs table they gave): a folder of a
# thousand runs has a thousand run files, and opening a folder reads the table several times.
_RUNS: dict[str, tuple[tuple, pd.DataFrame]] = {}
# (results location, part) -> (its marker's tag, run id, the metrics it lists or None)
_MARKER_METRICS: dict[tuple[str, str], tuple[str, str, list[str] | None]] = {}


def _read_file(entry: Entry, filesystem):
    """One whole Parquet file (several times faster than ``pq.read_table`` for a small one);
    the page checksums of a merged copy are checked."""
    import pyarrow.parquet as pq

    return pq.ParquetFile(entry.path, filesystem=filesystem, page_checksum_verification=True).read()


BASELINES_FILE = "baselines.json"


class ResultStore:
    """``root``: a local folder, or an ``s3://bucket/prefix`` on S3-compatible object storage."""

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

    def _write_parquet(self, relative: str, frame: pd.DataFrame) -> dict[str, Any]:
        """Write ``frame``; its size and checksum, which a commit marker records."""
        buffer = io.BytesIO()
        frame.to_parquet(buffer, index=False)
        self.files.write_bytes(relative, buffer.getvalue())
        return digest(buffer.getvalue())

    def _write_json(self, relative: str, value: dict) -> None:
        self.files.write_bytes(relative, json.dumps(value, indent=2, ensure_ascii=False, default=str).encode())

    def write_run(self, run_id: str, row: dict) -> None:
        self._write_parquet(f"runs/{run_id}.parquet", pd.DataFrame([row]))

    def write_baselines(self, named: dict[str, str], first_listed: dict[str, str] | None = None) -> None:
        """Per factor, the reference level the experiment named (``baseline:``) and its first level as
        the experiment lists it, for the report to read: beside the runs, not in them, so run ids and
        rows stay as they were."""
        self._write_json(BASELINES_FILE, {
            "named": {str(factor): str(level) for factor, level in named.items()},
            "first_listed": {str(factor): str(level) for factor, level in (first_listed or {}).items()},
        })

    def read_baselines(self) -> dict[str, dict[str, str]]:
        """``{"named": {factor: level}, "first_listed": {factor: level}}``, empty without the file."""
        stored = json.loads(self.files.read_bytes(BASELINES_FILE)) if self.files.exists(BASELINES_FILE) else {}
        return {part: {str(k): str(v) for k, v in stored.get(part, {}).items()} for part in ("named", "first_listed")}

    def write_questions(self, questions_key: str, frame: pd.DataFrame) -> None:
        """The question set's ``questions`` rows, one file per question set."""
        self._write_parquet(f"questions/{questions_key}.parquet", _conform(frame, "questions"))

    def commit_shard(self, run_id: str, question_ids: list[str], tables: dict[str, pd.DataFrame],
                     question_keys: list[str] | None = None) -> None:
        """One part per table for these questions, then the commit marker. ``question_keys`` (the
        questions' content keys, in order) go on every row of those questions and in the marker."""
        keys = dict(zip(question_ids, question_keys)) if question_keys is not None else {}
        part = f"{run_id}-{content_key(question_ids, question_keys, length=12)}"
        files = {}
        for name in PART_TABLES:
            frame = tables.get(name)
            frame = empty_table(name) if frame is None or frame.empty else frame
            if keys and "question_id" in frame.columns:
                frame = frame.assign(question_key=frame["question_id"].map(keys))
            files[name] = self._write_parquet(f"{name}/{part}.parquet", _conform(frame, name))
        scores = tables.get("scores")
        metrics: list[str] = []
        if scores is not None and not scores.empty:
            metrics = sorted(scores["metric"].dropna().astype(str).unique())
        # The marker goes last: until it exists the shard does not count as written. It lists the
        # part's metrics, so a page lists a folder's metrics without reading its scores.
        # Each part's size and checksum, checked whenever the part is read (ragkit.integrity).
        marker: dict = {"run_id": run_id, "question_ids": question_ids, "metrics": metrics, FILES_KEY: files}
        if question_keys is not None:
            marker["question_keys"] = list(question_keys)
        self._write_json(f"{COMMITS}/{part}.json", marker)

    def _read_marker(self, part: str) -> dict | None:
        return self.marker_record(part)[0]

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
        was done instead (ragkit.integrity.warning_lines)."""
        from ragkit.integrity import warning_lines

        return warning_lines(self)

    def _markers(self) -> list[tuple[str, dict]]:
        """(part, marker record) of every committed part that no compacted part replaces."""
        tags = {entry.stem: entry.tag for entry in self.files.list(COMMITS, ".json")}
        found = []
        for part in sorted(self.committed_parts()):
            record = self._read_marker(part)
            if record is not None:
                self._remember_metrics(part, tags.get(part, ""), record)
                found.append((part, record))
        return found

    def _remember_metrics(self, part: str, tag: str, record: dict) -> tuple[str, str, list[str] | None]:
        """What ``metric_names`` needs of a marker, kept per process under its tag (and, from a
        marker read whole, the digests a read checks its parts against)."""
        known = _MARKER_METRICS[(str(self.root), part)] = (tag, record["run_id"], record.get("metrics"))
        if "question_ids" in record:
            remember_digests(self, part, tag, record)
        return known

    def _unchecked_markers(self) -> list[tuple[str, dict]]:
        """The markers ``stale_keys`` has to read: all but those the last merge found current
        whose marker and run's question set are unchanged since (ragkit.merged.CheckedMarker):
        a thousand markers of a thousand question keys each take a second to read and check."""
        from ragkit.merged import checked_markers

        checked = checked_markers(self)
        if not checked:
            return self._markers()
        tags = {entry.stem: entry.tag for entry in self.files.list(COMMITS, ".json")}
        set_tags = {entry.stem: entry.tag for entry in self.files.list("questions", ".parquet")}
        runs = self.read("runs")
        run_sets = dict(zip(runs["run_id"], runs["questions_key"])) if "questions_key" in runs.columns else {}
        found = []
        for part in sorted(self.committed_parts()):
            known = checked.get(part)
            if (known is not None and known.tag == tags.get(part) and run_sets.get(known.run_id) == known.questions_key
                    and set_tags.get(known.questions_key) == known.questions_tag):
                self._remember_metrics(part, known.tag, {"run_id": known.run_id, "metrics": known.metrics})
                continue
            record = self._read_marker(part)
            if record is not None:
                self._remember_metrics(part, tags.get(part, ""), record)
                found.append((part, record))
        return found

    def _marker_metrics(self) -> list[tuple[str, str, list[str] | None]]:
        """(part, run id, the metrics its marker lists or None) of every committed part: remembered
        per marker tag, so a page that asked ``stale_keys`` does not read a thousand markers again."""
        tags = {entry.stem: entry.tag for entry in self.files.list(COMMITS, ".json")}
        committed = sorted(self.committed_parts())
        if any(_MARKER_METRICS.get((str(self.root), part), ("",))[0] != tags.get(part, "") for part in committed):
            self.stale_keys()  # remembers every marker, those the last merge checked without reading them
        found = []
        for part in committed:
            known = _MARKER_METRICS.get((str(self.root), part))
            if known is None or known[0] != tags.get(part, ""):
                record = self._read_marker(part)
                if record is None:
                    continue
                known = self._remember_metrics(part, tags.get(part, ""), record)
            found.append((part, known[1], known[2]))
        return found

    def compact_run(self, run_id: str) -> bool:
        """Merge a run's committed parts into one per table (once the run is finished), so a
        reader opens one file per run and table instead of one per shard. Crash-safe: the merged
        parts and their marker (which names the parts it replaces) are written first, then the
        old markers and parts are removed; until then readers skip what the marker replaces.
        False when there was nothing to merge."""
        parts = sorted(part for part in self.committed_parts() if part.rsplit("-", 1)[0] == run_id)
        records = [record for part in parts if (record := self._read_marker(part)) is not None]
        keyed = {"question_keys" in record for record in records}
        if len(parts) < 2 or len(records) < len(parts) or len(keyed) > 1:
            return False  # one part already, one removed meanwhile, or parts from before and after keys
        for name in PART_TABLES:  # a damaged part stays as it is, for the next run to set aside
            listed = [entry for entry in self.files.list(name, ".parquet") if entry.stem in set(parts)]
            if len(listed) < len(parts) or len(readable_parts(self, name, listed)) < len(parts):
                return False
        merged = f"{run_id}-{COMPACTED}{content_key(parts, length=12)}"
        files = {}
        for name in PART_TABLES:
            files[name] = self._write_parquet(f"{name}/{merged}.parquet", self._read_parts(name, parts).to_pandas())
        # The merged marker says what every part said: parts written before question keys, or before
        # markers listed metrics (older results), give a marker without them, as theirs are.
        marker: dict = {"run_id": run_id, "question_ids": [qid for record in records for qid in record["question_ids"]],
                        FILES_KEY: files}
        if keyed == {True}:
            marker["question_keys"] = [key for record in records for key in record["question_keys"]]
        if all("metrics" in record for record in records):
            marker["metrics"] = sorted({m for record in records for m in record["metrics"]})
        self._write_json(f"{COMMITS}/{merged}.json", {**marker, "replaces": parts})
        for part in parts:
            self.files.delete(f"{COMMITS}/{part}.json")
        for part in parts:
            for name in PART_TABLES:
                self.files.delete(f"{name}/{part}.parquet")
        return True

    def compact(self) -> tuple[int, int]:
        """Compact every run of the folder that has more than one part: what a run that finished
        compacts itself, for folders written before compaction existed or runs never finished.
        The caller holds ``writer_lock``. (runs compacted, parts they had)."""
        parts_of: dict[str, int] = {}
        for part in self.committed_parts():
            run_id = part.rsplit("-", 1)[0]
            parts_of[run_id] = parts_of.get(run_id, 0) + 1
        compacted = [run_id for run_id, count in sorted(parts_of.items()) if count > 1 and self.compact_run(run_id)]
        return len(compacted), sum(parts_of[run_id] for run_id in compacted)

    def _read_parts(self, name: str, parts: list[str]):
        """The given parts of a part table as one Arrow table in the table's schema."""
        import pyarrow.dataset as ds

        paths = [self.files.path(f"{name}/{part}.parquet") for part in parts]
        dataset = ds.dataset(paths, format="parquet", schema=arrow_schema(name), filesystem=self.files.filesystem)
        return dataset.to_table()

    def completed_questions(self) -> dict[str, set[str]]:
        """run id -> the ids of the questions it has committed (at any content)."""
        done: dict[str, set[str]] = {}
        for _, record in self._markers():
            done.setdefault(record["run_id"], set()).update(record["question_ids"])
        return done

    def completed_keys(self) -> dict[str, set[tuple[str, str | None]]]:
        """run id -> the (question id, question content key) pairs it has committed; the key is
        None in parts written before keys were recorded."""
        done: dict[str, set[tuple[str, str | None]]] = {}
        for _, record in self._markers():
            keys = record.get("question_keys") or [None] * len(record["question_ids"])
            done.setdefault(record["run_id"], set()).update(zip(record["question_ids"], keys))
        return done

    def current_keys(self) -> dict[str, set[tuple[str, str]]]:
        """run id -> the (question id, content key) pairs of its current question set: the set
        its ``runs`` row names. Runs whose question set records no keys are left out."""
        runs = self.read("runs")
        if runs.empty or "questions_key" not in runs.columns:
            return {}
        sets = {entry.stem: entry for entry in self.files.list("questions", ".parquet")}
        by_set: dict[str, set[tuple[str, str]] | None] = {}
        current: dict[str, set[tuple[str, str]]] = {}
        for run_id, key in zip(runs["run_id"], runs["questions_key"]):
            if pd.isna(key):
                continue
            if key not in by_set:
                read = self.read_files("questions", [sets[key]]) if key in sets else []
                table = read[0] if read else None
                by_set[key] = (set(zip(table["question_id"].to_pylist(), table["question_key"].to_pylist()))
                               if table is not None and "question_key" in table.column_names
                               and table["question_key"].null_count == 0 else None)
            if (pairs := by_set[key]) is not None:
                current[run_id] = pairs
        return current

    def stale_keys(self) -> set[tuple[str, str, str]]:
        """(run id, question id, content key) of committed rows that are not in their run's current
        question set: a question removed from the set, or answered before its text or ground truth
        changed. Their rows are kept (adding the question back reuses them) but not read.

        Remembered per folder until a marker, run row or question set is written: every table
        read asks, and a page reads several tables of a folder of a thousand runs."""
        signature = tuple((folder, entry.stem, entry.tag) for folder in (COMMITS, "runs", "questions")
                          for entry in self.files.list(folder, ".json" if folder == COMMITS else ".parquet"))
        known = _STALE.get(str(self.root))
        if known is not None and known[0] == signature:
            return known[1]
        stale = self._stale_keys()
        _STALE[str(self.root)] = (signature, stale)
        return stale

    def _stale_keys(self) -> set[tuple[str, str, str]]:
        current = self.current_keys()
        stale: set[tuple[str, str, str]] = set()
        if not current:
            return stale
        # question id -> its content keys in the set, one lookup per question set (runs share them)
        lookups: dict[int, dict[str, set[str]]] = {}
        for _, record in self._unchecked_markers():
            pairs, keys = current.get(record["run_id"]), record.get("question_keys")
            if pairs is None or not keys:  # parts written before keys: their rows are never stale
                continue
            if pairs.issuperset(zip(record["question_ids"], keys)):
                continue  # the usual case, tested in one pass in C: every committed row is current
            lookup = lookups.get(id(pairs))
            if lookup is None:
                lookup = lookups[id(pairs)] = {}
                for qid, key in pairs:
                    lookup.setdefault(qid, set()).add(key)
            stale.update((record["run_id"], qid, key) for qid, key in zip(record["question_ids"], keys)
                         if key is not None and key not in lookup.get(qid, ()))
        return stale

    def committed_parts(self) -> set[str]:
        """Parts with a commit marker, less those a compacted part replaces (left behind by a
        compaction that stopped before removing them)."""
        parts = {entry.stem for entry in self.files.list(COMMITS, ".json")}
        by_run: dict[str, list[str]] = {}
        for part in parts:
            by_run.setdefault(part.rsplit("-", 1)[0], []).append(part)
        replaced: set[str] = set()
        # Only a run with a compacted part and others beside it can have leftovers: a finished,
        # compacted run has one marker, which is not read here.
        for run_parts in by_run.values():
            if len(run_parts) < 2:
                continue
            for part in run_parts:
                if part.rsplit("-", 1)[-1].startswith(COMPACTED) and (record := self._read_marker(part)) is not None:
                    replaced.update(record.get("replaces", []))
        return parts - replaced

    def _parts(self, name: str, run_ids: list[str] | None = None) -> list[Entry]:
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
            committed = {part for part in committed if part.rsplit("-", 1)[0] in wanted}
        return committed

    def _note_missing(self, name: str, absent: set[str], run_ids: list[str] | None) -> None:
        """Name the committed parts of ``name`` that have no file. Listed again first: a compaction
        removes the old markers, then their parts, between this read's two listings."""
        listed = {entry.stem for entry in self.files.list(name, ".parquet")}
        for part in sorted(absent & self._committed_of(run_ids) - listed):
            note(self, f"{name}/{part}.parquet", MISSING)

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
        parts = self._parts(name, run_ids)
        if name == "questions":
            parts = self._question_sets(parts, run_ids)
        if not parts and as_arrow:
            return _read_schema(name, categorical).empty_table().select(columns)
        if not parts:
            table = empty_table(name) if name != "runs" else pd.DataFrame({"run_id": pd.Series(dtype="string")})
            return table if columns is None else table[columns]
        fs = self.files.filesystem
        if name == "runs":  # one small file per run, columns differ by component: let arrow align them
            signature = (str(self.root), tuple((entry.stem, entry.tag) for entry in parts))
            if _RUNS.get(signature[0], (None,))[0] != signature:
                from ragkit.merged import copied_parts, merged_copy, merged_runs

                copy = merged_copy(self, "runs")
                table = None
                if copy is not None and copy.parts == dict(signature[1]):
                    table = self._read_copy(copy.entry, "runs")
                    if table is not None and copied_parts(table.schema) != copy.parts:  # replaced since listed
                        table = None
                if table is None:
                    tables = self.read_files(name, parts)
                    if not tables:
                        return pd.DataFrame({"run_id": pd.Series(dtype="string")})
                    table = merged_runs(tables)
                _RUNS[signature[0]] = (signature, table.to_pandas())
            return _RUNS[signature[0]][1].copy()
        if name == "questions":  # question sets of several plans may share questions
            frames = [_conform(table.to_pandas(), name) for table in self.read_files(name, parts)]
            if not frames:
                return empty_table(name) if columns is None else empty_table(name)[columns]
            frame = pd.concat(frames, ignore_index=True)
            return frame.drop_duplicates("question_id", keep="last", ignore_index=True)
        # Part tables share one schema: one multi-file read is several times faster than a concat.
        import pyarrow as pa
        import pyarrow.dataset as ds

        schema = _read_schema(name, categorical)
        options = ds.ParquetReadOptions(dictionary_columns=list(categorical))
        where = ds.field("metric").isin(list(metrics)) if metrics is not None else None
        if question_id is not None:
            one = (ds.field("question_id") == question_id) | ds.field("question_id").is_null()
            where = one if where is None else where & one
        stale = self.stale_keys()
        tables = []
        if question_id is None and columns is not None and "question_key" not in columns:
            merged, parts = self._read_merged(name, parts, stale, columns, categorical, metrics)
            tables = [merged] if merged is not None else []
        parts = readable_parts(self, name, parts)  # each part opened from its own file is checked
        if not parts and not tables:
            return self._read(name, categorical, metrics, columns, [], question_id, as_arrow)  # no part readable
        if parts:
            dataset = ds.dataset([entry.path for entry in parts], format=ds.ParquetFileFormat(read_options=options),
                                 schema=schema, filesystem=fs)
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

    def read_files(self, name: str, entries: list[Entry]) -> list:
        """Whole files of the runs or questions table as Arrow tables; one Arrow cannot read is
        left out and named (``ragkit run`` writes its run's rows and question set again)."""
        import pyarrow as pa

        tables = []
        for entry in entries:
            try:
                tables.append(_read_file(entry, self.files.filesystem))
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
            table = _read_file(entry, self.files.filesystem)
        except FileNotFoundError:  # removed since listed
            return None
        except (pa.ArrowException, OSError, ValueError) as error:
            self._note_copy(name, error)
            return None
        return table

    def _note_copy(self, name: str, error: Exception | None) -> None:
        from ragkit.merged import MERGED

        note(self, f"{MERGED}/{name}.parquet", None if error is None else f"{type(error).__name__}")

    def _read_merged(self, name: str, parts: list[Entry], stale: set[tuple[str, str, str]], columns: list[str],
                     categorical: tuple[str, ...], metrics: list[str] | None):
        """(the rows of ``parts`` its merged copy holds, of ``metrics`` only when given, or None;
        the parts left to read from their own files): see ragkit.merged. A copy that cannot be
        read is ignored (and named): every part is read from its own file."""
        import pyarrow as pa

        try:
            return self._read_merged_copy(name, parts, stale, columns, categorical, metrics)
        except FileNotFoundError:  # replaced since listed
            return None, parts
        except (pa.ArrowException, OSError, ValueError) as error:
            self._note_copy(name, error)
            return None, parts

    def _read_merged_copy(self, name: str, parts: list[Entry], stale: set[tuple[str, str, str]], columns: list[str],
                          categorical: tuple[str, ...], metrics: list[str] | None):
        from ragkit.merged import MERGED_TABLES, PART_COLUMN, copied_parts, merged_copy

        copy = merged_copy(self, name) if name in MERGED_TABLES else None
        if copy is None:
            return None, parts
        stale_runs = {run_id for run_id, _, _ in stale}
        covered = [entry for entry in parts
                   if copy.parts.get(entry.stem) == entry.tag and entry.stem.rsplit("-", 1)[0] not in stale_runs]
        if not covered:
            return None, parts
        import pyarrow.parquet as pq

        stems = {entry.stem for entry in covered}
        others = len(stems) < len(copy.parts)  # the copy holds other runs' parts, or replaced ones
        dictionaries = list(dict.fromkeys([*categorical, *(["metric"] if metrics is not None else []),
                                           *([PART_COLUMN] if others else [])]))
        file = pq.ParquetFile(copy.entry.path, filesystem=self.files.filesystem, read_dictionary=dictionaries,
                              page_checksum_verification=True)
        if copied_parts(file.schema_arrow) != copy.parts:  # replaced since listed: read the parts
            return None, parts
        groups, mixed = _row_groups(file, metrics)
        read = list(dict.fromkeys([*columns, *(["metric"] if mixed else []), *([PART_COLUMN] if others else [])]))
        if not set(read) <= set(file.schema_arrow.names):  # written before a column existed: read the parts
            return None, parts
        table = file.read_row_groups(groups, columns=read)
        if mixed:
            table = table.filter(_member(table["metric"], metrics or []))
        if others:
            table = table.filter(_member(table[PART_COLUMN], stems))
        return table.select(columns), [entry for entry in parts if entry.stem not in stems]

    def committed_entries(self, name: str) -> list[Entry]:
        """The committed parts of a part table that pass their check (the files a reader of every
        run opens, and a merged copy copies)."""
        return readable_parts(self, name, self._parts(name))

    def merge(self, min_parts: int = 1) -> dict[str, int]:
        """Write the merged read copies that are out of date (ragkit.merged), when the folder has
        at least ``min_parts`` committed score parts; the caller holds ``writer_lock``. Table ->
        parts copied."""
        from ragkit.merged import merge

        if len(self.committed_entries("scores")) < min_parts:
            return {}
        return merge(self)

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
        for part, run_id, metrics in self._marker_metrics():
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
            readable = readable_parts(self, "scores", self._parts("scores"))
            parts = [entry.path for entry in readable if entry.stem in wanted]
            if parts:
                dataset = ds.dataset(parts, format="parquet", schema=arrow_schema("scores"),
                                     filesystem=self.files.filesystem)
                found = pc.unique(dataset.to_table(columns=["metric"]).column("metric")).to_pylist()
                names.update(str(n) for n in found if n is not None)
        return sorted(names)

    def exists(self) -> bool:
        return self.files.exists("runs")


def _read_schema(name: str, categorical: tuple[str, ...]):
    """A part table's Arrow schema as read: given, not inferred, so parts written before a
    column existed read as nulls; ``categorical`` columns as dictionaries."""
    import pyarrow as pa

    return pa.schema([pa.field(f.name, pa.dictionary(pa.int32(), pa.string())) if f.name in categorical else f
                      for f in arrow_schema(name)])


def _row_groups(file, metrics: list[str] | None) -> tuple[list[int], bool]:
    """The row groups of a merged copy that can hold rows of ``metrics`` (all when None), by their
    statistics, and whether some of them hold other metrics' rows too. Chosen here: a dataset
    filter on a column read as a dictionary does not skip row groups."""
    metadata = file.metadata
    if metrics is None:
        return list(range(metadata.num_row_groups)), False
    column = file.schema_arrow.get_field_index("metric")
    wanted = set(metrics)
    groups, mixed = [], False
    for group in range(metadata.num_row_groups):
        stats = metadata.row_group(group).column(column).statistics
        if stats is None or not stats.has_min_max:
            groups.append(group)
            mixed = True
        elif stats.min == stats.max:  # one metric's rows, as ragkit.merged writes them
            if stats.min in wanted:
                groups.append(group)
        elif any(stats.min <= metric <= stats.max for metric in wanted):
            groups.append(group)
            mixed = True
    return groups, mixed


def _member(column, values):
    """A boolean mask of the rows of a dictionary ``column`` whose value is in ``values``: decided
    once per dictionary entry, then taken by each row's index."""
    import pyarrow as pa
    import pyarrow.compute as pc

    wanted = set(values)
    masks = []
    for chunk in column.chunks:
        per_entry = np.array([value in wanted for value in chunk.dictionary.to_pylist()], dtype=bool)
        mask = per_entry[pc.fill_null(chunk.indices, 0).to_numpy()] if len(per_entry) else np.zeros(len(chunk), bool)
        if chunk.null_count:
            mask &= chunk.is_valid().to_numpy(zero_copy_only=False)
        masks.append(pa.array(mask))
    return pa.chunked_array(masks, pa.bool_())


def _conform(frame: pd.DataFrame, name: str) -> pd.DataFrame:
    """Exactly the table's columns in its dtypes; a column the writer did not fill is null (0 for counts)."""
    schema = SCHEMAS[name]
    frame = frame.copy()
    for column, dtype in schema.items():
        if column not in frame.columns:
            frame[column] = 0 if dtype == "int64" else (False if dtype == "bool" else None)
    frame = frame[list(schema)]
    fills = {c: 0 for c, d in schema.items() if d == "int64"} | {c: False for c, d in schema.items() if d == "bool"}
    return frame.fillna(fills).astype(schema)


def arrow_schema(name: str):
    import pyarrow as pa

    return pa.schema([(column, getattr(pa, _ARROW_TYPES[dtype])()) for column, dtype in SCHEMAS[name].items()])
