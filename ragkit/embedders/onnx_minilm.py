"""``minilm-onnx``: the shipped all-MiniLM-L6-v2 run by ONNX Runtime, fp32 or int8.

The same weights and tokenizer as ``minilm`` (its vectors agree with the torch model's to 1e-5
cosine in fp32; ``minilm`` itself runs this fp32 model when ONNX Runtime is installed), exported
at first use and cached (``onnx_export``). ``int8`` is faster on a CPU
and slightly different; it is a separate embedder, so its run ids, chunk vectors and indexes are
its own and a grid can compare it with ``minilm``. Building the config loads nothing: the export,
the session and the tokenizer are made on the first text embedded.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from itertools import groupby
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


# Tokens per session call, at most. Each layer's attention scores are batch x 12 x tokens x tokens
# floats: 32 texts of 256 tokens make 100 MB, which no cache holds; 8 of them (2,048 tokens) take
# less CPU per text (benchmarks/README.md, "Unpadded batches").
# Short texts still go 32 to a call (``batch_size``).
MAX_BATCH_TOKENS = 2048


class OnnxSentenceModel:
    """A tokenizer and an ONNX Runtime session that turn texts into unit sentence vectors."""

    def __init__(self, model_file: Path, folder: Path, max_length: int, batch_size: int = 32,
                 threads: int = 0) -> None:
        """``threads``: ONNX Runtime's intra-op threads; 0 is its default (one per physical core)."""
        import onnxruntime

        self.tokenizer = shipped_tokenizer(folder, max_length)
        self.session = onnxruntime.InferenceSession(str(model_file), session_options(threads),
                                                    providers=["CPUExecutionProvider"])
        self.max_length = max_length
        self.batch_size = batch_size

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors of ``texts``, in their order.

        The exported graph has no attention mask (``onnx_export``), so every batch holds texts of
        one token count: texts are sorted by token count (longest first, as sentence-transformers
        sorts) and each run of equal counts is cut into batches of at most ``batch_size`` texts
        and ``MAX_BATCH_TOKENS`` tokens (one text at least). No
        padding is computed and no mask is added to the attention scores; a count shared by few
        texts makes a small batch, which costs one more session call, not more arithmetic (at most
        ``max_length`` more calls than full batches would take).
        """
        out = np.zeros((len(texts), 384), dtype=np.float32)
        if not texts:
            return out
        ids = [encoding.ids for encoding in self.tokenizer.encode_batch(list(texts))]
        for batch in unpadded_batches([len(tokens) for tokens in ids], self.batch_size, MAX_BATCH_TOKENS):
            (vectors,) = self.session.run(None, {"input_ids": np.array([ids[i] for i in batch], dtype=np.int64)})
            out[batch] = vectors
        return out


def session_options(threads: int = 0) -> Any:
    """ONNX Runtime's options for the encoder: ``threads`` intra-op threads (0: one per physical
    core), and idle threads that sleep instead of spinning.

    Spinning (ONNX Runtime's default) keeps a waiting thread busy between operators to save a
    wake-up; a batch's operators take milliseconds, so the wake-up is nothing, while on a machine
    whose cores are all taken the spinning threads burn CPU the others need (benchmarks/README.md,
    issue 41: 1.3x the CPU per text at load 12).
    """
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return options


def shipped_tokenizer(folder: Path, max_length: int) -> Any:
    """The model's fast tokenizer (``tokenizer.json``) from the ``tokenizers`` library itself,
    truncating to ``max_length`` tokens with [CLS] and [SEP] and padding nothing: the ids
    transformers' ``AutoTokenizer`` gives with ``truncation=True``, without importing transformers
    (which imports torch: seconds on a first run)."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_length)
    return tokenizer


def unpadded_batches(lengths: Sequence[int], batch_size: int, max_tokens: int) -> list[list[int]]:
    """Indices of ``lengths`` in batches of equal length, longest first, each of at most
    ``batch_size`` indices and ``max_tokens`` tokens (but one index at least)."""
    order = sorted(range(len(lengths)), key=lambda index: -lengths[index])  # stable: ties keep their order
    batches = []
    for length, group in groupby(order, key=lambda index: lengths[index]):
        run, size = list(group), max(1, min(batch_size, max_tokens // max(length, 1)))
        batches += [run[start:start + size] for start in range(0, len(run), size)]
    return batches


def onnx_runtime_installed() -> bool:
    """Whether onnxruntime imports and onnx (the exporter's, needed only to export) is installed."""
    import importlib.util

    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return importlib.util.find_spec("onnx") is not None


def shipped_sentence_model(precision: str, cache_dir: Path | None) -> OnnxSentenceModel:
    """The shipped MiniLM at ``precision`` on ONNX Runtime, exported into ``cache_dir`` (default: the
    settings' model cache, shared by every data directory) on first use."""
    from ragkit.embedders.onnx_export import cached_model, max_seq_length, shipped_model_folder
    from ragkit.settings import get_settings

    folder = shipped_model_folder()
    cache_dir = cache_dir or get_settings().resolved_model_cache_dir()
    return OnnxSentenceModel(cached_model(cache_dir, folder, precision), folder, max_seq_length(folder))


def llama_index_model(model: OnnxSentenceModel, name: str) -> Any:
    """The model as a LlamaIndex ``BaseEmbedding`` named ``name`` (what ``Embedder.embed_model`` returns)."""
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from pydantic import PrivateAttr

    class OnnxEmbedding(BaseEmbedding):
        _model: Any = PrivateAttr()

        def __init__(self, sentence_model: OnnxSentenceModel) -> None:
            super().__init__(model_name=name, embed_batch_size=sentence_model.batch_size)
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
    # 2: unpadded batches. int8 vectors moved (dynamic quantisation's activation
    # ranges are per batch, and batches are grouped differently), so vectors cached by 1 are not reused.
    version: ClassVar[int] = 2
    Params: ClassVar[type[MiniLMOnnxParams]] = MiniLMOnnxParams
    params: MiniLMOnnxParams

    def __init__(self, params: ComponentParams, cache_dir: Path | None = None) -> None:
        super().__init__(params)
        self._cache_dir = cache_dir
        self._sentence_model: OnnxSentenceModel | None = None

    def sentence_model(self) -> OnnxSentenceModel:
        if self._sentence_model is None:
            if not onnx_runtime_installed():  # the exporter needs onnx: checked here to fail in one line
                raise ConfigError(MISSING_RUNTIME)
            self._sentence_model = shipped_sentence_model(self.params.precision, self._cache_dir)
        return self._sentence_model

    def _create_model(self) -> Any:
        return llama_index_model(self.sentence_model(), self.name)

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        # Straight to the session: LlamaIndex's batching and list conversion would only cost time.
        return self.sentence_model().encode(list(texts))

    def _embed_query_batch(self, texts: list[str]) -> list[list[float]]:
        # A query is embedded as any text (all-MiniLM-L6-v2 has no query prompt).
        return self.sentence_model().encode(texts).tolist()
