"""Each built-in retriever's parameters and declarations, without LlamaIndex.

The retriever classes subclass LlamaIndex's BaseRetriever; validating a config and planning a
grid read only a retriever's ``Params``, ``version`` and flags (``uses_embedder``...), so these
live here, in an *info* class the retriever class subclasses, readable through
``retrievers.info(name)`` without importing the retriever (``ragkit.registry``).
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from ragkit.registry import Component, ComponentParams

# The retrievers a strategy judge or a quality gate can switch among over one index
# (``ragkit.retrievers.switchable``): every built-in but mmr.
STRATEGIES = ("dense", "bm25", "hybrid")


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
    scope: Literal["all", "question_doc", "named_doc"] = Field(
        default="all",
        description="all: search the whole corpus; question_doc: only the question's own documents (its "
        "relevant documents, the gold scope); named_doc: only the document(s) the user chose (the question's "
        "`document` field). A LanceDB prefilter; a question without such documents searches everything, recorded.",
    )
    semantic_cache: float | None = Field(
        default=None, gt=0.0, le=1.0,
        description="Off (none) by default. A cosine threshold: a query whose embedding is at least this "
        "close to one searched earlier in the same run (and scope) reuses its hits instead of searching "
        "(the dynamic-documents design uses 0.7). Needs an embedder; changes results, so it is in the run id.",
    )
    semantic_cache_store: Literal["run", "persistent"] = Field(
        default="run",
        description="With semantic_cache: run keeps the cache in memory for one run; persistent keeps it on disk "
        "per index (corpus version, chunker, embedder), retriever and document scope, so later runs reuse "
        "earlier runs' hits (the dynamic-documents design's; a run's results then depend on the runs before it).",
    )

    added_fields: ClassVar[frozenset[str]] = ComponentParams.added_fields | {
        "scope", "min_similarity", "semantic_cache", "semantic_cache_store"}

    @model_validator(mode="after")
    def _store_needs_a_cache(self) -> RetrieverParams:
        if self.semantic_cache_store == "persistent" and self.semantic_cache is None:
            raise ValueError("semantic_cache_store 'persistent' keeps the semantic cache: set semantic_cache "
                             "(a cosine threshold, e.g. 0.7)")
        return self


class HybridParams(RetrieverParams):
    rrf_k: int = Field(default=60, ge=1, le=1000, description="RRF constant k in 1 / (k + rank).")
    fetch_k: int = Field(
        default=50, ge=1, le=1000, description="Depth of each ranking fused (raised to top_k if smaller)."
    )


class MMRParams(RetrieverParams):
    fetch_k: int = Field(default=20, ge=1, le=1000, description="Dense candidates considered.")
    mmr_lambda: float = Field(
        default=0.5, ge=0.0, le=1.0, description="1 = pure relevance, 0 = pure diversity."
    )

    @model_validator(mode="after")
    def _fetch_at_least_top_k(self) -> MMRParams:
        if self.fetch_k < self.top_k:
            raise ValueError(f"fetch_k ({self.fetch_k}) must be >= top_k ({self.top_k})")
        return self


class RetrieverInfo(Component):
    """What every retriever declares; ``ragkit.retrievers.base.Retriever`` subclasses it."""

    kind: ClassVar[str] = "retriever"
    Params: ClassVar[type[RetrieverParams]] = RetrieverParams
    # Retrievers that never look at vectors can share an index without an embedder.
    uses_embedder: ClassVar[bool] = True
    # Its hits' scores are cosine similarities to the query (the similarity filter reads them).
    scores_are_similarities: ClassVar[bool] = False

    @classmethod
    def score_ceiling(cls, params: dict[str, Any]) -> float | None:
        """The highest score a hit can have with these params; None: unbounded or unknown (a plugin,
        bm25's sums). A quality gate's heuristic thresholds on the raw scores must be reachable."""
        return 1.0 if cls.scores_are_similarities else None


class DenseRetrieverInfo(RetrieverInfo):
    name: ClassVar[str] = "dense"
    scores_are_similarities: ClassVar[bool] = True  # 1 - cosine distance


class BM25RetrieverInfo(RetrieverInfo):
    name: ClassVar[str] = "bm25"
    uses_embedder: ClassVar[bool] = False


class HybridRetrieverInfo(RetrieverInfo):
    name: ClassVar[str] = "hybrid"
    Params: ClassVar[type[HybridParams]] = HybridParams

    @classmethod
    def score_ceiling(cls, params: dict[str, Any]) -> float | None:
        """LanceDB's RRF gives a hit 1 / (rank + k) per ranking, ranks from 0: first in both, 2 / k."""
        return 2 / int(params.get("rrf_k", HybridParams.model_fields["rrf_k"].default))


class MMRRetrieverInfo(RetrieverInfo):
    name: ClassVar[str] = "mmr"
    scores_are_similarities: ClassVar[bool] = True  # 1 - cosine distance
    Params: ClassVar[type[MMRParams]] = MMRParams
