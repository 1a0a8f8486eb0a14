"""What every retriever shares: params (top_k, threshold, scope), the retrieval cache, node
building, the LlamaIndex hook.

``scope: question_doc`` limits every search to the question's own documents (its gold, relevant
ones), ``scope: named_doc`` to the document(s) the user chose (the question's ``document`` field);
``set_scope``, called by the pipeline per question, sets a LanceDB prefilter, so a question asked
about one document is answered from it alone. The retrieval cache (``use_cache``) answers a search it has seen, for the
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
    scope: Literal["all", "question_doc", "named_doc"] = Field(
        default="all",
        description="all: search the whole corpus; question_doc: only the question's own documents (its "
        "relevant documents, the gold scope); named_doc: only the document(s) the user chose (the question's "
        "`document` field). A LanceDB prefilter; a question without such documents searches everything, recorded.",
    )

    added_fields: ClassVar[frozenset[str]] = ComponentParams.added_fields | {"scope"}


class Retriever(Component, BaseRetriever):
    """Subclasses implement ``search``; ``_retrieve`` adds thresholding and LlamaIndex nodes."""

    kind: ClassVar[str] = "retriever"
    Params: ClassVar[type[RetrieverParams]] = RetrieverParams
    params: RetrieverParams
    # Retrievers that never look at vectors can share an index without an embedder.
    uses_embedder: ClassVar[bool] = True

    def __init__(self, params: RetrieverParams, index: ChunkIndex, embedder: Embedder | None = None) -> None:
        BaseRetriever.__init__(self)
        self.params = params
        self.index = index
        if self.uses_embedder and embedder is None:
            raise ValueError(f"retriever '{self.name}' needs an embedder")
        self.embedder = embedder
        self.where: str | None = None  # the scope's prefilter for the current question
        self.scope_missing = False
        self._cache: RetrievalCache | None = None
        self._replayed_seconds = 0.0

    def set_scope(self, doc_ids: list[str] | None, named: list[str] | None = None) -> None:
        """The current question's documents: ``doc_ids`` its relevant ones (``scope: question_doc``),
        ``named`` the ones the user chose (``scope: named_doc``); ``scope: all`` uses neither. Without
        any, the search covers every document and ``scope_missing`` says so (the pipeline records it):
        a question that names no document is still answered, visibly unscoped."""
        self.where, self.scope_missing = None, False
        if self.params.scope == "all":
            return
        chosen = doc_ids if self.params.scope == "question_doc" else named
        if chosen:
            self.where = doc_filter(chosen)
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
        return self.embedder.embed_query(query)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        hits = self.cached_search(query_bundle.query_str)[: self.params.top_k]
        if self.params.score_threshold is not None:
            hits = [hit for hit in hits if hit.score >= self.params.score_threshold]
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
