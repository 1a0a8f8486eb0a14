"""What every retriever shares: params (top_k, threshold, scope; declared in ``params.py``, without
LlamaIndex), the retrieval cache, node building, the LlamaIndex hook.

``scope: question_doc`` limits every search to the question's own documents (its gold, relevant
ones), ``scope: named_doc`` to the document(s) the user chose (the question's ``document`` field);
``set_scope``, called by the pipeline per question, sets a LanceDB prefilter, so a question asked
about one document is answered from it alone. The retrieval cache (``use_cache``) answers a search it has seen, for the
same index, retriever, parameters, query and scope, without searching or embedding the query.
Runs that differ only in top_k share one search (``share_searches``): it is made at the deepest
top_k and each shallower run keeps its first hits, where the retriever's ``prefix_rule`` says that
is exactly what a search at its own top_k returns, and searches at its own top_k where not.
The semantic cache (``semantic_cache``, off by default) reuses, within one run, the hits of an
earlier query whose embedding is within a cosine threshold (``ragkit.retrievers.semantic_cache``);
with ``semantic_cache_store: persistent`` also those of earlier runs, read from the store that
``use_semantic_store`` gives (the pipeline's assembly gives ``DATA/semantic_cache``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from itertools import pairwise
from pathlib import Path
from typing import Any, Literal

import numpy as np
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from ragkit.artefacts.index import ChunkIndex, Hit, doc_filter
from ragkit.embedders.base import Embedder
from ragkit.retrievers.cache import RetrievalCache
from ragkit.retrievers.params import RetrieverInfo, RetrieverParams
from ragkit.retrievers.semantic_cache import CacheLookup, SemanticCache
from ragkit.retrievers.semantic_store import SemanticStore, space_key
from ragkit.retrievers.similarity import cosine_similarities

# How a retriever's hits at top_k relate to its hits for the same query at a larger top_k (``depth``):
# "never" known to be their first top_k; "always" their first top_k; "untied" their first top_k
# wherever the first top_k + 1 scores of the deeper search all differ (a search that ranks by score
# exactly, but whose order among equal scores depends on how many hits it was asked for).
PrefixRule = Literal["never", "always", "untied"]


class Retriever(RetrieverInfo, BaseRetriever):
    """Subclasses implement ``search``; ``_retrieve`` adds thresholding and LlamaIndex nodes. What
    a retriever declares (kind, Params, uses_embedder...) is in its info class (``params.py``)."""

    params: RetrieverParams

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
        if params.semantic_cache is not None and embedder is None:
            raise ValueError(f"retriever '{self.name}': semantic_cache compares query embeddings and needs an "
                             "embedder")
        # In memory, per retriever object: one run's searches (see ragkit.retrievers.semantic_cache);
        # a persistent one is made when its store is given (use_semantic_store).
        persistent = params.semantic_cache_store == "persistent"
        self._semantic = SemanticCache(params.semantic_cache) \
            if params.semantic_cache is not None and not persistent else None
        self._lookups: list[CacheLookup] = []
        self._vector_in_hand: tuple[str, np.ndarray] | None = None
        self._reused_for: str | None = None  # the query whose hits the semantic cache just reused
        self._shared_depth = params.top_k
        self._document_metadata: Mapping[str, Mapping[str, Any]] = {}

    def set_scope(self, doc_ids: list[str] | None, named: list[str] | None = None) -> None:
        """The current question's documents: ``doc_ids`` its relevant ones (``scope: question_doc``),
        ``named`` the ones the user chose (``scope: named_doc``); ``scope: all`` uses neither. Without
        any, the search covers every document and ``scope_missing`` says so (the pipeline records it):
        a question that names no document is still answered, visibly unscoped.

        Called once per question, it also starts the question for the semantic cache: its own
        searches are not matched."""
        self.where, self.scope_missing = None, False
        if self._semantic is not None:
            self._semantic.begin_question()
        if self.params.scope == "all":
            return
        chosen = doc_ids if self.params.scope == "question_doc" else named
        if chosen:
            self.where = doc_filter(chosen)
        else:
            self.scope_missing = True

    def use_cache(self, cache: RetrievalCache | None) -> None:
        self._cache = cache

    def share_searches(self, depth: int) -> None:
        """Search ``depth`` deep (the deepest top_k of the runs that make this search otherwise alike,
        ``Plan.search_depths``) through the retrieval cache, so the other runs read it, and keep the
        first top_k hits where ``prefix_rule(depth)`` says they are what a search at top_k returns.
        Without a retrieval cache nothing is shared."""
        self._shared_depth = max(depth, self.params.top_k)

    def prefix_rule(self, depth: int) -> PrefixRule:
        """Whether this retriever's hits at top_k are the first top_k of its hits at ``depth`` (larger
        than top_k), with the same query and scope (``PrefixRule``). A retriever that does not say is
        never shared."""
        return "never"

    def use_document_metadata(self, by_doc: Mapping[str, Mapping[str, Any]]) -> None:
        """Add ``by_doc[doc_id]`` to the metadata of every chunk of that document this retriever
        returns (the document profiles on chunks); the searches, their caches and the index are
        unchanged: the fields are added to the nodes made from the hits."""
        self._document_metadata = dict(by_doc)

    def use_semantic_store(self, root: Path) -> None:
        """Where a persistent semantic cache keeps its entries (nothing changes for one kept per run)."""
        if self.params.semantic_cache is None or self.params.semantic_cache_store != "persistent":
            return
        self._semantic = SemanticCache(self.params.semantic_cache, SemanticStore(root), self.semantic_space)

    def semantic_space(self, where: str | None) -> str:
        """The stored entries a persistent semantic cache shares: this index (its corpus version,
        chunker and embedder), retriever and parameters, and the document scope ``where``."""
        return space_key(self.index.index_id, self.name, self._search_params(), where)

    def flush_semantic_cache(self) -> int:
        """Write a persistent semantic cache's new entries (after a question: no step times it)."""
        return self._semantic.flush() if self._semantic is not None else 0

    def _search_params(self) -> dict[str, object]:
        # The semantic cache decides whether to search, not what a search returns.
        return {name: value for name, value in self.params.key_dump().items()
                if name not in ("semantic_cache", "semantic_cache_store")}

    def drain_replayed_seconds(self) -> float:
        """The search time the cache replayed since the last call (what those searches cost),
        with the embedder's correction that charges each query its own embedding time even when
        its vector was embedded earlier or in a batch (``Embedder.embed_query``)."""
        seconds, self._replayed_seconds = self._replayed_seconds, 0.0
        if self.embedder is not None:
            seconds += self.embedder.drain_adjustment()
        return seconds

    def drain_cache_lookups(self) -> list[CacheLookup]:
        """The semantic cache's lookups since the last call (none when it is off)."""
        lookups, self._lookups = self._lookups, []
        return lookups

    def cache_key(self, query: str) -> str:
        # An exact search is shared by runs with and without the semantic cache.
        return RetrievalCache.key(self.index.index_id, self.name, self._search_params(), query, self.where)

    def remembered_search(self, query: str) -> list[Hit]:
        """``cached_search``, unless the semantic cache holds a query close enough to this one
        (searched earlier in this run, under the same scope): then that query's hits."""
        if self._semantic is None:
            if self.params.semantic_cache_store == "persistent":
                raise ValueError(f"retriever '{self.name}': semantic_cache_store 'persistent' needs a store folder "
                                 "(use_semantic_store)")
            return self.cached_search(query)
        started = time.perf_counter()
        before = self._pending_adjustment()
        vector = self.query_vector(query)
        embedded = time.perf_counter() - started + self._pending_adjustment() - before
        reused, lookup = self._semantic.lookup(query, vector, self.where)
        self._lookups.append(lookup)
        if reused is not None:
            self._reused_for = query
            return reused
        # The search embeds the same query: hand it the vector, so the embedding is charged once
        # (here), and counted in what a later exact-cache hit of this search replays.
        self._vector_in_hand = (query, vector)
        try:
            hits = self.cached_search(query, embedded_seconds=embedded)
        finally:
            self._vector_in_hand = None
        self._semantic.add(query, vector, self.where, hits)
        return hits

    def _pending_adjustment(self) -> float:
        return self.embedder.pending_adjustment() if self.embedder is not None else 0.0

    def cached_search(self, query: str, embedded_seconds: float = 0.0) -> list[Hit]:
        """``search``, answered from the cache when it has seen this search, or from the cached
        deeper search that runs differing only in top_k share (``share_searches``).
        ``embedded_seconds``: what embedding the query cost before the call (the semantic cache's
        lookup embeds it)."""
        if self._cache is None or not self.index.index_id:
            return self.search(query)
        top_k, depth = self.params.top_k, self._shared_depth
        rule = self.prefix_rule(depth) if depth > top_k else "never"
        if rule != "never":
            with self._searching_at(depth):
                deeper = self._cached_search_here(self._cache, query, embedded_seconds)
            if rule == "always" or untied(deeper, top_k):
                return deeper[:top_k]
            embedded_seconds = 0.0  # paid by the deeper search
        return self._cached_search_here(self._cache, query, embedded_seconds)

    @contextmanager
    def _searching_at(self, top_k: int) -> Iterator[None]:
        """``search`` and ``cache_key`` as for this retriever with ``top_k`` (its params restored after)."""
        own = self.params
        self.params = own.model_copy(update={"top_k": top_k})
        try:
            yield
        finally:
            self.params = own

    def _cached_search_here(self, cache: RetrievalCache, query: str, embedded_seconds: float) -> list[Hit]:
        key = self.cache_key(query)
        entry = cache.get(key)
        if entry is not None:
            hits, seconds = entry
            # The entry's seconds include its query's embedding, which a semantic lookup just paid.
            self._replayed_seconds += max(0.0, seconds - embedded_seconds)
            return hits
        started = time.perf_counter()
        before = self._pending_adjustment()
        hits = self.search(query)
        after = self._pending_adjustment()
        # What this search cost, its query's embedding share included, is what a hit replays.
        cache.put(key, hits, time.perf_counter() - started + after - before + embedded_seconds)
        return hits

    def search(self, query: str) -> list[Hit]:
        raise NotImplementedError

    def query_vector(self, query: str) -> np.ndarray:
        """The embedded query, for retrievers that use the embedder (``__init__`` made sure they have one)."""
        if self.embedder is None:
            raise ValueError(f"retriever '{self.name}' needs an embedder")
        if self._vector_in_hand is not None and self._vector_in_hand[0] == query:
            vector = self._vector_in_hand[1]
        else:
            vector = self.embedder.embed_query(query)
        self._last_vector = (query, vector)
        return vector

    def query_similarities(self, query: str, hits: list[Hit]) -> list[float]:
        """Each hit's cosine similarity to the query: its score where that is one, else its stored
        vector's (the query embedded once: the search's own vector is reused, not charged twice)."""
        # Reused hits (the semantic cache) carry the cached query's scores, not this query's.
        reused = self._reused_for == query
        if (self.scores_are_similarities and not reused) or not hits:
            return [hit.score for hit in hits]
        last = self._last_vector
        vector = last[1] if last is not None and last[0] == query else self.query_vector(query)
        return cosine_similarities(self.index, vector, hits)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        self._reused_for = None
        hits = self.remembered_search(query_bundle.query_str)[: self.params.top_k]
        if self.params.score_threshold is not None:
            hits = [hit for hit in hits if hit.score >= self.params.score_threshold]
        if self.params.min_similarity is not None:
            similarities = self.query_similarities(query_bundle.query_str, hits)
            hits = [hit for hit, similarity in zip(hits, similarities, strict=True)
                    if similarity >= self.params.min_similarity]
        nodes = [NodeWithScore(node=hit_to_node(hit), score=hit.score) for hit in hits]
        if self._document_metadata:
            for node in nodes:  # each node's metadata is its own (hit_to_node makes a new dict)
                node.node.metadata.update(self._document_metadata.get(node.node.metadata["doc_id"], {}))
        return nodes


def untied(hits: list[Hit], top_k: int) -> bool:
    """The first ``top_k`` + 1 scores all differ (fewer when the list is shorter): the first
    ``top_k`` are then the only top ``top_k`` by score, in the only order by score."""
    scores = [hit.score for hit in hits[: top_k + 1]]
    return all(higher > lower for higher, lower in pairwise(scores))


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
