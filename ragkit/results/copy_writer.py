"""Writing the merged read copies of a results folder (what they are and how they are read:
``ragkit.results.copies``).

``merge`` rewrites a table's copy only when its committed parts changed since, and records in
``markers.json`` the commit markers found current (``CheckedMarker``), so ``stale_keys`` need
not read them again. It runs at the end of every executed plan (from
``executor.MERGE_MIN_PARTS`` parts), by ``ragkit compact`` and ``ragkit check --repair``, each
holding the folder's writer lock.
"""

from __future__ import annotations

import io
import json
from typing import TYPE_CHECKING

import numpy as np

from ragkit.results.copies import (
    CHECKED_MARKERS,
    INDEX_KEY,
    MERGED_TABLES,
    PART_COLUMN,
    ROW_GROUP_ROWS,
    merged_copy,
    merged_runs,
    merged_schema,
)
from ragkit.results.parts import PartStore
from ragkit.results.schema import COMMITS, MERGED, arrow_schema
from ragkit.results.staleness import marker_metrics, stale_keys
from ragkit.storage.folders import Entry

if TYPE_CHECKING:  # pyarrow is imported when a copy is written, not at CLI start
    import pyarrow as pa


def merge(store: PartStore, tables: tuple[str, ...] = MERGED_TABLES) -> dict[str, int]:
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


def _write_checked_markers(store: PartStore) -> bool:
    """Record every committed marker whose rows are all current (see CheckedMarker); False when
    the record is already what it would be."""
    import pandas as pd

    # Tags first: a question set or marker rewritten after this listing fails the check later.
    marker_tags = {entry.stem: entry.tag for entry in store.files.list(COMMITS, ".json")}
    set_tags = {entry.stem: entry.tag for entry in store.files.list("questions", ".parquet")}
    stale_runs = {run_id for run_id, _, _ in stale_keys(store)}
    runs = store.runs_table()
    run_sets = (dict(zip(runs["run_id"], runs["questions_key"])) if "questions_key" in runs.columns else {})
    names: dict[str, int] = {}
    parts = {}
    # What stale_keys just read or found checked, not every marker read again.
    for part, run_id, metrics in marker_metrics(store):
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


def _merge_runs(store: PartStore) -> int:
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


def _merged_bytes(store: PartStore, name: str, parts: list[Entry]) -> bytes:
    import pyarrow as pa
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

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
