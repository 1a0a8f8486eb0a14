"""Indexes for large chunk sets: an ANN index from a row threshold up, the full-text index on demand,
queries that fetch only the columns they return, and many dense queries in one call."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from lancedb.query import LanceHybridQueryBuilder, LanceVectorQueryBuilder
from lancedb.rerankers import RRFReranker
from pydantic import ValidationError

from ragkit.artefacts.index import CHUNK_COLUMNS, FTS_COLUMN, AnnParams, IndexStore, doc_filter
from ragkit.retrievers import retrievers

pytestmark = pytest.mark.integration

DIM = 32
WORDS = ["cats", "purr", "dogs", "bark", "qubits", "market", "vaccine", "trial", "rates", "sleep"]


def _chunks(n: int) -> pd.DataFrame:
    texts = [f"{WORDS[i % 10]} {WORDS[(i * 7) % 10]} {WORDS[(i * 3) % 10]} note {i}" for i in range(n)]
    return pd.DataFrame({
        "chunk_id": [f"c{i}" for i in range(n)], "doc_id": [f"d{i % 12}" for i in range(n)],
        "chunk_index": [i // 12 for i in range(n)], "start_char": [i * 10 for i in range(n)],
        "end_char": [i * 10 + 9 for i in range(n)], "text": texts, "embed_text": texts,
        "metadata": [json.dumps({"n": i}) for i in range(n)],
    })


def _unit(rows: int, seed: int) -> np.ndarray:
    vectors = np.random.default_rng(seed).standard_normal((rows, DIM)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


ROWS = 600  # two IVF partitions need 512 rows or more (LanceDB trains fewer on fewer rows)
VECTORS = _unit(ROWS, seed=1)
QUERIES = _unit(12, seed=2)
PQ = {"kind": "ivf_pq", "num_partitions": 2, "num_sub_vectors": 4}


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> IndexStore:
    return IndexStore(tmp_path_factory.mktemp("lancedb"))


@pytest.fixture(scope="module")
def exact(store):
    return store.build("exact", _chunks(ROWS), VECTORS)


def _marker(store: IndexStore, index_id: str) -> dict:
    return json.loads((store.db_dir / f"chunks_{index_id}.ready").read_text())


def _vector_indexes(index) -> list[str]:
    return [ix.index_type for ix in index._table.list_indices() if ix.columns == ["vector"]]


# --- ANN ------------------------------------------------------------------------------------------


def test_ann_params_are_bounded_and_forbid_unknown_fields():
    assert AnnParams().kind == "none" and AnnParams().min_rows == 100_000 and AnnParams().nprobes == 20
    for bad in ({"kind": "ivf_flat"}, {"nprobes": 0}, {"min_rows": 0}, {"refine_factor": 0}, {"nlist": 4}):
        with pytest.raises(ValidationError):
            AnnParams.model_validate(bad)
    with pytest.raises(ValidationError, match="num_sub_vectors applies to kind 'ivf_pq' only"):
        AnnParams(kind="ivf_hnsw_sq", num_sub_vectors=4)


def test_an_ann_index_is_built_from_min_rows_up_and_recorded_in_the_marker(store):
    ann = AnnParams(**PQ, min_rows=ROWS, refine_factor=5)
    index = store.build("ann-at", _chunks(ROWS), VECTORS, ann=ann)

    assert _vector_indexes(index) == ["IvfPq"]
    assert _marker(store, "ann-at") == {"rows": ROWS, "vectors": True, "ann": ann.model_dump(), "ann_built": True,
                                        "fulltext": True}
    assert store.open("ann-at").ann == ann


def test_below_min_rows_the_table_stays_an_exact_scan(store, exact):
    ann = AnnParams(**PQ, min_rows=ROWS + 1)
    index = store.build("ann-below", _chunks(ROWS), VECTORS, ann=ann)

    assert _vector_indexes(index) == [] and index.ann is None
    assert _marker(store, "ann-below") == {"rows": ROWS, "vectors": True, "ann": ann.model_dump(),
                                           "ann_built": False, "fulltext": True}
    for query in QUERIES:
        assert index.dense(query, 10) == exact.dense(query, 10)


def test_kind_none_and_no_ann_build_nothing_and_an_index_without_vectors_gets_no_ann(store, exact):
    # ``exact`` builds the table this reads: without it, a random order that runs this test first
    # finds no marker.
    assert _marker(store, "exact")["ann"] is None and _marker(store, "exact")["ann_built"] is False
    store.build("ann-none", _chunks(ROWS), VECTORS, ann=AnnParams(kind="none", min_rows=1))
    assert _marker(store, "ann-none")["ann_built"] is False
    store.build("ann-novec", _chunks(ROWS), None, ann=AnnParams(**PQ, min_rows=1))
    assert _marker(store, "ann-novec")["ann_built"] is False


def _recall(index, queries: np.ndarray) -> float:
    truth = [set(np.argsort(-(VECTORS @ q))[:10].tolist()) for q in queries]
    found = [{int(hit.row["chunk_id"][1:]) for hit in index.dense(q, 10)} for q in queries]
    return float(np.mean([len(t & f) / 10 for t, f in zip(truth, found)]))


@pytest.mark.parametrize("ann", [
    AnnParams(**PQ, min_rows=ROWS, refine_factor=5),  # 4 PQ codes of 8 dims alone: recall about 0.8
    AnnParams(kind="ivf_hnsw_sq", min_rows=ROWS, num_partitions=2),
], ids=["ivf_pq+refine", "ivf_hnsw_sq"])
def test_dense_search_over_an_ann_index_finds_nearly_the_exact_top_10(store, ann):
    index = store.build(f"recall-{ann.kind}", _chunks(ROWS), VECTORS, ann=ann)
    assert _vector_indexes(index) == [{"ivf_pq": "IvfPq", "ivf_hnsw_sq": "IvfHnswSq"}[ann.kind]]
    assert _recall(index, QUERIES) >= 0.8


def test_dense_and_hybrid_pass_nprobes_and_refine_factor_only_when_an_ann_index_was_built(store, exact, monkeypatch):
    calls: list[tuple[str, str, int]] = []
    for builder in (LanceVectorQueryBuilder, LanceHybridQueryBuilder):
        for option in ("nprobes", "refine_factor"):
            real = getattr(builder, option)

            def spy(self, value, _real=real, _option=option, _builder=builder.__name__):
                calls.append((_builder, _option, value))
                return _real(self, value)

            monkeypatch.setattr(builder, option, spy)
    store.build("probed", _chunks(ROWS), VECTORS, ann=AnnParams(**PQ, min_rows=ROWS, nprobes=3, refine_factor=4))
    index = store.open("probed")

    exact.dense(QUERIES[0], 5)
    exact.hybrid("cats", QUERIES[0], 5, rrf_k=60)
    assert calls == []
    index.dense(QUERIES[0], 5)
    assert calls == [("LanceVectorQueryBuilder", "nprobes", 3), ("LanceVectorQueryBuilder", "refine_factor", 4)]
    calls.clear()
    index.hybrid("cats", QUERIES[0], 5, rrf_k=60)
    # LanceDB forwards the hybrid query's refine_factor to its vector sub-query itself.
    assert [call for call in calls if call[0] == "LanceHybridQueryBuilder"] == [
        ("LanceHybridQueryBuilder", "nprobes", 3), ("LanceHybridQueryBuilder", "refine_factor", 4)]


# --- full-text index on demand --------------------------------------------------------------------


def test_without_fulltext_bm25_and_hybrid_fail_naming_ensure_fulltext(store):
    index = store.build("nofts", _chunks(60), VECTORS[:60], fulltext=False)

    assert _marker(store, "nofts")["fulltext"] is False
    assert [ix.index_type for ix in index._table.list_indices()] == []
    bm25 = retrievers.build({"type": "bm25", "params": {"top_k": 3}}, index=index)
    with pytest.raises(ValueError, match=r"no full-text index.*ensure_fulltext\('nofts'\)"):
        bm25.retrieve("cats purr")
    with pytest.raises(ValueError, match="no full-text index"):
        index.hybrid("cats", QUERIES[0], 3, rrf_k=60)
    assert len(index.dense(QUERIES[0], 3)) == 3


def test_ensure_fulltext_builds_once_updates_the_marker_and_matches_an_index_built_with_it(store):
    store.build("later", _chunks(60), VECTORS[:60], fulltext=False)
    reference = store.build("upfront", _chunks(60), VECTORS[:60])
    before = _marker(store, "later")

    seconds = store.ensure_fulltext("later")

    assert isinstance(seconds, float) and seconds >= 0
    assert _marker(store, "later") == {**before, "fulltext": True}
    assert store.ensure_fulltext("later") is None
    assert store.ensure_fulltext("upfront") is None
    index = store.open("later")
    for query in ("cats purr", "market rates", "note 7"):
        assert index.fulltext(query, 10) == reference.fulltext(query, 10)
        assert index.hybrid(query, QUERIES[1], 10, rrf_k=60) == reference.hybrid(query, QUERIES[1], 10, rrf_k=60)
    with pytest.raises(KeyError, match="not built"):
        store.ensure_fulltext("missing")


def test_ensure_fulltext_records_its_cost_before_the_marker_says_built(store):
    """A kill between the full-text index and its marker must not leave a marked index without
    its cost recorded (CI once resumed a killed run one "fulltext" stage row short)."""
    store.build("later", _chunks(30), VECTORS[:30], fulltext=False)
    seen = []

    def killed_while_recording(seconds):
        seen.append((seconds, store.has_fulltext("later")))
        raise KeyboardInterrupt  # the process dies here: after the record, before the marker

    with pytest.raises(KeyboardInterrupt):
        store.ensure_fulltext("later", killed_while_recording)
    assert seen and seen[0][0] >= 0 and seen[0][1] is False
    assert store.has_fulltext("later") is False  # so the resumed run builds (and records) it again
    recorded = []
    assert store.ensure_fulltext("later", recorded.append) is not None
    assert len(recorded) == 1 and store.has_fulltext("later")


def test_a_marker_from_before_ann_and_optional_fulltext_opens_as_exact_with_fulltext(store):
    store.build("legacy", _chunks(30), VECTORS[:30])
    (store.db_dir / "chunks_legacy.ready").write_text(json.dumps({"rows": 30, "vectors": True}))

    index = store.open("legacy")

    assert index.ann is None and index.has_fulltext and len(index.fulltext("note", 50)) == 30


# --- queries: same results as LanceDB's own answer through pandas ---------------------------------


def _reference_dense(index, vector, limit, with_vectors=False, where=None):
    search = index._table.search(vector.tolist(), query_type="vector").distance_type("cosine")
    if where is not None:
        search = search.where(where, prefilter=True)
    records = search.limit(limit).to_pandas().to_dict("records")
    return [({c: r[c] for c in CHUNK_COLUMNS}, 1.0 - float(r["_distance"]),
             np.asarray(r["vector"], np.float32) if with_vectors else None) for r in records]


def _reference_fulltext(index, query, limit, where=None):
    search = index._table.search(query, query_type="fts", fts_columns=FTS_COLUMN)
    if where is not None:
        search = search.where(where, prefilter=True)
    records = search.limit(limit).to_pandas().to_dict("records")
    return [({c: r[c] for c in CHUNK_COLUMNS}, float(r["_score"]), None) for r in records]


def _reference_hybrid(index, query, vector, limit, rrf_k, where=None):
    builder = (index._table.search(query_type="hybrid", fts_columns=FTS_COLUMN).vector(vector.tolist()).text(query)
               .distance_type("cosine"))
    if where is not None:
        builder = builder.where(where, prefilter=True)
    records = builder.rerank(RRFReranker(K=rrf_k)).limit(limit).to_pandas().to_dict("records")
    return [({c: r[c] for c in CHUNK_COLUMNS}, float(r["_relevance_score"]), None) for r in records]


def _as_tuples(hits):
    return [(hit.row, hit.score, hit.vector) for hit in hits]


def _assert_same(got, want):
    assert len(got) == len(want)
    for (row, score, vector), (row_want, score_want, vector_want) in zip(got, want):
        assert row == row_want and [type(v) for v in row.values()] == [type(v) for v in row_want.values()]
        assert score == score_want
        assert (vector is None) == (vector_want is None)
        if vector is not None:
            assert vector.dtype == np.float32
            np.testing.assert_array_equal(vector, vector_want)


SCOPE = doc_filter(["d1", "d5", "d7"])


@pytest.mark.parametrize("where", [None, SCOPE], ids=["all", "scoped"])
def test_dense_fulltext_and_hybrid_return_the_rows_scores_and_order_lancedb_returns(exact, where):
    for i, query_vector in enumerate(QUERIES[:6]):
        for with_vectors in (False, True):
            _assert_same(_as_tuples(exact.dense(query_vector, 15, with_vectors, where)),
                         _reference_dense(exact, query_vector, 15, with_vectors, where))
        text = f"{WORDS[i]} {WORDS[i + 3]} note"
        _assert_same(_as_tuples(exact.fulltext(text, 15, where)), _reference_fulltext(exact, text, 15, where))
        _assert_same(_as_tuples(exact.hybrid(text, query_vector, 15, 60, where)),
                     _reference_hybrid(exact, text, query_vector, 15, 60, where))


def test_dense_asks_lancedb_only_for_the_columns_it_returns(exact, monkeypatch):
    selected: list[list[str]] = []
    real = LanceVectorQueryBuilder.select

    def spy(self, columns):
        selected.append(list(columns))
        return real(self, columns)

    monkeypatch.setattr(LanceVectorQueryBuilder, "select", spy)
    exact.dense(QUERIES[0], 3)
    exact.dense(QUERIES[0], 3, with_vectors=True)
    assert selected == [[*CHUNK_COLUMNS, "_distance"], [*CHUNK_COLUMNS, "vector", "_distance"]]


# --- many dense queries at once -------------------------------------------------------------------


@pytest.mark.parametrize("where", [None, SCOPE], ids=["all", "scoped"])
@pytest.mark.parametrize("with_vectors", [False, True])
def test_dense_many_equals_dense_on_each_vector(exact, where, with_vectors):
    many = exact.dense_many(QUERIES, 7, with_vectors=with_vectors, where=where)

    assert len(many) == len(QUERIES)
    for hits, query_vector in zip(many, QUERIES):
        _assert_same(_as_tuples(hits), _as_tuples(exact.dense(query_vector, 7, with_vectors, where)))


def test_dense_many_over_an_ann_index_equals_dense_and_counts_one_search_per_vector(store):
    index = store.build("many-ann", _chunks(ROWS), VECTORS, ann=AnnParams(**PQ, min_rows=ROWS, refine_factor=5))
    searches = index.searches

    many = index.dense_many(QUERIES, 10)

    assert index.searches == searches + len(QUERIES)
    assert [_as_tuples(hits) for hits in many] == [_as_tuples(index.dense(q, 10)) for q in QUERIES]
    assert index.dense_many(QUERIES[:1], 4) == [index.dense(QUERIES[0], 4)]
    assert index.dense_many(QUERIES[:0], 4) == []


def test_dense_many_on_an_index_without_vectors_fails_like_dense(store):
    index = store.build("novec", _chunks(20), None)
    with pytest.raises(ValueError, match="holds no vectors"):
        index.dense_many(QUERIES, 3)


# --- the table a build writes ---------------------------------------------------------------------


def test_a_built_table_holds_the_chunks_and_their_exact_float32_vectors(store):
    # Rows in an order other than the vectors' memory order: a column view, not C-contiguous.
    chunks, vectors = _chunks(7), np.asfortranarray(_unit(7, seed=3).astype(np.float64))
    table = store.build("layout", chunks, vectors, fulltext=False)._table.to_arrow()
    assert table.schema.names == [*CHUNK_COLUMNS, "vector"]
    assert str(table.schema.field("vector").type) == f"fixed_size_list<item: float>[{DIM}]"
    stored = np.stack(table.column("vector").to_numpy(zero_copy_only=False))
    assert stored.dtype == np.float32 and np.array_equal(stored, vectors.astype(np.float32))
    assert table.select(list(CHUNK_COLUMNS)).to_pandas().equals(chunks[list(CHUNK_COLUMNS)])
    assert _marker(store, "layout")["rows"] == 7


def test_an_empty_chunk_set_builds_an_empty_table_with_the_vector_column(store):
    table = store.build("empty", _chunks(0), np.empty((0, DIM), dtype=np.float32), fulltext=False)._table
    assert table.count_rows() == 0 and "vector" in table.schema.names


# --- recall on a table with structure -------------------------------------------------------------

CLUSTERED_ROWS, CLUSTERED_DIM = 4000, 64


def _clustered(rows: int, seed: int) -> np.ndarray:
    """Points around 80 random centres (noise of norm 0.3-0.6), unit length: neighbours are a
    cluster's points, as with real embeddings, rather than the near-ties of uniform noise."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((80, CLUSTERED_DIM))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    noise = rng.standard_normal((rows, CLUSTERED_DIM))
    noise *= (rng.uniform(0.3, 0.6, rows) / np.linalg.norm(noise, axis=1))[:, None]
    points = centres[rng.integers(0, 80, rows)] + noise
    return (points / np.linalg.norm(points, axis=1, keepdims=True)).astype(np.float32)


