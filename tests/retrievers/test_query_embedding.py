"""Query embeddings: a plan's questions are embedded in batches on first need, and every query is
charged its own share of the embedding time, whoever computed it. Without the share a grid's
first dense run paid for embedding every question and the runs after it paid nothing, so latency
depended on the order of runs."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pandas as pd
import pytest

from ragkit.artefacts.index import IndexStore
from ragkit.embedders import base as embedder_base
from ragkit.embedders.base import embedders
from ragkit.embedders.local import SentenceTransformerEmbedder
from ragkit.hashing import text_sha256
from ragkit.registry import ComponentParams
from ragkit.retrievers import base as retriever_base
from ragkit.retrievers import retrievers
from ragkit.retrievers.cache import RetrievalCache
from tests.doubles import FakeClock


class FakeModel:
    """Embeds by text length; each call costs 0.1 s plus 0.01 s per text on the fake clock."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.batches: list[list[str]] = []

    def _cost(self, texts: list[str]) -> list[list[float]]:
        self.batches.append(list(texts))
        self.clock.now += 0.1 + 0.01 * len(texts)
        return [[float(len(text)), 1.0] for text in texts]

    def get_query_embedding(self, text: str) -> list[float]:
        return self._cost([text])[0]

    def _embed(self, texts: list[str], prompt_name: str | None = None) -> list[list[float]]:
        assert prompt_name == "query"
        return self._cost(texts)


class FakeEmbedder(SentenceTransformerEmbedder):
    name: ClassVar[str] = "fake"
    Params: ClassVar[type[ComponentParams]] = ComponentParams

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(ComponentParams())
        self.fake = FakeModel(clock)

    def _create_model(self) -> Any:
        return self.fake


def charged(embedder: FakeEmbedder, clock: FakeClock, text: str) -> float:
    """What a caller timing embed_query and adding the embedder's adjustment is charged."""
    started = clock.now
    embedder.embed_query(text)
    return clock.now - started + embedder.drain_adjustment()


