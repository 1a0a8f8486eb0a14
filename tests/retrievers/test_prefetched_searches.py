"""A run's searches made ahead of its questions (``Retriever.prefetch``): dense batches them into
one LanceDB query, and each question's own search then reads exactly what it would have searched.

Checked on the real LanceDB index of ``test_shared_searches`` (chunks repeat, so scores tie and
LanceDB orders equal scores by the limit asked): every result read after a prefetch must equal
the direct search at its own top_k, chunk for chunk and score for score, with the searches shared
across top_k as a grid shares them."""

from __future__ import annotations

import pytest

from ragkit.pipeline.pipeline import Pipeline
from ragkit.retrievers.cache import RetrievalCache
from tests.retrievers.test_shared_searches import DEPTH, KS, QUERIES, RETRIEVERS, build, hits, index

pytestmark = pytest.mark.integration

__all__ = ["index"]  # the module's fixture, shared


def test_prefetched_dense_searches_give_each_top_k_exactly_its_own_searchs_hits(index, minilm_embedder, tmp_path):
    direct = {(k, query): hits(build(index, minilm_embedder, "dense", {}, k), query, None)
              for k in KS for query in QUERIES}
    cache = RetrievalCache(tmp_path / "cache")
    for k in KS:  # as a grid's runs share their searches: the first prefetches at the depth
        retriever = build(index, minilm_embedder, "dense", {}, k)
        retriever.use_cache(cache)
        retriever.share_searches(DEPTH)
        before = index.searches
        made = retriever.prefetch([*QUERIES, QUERIES[0]])  # a repeated question is searched once
        assert made == (len(QUERIES) if k == KS[0] else 0)
        assert index.searches - before == made
        for query in QUERIES:
            assert hits(retriever, query, None) == direct[k, query], (k, query)


@pytest.mark.parametrize("scope", ["all", "question_doc"])
@pytest.mark.parametrize(("name", "params"), RETRIEVERS, ids=lambda value: str(value))
def test_only_an_unscoped_dense_search_is_made_ahead(index, minilm_embedder, tmp_path, name, params, scope):
    """A scope's filter is the question's; the other retrievers have no batched search: their
    questions search as they come."""
    retriever = build(index, minilm_embedder, name, dict(params, scope=scope), 5)
    retriever.use_cache(RetrievalCache(tmp_path / "cache"))
    before = index.searches
    made = retriever.prefetch(QUERIES)
    assert made == index.searches - before == (len(QUERIES) if name == "dense" and scope == "all" else 0)
    semantic = build(index, minilm_embedder, "dense", {"semantic_cache": 0.9}, 5)
    semantic.use_cache(RetrievalCache(tmp_path / "semantic"))
    assert semantic.prefetch(QUERIES) == 0  # it decides per question whether to search at all


def test_a_prefetch_charges_each_search_its_share_and_no_question_its_embedding(index, minilm_embedder, tmp_path):
    cache = RetrievalCache(tmp_path / "cache")
    retriever = build(index, minilm_embedder, "dense", {}, 5)
    retriever.use_cache(cache)
    minilm_embedder.drain_adjustment()
    assert retriever.prefetch(QUERIES) == len(QUERIES)
    # Each question is charged its share when its search is read: nothing is left for the next one.
    assert minilm_embedder.pending_adjustment() == 0.0
    entries = [cache.get(retriever.cache_key(query)) for query in QUERIES]
    assert all(entry is not None and entry[1] > 0 for entry in entries)


def test_a_pipeline_prefetches_only_when_it_is_plain_retrieval(index, minilm_embedder, tmp_path):
    cache = RetrievalCache(tmp_path / "cache")
    retriever = build(index, minilm_embedder, "dense", {}, 5)
    retriever.use_cache(cache)
    plain = Pipeline(retriever, retriever, searchers=(retriever,), retrieval_cache=cache)
    assert plain.prefetch(QUERIES) == len(QUERIES)
    before = index.searches
    traces = [plain.answer(query) for query in QUERIES]
    assert index.searches == before  # every question read its prefetched search
    direct = build(index, minilm_embedder, "dense", {}, 5)
    assert [[node.node.node_id for node in trace.nodes] for trace in traces] == \
        [[node.node.node_id for node in direct.retrieve(query)] for query in QUERIES]

    class Stage:  # any stage may change the query the retriever is asked: nothing is searched ahead
        name = "judge"

    judged = Pipeline(retriever, retriever, searchers=(retriever,), retrieval_cache=cache)
    judged.stages = (Stage(),)
    assert judged.prefetch(["a query no one searched"]) == 0