@pytest.mark.parametrize("ann", [
    AnnParams(kind="ivf_pq", min_rows=1, num_partitions=8, num_sub_vectors=16, nprobes=4, refine_factor=10),
    AnnParams(kind="ivf_hnsw_sq", min_rows=1, num_partitions=4, nprobes=2),
], ids=["ivf_pq", "ivf_hnsw_sq"])
def test_an_ann_index_on_a_few_thousand_clustered_rows_finds_nine_of_the_exact_top_10(store, ann):
    vectors = _clustered(CLUSTERED_ROWS + 30, seed=5)
    table, queries = vectors[:CLUSTERED_ROWS], vectors[CLUSTERED_ROWS:]  # held-out points of the same clusters
    index = store.build(f"clustered-{ann.kind}", _chunks(CLUSTERED_ROWS), table, ann=ann, fulltext=False)
    exact = store.build("clustered-exact", _chunks(CLUSTERED_ROWS), table, fulltext=False)

    assert index.ann == ann and _vector_indexes(index) == [{"ivf_pq": "IvfPq", "ivf_hnsw_sq": "IvfHnswSq"}[ann.kind]]
    truth = [{int(hit.row["chunk_id"][1:]) for hit in exact.dense(q, 10)} for q in queries]
    # LanceDB's exact scan is numpy's top 10 (the reference the recall is measured against).
    assert truth == [set(np.argsort(-(table @ q))[:10].tolist()) for q in queries]
    found = [{int(hit.row["chunk_id"][1:]) for hit in index.dense(q, 10)} for q in queries]
    assert np.mean([len(t & f) / 10 for t, f in zip(truth, found)]) >= 0.9
