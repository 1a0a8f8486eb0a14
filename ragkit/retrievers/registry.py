"""The retriever registry: built-in names -> classes (imported on first use) and their light info
classes (``ragkit.retrievers.params``), so a config is validated and planned without LlamaIndex."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ragkit.registry import Registry
from ragkit.retrievers.params import RetrieverInfo

if TYPE_CHECKING:
    from ragkit.retrievers.base import Retriever

_INFOS = "ragkit.retrievers.params"

# The built-ins, by import path (loaded on first use); plugins join through entry points.
retrievers: Registry[Retriever, RetrieverInfo] = Registry("retriever", builtins={
    "dense": "ragkit.retrievers.dense:DenseRetriever",
    "bm25": "ragkit.retrievers.bm25:BM25Retriever",
    "hybrid": "ragkit.retrievers.hybrid:HybridRetriever",
    "mmr": "ragkit.retrievers.mmr:MMRRetriever",
}, infos={
    "dense": f"{_INFOS}:DenseRetrieverInfo",
    "bm25": f"{_INFOS}:BM25RetrieverInfo",
    "hybrid": f"{_INFOS}:HybridRetrieverInfo",
    "mmr": f"{_INFOS}:MMRRetrieverInfo",
})
