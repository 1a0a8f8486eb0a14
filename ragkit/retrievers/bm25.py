"""BM25 through LanceDB's native full-text index (English stemming and stop words)."""

from __future__ import annotations

from ragkit.artefacts.index import Hit
from ragkit.retrievers.base import PrefixRule, Retriever
from ragkit.retrievers.params import BM25RetrieverInfo


class BM25Retriever(BM25RetrieverInfo, Retriever):
    def prefix_rule(self, depth: int) -> PrefixRule:
        """LanceDB's full-text search ranks by score exactly, but which of several chunks with the
        same score it returns, and in what order, changes with the limit."""
        return "untied"

    def search(self, query: str) -> list[Hit]:
        return self.index.fulltext(query, self.params.top_k, where=self.where)
