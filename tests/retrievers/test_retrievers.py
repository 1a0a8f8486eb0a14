"""Retrievers over a real LanceDB index of real MiniLM vectors.

RetrieverContract holds what every retriever must do; each retriever's class adds what is
particular to it.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pandas as pd
import pytest
from llama_index.core.schema import QueryBundle

from ragkit.artefacts.index import IndexStore
from ragkit.errors import ConfigError
from ragkit.hashing import text_sha256
from ragkit.retrievers import retrievers
from ragkit.retrievers.mmr import mmr_order

pytestmark = pytest.mark.integration

TEXTS = {
    "cats": "Cats purr when they are content, and felines sleep most of the day.",
    "cats-copy": "Cats purr when they are content, and felines sleep most of the day!",
    "dogs": "Dogs bark at strangers and are loyal companions to their owners.",
    "qubits": "Quantum computers store information in qubits that can be in superposition.",
    "market": "The stock market fell sharply after the central bank raised interest rates.",
    "vaccine": "The vaccine trial reported 95 percent efficacy against symptomatic infection.",
}


@pytest.fixture(scope="module")
def index(tmp_path_factory, minilm_embedder):
    ids = list(TEXTS)
    texts = [TEXTS[i] for i in ids]
    chunks = pd.DataFrame({
        "chunk_id": [f"{i}:0" for i in ids], "doc_id": ids, "chunk_index": 0, "start_char": 0,
        "end_char": [len(t) for t in texts], "text": texts, "embed_text": texts,
        "text_sha": [text_sha256(t) for t in texts], "metadata": '{"title": "t"}',
    })
    store = IndexStore(tmp_path_factory.mktemp("lancedb"))
    return store.build("test", chunks, minilm_embedder.embed_texts(texts))


def _doc_ids(retriever, query: str) -> list[str]:
    return [n.node.metadata["doc_id"] for n in retriever.retrieve(QueryBundle(query))]


class RetrieverContract:
    name: str
    params: ClassVar[dict[str, Any]] = {}

    def build(self, index, embedder, **params):
        spec = {"type": self.name, "params": {**self.params, **params}}
        return retrievers.build(spec, index=index, embedder=embedder)

    def test_returns_at_most_top_k_nodes_with_offsets(self, index, minilm_embedder):
        nodes = self.build(index, minilm_embedder, top_k=3).retrieve("why do cats purr")
        assert 0 < len(nodes) <= 3
        for node in nodes:
            meta = node.node.metadata
            assert meta["doc_id"] in TEXTS and meta["end_char"] == len(TEXTS[meta["doc_id"]])
            assert node.node.text == TEXTS[meta["doc_id"]]

    def test_finds_the_obvious_document_first(self, index, minilm_embedder):
        assert _doc_ids(self.build(index, minilm_embedder, top_k=2), "stock market interest rates")[0] == "market"

    def test_scores_descend(self, index, minilm_embedder):
        scores = [n.score for n in self.build(index, minilm_embedder, top_k=4).retrieve("vaccine efficacy trial")]
        assert scores == sorted(scores, reverse=True) or self.name == "mmr"

    def test_score_threshold_drops_low_scores(self, index, minilm_embedder):
        query = "dogs bark at cats"
        everything = self.build(index, minilm_embedder, top_k=6).retrieve(query)
        scores = sorted(n.score for n in everything)
        cut = (scores[0] + scores[-1]) / 2
        kept = self.build(index, minilm_embedder, top_k=6, score_threshold=cut).retrieve(query)
        assert [n.node.node_id for n in kept] == [n.node.node_id for n in everything if n.score >= cut]
        assert 1 <= len(kept) < len(everything)

    def test_unknown_parameter_is_named(self):
        with pytest.raises(ConfigError, match="unknown parameter 'topk'"):
            retrievers.resolve({"type": self.name, "params": {"topk": 3}})


class TestDense(RetrieverContract):
    name = "dense"

    def test_matches_meaning_without_shared_words(self, index, minilm_embedder):
        top = _doc_ids(self.build(index, minilm_embedder, top_k=1), "kitten happiness sounds")
        assert top[0] in {"cats", "cats-copy"}

    def test_needs_an_embedder(self, index):
        with pytest.raises(ValueError, match="needs an embedder"):
            self.build(index, None)


class TestBM25(RetrieverContract):
    name = "bm25"

    def test_works_without_an_embedder_and_stems(self, index):
        # "barking" stems to "bark"; only the dogs text has it.
        assert _doc_ids(self.build(index, None, top_k=3), "barking") == ["dogs"]

    def test_no_shared_term_returns_nothing(self, index):
        assert _doc_ids(self.build(index, None, top_k=3), "xylophone") == []


class TestHybrid(RetrieverContract):
    name = "hybrid"

    def test_fuses_both_rankings(self, index, minilm_embedder):
        # Lexical hit for "barking" (bm25) and a semantic neighbour (dense) both appear.
        ids = _doc_ids(self.build(index, minilm_embedder, top_k=3), "barking pets")
        assert ids[0] == "dogs" and len(ids) == 3


class TestMMR(RetrieverContract):
    name = "mmr"
    params: ClassVar[dict[str, Any]] = {"fetch_k": 6}

    def test_pushes_a_near_duplicate_down(self, index, minilm_embedder):
        relevance_only = _doc_ids(self.build(index, minilm_embedder, top_k=2, mmr_lambda=1.0), "cats purring")
        diverse = _doc_ids(self.build(index, minilm_embedder, top_k=2, mmr_lambda=0.3), "cats purring")
        assert set(relevance_only) == {"cats", "cats-copy"}
        assert len({"cats", "cats-copy"} & set(diverse)) == 1

    def test_fetch_k_below_top_k_is_rejected(self):
        with pytest.raises(ConfigError, match=r"fetch_k \(3\) must be >= top_k \(5\)"):
            retrievers.resolve({"type": "mmr", "params": {"fetch_k": 3, "top_k": 5}})


@pytest.mark.unit
@pytest.mark.parametrize(
    ("mmr_lambda", "expected"),
    [
        # relevance (dot with the query): a 0.8, b 0.8, c 0.6; lambda 1 ranks by relevance alone
        (1.0, [0, 1, 2]),
        # lambda 0.5, after a: b scores 0.5*0.8 - 0.5*1 = -0.1, c scores 0.5*0.6 - 0.5*0 = 0.3
        (0.5, [0, 2, 1]),
    ],
)
def test_mmr_order_hand_computed(mmr_lambda, expected):
    query = np.array([0.8, 0.6])
    candidates = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])  # a, b (a copy of a), c
    assert mmr_order(query, candidates, 3, mmr_lambda) == expected
