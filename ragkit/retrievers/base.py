"""What every retriever shares: params (top_k, threshold, scope), the retrieval cache, node
building, the LlamaIndex hook.

``scope: question_doc`` limits every search to the question's own documents (``set_scope``, called
by the pipeline per question) with a LanceDB prefilter, so a question asked about one document is
answered from it alone. The retrieval cache (``use_cache``) answers a search it has seen, for the
same index, retriever, parameters, query and scope, without searching or embedding the query.
"""

from __future__ import annotations

import json
import time
from typing import ClassVar, Literal

import numpy as np
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from pydantic import Field

from ragkit.embedders.base import Embedder
from ragkit.index import ChunkIndex, Hit, doc_filter
from ragkit.registry import Component, ComponentParams, Registry
from ragkit.retrievers.cache import RetrievalCache
from ragkit.retrievers.similarity import cosine_similarities

# The built-ins, by import path (loaded on first use); plugins join through entry points.
retrievers: Registry[Retriever] = Registry("retriever", builtins={
    "dense": "ragkit.retrievers.dense:DenseRetriever",
    "bm25": "ragkit.retrievers.bm25:BM25Retriever",
    "hybrid": "ragkit.retrievers.hybrid:HybridRetriever",
    "mmr": "ragkit.retrievers.mmr:MMRRetriever",
})


class RetrieverParams(ComponentParams):
    top_k: int = Field(default=10, ge=1, le=1000, description="Chunks returned per query.")
    score_threshold: float | None = Field(
        default=None, description="Drop chunks scoring below this (scale depends on the retriever)."
    )
    min_similarity: float | None = Field(
        default=None, ge=-1.0, le=1.0,
        description="Drop chunks whose cosine similarity to the query is below this, whichever retriever "
        "ranked them (dense and mmr: their own score; hybrid and bm25: the chunk's stored vector, so an "
        "embedder is needed). None: no filter.",
    )
    scope: Literal["all", "question_doc"] = Field(
        default="all",
        description="all: search the whole corpus; question_doc: only the question's own documents (its "
        "relevant documents, a LanceDB prefilter); a question naming none searches everything, recorded.",
    )

    added_fields: ClassVar[frozenset[str]] = ComponentParams.added_fields | {"scope", "min_similarity"}


class Retriever(Component, BaseRetriever):
    """Subclasses implement ``search``; ``_retrieve`` adds thresholding and LlamaIndex nodes."""

    kind: ClassVar[str] = "retriever"
    Params: ClassVar[type[RetrieverParams]] = RetrieverParams
    params: RetrieverParams
    # Retrievers that never look at vectors can share an index without an embedder.
    uses_embedder: ClassVar[bool] = True
    # Its hits' scores are cosine similarities to the query (the similarity filter reads them).
    scores_are_similarities: ClassVar[bool] = False

    def __init__(self, params: RetrieverParams, index: ChunkIndex, embedder: Embedder | None = None) -> None:
        BaseRetriever.__init__(self)
        self.params = params
        self.index = index
        if self.uses_embedder and embedder is None:
            raise ValueError(f"retriever '{self.name}' needs an embedder")
        if params.min_similarity is not None and embedder is None:
            raise ValueError(f"retriever '{self.name}': min_similarity compares the chunks' vectors with the "
                             "query's and needs an embedder; use score_threshold for its own scores")
        self.embedder = embedder
        self._last_vector: tuple[str, np.ndarray] | None = None
        self.where: str | None = None  # the scope's prefilter for the current question
        self.scope_missing = False
        self._cache: RetrievalCache | None = None
        self._replayed_seconds = 0.0

    def set_scope(self, doc_ids: list[str] | None) -> None:
        """The current question's documents; only ``scope: question_doc`` uses them. Without any,
        the search covers every document and ``scope_missing`` says so (the pipeline records it):
        a question that names no document is still answered, visibly unscoped."""
        self.where, self.scope_missing = None, False
        if self.params.scope == "question_doc":
            if doc_ids:
                self.where = doc_filter(doc_ids)
            else:
                self.scope_missing = True

    def use_cache(self, cache: RetrievalCache | None) -> None:
        self._cache = cache

    def drain_replayed_seconds(self) -> float:
        """The search time the cache replayed since the last call (what those searches cost),
        with the embedder's correction that charges each query its own embedding time even when
        its vector was embedded earlier or in a batch (``Embedder.embed_query``)."""
        seconds, self._replayed_seconds = self._replayed_seconds, 0.0
        if self.embedder is not None:
            seconds += self.embedder.drain_adjustment()
        return seconds

    def cache_key(self, query: str) -> str:
        return RetrievalCache.key(self.index.index_id, self.name, self.params.key_dump(), query, self.where)

    def cached_search(self, query: str) -> list[Hit]:
        """``search``, answered from the cache when it has seen this search."""
        if self._cache is None or not self.index.index_id:
            return self.search(query)
        key = self.cache_key(query)
        entry = self._cache.get(key)
        if entry is not None:
            hits, seconds = entry
            self._replayed_seconds += seconds
            return hits
        started = time.perf_counter()
        before = self.embedder.pending_adjustment() if self.embedder is not None else 0.0
        hits = self.search(query)
        after = self.embedder.pending_adjustment() if self.embedder is not None else 0.0
        # What this search cost, its query's embedding share included, is what a hit replays.
        self._cache.put(key, hits, time.perf_counter() - started + after - before)
        return hits

    def search(self, query: str) -> list[Hit]:
        raise NotImplementedError

    def query_vector(self, query: str) -> np.ndarray:
        """The embedded query, for retrievers that use the embedder (``__init__`` made sure they have one)."""
        if self.embedder is None:
            raise ValueError(f"retriever '{self.name}' needs an embedder")
        vector = self.embedder.embed_query(query)
        self._last_vector = (query, vector)
        return vector

    def query_similarities(self, query: str, hits: list[Hit]) -> list[float]:
        """Each hit's cosine similarity to the query: its score where that is one, else its stored
        vector's (the query embedded once: the search's own vector is reused, not charged twice)."""
        if self.scores_are_similarities or not hits:
            return [hit.score for hit in hits]
        last = self._last_vector
        vector = last[1] if last is not None and last[0] == query else self.query_vector(query)
        return cosine_similarities(self.index, vector, hits)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        hits = self.cached_search(query_bundle.query_str)[: self.params.top_k]
        if self.params.score_threshold is not None:
            hits = [hit for hit in hits if hit.score >= self.params.score_threshold]
        if self.params.min_similarity is not None:
            similarities = self.query_similarities(query_bundle.query_str, hits)
            hits = [hit for hit, similarity in zip(hits, similarities, strict=True)
                    if similarity >= self.params.min_similarity]
        return [NodeWithScore(node=hit_to_node(hit), score=hit.score) for hit in hits]


def hit_to_node(hit: Hit) -> TextNode:
    row = hit.row
    metadata = json.loads(row["metadata"]) if row.get("metadata") else {}
    metadata.update(
        doc_id=row["doc_id"],
        start_char=int(row["start_char"]),
        end_char=int(row["end_char"]),
        chunk_index=int(row["chunk_index"]),
    )
    return TextNode(
        id_=row["chunk_id"],
        text=row["text"],
        metadata=metadata,
        start_char_idx=int(row["start_char"]),
        end_char_idx=int(row["end_char"]),
    )
