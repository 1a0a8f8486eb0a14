"""Embedders behind HTTP: an Ollama server or any OpenAI-compatible ``/embeddings`` endpoint.

Every request has a timeout; a refused connection, a timeout, a 5xx or a 429 is retried with
exponential backoff and then raises ``BackendUnavailable`` (the run stops, resumable); a server
that answers but refuses the request (a wrong model name, a bad key) is an
``EmbeddingServerError``, a one-line user error.
"""

from __future__ import annotations

import os
from typing import Any, ClassVar

from pydantic import Field

from ragkit.embedders.base import Embedder
from ragkit.errors import BackendUnavailable, ConfigError
from ragkit.registry import ComponentParams


class RemoteEmbedder(Embedder):
    """An HTTP endpoint, where a query is embedded as any text: one request per batch."""

    def _embed_query_batch(self, texts: list[str]) -> list[list[float]]:
        return self.embed_model().get_text_embedding_batch(texts)


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


class OllamaEmbedder(RemoteEmbedder):
    name: ClassVar[str] = "ollama"
    Params: ClassVar[type[OllamaEmbedParams]] = OllamaEmbedParams
    params: OllamaEmbedParams

    def _create_model(self) -> Any:
        return http_embedding(_OllamaAPI(self.params), embed_batch_size=32)


class OpenAIEmbedder(RemoteEmbedder):
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

        from ragkit.llms.base import with_retries  # the llms package's imports are not needed until a request

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
