"""Compaction: a finished run's parts merged into one per table, so a reader opens one file per
run and table instead of one per shard.

Crash-safe: the compacted parts and their marker (which names the parts it replaces) are written
first, then the old markers and parts are removed; until then readers skip what the marker
replaces (``PartStore.committed_parts``). A run killed after its last commit but before or during
its compaction is finished by the next ``ragkit run`` (``finish_compactions``), so a resumed
folder ends with the files an uninterrupted run leaves.
"""

from __future__ import annotations

from ragkit.hashing import content_key
from ragkit.results.integrity import readable_parts
from ragkit.results.parts import PartStore
from ragkit.results.schema import COMMITS, COMPACTED, FILES_KEY, PART_TABLES, RUN_ROWS_KEY, arrow_schema, run_of_part


def compact_run(store: PartStore, run_id: str) -> bool:
    """Merge a run's committed parts into one per table (once the run is finished); False when
    there was nothing to merge."""
    parts = sorted(part for part in store.committed_parts() if run_of_part(part) == run_id)
    records = [record for part in parts if (record := store.marker_record(part)[0]) is not None]
    keyed = {"question_keys" in record for record in records}
    if len(parts) < 2 or len(records) < len(parts) or len(keyed) > 1:
        return False  # one part already, one removed meanwhile, or parts from before and after keys
    for name in PART_TABLES:  # a damaged part stays as it is, for the next run to set aside
        listed = [entry for entry in store.files.list(name, ".parquet") if entry.stem in set(parts)]
        if len(listed) < len(parts) or len(readable_parts(store, name, listed)) < len(parts):
            return False
    merged = f"{run_id}-{COMPACTED}{content_key(parts, length=12)}"
    files = {}
    for name in PART_TABLES:
        files[name] = store.write_parquet(f"{name}/{merged}.parquet", _read_parts(store, name, parts).to_pandas())
    # The merged marker says what every part said: parts written before question keys, or before
    # markers listed metrics (older results), give a marker without them, as theirs are.
    marker: dict = {"run_id": run_id, "question_ids": [qid for record in records for qid in record["question_ids"]],
                    FILES_KEY: files}
    if keyed == {True}:
        marker["question_keys"] = [key for record in records for key in record["question_keys"]]
    if all(RUN_ROWS_KEY in record for record in records):  # else read as carrying them, as its parts were
        marker[RUN_ROWS_KEY] = any(record[RUN_ROWS_KEY] for record in records)
    if all("metrics" in record for record in records):
        marker["metrics"] = sorted({m for record in records for m in record["metrics"]})
    store.write_json(f"{COMMITS}/{merged}.json", {**marker, "replaces": parts})
    for part in parts:
        store.files.delete(f"{COMMITS}/{part}.json")
    for part in parts:
        for name in PART_TABLES:
            store.files.delete(f"{name}/{part}.parquet")
    return True


def finish_compactions(store: PartStore, finished: set[str]) -> list[str]:
    """Compact the ``finished`` runs that still have several parts (killed between their last commit
    and their compaction), and remove what a compaction killed midway left behind: the markers and
    files of the parts it replaced, or its own files without their marker. Only files no reader
    sees are removed. The caller holds ``writer_lock``. The runs compacted now."""
    if not finished:
        return []
    listed = {entry.stem for entry in store.files.list(COMMITS, ".json")}
    committed = store.committed_parts()
    # Listed but not committed: replaced by a compacted part whose marker names them (their rows
    # are in it); listed before compacting, so this call's own compacted parts are not among them.
    replaced = sorted(part for part in listed - committed if run_of_part(part) in finished)
    parts_of: dict[str, int] = {}
    for part in committed:
        parts_of[run_of_part(part)] = parts_of.get(run_of_part(part), 0) + 1
    compacted = [run_id for run_id in sorted(finished) if parts_of.get(run_id, 0) > 1 and compact_run(store, run_id)]
    for part in replaced:
        store.files.delete(f"{COMMITS}/{part}.json")
    # Part files without a marker, of a finished run: a replaced part whose marker went first, or
    # a compacted part whose marker was never written. No reader sees them. Other unmarked parts
    # (a shard written but never committed) are ``ragkit check --repair``'s to remove.
    markers = {entry.stem for entry in store.files.list(COMMITS, ".json")}
    unmarked = {(name, entry.stem) for name in PART_TABLES for entry in store.files.list(name, ".parquet")
                if entry.stem not in markers and run_of_part(entry.stem) in finished}
    if unmarked:  # the compacted markers are read only when something is left over
        left_by_compaction = {part for part in markers if run_of_part(part) in finished and _compacted(part)}
        for part in list(left_by_compaction):
            record = store.marker_record(part)[0]
            left_by_compaction.update(record.get("replaces", []) if record is not None else [])
        for name, part in sorted(unmarked):
            if part in left_by_compaction or _compacted(part):
                store.files.delete(f"{name}/{part}.parquet")
    return compacted


def _compacted(part: str) -> bool:
    """A part a compaction wrote (``<run id>-<COMPACTED><key>``)."""
    return part.rsplit("-", 1)[-1].startswith(COMPACTED)


def compact(store: PartStore) -> tuple[int, int]:
    """Compact every run of the folder that has more than one part: what a run that finished
    compacts itself, for folders written before compaction existed or runs never finished.
    The caller holds ``writer_lock``. (runs compacted, parts they had)."""
    parts_of: dict[str, int] = {}
    for part in store.committed_parts():
        run_id = run_of_part(part)
        parts_of[run_id] = parts_of.get(run_id, 0) + 1
    compacted = [run_id for run_id, count in sorted(parts_of.items()) if count > 1 and compact_run(store, run_id)]
    return len(compacted), sum(parts_of[run_id] for run_id in compacted)


def _read_parts(store: PartStore, name: str, parts: list[str]):
    """The given parts of a part table as one Arrow table in the table's schema."""
    import pyarrow.dataset as ds

    paths = [store.files.path(f"{name}/{part}.parquet") for part in parts]
    dataset = ds.dataset(paths, format="parquet", schema=arrow_schema(name), filesystem=store.files.filesystem)
    return dataset.to_table()
