"""The ingested corpora as one table (one row per corpus): what a listing of the data directory shows."""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from ragkit.corpus.store import CorpusInfo

LISTING_COLUMNS = ["name", "documents", "files", "size_mb", "types", "created"]


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
