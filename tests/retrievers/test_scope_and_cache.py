"""Per-question scope (a LanceDB prefilter) and the retrieval cache, over a real index of real
MiniLM vectors: every retriever type searches only the question's documents when scoped, and a
search seen before is answered from the cache with 0 searches on the index."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from ragkit.artefacts.index import IndexStore, doc_filter
from ragkit.hashing import text_sha256
from ragkit.retrievers import retrievers
from ragkit.retrievers.cache import RetrievalCache, connect

pytestmark = pytest.mark.integration

# Two documents about cats (one with a quote in its id, as file names may have), one about dogs.
DOCS = {
    "cats.md": ["Cats purr when they are content.", "Felines sleep most of the day.", "A cat grooms its fur."],
    "it's-dogs.md": ["Dogs bark at strangers.", "Dogs purr? No, dogs growl and wag their tails."],
    "market.md": ["The stock market fell after the rate rise.", "Cats and dogs are not traded on exchanges."],
}
RETRIEVERS = ["dense", "bm25", "hybrid", "mmr"]


@pytest.fixture(scope="module")
def index(tmp_path_factory, minilm_embedder):
    return build_index(tmp_path_factory, minilm_embedder)


def build_index(tmp_path_factory, minilm_embedder):
    """DOCS as one chunk per text, embedded with MiniLM, in a LanceDB index."""
    rows = [(doc, number, text) for doc, texts in DOCS.items() for number, text in enumerate(texts)]
    texts = [text for _, _, text in rows]
    chunks = pd.DataFrame({
        "chunk_id": [f"{doc}:{n}" for doc, n, _ in rows], "doc_id": [doc for doc, _, _ in rows],
        "chunk_index": [n for _, n, _ in rows], "start_char": 0, "end_char": [len(t) for t in texts],
        "text": texts, "embed_text": texts, "text_sha": [text_sha256(t) for t in texts], "metadata": "{}",
    })
    return IndexStore(tmp_path_factory.mktemp("lancedb")).build("scoped", chunks, minilm_embedder.embed_texts(texts))


def build(name, index, embedder, **params):
    return retrievers.build({"type": name, "params": {"top_k": 5, **params}}, index=index, embedder=embedder)


def doc_ids(retriever, query):
    return {node.node.metadata["doc_id"] for node in retriever.retrieve(query)}


@pytest.mark.unit
@pytest.mark.parametrize(("ids", "sql"), [
    (["a.md"], "doc_id IN ('a.md')"),
    (["it's.md", "a.md", "a.md"], "doc_id IN ('a.md', 'it''s.md')"),  # quotes doubled, sorted, once
])
def test_doc_filter_quotes_and_orders_the_ids(ids, sql):
    assert doc_filter(ids) == sql


@pytest.mark.parametrize("name", RETRIEVERS)
def test_question_doc_scope_searches_only_the_questions_documents(index, minilm_embedder, name):
    retriever = build(name, index, minilm_embedder, scope="question_doc")
    assert doc_ids(retriever, "why do cats purr") >= {"cats.md", "it's-dogs.md"}  # no scope set yet: all
    retriever.set_scope(["it's-dogs.md"])
    assert doc_ids(retriever, "why do cats purr") == {"it's-dogs.md"}
    retriever.set_scope(["market.md", "cats.md"])
    assert doc_ids(retriever, "why do cats purr") <= {"market.md", "cats.md"}
    assert not retriever.scope_missing


@pytest.mark.parametrize("name", RETRIEVERS)
def test_scope_all_ignores_the_questions_documents(index, minilm_embedder, name):
    retriever = build(name, index, minilm_embedder)
    retriever.set_scope(["market.md"])
    assert len(doc_ids(retriever, "why do cats purr")) > 1


def test_a_scoped_question_without_documents_searches_everything_and_says_so(index, minilm_embedder):
    retriever = build("dense", index, minilm_embedder, scope="question_doc")
    retriever.set_scope([])
    assert retriever.scope_missing and len(doc_ids(retriever, "why do cats purr")) == 3


@pytest.mark.parametrize("name", RETRIEVERS)
def test_a_cached_search_is_not_run_again_and_returns_the_same_chunks(index, minilm_embedder, tmp_path, name):
    cache = RetrievalCache(tmp_path / "cache")
    first = build(name, index, minilm_embedder)
    first.use_cache(cache)
    before = index.searches
    nodes = first.retrieve("why do cats purr")
    assert index.searches > before
    searched = index.searches
    cache.flush()
    first.drain_replayed_seconds()
    # A sibling configuration (a new retriever object, same spec) in a new process-like cache.
    again = build(name, index, minilm_embedder)
    again.use_cache(RetrievalCache(tmp_path / "cache"))
    repeat = again.retrieve("why do cats purr")
    assert index.searches == searched  # 0 searches
    assert [(n.node.node_id, n.score, n.node.get_content()) for n in repeat] == \
        [(n.node.node_id, n.score, n.node.get_content()) for n in nodes]
    assert again.drain_replayed_seconds() > 0 and again.drain_replayed_seconds() == 0


@pytest.mark.parametrize("change", [{"top_k": 2}, {"score_threshold": 0.1}, {"scope": "question_doc"}, None])
def test_changing_the_retrievers_params_the_query_or_the_scope_searches_again(index, minilm_embedder, tmp_path,
                                                                                change):
    cache = RetrievalCache(tmp_path / "cache")
    retriever = build("dense", index, minilm_embedder)
    retriever.use_cache(cache)
    retriever.retrieve("why do cats purr")
    searched = index.searches
    other = build("dense", index, minilm_embedder, **(change or {}))
    other.use_cache(cache)
    if change and "scope" in change:
        other.set_scope(["cats.md"])
    other.retrieve("why do cats purr" if change else "do dogs bark")
    assert index.searches == searched + 1


# Cut short, or empty: a damaged entry (a table row, or an old per-search file) is searched again.
@pytest.mark.parametrize("damaged", ['{"format": 1, "key": "', ""])
def test_a_corrupt_cache_entry_is_searched_again_and_rewritten(index, minilm_embedder, tmp_path, damaged):
    cache = RetrievalCache(tmp_path / "cache")
    retriever = build("bm25", index, None)
    retriever.use_cache(cache)
    expected = [n.node.node_id for n in retriever.retrieve("cats purr")]
    cache.flush()
    db = connect(tmp_path / "cache")
    assert db.execute("UPDATE retrievals SET entry = ?", (damaged,)).rowcount == 1
    searched = index.searches
    assert [n.node.node_id for n in retriever.retrieve("cats purr")] == expected
    assert index.searches == searched + 1
    cache.flush()
    (entry,) = db.execute("SELECT entry FROM retrievals").fetchone()
    assert json.loads(entry)["hits"]


def test_entries_of_the_old_file_per_search_layout_are_still_read(index, tmp_path):
    """A data dir written before the table: its files answer, and new entries go to the table."""
    cache = RetrievalCache(tmp_path / "cache")
    retriever = build("bm25", index, None)
    retriever.use_cache(cache)
    expected = [n.node.node_id for n in retriever.retrieve("cats purr")]
    cache.flush()
    db = connect(tmp_path / "cache")
    key, entry = db.execute("SELECT key, entry FROM retrievals").fetchone()
    db.execute("DELETE FROM retrievals")
    legacy = tmp_path / "cache" / key[:2] / f"{key}.json"
    legacy.parent.mkdir()
    legacy.write_text(entry, encoding="utf-8")
    fresh = RetrievalCache(tmp_path / "cache")
    retriever.use_cache(fresh)
    searched = index.searches
    assert [n.node.node_id for n in retriever.retrieve("cats purr")] == expected
    assert index.searches == searched


def test_cached_rows_are_plain_json_numbers(tmp_path):
    from ragkit.artefacts.index import Hit

    cache = RetrievalCache(tmp_path)
    row = {"chunk_id": "a:0", "doc_id": "a", "chunk_index": np.int64(3), "start_char": np.int64(0),
           "end_char": np.int64(5), "text": "hello", "embed_text": "hello", "metadata": "{}"}
    cache.put("k" * 32, [Hit(row, 0.5)], 0.01)
    assert cache.flush() == 1
    (hit,), seconds = cache.get("k" * 32)
    assert hit.row["chunk_index"] == 3 and hit.score == 0.5 and seconds == 0.01
