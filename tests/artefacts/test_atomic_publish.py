"""LanceDB tables appear whole or not at all: an index is built aside and published by one rename,
and the embedding cache is created the same way and then only appended to."""

from __future__ import annotations

from pathlib import Path

import lancedb
import numpy as np
import pandas as pd
import pytest

from ragkit.artefacts.index import IndexStore
from ragkit.embedders.cache import EmbeddingCache

pytestmark = pytest.mark.integration


def _chunks(n: int) -> pd.DataFrame:
    texts = [f"cats purr number {i}" for i in range(n)]
    return pd.DataFrame({"chunk_id": [f"c{i}" for i in range(n)], "doc_id": "d", "chunk_index": range(n),
                         "start_char": 0, "end_char": 10, "text": texts, "embed_text": texts, "metadata": "{}"})


class Killed(BaseException):
    """Stands in for a SIGKILL: nothing after it runs."""


def _die() -> None:
    raise Killed


def test_an_index_build_killed_before_publishing_leaves_nothing_readable_and_the_next_build_finishes(tmp_path):
    store = IndexStore(tmp_path / "lancedb")
    with pytest.raises(Killed):
        store.build("abc", _chunks(5), None, before_publish=_die)  # the table is complete but unpublished

    assert not store.is_ready("abc")
    assert not (tmp_path / "lancedb" / "chunks_abc.lance").exists()
    assert list((tmp_path / "lancedb" / ".building").iterdir()), "the staging folder is the only trace"

    index = store.build("abc", _chunks(5), None)
    assert len(index) == 5 and store.is_ready("abc")
    assert len(index.fulltext("cats", 10)) == 5
    assert not list((tmp_path / "lancedb" / ".building").iterdir())


def test_a_table_published_without_its_marker_is_rebuilt_not_read(tmp_path):
    store = IndexStore(tmp_path / "lancedb")
    store.build("abc", _chunks(3), None)
    (tmp_path / "lancedb" / "chunks_abc.ready").unlink()  # killed between the rename and the marker
    with pytest.raises(KeyError, match="not built"):
        store.open("abc")

    rebuilt = store.build("abc", _chunks(4), None)
    assert len(rebuilt) == 4 and len(store.open("abc")) == 4


def test_the_embedding_cache_only_appends_so_a_reader_keeps_its_files(tmp_path):
    first, second = EmbeddingCache(tmp_path, "minilm"), EmbeddingCache(tmp_path, "minilm")
    first.add(["a", "b"], np.eye(2, 4, dtype=np.float32))
    reader = lancedb.connect(tmp_path).open_table("embeddings_minilm")

    second.add(["c"], np.ones((1, 4), dtype=np.float32))  # another process, appending

    assert reader.to_arrow().num_rows == 2  # the version it opened is still all there
    assert sorted(first.lookup(["a", "b", "c"])) == ["a", "b", "c"]
    assert not list((tmp_path / ".building").iterdir())


def test_an_embedding_cache_whose_creation_fails_reads_as_empty(tmp_path, monkeypatch):
    import ragkit.embedders.cache

    def full_disk(built: Path, path: Path) -> None:
        raise OSError(28, "No space left on device")

    cache = EmbeddingCache(tmp_path, "minilm")
    monkeypatch.setattr(ragkit.embedders.cache, "publish_dir", full_disk)
    with pytest.raises(OSError, match="No space left"):
        cache.add(["a"], np.ones((1, 4), dtype=np.float32))
    monkeypatch.undo()

    assert cache.lookup(["a"]) == {}
    cache.add(["a"], np.ones((1, 4), dtype=np.float32))
    assert list(cache.lookup(["a"])) == ["a"]


class _LengthEmbedder:
    """Vector = (length, first character code): says which text it came from; records its batches."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    def embed_texts(self, texts):
        self.batches.append(list(texts))
        return np.asarray([[float(len(t)), float(ord(t[0]))] for t in texts], dtype=np.float32)


def test_texts_are_embedded_shortest_first_in_batches_and_returned_in_the_callers_order(tmp_path):
    from ragkit.embedders.cache import embed_with_cache

    texts = ["ccc long text", "a", "bbbbb", "a", "dd"]  # "a" twice: embedded once
    keys = [f"k-{t}" for t in texts]
    embedder = _LengthEmbedder()
    cache = EmbeddingCache(tmp_path / "emb", "fake")

    vectors, embedded = embed_with_cache(embedder, texts, keys, cache, batch_size=2)

    assert embedded == 4
    assert embedder.batches == [["a", "dd"], ["bbbbb", "ccc long text"]]
    assert vectors.tolist() == [[float(len(t)), float(ord(t[0]))] for t in texts]
    again, embedded_again = embed_with_cache(embedder, texts, keys, cache, batch_size=2)
    assert embedded_again == 0 and again.tolist() == vectors.tolist()
