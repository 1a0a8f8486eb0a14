"""Document texts left in the store's parsed files: an ingested corpus keeps where each text is.

``CorpusStore.load`` reads every parsed file once (``documents/<sha>.<type>.v<N>.json``) for the
documents' ids, metadata and the texts' SHA-256 (the corpus key), then lets the texts go: each
document keeps the number of its file and its place in that file's ``documents`` list (8 bytes),
and its digest (32 bytes) only until the key is made. The texts are read back a batch at a time
(``ParsedTexts[start:stop]``): each parsed file the batch touches is opened once.

A parsed file must not change or go while a corpus made from it is in use: its size and
modification time are taken at the load and checked at every read, so a changed or deleted file
stops the build with a one-line error instead of chunking texts that do not match the corpus key.

An imported entry (``CorpusStore.import_documents``) is one parsed file holding all its documents,
so a batch of it reads the whole file. Nothing in ragkit writes one today (dataset corpora are
read from their corpus.jsonl, ``JsonlTexts``); it stays correct, not fast, for large imports.

A ``ParsedTexts`` pickles as the list of its texts (``__reduce__``), as ``JsonlTexts`` does: the
Ray executor ships the corpus to workers that may not see the data dir.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, overload

import numpy as np

from ragkit.errors import ConfigError


class ParsedTexts(Sequence[str]):
    """The texts at (file number, document number) ``places`` of parsed files ``paths``, whose
    (size, mtime) ``stamps`` were taken when the files were read; ``hashes`` as ``JsonlTexts``'."""

    __slots__ = ("_hashes", "_paths", "_places", "_stamps")

    def __init__(self, paths: list[Path], stamps: list[tuple[int, int]], places: np.ndarray,
                 hashes: np.ndarray | None = None) -> None:
        if hashes is not None and len(hashes) != len(places):
            raise ValueError(f"{len(places)} places and {len(hashes)} hashes must be as many")
        self._paths, self._stamps, self._places, self._hashes = paths, stamps, places, hashes

    def __len__(self) -> int:
        return len(self._places)

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> list[str]: ...

    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return self._read(self._places[index])
        position = range(len(self._places))[index]  # negative positions, IndexError as a list's
        return self._read(self._places[position:position + 1])[0]

    def __iter__(self) -> Iterator[str]:
        for start in range(0, len(self), 1_000):  # each file once per thousand texts, one batch held
            yield from self[start:start + 1_000]

    def take(self, order: Sequence[int]) -> ParsedTexts:
        """The texts at positions ``order`` (a permutation or a selection), still in their files."""
        positions = np.asarray(order, dtype=np.int64)
        hashes = None if self._hashes is None else self._hashes[positions]
        return ParsedTexts(self._paths, self._stamps, self._places[positions], hashes)

    def sha256s(self) -> Iterator[str]:
        """Each text's SHA-256 (hex), in order: from the load when kept, else read and hashed."""
        if self._hashes is not None:
            return (row.tobytes().hex() for row in self._hashes)
        return (hashlib.sha256(text.encode("utf-8")).hexdigest() for text in self)

    def forget_hashes(self) -> None:
        """Drop the load's digests (32 bytes a text) once the corpus key is made."""
        self._hashes = None

    def _read(self, places: np.ndarray) -> list[str]:
        texts: list[str] = [""] * len(places)
        by_file: dict[int, list[int]] = {}
        for position, file_number in enumerate(places[:, 0].tolist() if len(places) else []):
            by_file.setdefault(file_number, []).append(position)
        for file_number, positions in by_file.items():
            documents = self._documents_of(file_number)
            for position in positions:
                texts[position] = documents[int(places[position, 1])]["text"]
        return texts

    def _documents_of(self, file_number: int) -> list[dict[str, Any]]:
        path = self._paths[file_number]
        try:
            with open(path, "rb") as handle:
                status = os.fstat(handle.fileno())  # of the file read, not of a later replacement
                raw = handle.read()
        except FileNotFoundError:
            raise ConfigError(f"{path} was removed while a corpus read from it was in use: "
                              f"ingest its source file again") from None
        if (status.st_size, status.st_mtime_ns) != self._stamps[file_number]:
            raise ConfigError(f"{path} changed while a corpus read from it was in use: ingest its source file again")
        documents: list[dict[str, Any]] = json.loads(raw)["documents"]
        return documents

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ParsedTexts) and (self._paths, self._stamps) == (other._paths, other._stamps):
            return bool(np.array_equal(self._places, other._places))
        if isinstance(other, Sequence) and not isinstance(other, (str, bytes)):
            return len(self) == len(other) and list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # compared by content, like a list

    def __reduce__(self) -> tuple[Any, ...]:
        return list, (list(self),)

    def __repr__(self) -> str:
        return f"ParsedTexts({len(self._paths)} files, {len(self)} texts)"
