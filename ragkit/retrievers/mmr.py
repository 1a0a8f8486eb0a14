"""Maximal marginal relevance over the dense top ``fetch_k``: relevant, but not redundant."""

from __future__ import annotations

import numpy as np

from ragkit.artefacts.index import Hit
from ragkit.retrievers.base import PrefixRule, Retriever
from ragkit.retrievers.params import MMRParams, MMRRetrieverInfo


def mmr_order(query: np.ndarray, candidates: np.ndarray, count: int, mmr_lambda: float) -> list[int]:
    """Greedy MMR with the standard max-similarity-to-any-selected penalty.

    (LlamaIndex's get_top_k_mmr_embeddings penalises only the last pick, which lets near
    duplicates of earlier picks back in.) Vectors are unit length, so dot = cosine.
    """
    relevance = candidates @ query
    pairwise = candidates @ candidates.T
    selected: list[int] = []
    remaining = list(range(len(candidates)))
    while remaining and len(selected) < count:
        if selected:
            redundancy = pairwise[np.ix_(remaining, selected)].max(axis=1)
        else:
            redundancy = np.zeros(len(remaining))
        scores = mmr_lambda * relevance[remaining] - (1 - mmr_lambda) * redundancy
        selected.append(remaining.pop(int(np.argmax(scores))))
    return selected


class MMRRetriever(MMRRetrieverInfo, Retriever):
    params: MMRParams

    def prefix_rule(self, depth: int) -> PrefixRule:
        """The same fetch_k candidates, picked greedily: the first top_k picks do not depend on how
        many follow (fetch_k bounds the depth)."""
        return "always" if depth <= self.params.fetch_k else "never"

    def search(self, query: str) -> list[Hit]:
        query_vector = self.query_vector(query)
        candidates = self.index.dense(query_vector, self.params.fetch_k, with_vectors=True, where=self.where)
        if not candidates:
            return []
        matrix = np.stack([_vector(hit) for hit in candidates])
        order = mmr_order(query_vector, matrix, self.params.top_k, self.params.mmr_lambda)
        return [candidates[i] for i in order]


def _vector(hit: Hit) -> np.ndarray:
    if hit.vector is None:  # dense(..., with_vectors=True) returns every hit's vector
        raise ValueError(f"dense hit {hit.row.get('chunk_id')} came without its vector")
    return hit.vector
