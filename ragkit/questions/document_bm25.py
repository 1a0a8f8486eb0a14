"""Okapi BM25 over whole documents, in memory: which document does keyword search rank first?

Used by the question-set quality report, not by experiments (those search chunks through the
LanceDB full-text index). Term counts are a scipy sparse matrix (a corpus of thousands of
documents scores hundreds of questions in well under a second), built here with the same
content-word tokeniser as the overlap measure rather than with scikit-learn's CountVectorizer,
whose import is slow on the dashboard page; the BM25 weighting (k1, b, the idf of
``ragkit.stages.context.rerank.bm25_scores``) is the few lines below.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import sparse

from ragkit.text import multilingual_content_words


class DocumentBM25:
    def __init__(self, doc_ids: Sequence[str], texts: Sequence[str], k1: float = 1.2, b: float = 0.75) -> None:
        self.doc_ids = list(doc_ids)
        self._position = {doc_id: index for index, doc_id in enumerate(self.doc_ids)}
        self._vocabulary: dict[str, int] = {}
        rows, columns = [], []
        for row, text in enumerate(texts):
            for word in multilingual_content_words(text):
                rows.append(row)
                columns.append(self._vocabulary.setdefault(word, len(self._vocabulary)))
        counts = sparse.csr_matrix((np.ones(len(rows)), (rows, columns)),
                                   shape=(len(self.doc_ids), max(1, len(self._vocabulary))))
        counts.sum_duplicates()
        lengths = np.asarray(counts.sum(axis=1)).ravel()
        average = lengths.mean() or 1.0
        frequency = np.asarray((counts > 0).sum(axis=0)).ravel()
        idf = np.log(1 + (len(self.doc_ids) - frequency + 0.5) / (frequency + 0.5))
        row_of = np.repeat(np.arange(counts.shape[0]), np.diff(counts.indptr))
        tf = counts.data
        counts.data = idf[counts.indices] * tf * (k1 + 1) / (tf + k1 * (1 - b + b * lengths[row_of] / average))
        self._weights = counts.tocsc()

    def scores(self, query: str) -> np.ndarray:
        """BM25 of every document for the query (each distinct query term counted once)."""
        vocabulary = self._vocabulary
        columns = sorted({vocabulary[term] for term in multilingual_content_words(query) if term in vocabulary})
        if not columns:
            return np.zeros(len(self.doc_ids))
        return np.asarray(self._weights[:, columns].sum(axis=1)).ravel()

    def ranks_first(self, query: str, doc_id: str) -> bool:
        """True if ``doc_id`` scores strictly above every other document (a tie is no win)."""
        scores = self.scores(query)
        position = self._position[doc_id]
        own = scores[position]
        return bool(own > 0 and (np.delete(scores, position) < own).all())
