"""The embedding cache at scale: lookups read only the keys asked for, appends are Arrow tables,
and compaction merges the appends' fragments without changing a vector or a reader's view."""

from __future__ import annotations

import hashlib

import lancedb
import numpy as np
import pyarrow as pa
import pytest
from lancedb.query import LanceEmptyQueryBuilder, LanceTakeQueryBuilder
from lancedb.table import LanceTable

from ragkit.embedders.cache import EmbeddingCache, embed_with_cache

pytestmark = pytest.mark.integration

DIM = 16


def _keys(n: int, salt: str = "") -> list[str]:
    return [hashlib.sha256(f"{salt}text {i}".encode()).hexdigest() for i in range(n)]


def _vectors(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)


def _filled(tmp_path, n: int, batch: int) -> tuple[EmbeddingCache, list[str], np.ndarray]:
    cache = EmbeddingCache(tmp_path, "scale")
    keys, vectors = _keys(n), _vectors(n)
    for start in range(0, n, batch):
        cache.add(keys[start : start + batch], vectors[start : start + batch])
    return cache, keys, vectors


# (SCAN_RATIO, READ_ALL_RATIO, SCAN_GROUP_ROWS); 333 keys tested at a time cross batch boundaries.
PATHS = {"filter": (0, 0, None), "key scan": (10**9, 0, None), "key scan in small groups": (10**9, 0, 333),
         "read all": (10**9, 10**9, None)}


@pytest.fixture(params=list(PATHS))
def lookup_path(request, monkeypatch) -> str:
    """A few keys are looked up by filtered queries, a good part of a table by one scan of its key
    column, most of it by reading it all: each lookup test runs all three ways."""
    scan_ratio, read_all_ratio, group_rows = PATHS[request.param]
    monkeypatch.setattr(EmbeddingCache, "SCAN_RATIO", scan_ratio)
    monkeypatch.setattr(EmbeddingCache, "READ_ALL_RATIO", read_all_ratio)
    if group_rows is not None:
        monkeypatch.setattr(EmbeddingCache, "SCAN_GROUP_ROWS", group_rows)
    return request.param


def _fragments(tmp_path) -> int:
    return lancedb.connect(tmp_path).open_table("embeddings_scale").stats()["fragment_stats"]["num_fragments"]


def test_lookup_returns_exactly_the_stored_vectors_of_the_keys_asked_for_and_nothing_for_unknown_keys(
        tmp_path, monkeypatch, lookup_path):
    cache, keys, vectors = _filled(tmp_path, 3_000, batch=500)
    monkeypatch.setattr(EmbeddingCache, "LOOKUP_BATCH", 700)  # several filtered queries per lookup
    wanted = keys[5:2_500:2] + keys[2_999:]
    unknown = _keys(50, salt="never stored ")

    found = cache.lookup(wanted + unknown + wanted[:10])  # repeated keys are looked up once

    assert sorted(found) == sorted(wanted)
    position = {key: i for i, key in enumerate(keys)}
    for key, vector in found.items():
        assert vector.dtype == np.float32 and vector.shape == (DIM,)
        np.testing.assert_array_equal(vector, vectors[position[key]])
    assert cache.lookup(unknown) == {}
    assert cache.lookup([]) == {}
    assert EmbeddingCache(tmp_path, "absent").lookup(keys[:3]) == {}


