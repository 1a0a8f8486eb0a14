"""Windows of a chunk set embedded one by one, in any order (as Ray's window steps do), make the
batches, the cache and the embedded count of the in-process streamed build, which walks the
windows in order under the embedder's lock."""

from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ragkit.artefacts.index_stream import EmbeddingTally, chunkset_windows, embedded_windows
from ragkit.artefacts.window_embedding import chunkset_window, embed_window, keys_before, window_count
from ragkit.embedders.cache import EmbeddingCache

pytestmark = pytest.mark.unit

WINDOW = 8
BATCH = 3


class RecordingEmbedder:
    """Vectors from each text's length and characters; records every batch it is given."""

    def __init__(self) -> None:
        self.batches: list[tuple[str, ...]] = []

    def embed_texts(self, texts: list[str]) -> np.ndarray:
        self.batches.append(tuple(texts))
        return np.asarray([[len(t), sum(map(ord, t)) % 97, len(self.batches)] for t in texts], np.float32)


def chunkset_file(path: Path, texts: list[str], row_group_size: int) -> Path:
    """A chunk set's key and text columns (the key: the text itself, enough for the cache)."""
    pq.write_table(pa.table({"text_sha": texts, "embed_text": texts}), path, row_group_size=row_group_size)
    return path


def texts() -> list[str]:
    """27 rows (4 windows of 8) of different lengths, some repeated within and across windows."""
    words = [("w" * (1 + (i * 7) % 11)) + str(i) for i in range(20)]
    return [*words[:8], words[2], words[9], words[3], *words[10:14], words[0], *words[14:20],
            words[9], words[15], words[16]]


@pytest.mark.parametrize("row_group_size", [5, 8, 100])
def test_window_steps_in_any_order_embed_the_in_process_builds_batches(tmp_path: Path, row_group_size: int) -> None:
    path = chunkset_file(tmp_path / "chunks.parquet", texts(), row_group_size)
    assert window_count(path, WINDOW) == 4
    for number, window in enumerate(chunkset_windows(path, WINDOW)):
        assert chunkset_window(path, WINDOW, number).equals(window)

    in_process, tally = RecordingEmbedder(), EmbeddingTally()
    whole_cache = EmbeddingCache(tmp_path / "whole", "e")
    windows = embedded_windows(chunkset_windows(path, WINDOW), in_process, whole_cache,  # type: ignore[arg-type]
                               BATCH, contextlib.nullcontext(), tally)
    for _ in windows:
        pass

    sharded = RecordingEmbedder()
    cache = EmbeddingCache(tmp_path / "windows", "e")
    added = [embed_window(sharded, path, WINDOW, number, cache, BATCH,  # type: ignore[arg-type]
                          contextlib.nullcontext())[0] for number in (3, 1, 0, 2)]
    # The same batches (each window's texts first seen in it, shortest first), only in window order.
    assert sorted(sharded.batches) == sorted(in_process.batches)
    assert sum(added) == tally.embedded == len(set(texts()))
    keys = sorted(set(texts()))
    assert whole_cache.lookup(keys).keys() == cache.lookup(keys).keys()


def test_a_text_another_writer_stored_meanwhile_is_not_appended_again(tmp_path: Path) -> None:
    path = chunkset_file(tmp_path / "chunks.parquet", texts(), 100)
    cache = EmbeddingCache(tmp_path / "cache", "e")
    first = pd.read_parquet(path).iloc[:WINDOW]

    class Racing(RecordingEmbedder):
        """Another writer appends the window's shortest text while this one computes."""

        def embed_texts(self, batch: list[str]) -> np.ndarray:
            if not self.batches:
                cache.add([batch[0]], np.zeros((1, 3), np.float32))
            return super().embed_texts(batch)

    added, _ = embed_window(Racing(), path, WINDOW, 0, cache, BATCH, contextlib.nullcontext())  # type: ignore[arg-type]
    assert added == first["text_sha"].nunique() - 1
    assert cache._table().count_rows() == first["text_sha"].nunique()  # stored once


def test_keys_before_finds_only_earlier_rows(tmp_path: Path) -> None:
    path = chunkset_file(tmp_path / "chunks.parquet", texts(), 5)
    rows = texts()
    assert keys_before(path, 8, {rows[8], rows[9], rows[10]}) == {rows[8], rows[10]}  # rows[9]: not before row 8
    assert keys_before(path, 0, {rows[0]}) == set()


def test_a_window_tried_again_embeds_only_what_the_cache_lacks(tmp_path: Path) -> None:
    """A worker killed mid-window keeps what it committed; the window run again embeds the rest."""
    path = chunkset_file(tmp_path / "chunks.parquet", texts(), 5)
    cache = EmbeddingCache(tmp_path / "cache", "e")
    window = list(dict.fromkeys(texts()[WINDOW : 2 * WINDOW]))
    committed = window[:3]  # what the killed worker had committed
    cache.add(committed, RecordingEmbedder().embed_texts(committed))

    again = RecordingEmbedder()
    added, _ = embed_window(again, path, WINDOW, 1, cache, BATCH, contextlib.nullcontext())  # type: ignore[arg-type]
    embedded = [text for batch in again.batches for text in batch]
    earlier = set(texts()[:WINDOW])  # window 0's texts: window 0 embeds them
    assert sorted(embedded) == sorted(set(window) - set(committed) - earlier)
    assert added == len(embedded) > 0
