"""Hybrid retrieval: reciprocal rank fusion of dense and BM25 rankings."""

from __future__ import annotations

from ragkit.artefacts.index import Hit
from ragkit.retrievers.base import PrefixRule, Retriever
from ragkit.retrievers.params import HybridParams, HybridRetrieverInfo


class HybridRetriever(HybridRetrieverInfo, Retriever):
    params: HybridParams

    def prefix_rule(self, depth: int) -> PrefixRule:
        """Both rankings are fused at max(fetch_k, top_k): at the same depth it is the same search."""
        same = max(self.params.fetch_k, depth) == max(self.params.fetch_k, self.params.top_k)
        return "always" if same else "never"

    def search(self, query: str) -> list[Hit]:
        # Fusing deeper lists than top_k lets a chunk ranked moderately by both win.
        depth = max(self.params.fetch_k, self.params.top_k)
        hits = self.index.hybrid(query, self.query_vector(query), depth, self.params.rrf_k, where=self.where)
        return hits[: self.params.top_k]