@pytest.mark.parametrize("lookup_path", ["filter", "key scan"], indirect=True)
def test_lookup_never_reads_the_whole_table_only_the_vectors_of_the_wanted_keys(tmp_path, monkeypatch, lookup_path):
    cache, keys, _ = _filled(tmp_path, 2_000, batch=1_000)
    reads: list[tuple[int, list[str]]] = []

    def whole_table(self, *args, **kwargs):
        raise AssertionError("lookup read the whole table")

    def counted(real):
        def to_arrow(self, *args, **kwargs):
            result = real(self, *args, **kwargs)
            reads.append((result.num_rows, result.column_names))
            return result
        return to_arrow

    monkeypatch.setattr(LanceTable, "to_arrow", whole_table)
    monkeypatch.setattr(LanceTable, "to_pandas", whole_table)
    monkeypatch.setattr(LanceTakeQueryBuilder, "to_arrow", counted(LanceTakeQueryBuilder.to_arrow))

    def counted_batches(real):  # a scan's to_arrow reads through to_batches too
        def to_batches(self, *args, **kwargs):
            reader = real(self, *args, **kwargs)
            batches = list(reader)
            reads.append((sum(batch.num_rows for batch in batches), reader.schema.names))
            return pa.RecordBatchReader.from_batches(reader.schema, batches)
        return to_batches

    monkeypatch.setattr(LanceEmptyQueryBuilder, "to_batches", counted_batches(LanceEmptyQueryBuilder.to_batches))

    found = cache.lookup(keys[100:130] + _keys(5, salt="x"))

    assert len(found) == 30
    assert sum(rows for rows, columns in reads if "vector" in columns) == 30
    if lookup_path == "key scan":  # the key column alone is read whole
        assert (2_000, ["text_sha", "_rowid"]) in reads


def test_the_share_of_the_table_asked_for_chooses_filter_key_scan_or_read_all(tmp_path, monkeypatch):
    cache, keys, vectors = _filled(tmp_path, 2_000, batch=1_000)
    calls: list[str] = []
    real_scan, real_where = EmbeddingCache._rows_by_key_scan, LanceEmptyQueryBuilder.where

    def scan(table, wanted):
        calls.append("key scan")
        return real_scan(table, wanted)

    def where(self, *args, **kwargs):
        calls.append("filter")
        return real_where(self, *args, **kwargs)

    monkeypatch.setattr(EmbeddingCache, "_rows_by_key_scan", staticmethod(scan))
    monkeypatch.setattr(LanceEmptyQueryBuilder, "where", where)
    position = {key: i for i, key in enumerate(keys)}
    for asked, path in ((keys[:99], ["filter"]), (keys[:100], ["key scan"]), (keys[:999], ["key scan"]),
                        ([*keys[:999], "unknown"], [])):  # 99*20 < 2,000 <= 100*20; 1,000*2 >= 2,000
        calls.clear()
        found = cache.lookup(asked)
        assert calls == path
        assert sorted(found) == sorted(k for k in asked if k in position)
        np.testing.assert_array_equal(np.stack([found[k] for k in asked if k in position]),
                                      vectors[[position[k] for k in asked if k in position]])


def test_a_large_table_without_its_key_index_is_scanned_once_not_filtered_per_batch(tmp_path, monkeypatch):
    """Before ``compact`` indexes the keys (a streamed build's later windows), each filtered query
    would scan the key column: a lookup then scans it once, whatever it asks for."""
    cache, keys, vectors = _filled(tmp_path, 2_000, batch=1_000)
    monkeypatch.setattr(EmbeddingCache, "KEY_INDEX_MIN_ROWS", 1_000)
    calls: list[str] = []
    real_scan, real_where = EmbeddingCache._rows_by_key_scan, LanceEmptyQueryBuilder.where

    def scan(table, wanted):
        calls.append("key scan")
        return real_scan(table, wanted)

    def where(self, *args, **kwargs):
        calls.append("filter")
        return real_where(self, *args, **kwargs)

    monkeypatch.setattr(EmbeddingCache, "_rows_by_key_scan", staticmethod(scan))
    monkeypatch.setattr(LanceEmptyQueryBuilder, "where", where)
    found = cache.lookup(keys[:10])
    assert calls == ["key scan"]
    np.testing.assert_array_equal(np.stack([found[k] for k in keys[:10]]), vectors[:10])
    cache.compact()  # indexes the keys: a few keys are filtered again
    calls.clear()
    assert sorted(cache.lookup(keys[:10])) == sorted(keys[:10])
    assert calls == ["filter"]


ODD_KEYS = ["it's", "a'); DROP TABLE t; --", "back\\slash", "x' OR '1'='1", "ünïcødé", "%_*", "nul\x00byte"]


