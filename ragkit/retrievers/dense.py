"""Dense retrieval: cosine similarity between the query vector and chunk vectors."""

from __future__ import annotations

from typing import ClassVar

from ragkit.index import Hit
from ragkit.retrievers.base import Retriever


class DenseRetriever(Retriever):
    name: ClassVar[str] = "dense"
    scores_are_similarities: ClassVar[bool] = True  # 1 - cosine distance

    def search(self, query: str) -> list[Hit]:
        return self.index.dense(self.query_vector(query), self.params.top_k, where=self.where)
