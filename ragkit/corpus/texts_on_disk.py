"""What every sequence of texts left in their files shares: positions kept instead of texts, read
back a batch at a time, the scan's digests kept until the corpus key is made, pickled as a list.

A subclass says where a text is (one row of ``_places`` per text, any numpy dtype and width) and
how to read a batch of them (``_read``); ``JsonlTexts`` keeps byte offsets in one file,
``ParsedTexts`` (file number, document number) pairs in the store's parsed files.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from typing import Any, TypeVar, overload

import numpy as np

_Self = TypeVar("_Self", bound="TextsOnDisk")


class TextsOnDisk(Sequence[str]):
    """Texts at ``places`` (one row each), with their SHA-256 ``hashes`` (rows of 32 bytes) in the
    same order when kept from the scan."""

    __slots__ = ("_hashes", "_places")

    def __init__(self, places: np.ndarray, hashes: np.ndarray | None = None) -> None:
        if hashes is not None and len(hashes) != len(places):
            raise ValueError(f"{len(places)} places and {len(hashes)} hashes must be as many")
        self._places, self._hashes = places, hashes

    def _read(self, places: np.ndarray) -> list[str]:
        """The texts at ``places``, in their order."""
        raise NotImplementedError

    def _with(self: _Self, places: np.ndarray, hashes: np.ndarray | None) -> _Self:
        """The same files' texts at other ``places``."""
        raise NotImplementedError

    def _source(self) -> tuple[Any, ...]:
        """What identifies the files read (paths and their stamps), for ``==`` without reading."""
        raise NotImplementedError

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
        for start in range(0, len(self), 1_000):  # files opened once per thousand texts, one batch held
            yield from self[start:start + 1_000]

    def take(self: _Self, order: Sequence[int]) -> _Self:
        """The texts at positions ``order`` (a permutation or a selection), still in their files."""
        positions = np.asarray(order, dtype=np.int64)
        return self._with(self._places[positions], None if self._hashes is None else self._hashes[positions])

    def sha256s(self) -> Iterator[str]:
        """Each text's SHA-256 (hex), in order: from the scan when kept, else read and hashed."""
        if self._hashes is not None:
            return (row.tobytes().hex() for row in self._hashes)
        return (hashlib.sha256(text.encode("utf-8")).hexdigest() for text in self)

    def forget_hashes(self) -> None:
        """Drop the scan's digests (32 bytes a text) once the corpus key is made."""
        self._hashes = None

    def __eq__(self, other: object) -> bool:
        if type(other) is type(self) and self._source() == other._source():
            return bool(np.array_equal(self._places, other._places))
        if isinstance(other, Sequence) and not isinstance(other, (str, bytes)):
            return len(self) == len(other) and list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # compared by content, like a list

    def __reduce__(self) -> tuple[Any, ...]:
        # As a list of its texts: the Ray executor ships the corpus to workers that may not see the files.
        return list, (list(self),)