@pytest.mark.parametrize("key", ODD_KEYS)
def test_keys_are_quoted_so_any_string_matches_only_itself(tmp_path, key, lookup_path):
    cache = EmbeddingCache(tmp_path, "quoted")
    cache.add(["plain", key], _vectors(2))
    cache.add(_keys(20), _vectors(20, seed=3))  # so that one key is a small share of the table

    assert list(cache.lookup([key])) == [key]
    np.testing.assert_array_equal(cache.lookup([key])[key], _vectors(2)[1])
    assert cache.lookup(["x"]) == {} and sorted(cache.lookup(["plain", key])) == sorted(["plain", key])


def test_add_appends_one_arrow_table_per_batch_with_float32_fixed_size_vectors(tmp_path, monkeypatch):
    appended: list[object] = []
    real_add = LanceTable.add

    def spy(self, data, *args, **kwargs):
        appended.append(data)
        return real_add(self, data, *args, **kwargs)

    monkeypatch.setattr(LanceTable, "add", spy)
    cache, keys, vectors = _filled(tmp_path, 30, batch=10)  # the first batch creates, two append

    schema = pa.schema([("text_sha", pa.string()), ("vector", pa.list_(pa.float32(), DIM))])
    assert len(appended) == 2 and all(isinstance(data, pa.Table) and data.schema == schema for data in appended)
    table = lancedb.connect(tmp_path).open_table("embeddings_scale")
    assert table.schema == schema and len(table.list_versions()) == 3  # one commit per batch
    found = cache.lookup(keys)
    np.testing.assert_array_equal(np.stack([found[k] for k in keys]), vectors)


def test_add_refuses_keys_and_vectors_of_different_lengths(tmp_path):
    with pytest.raises(ValueError, match="3 keys"):
        EmbeddingCache(tmp_path, "scale").add(["a", "b", "c"], _vectors(2))


def test_a_table_written_by_the_old_list_of_dicts_add_is_read_and_extended(tmp_path, lookup_path):
    legacy = [{"text_sha": "old", "vector": [0.5] * DIM}]
    lancedb.connect(tmp_path).create_table("embeddings_scale", data=legacy)
    cache = EmbeddingCache(tmp_path, "scale")

    cache.add(["new"], _vectors(1))

    found = cache.lookup(["old", "new"])
    assert found["old"].tolist() == [0.5] * DIM and found["new"].tolist() == _vectors(1)[0].tolist()


def test_compaction_merges_fragments_without_changing_data_or_a_readers_version(tmp_path):
    cache, keys, vectors = _filled(tmp_path, 400, batch=20)
    table = lancedb.connect(tmp_path).open_table("embeddings_scale")
    before = table.to_arrow().sort_by("text_sha")
    reader_version = table.version
    assert _fragments(tmp_path) == 20

    cache.compact()

    assert _fragments(tmp_path) == 1
    after = lancedb.connect(tmp_path).open_table("embeddings_scale")
    assert after.to_arrow().sort_by("text_sha").equals(before)
    # Compaction is a new version: the files of the version a reader opened are still there.
    table.checkout(reader_version)
    assert table.to_arrow().sort_by("text_sha").equals(before)
    found = cache.lookup(keys)
    np.testing.assert_array_equal(np.stack([found[k] for k in keys]), vectors)


class _CountingEmbedder:
    def __init__(self) -> None:
        self.batches = 0

    def embed_texts(self, texts):
        self.batches += 1
        return np.stack([_vectors(1, seed=int(t.split()[-1]))[0] for t in texts])


def test_embed_with_cache_compacts_after_adding_and_indexes_the_keys_of_a_large_table(tmp_path, monkeypatch):
    monkeypatch.setattr(EmbeddingCache, "KEY_INDEX_MIN_ROWS", 100)
    cache = EmbeddingCache(tmp_path, "scale")
    embedder = _CountingEmbedder()
    texts = [f"text {i}" for i in range(120)]

    vectors, embedded = embed_with_cache(embedder, texts, _keys(120), cache, batch_size=10)

    assert embedded == 120 and embedder.batches == 12
    table = lancedb.connect(tmp_path).open_table("embeddings_scale")
    assert table.stats()["fragment_stats"]["num_fragments"] == 1
    assert [(ix.columns, ix.index_type) for ix in table.list_indices()] == [(["text_sha"], "BTree")]
    # Rows appended after the index are found too (LanceDB also scans what the index lacks).
    cache.add(["late"], _vectors(1, seed=99))
    assert sorted(cache.lookup(["late", *_keys(2)])) == sorted(["late", *_keys(2)])
    again, embedded_again = embed_with_cache(embedder, texts, _keys(120), cache, batch_size=10)
    assert embedded_again == 0 and embedder.batches == 12
    np.testing.assert_array_equal(again, vectors)


