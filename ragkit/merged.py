"""Merged read copies of a results folder's part tables: one file to open instead of one per run.

A page over 1,000 finished runs opens 1,000 parts per table and decodes every row of each to find
the few metrics it shows: 67 million score rows at 1,000 runs x 1,000 questions, about 2.5 s
before any number is computed. ``merge`` writes, per table in ``MERGED_TABLES``, one Parquet file
holding the rows of every committed part, tagged with their part, in row groups of one metric
each for ``scores``, so that reading a few metrics skips the others' row groups by their
statistics. The file's metadata names the parts it copied and their tags.

The runs table (a file per run) gets a merged copy too, read whole when every run file is still
the one it copied.

A merged copy is derived, never the truth (the parts and their commit markers stay):
- readers take from it only the rows of parts still committed with the tag it recorded; a part
  committed, compacted or rewritten since is read from its own file (``ResultStore.read``);
- runs with stale rows (questions edited or removed since, ``ResultStore.stale_keys``) are read
  from their parts, which drop those rows; the copy holds no question keys;
- it is replaced whole (an atomic write locally, one PUT on object storage), so a reader sees
  the old copy or the new one, and checks once it has opened it that it is the one it listed;
  it is rebuilt at the end of every executed plan (from ``executor.MERGE_MIN_PARTS`` parts) and
  by ``ragkit compact``, both holding the folder's writer lock.

``markers.json`` records the commit markers found current at the merge (``CheckedMarker``), so
``stale_keys`` need not read a thousand markers again while they and their question sets are
unchanged.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pyarrow as pa

    from ragkit.folders import Entry
    from ragkit.results import ResultStore

from ragkit.integrity import note

MERGED = "_merged"
# What the Compare page reads whole; retrievals and answers are read a question at a time.
MERGED_TABLES = ("scores", "stages", "judgements")
PART_COLUMN = "part"
# Rows per row group: a metric's rows of a thousand runs span a few; buffered rows stay bounded.
ROW_GROUP_ROWS = 1 << 16
INDEX_KEY = b"ragkit.merged_parts"


@dataclass(frozen=True)
class MergedCopy:
    """One table's merged file and the (part -> tag) it copied."""

    entry: Entry
    parts: dict[str, str]


def merged_schema(name: str) -> pa.Schema:
    """The columns a merged copy holds: the table's, less the question key, plus its part."""
    import pyarrow as pa

    from ragkit.results import arrow_schema

    fields = [field for field in arrow_schema(name) if field.name != "question_key"]
    return pa.schema([*fields, pa.field(PART_COLUMN, pa.string())])


# (results location, table) -> (the merged file's tag, what it copied)
_INDEX: dict[tuple[str, str], tuple[str, MergedCopy]] = {}


def merged_copy(store: ResultStore, name: str) -> MergedCopy | None:
    """The current merged copy of table ``name``, None when there is none (or it cannot be read)."""
    import pyarrow.parquet as pq

    entry = next((e for e in store.files.list(MERGED, ".parquet") if e.stem == name), None)
    if entry is None:
        return None
    key = (str(store.root), name)
    known = _INDEX.get(key)
    if known is not None and known[0] == entry.tag:
        return known[1]
    try:
        parts = copied_parts(pq.ParquetFile(entry.path, filesystem=store.files.filesystem).schema_arrow)
    except FileNotFoundError:  # replaced or removed while read
        return None
    except (OSError, ValueError) as error:  # damaged, or not Parquet (ArrowInvalid): ignored, and named
        note(store, f"{MERGED}/{name}.parquet", f"{type(error).__name__}: not readable as Parquet")
        return None
    if parts is None:
        return None
    copy = MergedCopy(entry, parts)
    _INDEX[key] = (entry.tag, copy)
    return copy


def merged_runs(tables: list[pa.Table]) -> pa.Table:
    """The runs table from its files (a file per run, whose columns differ by component)."""
    import pyarrow as pa

    return pa.concat_tables(tables, promote_options="default")


