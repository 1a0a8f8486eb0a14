"""Checking a results folder's parts when they are read, and setting damaged ones aside.

A commit marker records, for each part it commits, the part's size and SHA-256 (``digest``),
taken from the bytes written. A part is checked when it is read: its size from the listing, then
its checksum (once per file version per process: ``verify_entry``). Markers written before
checksums existed record none; their parts are checked by being readable by Arrow instead.

A part that fails its check (or is missing, or whose marker cannot be read) is left out of every
read and named (``problems``): reports and pages show what they could read and say what they
could not. The writer (``ragkit run`` before it plans its work, ``ragkit check --repair``) sets
the damaged shard aside (``set_aside``): its marker and whatever parts it has move into
``_damaged/<time>-<part>/`` with a ``reason.json``, never deleted, so its questions are no longer
committed and the run recomputes exactly them.

The merged read copies (``ragkit.results.copies``) are derived: one that cannot be read is ignored
(its parts are read instead), named, and rebuilt by ``ragkit check --repair``.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ragkit.hashing import bytes_sha256
from ragkit.results.schema import COMMITS, DAMAGED, FILES_KEY, MERGED, PART_TABLES, run_of_part
from ragkit.storage.folders import Entry, Folder

MISSING = "missing"


class ResultsFolder(Protocol):
    """What the checks need of a results folder (``ragkit.results.parts.PartStore`` is one): its
    location and files, and its commit markers. A protocol, so the store can check its parts
    with this module without the two importing each other."""

    root: str | Path
    files: Folder

    def marker_record(self, part: str) -> tuple[dict | None, str | None]: ...

    def committed_parts(self) -> set[str]: ...


# (results location, file path) -> (what was checked: file tag and expected digest, the problem or None)
_VERIFIED: dict[tuple[str, str], tuple[str, str | None]] = {}
# results location -> {relative path: (problem, the file's tag then: "" when absent)} met by reads
_PROBLEMS: dict[str, dict[str, tuple[str, str]]] = {}
# (results location, part) -> (its marker's tag, the digests of its files it records)
_MARKER_FILES: dict[tuple[str, str], tuple[str, dict]] = {}


def digest(data: bytes) -> dict[str, Any]:
    """What a marker records of a part: its size and checksum."""
    return {"bytes": len(data), "sha256": bytes_sha256(data)}


def problem_of(data: bytes, expected: dict | None) -> str | None:
    """Why ``data`` is not the part its marker committed, or None when it is. Without a recorded
    digest (a marker from before checksums), being readable by Arrow is the check."""
    if expected is not None:
        if len(data) != expected.get("bytes"):
            return f"{len(data)} bytes where its commit marker recorded {expected.get('bytes')}"
        if bytes_sha256(data) != expected.get("sha256"):
            return "its checksum differs from the one its commit marker recorded"
        return None
    return unreadable_parquet(data)


def unreadable_parquet(data: bytes) -> str | None:
    """Why Arrow cannot read ``data`` as a Parquet file, or None when it can."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pq.read_table(pa.BufferReader(data))
    except (pa.ArrowException, OSError, ValueError) as error:
        first = (str(error).splitlines() or [""])[0][:200]
        return f"not readable as Parquet ({type(error).__name__}: {first})"
    return None


def verify_entry(store: ResultsFolder, entry: Entry, relative: str, expected: dict | None,
                 fresh: bool = False) -> str | None:
    """The problem of one committed part file (``entry``, at ``relative`` in the folder), or None.
    Remembered per file version (its listing tag) and expected digest, so a page reading a table
    many times reads each part's bytes once; ``fresh`` checks again (``ragkit check``, ``ragkit
    run``: bit rot keeps a file's tag)."""
    if expected is not None and entry.size >= 0 and entry.size != expected.get("bytes"):
        return f"{entry.size} bytes where its commit marker recorded {expected.get('bytes')}"
    key = (str(store.root), entry.path)
    checked = f"{entry.tag}|{json.dumps(expected, sort_keys=True)}"
    known = _VERIFIED.get(key)
    if known is not None and known[0] == checked and not fresh:
        return known[1]
    missing: tuple[type[Exception], ...] = (FileNotFoundError, *store.files.missing_errors)
    try:
        data = store.files.read_bytes(relative)
    except missing:
        return MISSING
    problem = problem_of(data, expected)
    _VERIFIED[key] = (checked, problem)
    return problem


def remember_digests(store: ResultsFolder, part: str, tag: str, record: dict) -> None:
    """Keep what a marker read whole (its file ``tag``) records of its parts' digests."""
    _MARKER_FILES[(str(store.root), part)] = (tag, record.get(FILES_KEY) or {})


def _expected_files(store: ResultsFolder, part: str, tag: str) -> tuple[dict | None, str | None]:
    """(the digests a part's marker records, None) or (None, why the marker cannot be read);
    remembered per marker tag, so a read does not open a marker per part every time."""
    known = _MARKER_FILES.get((str(store.root), part))
    if known is not None and known[0] == tag:
        return known[1], None
    record, problem = store.marker_record(part)
    if record is None:
        return None, problem
    remember_digests(store, part, tag, record)
    return record.get(FILES_KEY) or {}, None


