"""Plain text files, and the decoding every text-based parser reads its file with."""

from __future__ import annotations

from pathlib import Path

from ragkit.corpus.parsers.parsed import ParsedDocument


def read_text(path: Path) -> str:
    """UTF-8 (a BOM dropped); text that is not UTF-8 is read as Latin-1, which decodes any byte.

    Binary content never gets here: validation rejects NUL and control bytes first. Latin-1
    rather than Windows-1252 because it is total: no byte sequence fails."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def is_utf8(path: Path) -> bool:
    """Whether ``read_text`` reads ``path`` as UTF-8 (else it fell back to Latin-1)."""
    try:
        path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError:
        return False
    return True


def parse_txt(path: Path) -> list[ParsedDocument]:
    return [ParsedDocument(read_text(path))]