def copied_parts(schema: pa.Schema) -> dict[str, str] | None:
    """part -> tag a merged copy's schema says it copied; None for a file this code did not write."""
    try:
        return dict(json.loads((schema.metadata or {})[INDEX_KEY]))
    except (KeyError, TypeError, ValueError):
        return None


def merge(store: ResultStore, tables: tuple[str, ...] = MERGED_TABLES) -> dict[str, int]:
    """Write the merged copy of each table whose committed parts changed since its copy, and of
    the runs table (a file per run); table -> parts copied (tables already up to date are left
    out). The caller holds ``writer_lock``."""
    written: dict[str, int] = {}
    runs = _merge_runs(store)
    if runs:
        written["runs"] = runs
    _write_checked_markers(store)
    for name in tables:
        parts = store.committed_entries(name)
        copy = merged_copy(store, name)
        if copy is not None and copy.parts == {entry.stem: entry.tag for entry in parts}:
            continue
        if not parts:
            if copy is not None:
                store.files.delete(f"{MERGED}/{name}.parquet")
            continue
        store.files.write_bytes(f"{MERGED}/{name}.parquet", _merged_bytes(store, name, parts))
        written[name] = len(parts)
    return written


CHECKED_MARKERS = "markers.json"
# (results location) -> (the checked-markers file's tag, its parts)
_CHECKED: dict[str, tuple[str, dict[str, CheckedMarker]]] = {}


@dataclass(frozen=True)
class CheckedMarker:
    """What a commit marker said when the folder was last merged, and that none of its rows was
    stale against its run's question set then: true for as long as the marker (its tag) and
    that question set (its name and tag) are unchanged, so readers need not read the marker."""

    tag: str
    run_id: str
    questions_key: str
    questions_tag: str
    metrics: list[str] | None


def checked_markers(store: ResultStore) -> dict[str, CheckedMarker]:
    """part -> its CheckedMarker, from the last merge; empty when there is none or it is unreadable."""
    entry = next((e for e in store.files.list(MERGED, ".json") if e.stem == CHECKED_MARKERS[:-5]), None)
    if entry is None:
        return {}
    known = _CHECKED.get(str(store.root))
    if known is not None and known[0] == entry.tag:
        return known[1]
    try:
        document = json.loads(store.files.read_bytes(f"{MERGED}/{CHECKED_MARKERS}"))
        names = document["metrics"]
        parts = {part: CheckedMarker(tag, run_id, questions_key, questions_tag,
                                     None if metrics is None else [names[i] for i in metrics])
                 for part, (tag, run_id, questions_key, questions_tag, metrics) in document["parts"].items()}
    except (OSError, KeyError, TypeError, ValueError, IndexError):  # removed since listed, or not ours
        return {}
    _CHECKED[str(store.root)] = (entry.tag, parts)
    return parts


def _write_checked_markers(store: ResultStore) -> bool:
    """Record every committed marker whose rows are all current (see CheckedMarker); False when
    the record is already what it would be."""
    import pandas as pd

    from ragkit.results import COMMITS

    # Tags first: a question set or marker rewritten after this listing fails the check later.
    marker_tags = {entry.stem: entry.tag for entry in store.files.list(COMMITS, ".json")}
    set_tags = {entry.stem: entry.tag for entry in store.files.list("questions", ".parquet")}
    stale_runs = {run_id for run_id, _, _ in store.stale_keys()}
    runs = store.read("runs")
    run_sets = (dict(zip(runs["run_id"], runs["questions_key"])) if "questions_key" in runs.columns else {})
    names: dict[str, int] = {}
    parts = {}
    # What stale_keys just read or found checked, not every marker read again.
    for part, run_id, metrics in store._marker_metrics():
        questions_key = run_sets.get(run_id)
        if run_id in stale_runs or questions_key is None or pd.isna(questions_key) or questions_key not in set_tags:
            continue
        parts[part] = [marker_tags.get(part, ""), run_id, questions_key, set_tags[questions_key],
                       None if metrics is None else [names.setdefault(m, len(names)) for m in metrics]]
    document = json.dumps({"metrics": list(names), "parts": parts}, sort_keys=True).encode()
    missing: tuple[type[Exception], ...] = (OSError, *store.files.missing_errors)
    try:
        if store.files.read_bytes(f"{MERGED}/{CHECKED_MARKERS}") == document:
            return False
    except missing:
        pass
    store.files.write_bytes(f"{MERGED}/{CHECKED_MARKERS}", document)
    return True


