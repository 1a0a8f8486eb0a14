"""Staleness: which committed rows no longer answer their run's current question set.

Results are keyed per (run, question content): a question removed from its set, or answered
before its text or ground truth changed, leaves rows that are kept (adding the question back
reuses them) but not read. ``stale_keys`` names them; readers drop them
(``ragkit.results.result_store``), and ``ragkit run`` answers the changed questions again.
"""

from __future__ import annotations

import pandas as pd

from ragkit.results.copies import checked_markers
from ragkit.results.parts import PartStore
from ragkit.results.schema import COMMITS

# results location -> (what its markers, runs and question sets were, the stale keys they gave)
_STALE: dict[str, tuple[tuple, set[tuple[str, str, str]]]] = {}


def current_keys(store: PartStore) -> dict[str, set[tuple[str, str]]]:
    """run id -> the (question id, content key) pairs of its current question set: the set
    its ``runs`` row names. Runs whose question set records no keys are left out."""
    runs = store.runs_table()
    if runs.empty or "questions_key" not in runs.columns:
        return {}
    sets = {entry.stem: entry for entry in store.files.list("questions", ".parquet")}
    by_set: dict[str, set[tuple[str, str]] | None] = {}
    current: dict[str, set[tuple[str, str]]] = {}
    for run_id, key in zip(runs["run_id"], runs["questions_key"]):
        if pd.isna(key):
            continue
        if key not in by_set:
            read = store.read_files("questions", [sets[key]]) if key in sets else []
            table = read[0] if read else None
            by_set[key] = (set(zip(table["question_id"].to_pylist(), table["question_key"].to_pylist()))
                           if table is not None and "question_key" in table.column_names
                           and table["question_key"].null_count == 0 else None)
        if (pairs := by_set[key]) is not None:
            current[run_id] = pairs
    return current


def stale_keys(store: PartStore) -> set[tuple[str, str, str]]:
    """(run id, question id, content key) of committed rows that are not in their run's current
    question set: a question removed from the set, or answered before its text or ground truth
    changed. Their rows are kept (adding the question back reuses them) but not read.

    Remembered per folder until a marker, run row or question set is written: every table
    read asks, and a page reads several tables of a folder of a thousand runs."""
    signature = tuple((folder, entry.stem, entry.tag) for folder in (COMMITS, "runs", "questions")
                      for entry in store.files.list(folder, ".json" if folder == COMMITS else ".parquet"))
    known = _STALE.get(str(store.root))
    if known is not None and known[0] == signature:
        return known[1]
    stale = _stale_keys(store)
    _STALE[str(store.root)] = (signature, stale)
    return stale


def _stale_keys(store: PartStore) -> set[tuple[str, str, str]]:
    current = current_keys(store)
    stale: set[tuple[str, str, str]] = set()
    if not current:
        return stale
    # question id -> its content keys in the set, one lookup per question set (runs share them)
    lookups: dict[int, dict[str, set[str]]] = {}
    for _, record in _unchecked_markers(store):
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


def _unchecked_markers(store: PartStore) -> list[tuple[str, dict]]:
    """The markers ``stale_keys`` has to read: all but those the last merge found current
    whose marker and run's question set are unchanged since (``ragkit.results.copies.CheckedMarker``):
    a thousand markers of a thousand question keys each take a second to read and check."""
    checked = checked_markers(store)
    if not checked:
        return store.committed_markers()
    tags = {entry.stem: entry.tag for entry in store.files.list(COMMITS, ".json")}
    set_tags = {entry.stem: entry.tag for entry in store.files.list("questions", ".parquet")}
    runs = store.runs_table()
    run_sets = dict(zip(runs["run_id"], runs["questions_key"])) if "questions_key" in runs.columns else {}
    found = []
    for part in sorted(store.committed_parts()):
        known = checked.get(part)
        if (known is not None and known.tag == tags.get(part) and run_sets.get(known.run_id) == known.questions_key
                and set_tags.get(known.questions_key) == known.questions_tag):
            store.remember_metrics(part, known.tag, {"run_id": known.run_id, "metrics": known.metrics})
            continue
        record = store.marker_record(part)[0]
        if record is not None:
            store.remember_metrics(part, tags.get(part, ""), record)
            found.append((part, record))
    return found


def marker_metrics(store: PartStore) -> list[tuple[str, str, list[str] | None]]:
    """(part, run id, the metrics its marker lists or None) of every committed part: remembered
    per marker tag, so a page that asked ``stale_keys`` does not read a thousand markers again."""
    tags = {entry.stem: entry.tag for entry in store.files.list(COMMITS, ".json")}
    committed = sorted(store.committed_parts())
    if any((store.remembered_metrics(part) or ("",))[0] != tags.get(part, "") for part in committed):
        stale_keys(store)  # remembers every marker, those the last merge checked without reading them
    found = []
    for part in committed:
        known = store.remembered_metrics(part)
        if known is None or known[0] != tags.get(part, ""):
            record = store.marker_record(part)[0]
            if record is None:
                continue
            known = store.remember_metrics(part, tags.get(part, ""), record)
        found.append((part, known[1], known[2]))
    return found
