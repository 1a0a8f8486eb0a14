"""Which files of an ingest are read: a folder walked without following links, and every candidate
screened (links, missing files, doc ids taken twice, type and size limits) before any is parsed,
so one bad file is named and skipped while the rest go on."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from ragkit.corpus.validation import validate_file
from ragkit.errors import IngestError
from ragkit.settings import RagkitSettings


class FileStatus(BaseModel):
    path: str
    doc_id: str
    status: Literal["ingested", "skipped"]
    reason: str = ""
    documents: int = 0



def walk(path: Path) -> Iterator[tuple[Path, str]]:
    """(file, doc_id) for a file given directly or every non-hidden file under a folder, sorted.

    A symbolic link under the folder (to a file or a folder) is listed, not entered, so that
    screening names it as skipped: it may point outside the folder.
    """
    if not path.is_dir():  # a file, or a missing path that screening reports as not found
        yield path, path.name
        return
    found: list[Path] = []
    for root, dirs, files in os.walk(path):  # does not follow symlinked folders: no cycles
        linked = [d for d in dirs if os.path.islink(os.path.join(root, d))]
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in linked]
        found.extend(Path(root) / name for name in files + linked if not name.startswith("."))
    yield from sorted(((file, file.relative_to(path).as_posix()) for file in found), key=lambda item: item[1])


def skipped(path: Path, doc_id: str, error: IngestError | OSError) -> FileStatus:
    # An unreadable file (permissions, vanished mid-ingest) is one bad file, not a failed batch.
    reason = error.reason if isinstance(error, IngestError) else f"cannot read file: {error.strerror or error}"
    return FileStatus(path=str(path), doc_id=doc_id, status="skipped", reason=reason)


def screen(
    candidates: list[tuple[Path, str]], settings: RagkitSettings
) -> tuple[dict[int, FileStatus], list[tuple[int, Path, str]]]:
    """Statuses of rejected candidates (by position) and (position, path, doc_id) of accepted ones."""
    statuses: dict[int, FileStatus] = {}
    accepted: list[tuple[int, Path, str]] = []
    claimed: dict[str, Path] = {}
    for index, (path, doc_id) in enumerate(candidates):
        try:
            if path.is_symlink():
                raise IngestError("symbolic link, not followed (it can point outside the folder): ingest its target")
            if not path.is_file():
                raise IngestError("not found" if not path.exists() else "not a regular file")
            if doc_id in claimed:
                raise IngestError(f"doc id '{doc_id}' is already taken by {claimed[doc_id]} in this batch")
            validate_file(path, settings)
        except (IngestError, OSError) as error:
            statuses[index] = skipped(path, doc_id, error)
            continue
        claimed[doc_id] = path
        accepted.append((index, path, doc_id))
    return statuses, accepted
