"""Merged read copies of a results folder's part tables: one file to open instead of one per run.
This module says what a copy is and reads from it; ``ragkit.results.copy_writer`` writes them.

A page over 1,000 finished runs opens 1,000 parts per table and decodes every row of each to find
the few metrics it shows: 67 million score rows at 1,000 runs x 1,000 questions, about 2.5 s
before any number is computed. A copy holds, per table in ``MERGED_TABLES``, the rows of every
committed part, tagged with their part, in row groups of one metric each for ``scores``, so that
reading a few metrics skips the others' row groups by their statistics. The file's metadata
names the parts it copied and their tags.

The runs table (a file per run) gets a merged copy too, read whole when every run file is still
the one it copied.

A merged copy is derived, never the truth (the parts and their commit markers stay):
- readers take from it only the rows of parts still committed with the tag it recorded; a part
  committed, compacted or rewritten since is read from its own file (``read_copied_rows``);
- runs with stale rows (questions edited or removed since, ``ragkit.results.staleness``) are read
  from their parts, which drop those rows; the copy holds no question keys;
- it is replaced whole (an atomic write locally, one PUT on object storage), so a reader sees
  the old copy or the new one, and checks once it has opened it that it is the one it listed.

``markers.json`` records the commit markers found current at the merge (``CheckedMarker``), so
``stale_keys`` need not read a thousand markers again while they and their question sets are
unchanged.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ragkit.results.integrity import ResultsFolder, note
from ragkit.results.schema import MERGED, arrow_schema, run_of_part
from ragkit.storage.folders import Entry

if TYPE_CHECKING:  # pyarrow is imported when a copy is read, not at CLI start
    import pyarrow as pa

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

    fields = [field for field in arrow_schema(name) if field.name != "question_key"]
    return pa.schema([*fields, pa.field(PART_COLUMN, pa.string())])


# (results location, table) -> (the merged file's tag, what it copied)
_INDEX: dict[tuple[str, str], tuple[str, MergedCopy]] = {}


def merged_copy(store: ResultsFolder, name: str) -> MergedCopy | None:
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


def checked_markers(store: ResultsFolder) -> dict[str, CheckedMarker]:
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




def note_unreadable_copy(store: ResultsFolder, name: str, error: Exception | None) -> None:
    """Remember (``error``) or forget (None) that table ``name``'s merged copy could not be read."""
    note(store, f"{MERGED}/{name}.parquet", None if error is None else f"{type(error).__name__}")


def read_copied_rows(store: ResultsFolder, name: str, parts: list[Entry], stale: set[tuple[str, str, str]],
                     columns: list[str], categorical: tuple[str, ...], metrics: list[str] | None):
    """(the rows of ``parts`` the merged copy of ``name`` holds, of ``metrics`` only when given, or
    None; the parts left to read from their own files). A copy that cannot be read is ignored
    (and named): every part is read from its own file."""
    import pyarrow as pa

    try:
        return _read_copied_rows(store, name, parts, stale, columns, categorical, metrics)
    except FileNotFoundError:  # replaced since listed
        return None, parts
    except (pa.ArrowException, OSError, ValueError) as error:
        note_unreadable_copy(store, name, error)
        return None, parts


def _read_copied_rows(store: ResultsFolder, name: str, parts: list[Entry], stale: set[tuple[str, str, str]],
                      columns: list[str], categorical: tuple[str, ...], metrics: list[str] | None):
    copy = merged_copy(store, name) if name in MERGED_TABLES else None
    if copy is None:
        return None, parts
    stale_runs = {run_id for run_id, _, _ in stale}
    covered = [entry for entry in parts
               if copy.parts.get(entry.stem) == entry.tag and run_of_part(entry.stem) not in stale_runs]
    if not covered:
        return None, parts
    import pyarrow.parquet as pq

    stems = {entry.stem for entry in covered}
    others = len(stems) < len(copy.parts)  # the copy holds other runs' parts, or replaced ones
    dictionaries = list(dict.fromkeys([*categorical, *(["metric"] if metrics is not None else []),
                                       *([PART_COLUMN] if others else [])]))
    file = pq.ParquetFile(copy.entry.path, filesystem=store.files.filesystem, read_dictionary=dictionaries,
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
        elif stats.min == stats.max:  # one metric's rows, as ragkit.results.copy_writer writes them
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
