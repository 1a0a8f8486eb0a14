"""What every embedder shares: the query-vector memo, unit vectors, and the kind's registry.

Every backend is a LlamaIndex ``BaseEmbedding`` underneath, created lazily on first use and
passed explicitly to whatever needs it (never through llama_index ``Settings``). A backend
writes ``_create_model`` (and ``_embed_query_batch`` when it embeds a list of queries at once):
the local sentence-transformers models are in ``local.py``, the ONNX Runtime MiniLM in
``onnx_minilm.py``, the HTTP servers in ``remote.py``,
and the cache that makes each text embed once in ``cache.py``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from ragkit.registry import Component, ComponentParams, Registry

# The built-ins, by import path (loaded on first use); plugins join through entry points.
embedders: Registry[Embedder] = Registry("embedder", builtins={
    "minilm": "ragkit.embedders.local:MiniLMEmbedder",
    "huggingface": "ragkit.embedders.local:HuggingFaceEmbedder",
    "minilm-onnx": "ragkit.embedders.onnx_minilm:MiniLMOnnxEmbedder",
    "ollama": "ragkit.embedders.remote:OllamaEmbedder",
    "openai": "ragkit.embedders.remote:OpenAIEmbedder",
})


class Embedder(Component):
    kind: ClassVar[str] = "embedder"

    def __init__(self, params: ComponentParams) -> None:
        self.params = params
        self._model: Any = None
        # A grid asks the same questions of many indexes: embed each question once per process,
        # remembering what its embedding cost (its share of the batch it was embedded in).
        self._query_vectors: dict[str, tuple[np.ndarray, float]] = {}
        self._expected: list[str] = []
        self._adjustment = 0.0
        self.query_batches = 0  # batches of queries this process embedded itself (shared ones are not)

    def _create_model(self) -> Any:
        raise NotImplementedError

    def embed_model(self) -> Any:
        """The LlamaIndex embedding model, loaded on first use."""
        if self._model is None:
            self._model = self._create_model()
        return self._model

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        vectors = self.embed_model().get_text_embedding_batch(list(texts))
        return _normalise(np.asarray(vectors, dtype=np.float32))

    def expect_queries(self, texts: Sequence[str]) -> None:
        """Queries this process will ask (a plan's questions, in the plan's order). The first of
        them that needs a vector embeds all of them in batches; nothing is embedded before (a
        re-run answered from the retrieval cache loads no model at all). The batch's members
        are always the expected texts not yet embedded, so a question's vector does not depend on
        which run asked first."""
        self._expected = list(dict.fromkeys(texts))

    def embed_query(self, text: str) -> np.ndarray:
        """The query's unit vector. Every call is charged the query's own embedding time, whoever
        computed it: a cached query adds its share to ``drain_adjustment``, and the call that
        embeds a whole batch subtracts the other queries' shares from the time measured around
        it. Latency then does not depend on the order of runs or on batching."""
        cached = self._query_vectors.get(text)
        if cached is not None:
            self._adjustment += cached[1]
            return cached[0]
        batch = [q for q in self._expected if q not in self._query_vectors] if text in self._expected else []
        batch = batch or [text]
        started = time.perf_counter()
        vectors = _normalise(np.asarray(self._embed_query_batch(batch), dtype=np.float32))
        elapsed = time.perf_counter() - started
        self.query_batches += 1
        share = elapsed / len(batch)
        for query, vector in zip(batch, vectors, strict=True):
            self._query_vectors[query] = (vector, share)
        self._adjustment += share - elapsed
        return self._query_vectors[text][0]

    def held_query_vectors(self, texts: Sequence[str]) -> tuple[np.ndarray, list[float]]:
        """The vectors this embedder holds for ``texts`` (each embedded already) and each one's
        share of its batch's time, for another process's ``share_query_vectors``."""
        held = [self._query_vectors[text] for text in texts]
        return np.stack([vector for vector, _ in held]), [share for _, share in held]

    def share_query_vectors(self, texts: Sequence[str], vectors: np.ndarray, shares: Sequence[float]) -> None:
        """Hold query vectors another process embedded with this same embedder (a Ray worker's
        run gets the plan's questions embedded once for the whole execution): ``embed_query``
        then returns them and charges each its share, as if embedded here. A vector this
        embedder holds already is kept."""
        for text, vector, share in zip(texts, vectors, shares, strict=True):
            self._query_vectors.setdefault(text, (np.asarray(vector, dtype=np.float32), float(share)))

    def _embed_query_batch(self, texts: list[str]) -> list[list[float]]:
        """Query vectors of several texts; backends that embed a list at once override it."""
        model = self.embed_model()
        return [model.get_query_embedding(text) for text in texts]

    def drain_adjustment(self) -> float:
        """Seconds to add to the time measured around this embedder's ``embed_query`` calls since
        the last drain, so that each call costs its query's share (see ``embed_query``)."""
        seconds, self._adjustment = self._adjustment, 0.0
        return seconds

    def pending_adjustment(self) -> float:
        return self._adjustment


def _normalise(vectors: np.ndarray) -> np.ndarray:
    """Each row scaled to length 1 (a zero row stays zero)."""
    # Unit vectors make cosine, dot product and MMR similarity agree.
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1.0, norms)
