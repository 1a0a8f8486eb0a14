"""Hybrid retrieval: reciprocal rank fusion of dense and BM25 rankings."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from ragkit.index import Hit
from ragkit.retrievers.base import Retriever, RetrieverParams


class HybridParams(RetrieverParams):
    rrf_k: int = Field(default=60, ge=1, le=1000, description="RRF constant k in 1 / (k + rank).")
    fetch_k: int = Field(
        default=50, ge=1, le=1000, description="Depth of each ranking fused (raised to top_k if smaller)."
    )


class HybridRetriever(Retriever):
    name: ClassVar[str] = "hybrid"
    Params: ClassVar[type[HybridParams]] = HybridParams
    params: HybridParams

    def search(self, query: str) -> list[Hit]:
        # Fusing deeper lists than top_k lets a chunk ranked moderately by both win.
        depth = max(self.params.fetch_k, self.params.top_k)
        hits = self.index.hybrid(query, self.query_vector(query), depth, self.params.rrf_k, where=self.where)
        return hits[: self.params.top_k]