def test_a_small_table_gets_no_key_index_and_a_rerun_that_adds_nothing_does_not_compact(tmp_path, monkeypatch):
    cache = EmbeddingCache(tmp_path, "scale")
    embed_with_cache(_CountingEmbedder(), ["text 1", "text 2"], ["k1", "k2"], cache, batch_size=1)
    table = lancedb.connect(tmp_path).open_table("embeddings_scale")
    assert list(table.list_indices()) == []
    versions = len(table.list_versions())

    def fail() -> None:
        raise AssertionError("compacted although nothing was added")

    monkeypatch.setattr(cache, "compact", fail)
    embed_with_cache(_CountingEmbedder(), ["text 1"], ["k1"], cache, batch_size=1)
    assert len(lancedb.connect(tmp_path).open_table("embeddings_scale").list_versions()) == versions


class _FailingAfter(_CountingEmbedder):
    """Embeds ``batches`` model batches, then fails as a killed or broken model would."""

    def __init__(self, batches: int) -> None:
        super().__init__()
        self.limit = batches

    def embed_texts(self, texts):
        if self.batches == self.limit:
            raise RuntimeError("model gone")
        return super().embed_texts(texts)


@pytest.mark.parametrize(("commit_rows", "commit_seconds", "adds"), [
    (50, 3600.0, [50, 50, 20]),  # every 50 vectors, and what is left at the end
    (10**6, 3600.0, [120]),  # one commit for a build smaller than COMMIT_ROWS
    (10**6, 0.0, [10] * 12),  # COMMIT_SECONDS passed: every model batch commits
])
def test_embed_with_cache_commits_every_commit_rows_or_commit_seconds_not_every_model_batch(
        tmp_path, monkeypatch, commit_rows, commit_seconds, adds):
    monkeypatch.setattr(EmbeddingCache, "COMMIT_ROWS", commit_rows)
    monkeypatch.setattr(EmbeddingCache, "COMMIT_SECONDS", commit_seconds)
    cache = EmbeddingCache(tmp_path, "scale")
    sizes: list[int] = []
    add = cache.add
    monkeypatch.setattr(cache, "add", lambda keys, vectors: (sizes.append(len(keys)), add(keys, vectors)))
    texts = [f"text {i}" for i in range(120)]

    vectors, embedded = embed_with_cache(_CountingEmbedder(), texts, _keys(120), cache, batch_size=10)

    assert sizes == adds and embedded == 120
    stored = cache.lookup(_keys(120))
    np.testing.assert_array_equal(np.stack([stored[key] for key in _keys(120)]), vectors)


def test_a_build_that_fails_midway_keeps_the_committed_vectors_and_the_next_embeds_only_the_rest(
        tmp_path, monkeypatch):
    monkeypatch.setattr(EmbeddingCache, "COMMIT_ROWS", 50)
    cache = EmbeddingCache(tmp_path, "scale")
    texts = [f"text {i}" for i in range(120)]
    with pytest.raises(RuntimeError, match="model gone"):
        embed_with_cache(_FailingAfter(batches=8), texts, _keys(120), cache, batch_size=10)
    assert len(cache.lookup(_keys(120))) == 50  # 80 embedded, 50 committed: at most COMMIT_ROWS lost
    resumed = _CountingEmbedder()
    vectors, embedded = embed_with_cache(resumed, texts, _keys(120), cache, batch_size=10)
    assert embedded == 70 and resumed.batches == 7
    np.testing.assert_array_equal(vectors, np.stack([_vectors(1, seed=i)[0] for i in range(120)]))
