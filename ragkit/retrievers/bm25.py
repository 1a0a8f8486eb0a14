"""BM25 through LanceDB's native full-text index (English stemming and stop words)."""

from __future__ import annotations

from typing import ClassVar

from ragkit.index import Hit
from ragkit.retrievers.base import Retriever


class BM25Retriever(Retriever):
    name: ClassVar[str] = "bm25"
    uses_embedder: ClassVar[bool] = False

    def search(self, query: str) -> list[Hit]:
        return self.index.fulltext(query, self.params.top_k, where=self.where)
