"""Document texts left in their JSONL file: a corpus keeps each line's byte offset, not its text.

A million 20-40-word documents held as Python strings cost about 0.36 KB each beyond everything
else a build keeps (issue 32 #2); their offsets cost 8 bytes. The texts are read back a batch at a
time (``JsonlTexts[start:stop]``), in file order within the batch, when the corpus is chunked.

The file must not change while a corpus made from it is in use: its size and modification time
are taken when it is scanned and checked at every read, so a changed file stops the build with a
one-line error instead of chunking texts that do not match the corpus key.

A ``JsonlTexts`` pickles as the list of its texts (``__reduce__``): the Ray executor ships the
plan, corpus included, to workers that may not see this file, so they get the texts as before.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, overload

import numpy as np

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


class JsonlTexts(Sequence[str]):
    """The texts of chosen lines of one JSONL file, by position; ``read_text`` makes a line's text
    (as the loader that scanned the file did). ``hashes`` are the texts' SHA-256 digests in the
    same order (rows of 32 bytes), kept from the scan so the corpus key needs no second read."""

    __slots__ = ("_hashes", "_offsets", "_path", "_read_text", "_stamp")

    def __init__(self, path: Path, offsets: np.ndarray, read_text: Callable[[bytes], str],
                 stamp: tuple[int, int], hashes: np.ndarray | None = None) -> None:
        if hashes is not None and len(hashes) != len(offsets):
            raise ValueError(f"{len(offsets)} offsets and {len(hashes)} hashes must be as many")
        self._path, self._offsets, self._read_text, self._stamp = Path(path), offsets, read_text, stamp
        self._hashes = hashes

    def __len__(self) -> int:
        return len(self._offsets)

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> list[str]: ...

    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return self._read(self._offsets[index])
        position = range(len(self._offsets))[index]  # negative positions, IndexError as a list's
        return self._read(self._offsets[position:position + 1])[0]

    def __iter__(self) -> Iterator[str]:
        for start in range(0, len(self), 1_000):  # one open file per thousand texts, one batch held
            yield from self[start:start + 1_000]

    def take(self, order: Sequence[int]) -> JsonlTexts:
        """The texts at positions ``order`` (a permutation or a selection), still in the file."""
        positions = np.asarray(order, dtype=np.int64)
        hashes = None if self._hashes is None else self._hashes[positions]
        return JsonlTexts(self._path, self._offsets[positions], self._read_text, self._stamp, hashes)

    def sha256s(self) -> Iterator[str]:
        """Each text's SHA-256 (hex), in order: from the scan when kept, else read and hashed."""
        if self._hashes is not None:
            return (row.tobytes().hex() for row in self._hashes)
        return (hashlib.sha256(text.encode("utf-8")).hexdigest() for text in self)

    def forget_hashes(self) -> None:
        """Drop the scan's digests (32 bytes a text) once the corpus key is made."""
        self._hashes = None

    def _read(self, offsets: np.ndarray) -> list[str]:
        texts: list[str] = [""] * len(offsets)
        if not len(offsets):
            return texts
        with open(self._path, "rb") as handle:
            status = os.fstat(handle.fileno())
            if (status.st_size, status.st_mtime_ns) != self._stamp:
                raise ConfigError(f"{self._path} changed while a corpus read from it was in use: run again")
            for position in np.argsort(offsets, kind="stable"):  # file order: forward reads
                handle.seek(int(offsets[position]))
                texts[position] = self._read_text(handle.readline())
        return texts

    def __eq__(self, other: object) -> bool:
        if isinstance(other, JsonlTexts) and (self._path, self._stamp) == (other._path, other._stamp):
            return bool(np.array_equal(self._offsets, other._offsets))
        if isinstance(other, Sequence) and not isinstance(other, (str, bytes)):
            return len(self) == len(other) and list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # compared by content, like a list

    def __reduce__(self) -> tuple[Any, ...]:
        return list, (list(self),)

    def __repr__(self) -> str:
        return f"JsonlTexts({str(self._path)!r}, {len(self)} texts)"
