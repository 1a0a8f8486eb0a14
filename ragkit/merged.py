"""Merged read copies of a results folder's part tables: one file to open instead of one per run.

A page over 1,000 finished runs opens 1,000 parts per table and decodes every row of each to find
the few metrics it shows: 67 million score rows at 1,000 runs x 1,000 questions, about 2.5 s
before any number is computed. ``merge`` writes, per table in ``MERGED_TABLES``, one Parquet file
holding the rows of every committed part, tagged with their part, in row groups of one metric
each for ``scores``, so that reading a few metrics skips the others' row groups by their
statistics. The file's metadata names the parts it copied and their tags.

A merged copy is derived, never the truth (the parts and their commit markers stay):
- readers take from it only the rows of parts still committed with the tag it recorded; a part
  committed, compacted or rewritten since is read from its own file (``ResultStore.read``);
- runs with stale rows (questions edited or removed since, ``ResultStore.stale_keys``) are read
  from their parts, which drop those rows; the copy holds no question keys;
- it is replaced whole (an atomic write locally, one PUT on object storage), so a reader sees
  the old copy or the new one; it is rebuilt at the end of every executed plan and by
  ``ragkit compact``, both holding the folder's writer lock.
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


def merged_columns(name: str) -> list[str]:
    """The columns a merged copy holds: the table's, less the question key, plus its part."""
    from ragkit.results import SCHEMAS

    return [column for column in SCHEMAS[name] if column != "question_key"] + [PART_COLUMN]


def merged_schema(name: str) -> pa.Schema:
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
        metadata = pq.ParquetFile(entry.path, filesystem=store.files.filesystem).schema_arrow.metadata or {}
        parts = dict(json.loads(metadata[INDEX_KEY]))
    except (OSError, KeyError, TypeError, ValueError):  # replaced while read, or not a copy this code wrote
        return None
    copy = MergedCopy(entry, parts)
    _INDEX[key] = (entry.tag, copy)
    return copy


def merge(store: ResultStore, tables: tuple[str, ...] = MERGED_TABLES) -> dict[str, int]:
    """Write the merged copy of each table whose committed parts changed since its copy; table ->
    parts copied (tables already up to date are left out). The caller holds ``writer_lock``."""
    written: dict[str, int] = {}
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

    with pq.ParquetWriter(buffer, schema) as writer:
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
