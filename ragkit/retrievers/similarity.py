"""The similarity filter (``min_similarity``): each retrieved chunk's cosine similarity to the
query, whichever retriever ranked it, so one threshold means the same for dense, hybrid, MMR and
BM25 (a fused RRF score or a BM25 score has no fixed scale; ``score_threshold`` filters those).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ragkit.artefacts.index import ChunkIndex, Hit, sql_text


def cosine_similarities(index: ChunkIndex, query_vector: np.ndarray, hits: Sequence[Hit]) -> list[float]:
    """Cosine similarity of each hit's stored vector to ``query_vector``, in the hits' order (one
    filtered scan of the index for the hits' chunk ids)."""
    if not hits:
        return []
    ids = sorted({str(hit.row["chunk_id"]) for hit in hits})
    where = f"chunk_id IN ({', '.join(sql_text(chunk_id) for chunk_id in ids)})"
    vectors = {str(hit.row["chunk_id"]): hit.vector for hit in index.chunks(where, with_vectors=True)
               if hit.vector is not None}
    missing = [chunk_id for chunk_id in ids if chunk_id not in vectors]
    if missing:  # a hit comes from this index, so its row is there: anything else is a broken index
        raise ValueError(f"index {index.index_id}: no vector for retrieved chunks {missing[:3]}")
    matrix = np.stack([vectors[str(hit.row["chunk_id"])] for hit in hits]).astype(np.float64)
    query = np.asarray(query_vector, dtype=np.float64)
    norms = np.linalg.norm(matrix, axis=1) * np.linalg.norm(query)
    return [float(value) for value in (matrix @ query) / np.where(norms == 0, 1.0, norms)]
