"""The corpora listing: one row per corpus with its size in MB and its file types counted."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from ragkit.corpus.listing import LISTING_COLUMNS, corpora_table
from ragkit.corpus.store import CorpusInfo

pytestmark = pytest.mark.unit


def test_one_row_per_corpus_with_size_in_mb_and_types_sorted():
    created = datetime(2026, 1, 2, tzinfo=UTC)
    info = CorpusInfo(name="papers", corpus_id="c1", files=3, documents=5, total_bytes=1_572_864,
                      file_types={"txt": 1, "pdf": 2}, created=created)
    table = corpora_table([info])
    assert table.to_dict("records") == [{"name": "papers", "documents": 5, "files": 3, "size_mb": 1.5,
                                         "types": "pdf (2), txt (1)", "created": created}]
    assert list(corpora_table([]).columns) == LISTING_COLUMNS
