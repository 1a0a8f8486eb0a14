"""Document texts left in their JSONL file: a corpus keeps each line's byte offset, not its text.

Held as Python strings, the texts would be most of a large build's memory (benchmarks/README.md,
"The corpus text left on disk"); an offset costs 8 bytes. The texts are read back a batch at a
time (``JsonlTexts[start:stop]``), in file order within the batch, when the corpus is chunked.

The file must not change while a corpus made from it is in use: its size and modification time
are taken when it is scanned and checked at every read, so a changed file stops the build with a
one-line error instead of chunking texts that do not match the corpus key.

A ``JsonlTexts`` pickles as the list of its texts (``texts_on_disk.TextsOnDisk``): the Ray
executor ships the plan, corpus included, to workers that may not see this file.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ragkit.corpus.texts_on_disk import TextsOnDisk
from ragkit.errors import ConfigError

_BOM = b"\xef\xbb\xbf"


def file_stamp(path: Path) -> tuple[int, int]:
    """(size in bytes, modification time in ns): what a change to the file changes."""
    status = os.stat(path)
    return status.st_size, status.st_mtime_ns


def scan_lines(path: Path) -> Iterator[tuple[int, int, bytes]]:
    """(1-based line number, byte offset, line) of every line with more than ASCII blanks (the
    caller still decides about Unicode ones), numbered as ``numbered_lines`` numbers them (a
    leading UTF-8 byte-order mark is skipped); lines end at ``\\n``."""
    with open(path, "rb") as handle:
        offset = 0
        for line_no, line in enumerate(handle, start=1):
            start = offset
            offset += len(line)
            if line_no == 1 and line.startswith(_BOM):
                line, start = line[len(_BOM):], start + len(_BOM)
            if line.strip():
                yield line_no, start, line


class JsonlTexts(TextsOnDisk):
    """The texts of chosen lines of one JSONL file, by position (their byte offsets are the
    places); ``read_text`` makes a line's text (as the loader that scanned the file did)."""

    __slots__ = ("_path", "_read_text", "_stamp")

    def __init__(self, path: Path, offsets: np.ndarray, read_text: Callable[[bytes], str],
                 stamp: tuple[int, int], hashes: np.ndarray | None = None) -> None:
        super().__init__(offsets, hashes)
        self._path, self._read_text, self._stamp = Path(path), read_text, stamp

    def _with(self, places: np.ndarray, hashes: np.ndarray | None) -> JsonlTexts:
        return JsonlTexts(self._path, places, self._read_text, self._stamp, hashes)

    def _source(self) -> tuple[Any, ...]:
        return self._path, self._stamp

    def _read(self, places: np.ndarray) -> list[str]:
        texts: list[str] = [""] * len(places)
        if not len(places):
            return texts
        with open(self._path, "rb") as handle:
            status = os.fstat(handle.fileno())
            if (status.st_size, status.st_mtime_ns) != self._stamp:
                raise ConfigError(f"{self._path} changed while a corpus read from it was in use: run again")
            for position in np.argsort(places, kind="stable"):  # file order: forward reads
                handle.seek(int(places[position]))
                texts[position] = self._read_text(handle.readline())
        return texts

    def __repr__(self) -> str:
        return f"JsonlTexts({str(self._path)!r}, {len(self)} texts)"