def _merge_runs(store: ResultStore) -> int:
    """Write the runs table's merged copy when a run file changed since; the run files copied."""
    import pyarrow.parquet as pq

    entries = store.files.list("runs", ".parquet")
    copy = merged_copy(store, "runs")
    if not entries or (copy is not None and copy.parts == {entry.stem: entry.tag for entry in entries}):
        return 0
    tables = store.read_files("runs", entries)
    if len(tables) < len(entries):  # a run file Arrow cannot read: no copy, so readers name it
        return 0
    table = merged_runs(tables)
    index = json.dumps([[entry.stem, entry.tag] for entry in entries]).encode()
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), INDEX_KEY: index})
    buffer = io.BytesIO()
    pq.write_table(table, buffer, write_page_checksum=True)
    store.files.write_bytes(f"{MERGED}/runs.parquet", buffer.getvalue())
    return len(entries)


def _merged_bytes(store: ResultStore, name: str, parts: list[Entry]) -> bytes:
    import pyarrow as pa
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    from ragkit.results import arrow_schema

    schema = merged_schema(name)
    index = json.dumps([[entry.stem, entry.tag] for entry in parts]).encode()
    schema = schema.with_metadata({INDEX_KEY: index})
    columns = [column for column in schema.names if column != PART_COLUMN]
    buffer = io.BytesIO()
    pending: dict[str, list[pa.Table]] = {}
    counts: dict[str, int] = {}

    # Page checksums: a reader of a few row groups checks what it reads (``page_checksum_verification``).
    with pq.ParquetWriter(buffer, schema, write_page_checksum=True) as writer:
        def flush(group: str) -> None:
            if pending.get(group):
                writer.write_table(pa.concat_tables(pending.pop(group)), row_group_size=ROW_GROUP_ROWS)
                counts[group] = 0

        for entry in parts:
            # The table's schema, so parts written before a column existed read it as nulls.
            table = ds.dataset([entry.path], format="parquet", schema=arrow_schema(name),
                               filesystem=store.files.filesystem).to_table(columns=columns)
            table = table.append_column(PART_COLUMN, pa.array([entry.stem] * table.num_rows, pa.string()))
            for group, rows in _groups(table, name):
                pending.setdefault(group, []).append(rows)
                counts[group] = counts.get(group, 0) + rows.num_rows
                if counts[group] >= ROW_GROUP_ROWS:
                    flush(group)
        for group in sorted(pending):
            flush(group)
    return buffer.getvalue()


def _groups(table: pa.Table, name: str) -> list[tuple[str, pa.Table]]:
    """A part's rows by the row group they join: one group per metric for scores (a reader of a
    few metrics skips the rest by row group statistics), one group for other tables."""
    import pyarrow.compute as pc

    if name != "scores" or table.num_rows == 0:
        return [("", table)]
    encoded = pc.dictionary_encode(pc.fill_null(table["metric"], "")).combine_chunks()
    codes = encoded.indices.to_numpy(zero_copy_only=False)
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(encoded.dictionary) + 1))
    ordered = table.take(order)
    return [(str(metric), ordered.slice(bounds[i], bounds[i + 1] - bounds[i]))
            for i, metric in enumerate(encoded.dictionary.to_pylist()) if bounds[i + 1] > bounds[i]]
