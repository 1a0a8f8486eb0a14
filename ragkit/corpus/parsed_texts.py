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

A ``ParsedTexts`` pickles as the list of its texts, as ``JsonlTexts`` does (``TextsOnDisk``): the
Ray executor ships the corpus to workers that may not see the data dir.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from ragkit.corpus.texts_on_disk import TextsOnDisk
from ragkit.errors import ConfigError


class ParsedTexts(TextsOnDisk):
    """The texts at (file number, document number) ``places`` of parsed files ``paths``, whose
    (size, mtime) ``stamps`` were taken when the files were read."""

    __slots__ = ("_paths", "_stamps")

    def __init__(self, paths: list[Path], stamps: list[tuple[int, int]], places: np.ndarray,
                 hashes: np.ndarray | None = None) -> None:
        super().__init__(places, hashes)
        self._paths, self._stamps = paths, stamps

    def _with(self, places: np.ndarray, hashes: np.ndarray | None) -> ParsedTexts:
        return ParsedTexts(self._paths, self._stamps, places, hashes)

    def _source(self) -> tuple[Any, ...]:
        return self._paths, self._stamps

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

    def __repr__(self) -> str:
        return f"ParsedTexts({len(self._paths)} files, {len(self)} texts)"