def readable_parts(store: ResultsFolder, name: str, parts: list[Entry], fresh: bool = False) -> list[Entry]:
    """``parts`` of table ``name`` less those that fail their check: each one left out is
    remembered (``note``) for ``PartStore.unreadable`` instead of stopping the read."""
    if not parts:
        return parts
    tags = {entry.stem: entry.tag for entry in store.files.list(COMMITS, ".json")}
    kept = []
    for entry in parts:
        if entry.stem not in tags:  # compacted away since listed: the read retries
            kept.append(entry)
            continue
        files, problem = _expected_files(store, entry.stem, tags[entry.stem])
        if files is None and problem is None:  # removed since listed, as above
            kept.append(entry)
            continue
        relative = f"{name}/{entry.stem}.parquet"
        if problem is None:
            problem = verify_entry(store, entry, relative, (files or {}).get(name), fresh=fresh)
        note(store, relative, problem)
        if problem is None:
            kept.append(entry)
    return kept


def note(store: ResultsFolder, relative: str, problem: str | None) -> None:
    """Remember (or forget, when ``problem`` is None) what a read met at ``relative``, with the
    file's tag: a file replaced since (a part committed again) is no longer that problem."""
    found = _PROBLEMS.setdefault(str(store.root), {})
    if problem is None:
        found.pop(relative, None)
    else:
        found[relative] = (problem, _tag_of(store, relative))


def _tag_of(store: ResultsFolder, relative: str) -> str:
    folder, _, name = relative.rpartition("/")
    stem, _, suffix = name.rpartition(".")
    return next((entry.tag for entry in store.files.list(folder, f".{suffix}") if entry.stem == stem), "")


def noted(store: ResultsFolder) -> dict[str, str]:
    """relative path -> problem of what reads in this process could not read, for the parts still
    committed (a part set aside or recommitted since is no longer a problem)."""
    found = dict(_PROBLEMS.get(str(store.root), {}))  # a copy: other threads' reads note too
    if not found:
        return {}
    committed = store.committed_parts()
    current = {}
    for relative, (problem, tag) in sorted(found.items()):
        folder, _, name = relative.partition("/")
        stem = name.rsplit(".", 1)[0]
        if (folder in (*PART_TABLES, COMMITS) and stem not in committed) or _tag_of(store, relative) != tag:
            continue
        current[relative] = problem
    return current


def warning_lines(store: ResultsFolder) -> list[str]:
    """One line per file a read could not use, naming it and saying what was done instead."""
    lines = []
    for relative, problem in noted(store).items():
        derived = relative.startswith(f"{MERGED}/")
        consequence = ("ignored: the parts it copies were read instead; `ragkit check --repair` rebuilds it"
                       if derived else "its rows are left out; `ragkit run` recomputes them")
        lines.append(f"warning: {relative} could not be read ({problem}): {consequence}")
    return lines


@dataclass
class DamagedPart:
    """A committed part whose marker or files fail their check: table (or "marker") -> problem."""

    part: str
    run_id: str
    question_ids: list[str]
    problems: dict[str, str] = field(default_factory=dict)
    set_aside_in: str = ""

    def describe(self) -> str:
        what = "; ".join(f"{table}/{self.part}.parquet: {problem}" if table != "marker" else f"marker: {problem}"
                         for table, problem in self.problems.items())
        questions = f"{len(self.question_ids)} question(s) of run {self.run_id}" if self.run_id else "unknown questions"
        return f"{self.part} ({questions}): {what}"


def find_damaged(store: ResultsFolder, fresh: bool = True) -> list[DamagedPart]:
    """Every committed part whose marker cannot be read, or one of whose files is missing or
    fails its check (each file read whole when ``fresh``)."""
    listed = {name: {entry.stem: entry for entry in store.files.list(name, ".parquet")} for name in PART_TABLES}
    damaged = []
    for part in sorted(store.committed_parts()):
        record, problem = store.marker_record(part)
        if record is None:
            if problem is not None:  # removed by a compaction since listed otherwise
                damaged.append(DamagedPart(part, run_of_part(part), [], {"marker": problem}))
            continue
        found = DamagedPart(part, str(record.get("run_id", "")), list(record.get("question_ids", [])))
        expected = record.get(FILES_KEY) or {}
        for name in PART_TABLES:
            entry = listed[name].get(part)
            problem = (MISSING if entry is None
                       else verify_entry(store, entry, f"{name}/{part}.parquet", expected.get(name), fresh=fresh))
            if problem is not None:
                found.problems[name] = problem
        if found.problems:
            damaged.append(found)
    return damaged


def set_aside(store: ResultsFolder, damaged: list[DamagedPart]) -> list[DamagedPart]:
    """Move each damaged shard's files and then its marker into ``_damaged/``, with a
    ``reason.json``: its questions are no longer committed. The caller holds ``writer_lock``."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    for item in damaged:
        folder = f"{DAMAGED}/{stamp}-{item.part}"
        reason = {"part": item.part, "run_id": item.run_id, "question_ids": item.question_ids,
                  "problems": item.problems, "found": stamp}
        store.files.write_bytes(f"{folder}/reason.json", json.dumps(reason, indent=2).encode())
        for name in PART_TABLES:  # files first: a stop in between leaves a marker with missing parts
            if store.files.exists(f"{name}/{item.part}.parquet"):
                store.files.move(f"{name}/{item.part}.parquet", f"{folder}/{name}.parquet")
            note(store, f"{name}/{item.part}.parquet", None)
        store.files.move(f"{COMMITS}/{item.part}.json", f"{folder}/commit.json")
        note(store, f"{COMMITS}/{item.part}.json", None)
        item.set_aside_in = folder
    return damaged
