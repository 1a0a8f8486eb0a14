"""``minilm-onnx``: the shipped all-MiniLM-L6-v2 run by ONNX Runtime, fp32 or int8.

The same weights and tokenizer as ``minilm`` (its vectors agree with the torch model's to 1e-5
cosine in fp32), exported at first use and cached (``onnx_export``). ``int8`` is faster on a CPU
and slightly different; it is a separate embedder, so its run ids, chunk vectors and indexes are
its own and a grid can compare it with ``minilm``. Building the config loads nothing: the export,
the session and the tokenizer are made on the first text embedded.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field

from ragkit.embedders.base import Embedder
from ragkit.errors import ConfigError
from ragkit.registry import ComponentParams

MISSING_RUNTIME = "embedder 'minilm-onnx' needs onnx and onnxruntime: pip install 'ragkit[onnx]' (or use minilm)"


class MiniLMOnnxParams(ComponentParams):
    """all-MiniLM-L6-v2 (the shipped weights) exported to ONNX and run by ONNX Runtime."""

    precision: Literal["fp32", "int8"] = Field(
        default="int8",
        description="fp32: the exported graph as is (matches minilm); int8: weights quantised by onnxruntime's "
                    "dynamic quantisation (faster on CPUs; vectors 0.007 cosine from minilm's on average, "
                    "0.03 at worst).")


class OnnxSentenceModel:
    """A tokenizer and an ONNX Runtime session that turn texts into unit sentence vectors."""

    def __init__(self, model_file: Path, folder: Path, max_length: int, batch_size: int = 32) -> None:
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        import onnxruntime
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(str(folder), use_fast=True)
        self.session = onnxruntime.InferenceSession(str(model_file), providers=["CPUExecutionProvider"])
        self.max_length = max_length
        self.batch_size = batch_size

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 384), dtype=np.float32)
        # Texts of similar length batched together pad less (as sentence-transformers does).
        order = np.argsort([-len(text) for text in texts], kind="stable")
        out: list[np.ndarray] = [np.empty(0)] * len(texts)
        for start in range(0, len(texts), self.batch_size):
            chosen = order[start:start + self.batch_size]
            tokens = self.tokenizer([texts[i] for i in chosen], padding=True, truncation=True,
                                    max_length=self.max_length, return_tensors="np")
            (vectors,) = self.session.run(None, {"input_ids": tokens["input_ids"].astype(np.int64),
                                                 "attention_mask": tokens["attention_mask"].astype(np.int64)})
            for index, vector in zip(chosen, vectors, strict=True):
                out[index] = vector
        return np.asarray(out, dtype=np.float32)


def _llama_index_model(model: OnnxSentenceModel) -> Any:
    """The model as a LlamaIndex ``BaseEmbedding`` (what ``Embedder.embed_model`` returns)."""
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from pydantic import PrivateAttr

    class OnnxEmbedding(BaseEmbedding):
        _model: Any = PrivateAttr()

        def __init__(self, sentence_model: OnnxSentenceModel) -> None:
            super().__init__(model_name="minilm-onnx", embed_batch_size=sentence_model.batch_size)
            self._model = sentence_model

        def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            return self._model.encode(texts).tolist()

        def _get_text_embedding(self, text: str) -> list[float]:
            return self._get_text_embeddings([text])[0]

        def _get_query_embedding(self, query: str) -> list[float]:
            return self._get_text_embedding(query)

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._get_query_embedding(query)

    return OnnxEmbedding(model)


class MiniLMOnnxEmbedder(Embedder):
    name: ClassVar[str] = "minilm-onnx"
    Params: ClassVar[type[MiniLMOnnxParams]] = MiniLMOnnxParams
    params: MiniLMOnnxParams

    def __init__(self, params: ComponentParams, data_dir: Path | None = None) -> None:
        super().__init__(params)
        self._data_dir = data_dir
        self._sentence_model: OnnxSentenceModel | None = None

    def sentence_model(self) -> OnnxSentenceModel:
        if self._sentence_model is None:
            try:
                import onnx  # noqa: F401 - the exporter needs it; checked here to fail in one line
                import onnxruntime  # noqa: F401
            except ImportError:
                raise ConfigError(MISSING_RUNTIME) from None
            from ragkit.embedders.onnx_export import cached_model, max_seq_length, shipped_model_folder
            from ragkit.settings import get_settings

            folder = shipped_model_folder()
            data_dir = self._data_dir or get_settings().resolved_data_dir()
            self._sentence_model = OnnxSentenceModel(cached_model(data_dir, folder, self.params.precision),
                                                     folder, max_seq_length(folder))
        return self._sentence_model

    def _create_model(self) -> Any:
        return _llama_index_model(self.sentence_model())

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        # Straight to the session: LlamaIndex's batching and list conversion would only cost time.
        return self.sentence_model().encode(list(texts))

    def _embed_query_batch(self, texts: list[str]) -> list[list[float]]:
        # A query is embedded as any text (all-MiniLM-L6-v2 has no query prompt).
        return self.sentence_model().encode(texts).tolist()
