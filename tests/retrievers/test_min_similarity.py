"""The similarity filter (``min_similarity``, issue 31 item 3): a retriever option, so the base
pipeline filters with every judge off. It drops chunks whose cosine similarity to the query is
below the threshold whichever retriever ranked them: dense and MMR by their own scores, hybrid
and BM25 (ranked by fused or BM25 scores) by the chunk's stored vector. Hand-made 2-d vectors make
each similarity known in advance; scikit-learn's cosine_similarity checks the table."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics.pairwise import cosine_similarity

from ragkit.artefacts.index import IndexStore
from ragkit.embedders.local import SentenceTransformerEmbedder
from ragkit.errors import ConfigError
from ragkit.experiments.config import config_from_dict
from ragkit.hashing import text_sha256
from ragkit.registry import ComponentParams
from ragkit.retrievers import retrievers

pytestmark = pytest.mark.integration

QUERY = "cats purr"
QUERY_VECTOR = (1.0, 0.0)
# chunk id -> (text, vector, its cosine similarity to the query vector, by hand)
CHUNKS = {
    "a": ("cats purr and purr", (2.0, 0.0), 1.0),
    "b": ("cats purr loudly", (0.6, 0.8), 0.6),
    "c": ("cats and purr sounds", (0.3, np.sqrt(1 - 0.09)), 0.3),
    "d": ("cats sleep", (0.0, 1.0), 0.0),
    "e": ("cats purr rarely", (-0.5, np.sqrt(0.75)), -0.5),
}


class QueryModel:
    """Every query embeds to QUERY_VECTOR."""

    def get_query_embedding(self, text: str) -> list[float]:
        return list(QUERY_VECTOR)

    def _embed(self, texts: list[str], prompt_name: str | None = None) -> list[list[float]]:
        return [list(QUERY_VECTOR) for _ in texts]


class FixedQueryEmbedder(SentenceTransformerEmbedder):
    name: ClassVar[str] = "fixed"
    Params: ClassVar[type[ComponentParams]] = ComponentParams

    def __init__(self) -> None:
        super().__init__(ComponentParams())

    def _create_model(self) -> Any:
        return QueryModel()


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    ids = list(CHUNKS)
    texts = [CHUNKS[i][0] for i in ids]
    chunks = pd.DataFrame({
        "chunk_id": ids, "doc_id": [f"{i}.txt" for i in ids], "chunk_index": 0, "start_char": 0,
        "end_char": [len(t) for t in texts], "text": texts, "embed_text": texts,
        "text_sha": [text_sha256(t) for t in texts], "metadata": "{}",
    })
    vectors = np.array([CHUNKS[i][1] for i in ids], dtype=np.float32)
    return IndexStore(tmp_path_factory.mktemp("lancedb")).build("similarity", chunks, vectors)


def kept(name: str, index, **params) -> set[str]:
    retriever = retrievers.build({"type": name, "params": {"top_k": 5, **params}}, index=index,
                                 embedder=FixedQueryEmbedder())
    return {node.node.node_id for node in retriever.retrieve(QUERY)}


@pytest.mark.unit
def test_the_hand_computed_similarities_agree_with_scikit_learn():
    vectors = np.array([vector for _, vector, _ in CHUNKS.values()])
    expected = [similarity for _, _, similarity in CHUNKS.values()]
    assert cosine_similarity([QUERY_VECTOR], vectors)[0] == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("name", ["dense", "bm25", "hybrid", "mmr"])
@pytest.mark.parametrize(("threshold", "expected"), [
    (None, None),  # off: whatever the retriever returns
    (0.4, {"a", "b"}),
    (0.25, {"a", "b", "c"}),
    (-0.1, {"a", "b", "c", "d"}),
    (1.0, {"a"}),
])
def test_min_similarity_keeps_the_chunks_at_or_above_it_for_every_retriever(index, name, threshold, expected):
    unfiltered = kept(name, index)
    params = {} if threshold is None else {"min_similarity": threshold}
    if name == "mmr":
        params["fetch_k"] = 5
    found = kept(name, index, **params)
    if expected is None:
        assert found == unfiltered
    else:
        assert found == unfiltered & expected
    # BM25 finds "cats" in every chunk: the filter, not the ranking, decides what is left.
    if name in ("dense", "bm25") and threshold == 0.4:
        assert unfiltered == set(CHUNKS) and found == {"a", "b"}


def test_the_filter_keeps_the_retrievers_order_and_scores(index):
    retriever = retrievers.build({"type": "bm25", "params": {"top_k": 5, "min_similarity": 0.25}}, index=index,
                                 embedder=FixedQueryEmbedder())
    plain = retrievers.build({"type": "bm25", "params": {"top_k": 5}}, index=index)
    filtered = [(n.node.node_id, n.score) for n in retriever.retrieve(QUERY)]
    assert filtered == [(n.node.node_id, n.score) for n in plain.retrieve(QUERY) if n.node.node_id in {"a", "b", "c"}]


class TwoQueryModel(QueryModel):
    """QUERY embeds to QUERY_VECTOR, its paraphrase to (0.8, 0.6): cosine 0.8 between the two."""

    def get_query_embedding(self, text: str) -> list[float]:
        return list(QUERY_VECTOR) if text == QUERY else [0.8, 0.6]


class TwoQueryEmbedder(FixedQueryEmbedder):
    def _create_model(self) -> Any:
        return TwoQueryModel()


def test_after_a_semantic_cache_hit_the_filter_compares_with_the_new_query(index):
    """A reused hit list carries the cached query's scores; the filter must measure each chunk
    against the query asked. To (0.8, 0.6) the chunks' cosines are a 0.8, b 0.96, c 0.81, d 0.6,
    e 0.12 (by hand; scikit-learn below), so 0.5 keeps a-d, where the cached query's kept a, b."""
    paraphrase_vector = [[0.8, 0.6]]
    vectors = np.array([vector for _, vector, _ in CHUNKS.values()])
    expected = dict(zip(CHUNKS, cosine_similarity(paraphrase_vector, vectors)[0], strict=True))
    assert {chunk for chunk, value in expected.items() if value >= 0.5} == {"a", "b", "c", "d"}
    params = {"top_k": 5, "min_similarity": 0.5, "semantic_cache": 0.7}
    retriever = retrievers.build({"type": "dense", "params": params}, index=index, embedder=TwoQueryEmbedder())
    assert {node.node.node_id for node in retriever.retrieve(QUERY)} == {"a", "b"}
    retriever.set_scope(None)  # the next question
    assert {node.node.node_id for node in retriever.retrieve("why cats purr")} == {"a", "b", "c", "d"}
    assert [lookup.hit for lookup in retriever.drain_cache_lookups()] == [False, True]


@pytest.mark.unit
def test_at_its_default_it_stays_out_of_the_spec():
    assert retrievers.resolve({"type": "hybrid", "params": {"min_similarity": None}}) == retrievers.resolve("hybrid")
    assert retrievers.resolve({"type": "hybrid", "params": {"min_similarity": 0.4}}).params["min_similarity"] == 0.4


@pytest.mark.unit
def test_out_of_range_is_a_config_error():
    with pytest.raises(ConfigError, match="min_similarity"):
        retrievers.resolve({"type": "dense", "params": {"min_similarity": 1.5}})


@pytest.mark.unit
def test_a_retriever_without_vectors_refuses_it(index):
    with pytest.raises(ValueError, match=r"min_similarity .* needs an embedder"):
        retrievers.build({"type": "bm25", "params": {"min_similarity": 0.4}}, index=index)
    with pytest.raises(ConfigError, match=r"retrievers \['bm25'\] set min_similarity"):
        config_from_dict({"name": "x", "dataset": {"path": "q.jsonl"}, "embedders": ["minilm"],
                          "retrievers": [{"type": "bm25", "params": {"min_similarity": 0.4}}]})
