"""What every retriever shares: params (top_k, threshold), node building, the LlamaIndex hook."""

from __future__ import annotations

import json
from typing import ClassVar

import numpy as np
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from pydantic import Field

from ragkit.embeddings import Embedder
from ragkit.index import ChunkIndex, Hit
from ragkit.registry import Component, ComponentParams


class RetrieverParams(ComponentParams):
    top_k: int = Field(default=10, ge=1, le=1000, description="Chunks returned per query.")
    score_threshold: float | None = Field(
        default=None, description="Drop chunks scoring below this (scale depends on the retriever)."
    )


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

    def search(self, query: str) -> list[Hit]:
        raise NotImplementedError

    def query_vector(self, query: str) -> np.ndarray:
        """The embedded query, for retrievers that use the embedder (``__init__`` made sure they have one)."""
        if self.embedder is None:
            raise ValueError(f"retriever '{self.name}' needs an embedder")
        return self.embedder.embed_query(query)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        hits = self.search(query_bundle.query_str)[: self.params.top_k]
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
