"""Dense retrieval: cosine similarity between the query vector and chunk vectors."""

from __future__ import annotations

from ragkit.artefacts.index import Hit
from ragkit.retrievers.base import Retriever
from ragkit.retrievers.params import DenseRetrieverInfo


class DenseRetriever(DenseRetrieverInfo, Retriever):
    def search(self, query: str) -> list[Hit]:
        return self.index.dense(self.query_vector(query), self.params.top_k, where=self.where)
