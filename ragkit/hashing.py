"""Content keys: every cached artefact is named by a hash of what it was made from."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def content_key(*parts: Any, length: int = 16) -> str:
    """A short stable hash of JSON-able parts (order matters, dict key order does not)."""
    digest = hashlib.sha256(canonical_json(list(parts)).encode("utf-8")).hexdigest()
    return digest[:length]


def content_key_of_rows(head: Any, rows: Iterable[Any], length: int = 16) -> str:
    """``content_key(head, list(rows))``, the same key, hashed as each row's JSON is made: a corpus
    of 3M documents held its (id, text hash) pairs and their JSON at once, about 0.3 KB each."""
    digest = hashlib.sha256(f"[{canonical_json(head)},[".encode())
    separator = ""
    for row in rows:
        digest.update(f"{separator}{canonical_json(row)}".encode())
        separator = ","
    digest.update(b"]]")
    return digest.hexdigest()[:length]


def bytes_sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_sha256(path: Path, block_size: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(block_size), b""):
            digest.update(block)
    return digest.hexdigest()


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
