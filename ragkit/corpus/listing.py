"""The ingested corpora as one table (one row per corpus), and one corpus's source files as a table
(one row per file): what `ragkit corpus list` / `ragkit corpus docs` and the Corpora page show."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

import pandas as pd

from ragkit.corpus.store import CorpusInfo, ManifestEntry

if TYPE_CHECKING:
    from llama_index.core.schema import Document

LISTING_COLUMNS = ["name", "documents", "files", "size_mb", "types", "created"]
DOCUMENT_COLUMNS = ["doc_id", "file_name", "file_type", "size_bytes", "documents", "pages", "chars", "ingested"]


def corpora_table(infos: Iterable[CorpusInfo]) -> pd.DataFrame:
    """name, documents, files, size in MB (3 decimals), file types with their counts, created."""
    rows = [
        {
            "name": info.name,
            "documents": info.documents,
            "files": info.files,
            "size_mb": round(info.total_bytes / 1024 / 1024, 3),
            "types": ", ".join(f"{kind} ({count})" for kind, count in sorted(info.file_types.items())),
            "created": info.created,
        }
        for info in infos
    ]
    return pd.DataFrame(rows, columns=LISTING_COLUMNS)


def documents_table(files: Iterable[tuple[ManifestEntry, list[Document]]]) -> pd.DataFrame:
    """One row per source file (CorpusStore.files): the doc id that deletes it, its file name, type
    and size, how many documents it holds (a BEIR-style file or a dataset import holds many), their
    pages (PDF pages; 0 for other types) and characters, and when it was ingested (None when its
    manifest predates that field)."""
    rows = [
        {
            "doc_id": entry.doc_id,
            "file_name": PurePosixPath(entry.doc_id).name,
            "file_type": entry.file_type,
            "size_bytes": entry.size_bytes,
            "documents": len(documents),
            "pages": sum(_pages(document) for document in documents),
            "chars": sum(len(document.text) for document in documents),
            "ingested": entry.ingested,
        }
        for entry, documents in files
    ]
    return pd.DataFrame(rows, columns=DOCUMENT_COLUMNS)


def _pages(document: Document) -> int:
    # A PDF parser records its page count; an imported document's metadata may hold anything.
    pages = document.metadata.get("pages", 0)
    return pages if isinstance(pages, int) and not isinstance(pages, bool) else 0
