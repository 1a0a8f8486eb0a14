"""Dense retrieval: cosine similarity between the query vector and chunk vectors."""

from __future__ import annotations

from ragkit.artefacts.index import Hit
from ragkit.retrievers.base import PrefixRule, Retriever
from ragkit.retrievers.params import DenseRetrieverInfo


class DenseRetriever(DenseRetrieverInfo, Retriever):
    def prefix_rule(self, depth: int) -> PrefixRule:
        """An exact search ranks by distance, equal distances in an order that may depend on the limit
        (tests/retrievers/test_shared_searches.py); an approximate one's candidates depend on it."""
        return "untied" if self.index.ann is None else "never"

    def search(self, query: str) -> list[Hit]:
        return self.index.dense(self.query_vector(query), self.params.top_k, where=self.where)
