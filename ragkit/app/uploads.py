"""Saving files a browser uploaded: nothing is written outside the data directory's uploads folder.

The names and folders come from the user, so every one is sanitised (``sanitize_name``), every
target is checked to resolve inside its root, and a name that is already a symbolic link is
refused rather than written through. Size limits are checked later, when the files are
ingested (``CorpusStore.ingest``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

from ragkit.corpus.validation import sanitize_name
from ragkit.errors import ConfigError
from ragkit.settings import get_settings


class UploadedFile(Protocol):
    """What a Streamlit UploadedFile offers: the name the browser sent and the bytes."""

    name: str

    def getvalue(self) -> bytes: ...


def uploads_root() -> Path:
    return get_settings().resolved_data_dir() / "uploads"


def inside(path: Path, root: Path) -> Path:
    """``path`` resolved, refusing anything outside ``root`` (uploads never escape the data dir).

    Resolving follows symbolic links, so a link inside ``root`` that points out is refused too.
    """
    try:
        resolved, root = path.resolve(), root.resolve()
    except (OSError, RuntimeError, ValueError) as error:  # a link loop, a NUL byte in the path
        raise ConfigError(f"{path!r} cannot be resolved: {error}") from None
    if resolved != root and root not in resolved.parents:
        raise ConfigError(f"{path} is outside {root}")
    return resolved


def save_uploads(files: Iterable[UploadedFile], *folders: str, root: Path | None = None) -> list[Path]:
    """Write uploaded files to <root>/<folders...>/<sanitized name>; root is the data directory's
    ``uploads`` folder unless given.

    Files whose names sanitise alike get a "2-", "3-"... prefix rather than overwrite each
    other, and a name that is already a symbolic link is refused, never written through.
    """
    root = uploads_root() if root is None else root
    folder = inside(root.joinpath(*(sanitize_name(part) for part in folders)), root)
    folder.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    taken: set[str] = set()  # casefolded: on macOS and Windows "A.txt" and "a.txt" are one file
    for uploaded in files:
        name = sanitize_name(uploaded.name)
        copy = 1
        while name.casefold() in taken:
            copy += 1
            name = sanitize_name(f"{copy}-{sanitize_name(uploaded.name)}")
        taken.add(name.casefold())
        target = folder / name  # not the resolved path: a link at this name must not be written through
        inside(target, folder)
        write_without_following(target, uploaded.getvalue())
        paths.append(target)
    return paths


def write_without_following(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path``, refusing (one-line ConfigError) when ``path`` is a symbolic link."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    try:
        descriptor = os.open(path, flags, 0o666)
    except OSError as error:  # O_NOFOLLOW: the name is a symbolic link
        raise ConfigError(f"cannot write the upload {path.name}: {error.strerror or error}") from None
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(data)