@pytest.fixture
def clock(monkeypatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(embedder_base, "time", fake)
    monkeypatch.setattr(retriever_base, "time", fake)  # the retriever times its searches on the same clock
    return fake


@pytest.mark.unit
def test_expected_queries_embed_in_one_batch_on_first_need_and_each_is_charged_its_share(clock):
    embedder = FakeEmbedder(clock)
    embedder.expect_queries(["a", "bb", "a", "ccc", "dddd"])
    assert embedder.fake.batches == []  # nothing before a vector is needed
    # The batch costs 0.1 + 4 x 0.01 = 0.14 s: 0.035 s per query, charged to each as it is asked.
    assert charged(embedder, clock, "ccc") == pytest.approx(0.035)
    assert embedder.fake.batches == [["a", "bb", "ccc", "dddd"]]  # the plan's order, each text once
    assert [charged(embedder, clock, t) for t in ("a", "bb", "dddd", "ccc")] == pytest.approx([0.035] * 4)
    assert len(embedder.fake.batches) == 1


@pytest.mark.unit
def test_an_unexpected_query_is_embedded_alone_and_charged_the_same_on_every_ask(clock):
    embedder = FakeEmbedder(clock)
    embedder.expect_queries(["a", "bb"])
    assert charged(embedder, clock, "rewritten query") == pytest.approx(0.11)
    assert charged(embedder, clock, "rewritten query") == pytest.approx(0.11)  # cached, still charged
    assert embedder.fake.batches == [["rewritten query"]]
    charged(embedder, clock, "bb")
    assert embedder.fake.batches[-1] == ["a", "bb"]


@pytest.mark.unit
def test_a_batch_holds_only_the_expected_queries_not_embedded_yet(clock):
    embedder = FakeEmbedder(clock)
    embedder.expect_queries(["a"])
    charged(embedder, clock, "a")
    embedder.expect_queries(["a", "bb", "ccc"])
    assert charged(embedder, clock, "bb") == pytest.approx((0.1 + 0.02) / 2)
    assert embedder.fake.batches == [["a"], ["bb", "ccc"]]


@pytest.mark.unit
def test_shared_query_vectors_are_returned_and_charged_their_share_without_loading_the_model(clock):
    """What a Ray worker does with the plan's query vectors another worker embedded: the vectors
    and shares it holds are handed over, and the other embedder answers and charges as the first."""
    first = FakeEmbedder(clock)
    first.expect_queries(["a", "bb", "ccc"])
    first.embed_query("a")
    first.drain_adjustment()
    vectors, shares = first.held_query_vectors(["a", "bb", "ccc"])
    assert first.query_batches == 1 and shares == pytest.approx([0.13 / 3] * 3)

    other = FakeEmbedder(clock)
    other.share_query_vectors(["a", "bb", "ccc"], vectors, shares)
    other.expect_queries(["a", "bb", "ccc"])
    assert [charged(other, clock, t) for t in ("ccc", "a")] == pytest.approx([0.13 / 3] * 2)
    np.testing.assert_array_equal(other.embed_query("bb"), first.embed_query("bb"))
    assert other.fake.batches == [] and other._model is None and other.query_batches == 0
    other.share_query_vectors(["a"], np.asarray([[0.0, 1.0]], dtype=np.float32), [9.0])  # held: kept
    np.testing.assert_array_equal(other.embed_query("a"), vectors[0])


def test_batched_minilm_query_vectors_equal_single_ones_up_to_float_noise():
    embedder = embedders.build("minilm")  # not the session's: its expected queries are its own
    queries = ["why do cats purr", "What is the incubation period of COVID-19?", "dogs", "a b c d e f g h"]
    single = np.stack([embedder.embed_model().get_query_embedding(q) for q in queries]).astype(np.float32)
    single /= np.linalg.norm(single, axis=1, keepdims=True)
    embedder.expect_queries(queries)
    batched = np.stack([embedder.embed_query(q) for q in queries])
    np.testing.assert_allclose(batched, single, atol=2e-6)
    assert set(embedder._query_vectors) == set(queries)


@pytest.mark.integration
def test_a_cached_search_replays_the_queries_share_and_two_retrievers_are_charged_alike(tmp_path, clock):
    """Two dense retrievers over one index share an embedder: the first search of each is charged
    the query's embedding share (the first one no longer pays the whole batch), and the retrieval
    cache stores that share with the search, so a hit replays it too."""
    embedder = FakeEmbedder(clock)
    texts = ["cats purr", "dogs bark", "markets fall"]
    chunks = pd.DataFrame({
        "chunk_id": ["c0", "c1", "c2"], "doc_id": ["d0", "d1", "d2"], "chunk_index": 0, "start_char": 0,
        "end_char": [len(t) for t in texts], "text": texts, "embed_text": texts,
        "text_sha": [text_sha256(t) for t in texts], "metadata": "{}",
    })
    vectors = np.asarray([[1.0, 0.0], [0.0, 1.0], [0.8, 0.6]], dtype=np.float32)
    index = IndexStore(tmp_path / "lancedb").build("fake-index", chunks, vectors)
    cache = RetrievalCache(tmp_path / "retrieval_cache")
    embedder.expect_queries(["q1", "q2"])

    def retriever(top_k: int) -> Any:
        built = retrievers.build({"type": "dense", "params": {"top_k": top_k}}, index=index,
                                          embedder=embedder)
        built.use_cache(cache)
        return built

    first, second = retriever(1), retriever(2)
    for searcher in (first, second):
        started = clock.now
        searcher.cached_search("q1")  # the search itself takes no fake time
        assert clock.now - started + searcher.drain_replayed_seconds() == pytest.approx(0.06)
    cache.flush()
    hits, seconds = RetrievalCache(tmp_path / "retrieval_cache").get(first.cache_key("q1"))
    assert seconds == pytest.approx(0.06)  # the search (no fake time) and the query's share
    started = clock.now
    first.cached_search("q1")  # a hit: nothing embedded or searched, the share replayed
    assert clock.now == started and first.drain_replayed_seconds() == pytest.approx(0.06)
    assert [hit.row["chunk_id"] for hit in hits] == ["c2"]  # q1 embeds as (2, 1): nearest (0.8, 0.6)
