"""The ``ollama`` backend: llama-index-llms-ollama with timeouts, retries and clear errors.

A model is identified by its digest as well as its tag: ``ollama pull`` can put another model
under the same tag, and its replies must not be served from the old one's cache entries.
"""

from __future__ import annotations

import threading
from typing import Any, ClassVar

from pydantic import Field

from ragkit.errors import BackendUnavailable, LLMError, LLMTimeoutError
from ragkit.llms.base import BackendReply, LLMBackend, Message, RemoteLLMParams, with_retries
from ragkit.settings import DEFAULT_OLLAMA_MODEL, DEFAULT_OLLAMA_URL

PRE_RUN_CHECK_TIMEOUT_S = 2.0
# Once per run, so generous: a timeout_s tuned for short replies must not make a busy server look dead.
DIGEST_LOOKUP_TIMEOUT_S = 30.0


class OllamaParams(RemoteLLMParams):
    model: str = Field(default=DEFAULT_OLLAMA_MODEL, min_length=1, description="Model name as Ollama lists it.")
    base_url: str = Field(default=DEFAULT_OLLAMA_URL, description="URL of the Ollama server.")
    context_window: int = Field(
        default=4096, ge=256, le=1_048_576, description="num_ctx sent to Ollama (prompt plus reply tokens)."
    )


def unreachable_message(base_url: str) -> str:
    return (
        f"Ollama is not reachable at {base_url} — start it with `ollama serve` "
        "or choose another backend (llm type 'local' or 'openai')"
    )


def pulled_models(base_url: str, timeout_s: float) -> dict[str, str | None]:
    """Name -> digest of every model the server at ``base_url`` lists in ``/api/tags``.

    Raises BackendUnavailable when nothing answers there, or something that is not Ollama."""
    import httpx

    try:
        response = httpx.get(base_url.rstrip("/") + "/api/tags", timeout=timeout_s)
        listing = response.json() if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError):  # ValueError: something else listens there
        listing = None
    if not isinstance(listing, dict):
        raise BackendUnavailable(unreachable_message(base_url), backend=OllamaLLM.name, url=base_url)
    return {str(entry.get("name", "")): entry.get("digest") for entry in listing.get("models") or []}


def listed_name(pulled: dict[str, str | None], model: str) -> str | None:
    """The name Ollama lists ``model`` under, or None when it is not pulled."""
    # Ollama lists "llama3.2:latest" for a model pulled as "llama3.2".
    for name in (model, f"{model}:latest" if ":" not in model else None):
        if name in pulled:
            return name
    return None


def missing_model_message(base_url: str, model: str, pulled: list[str]) -> str:
    return (
        f"Ollama at {base_url} has no model '{model}' — pull it with `ollama pull {model}` "
        f"or choose one it has: {', '.join(pulled) or '(none pulled)'}"
    )


class OllamaLLM(LLMBackend):
    name: ClassVar[str] = "ollama"
    Params: ClassVar[type[OllamaParams]] = OllamaParams
    params: OllamaParams

    def __init__(self, params: OllamaParams) -> None:
        super().__init__(params)
        # Shared with the copies from with_params: one lookup per model for all of them.
        self._digests: dict[str, str | None] = {}
        self._digest_lock = threading.Lock()

    def problem(self) -> str | None:
        """Why a run could not use this backend: server down, or the model not pulled (else None)."""
        try:
            pulled = pulled_models(self.params.base_url, PRE_RUN_CHECK_TIMEOUT_S)
        except BackendUnavailable as error:
            return str(error)
        if listed_name(pulled, self.params.model) is not None:
            return None
        return missing_model_message(self.params.base_url, self.params.model, sorted(pulled))

    def cache_identity(self) -> dict[str, Any]:
        return {**super().cache_identity(), "digest": self.model_digest()}

    def model_digest(self) -> str | None:
        """The digest of the model the server has under this tag; None if it does not list the
        model (its calls then fail, naming it).

        Asked once per backend object, so once per run (the executor holds one per spec), not per
        call: a model re-pulled between runs is a cache miss, one re-pulled mid-run is not seen."""
        model = self.params.model
        with self._digest_lock:
            if model not in self._digests:
                pulled = pulled_models(self.params.base_url, DIGEST_LOOKUP_TIMEOUT_S)
                name = listed_name(pulled, model)
                self._digests[model] = pulled[name] if name is not None else None
            return self._digests[model]

    def _create_client(self) -> Any:
        from ollama import Client

        return Client(host=self.params.base_url, timeout=self.params.timeout_s)

    def _llm(self, max_tokens: int) -> Any:
        from llama_index.llms.ollama import Ollama

        options: dict[str, Any] = {"num_predict": max_tokens}
        if self.params.seed is not None:
            options["seed"] = self.params.seed
        # A fresh, cheap wrapper per call carries this call's num_predict; the HTTP client
        # (and its connection pool) is shared.
        return Ollama(
            model=self.params.model,
            base_url=self.params.base_url,
            temperature=self.params.temperature,
            request_timeout=self.params.timeout_s,
            context_window=self.params.context_window,  # set, so no /api/show round trip
            additional_kwargs=options,
            client=self.client(),
        )

    def _chat(self, messages: list[Message], *, json_schema: dict[str, Any] | None, max_tokens: int) -> BackendReply:
        from llama_index.core.llms import ChatMessage

        llm = self._llm(max_tokens)
        chat_messages = [ChatMessage(role=message["role"], content=message["content"]) for message in messages]
        extra = {"format": json_schema} if json_schema is not None else {}
        try:
            response = with_retries(
                lambda: llm.chat(chat_messages, **extra),
                max_retries=self.params.max_retries,
                backoff_s=self.params.retry_backoff_s,
                is_retryable=_is_transient,
            )
        except Exception as error:
            raise self._explain(error) from error
        raw = response.raw or {}
        return BackendReply(
            text=response.message.content or "",
            prompt_tokens=int(raw.get("prompt_eval_count") or 0),
            completion_tokens=int(raw.get("eval_count") or 0),
        )

    def _explain(self, error: Exception) -> Exception:
        import httpx
        from ollama import ResponseError

        url = self.params.base_url
        attempts = self.params.max_retries + 1
        # Refused, unknown host, or no answer to the connection itself: the server is not there.
        # A server that dies mid-reply drops the connection, and the retry is refused.
        if isinstance(error, (ConnectionError, httpx.ConnectError, httpx.ConnectTimeout)):
            return BackendUnavailable(unreachable_message(url), backend=self.name, url=url)
        if isinstance(error, httpx.TimeoutException):
            return LLMTimeoutError(
                f"Ollama at {url} did not answer within timeout_s={self.params.timeout_s} "
                f"({attempts} attempts); raise timeout_s or use a smaller model"
            )
        if isinstance(error, ResponseError):
            if error.status_code == 404:
                return LLMError(
                    f"Ollama at {url} has no model '{self.params.model}': run `ollama pull {self.params.model}` "
                    f"({error.error})"
                )
            return LLMError(
                f"Ollama at {url} failed with HTTP {error.status_code} after {attempts} attempts: {error.error}"
            )
        return LLMError(f"Ollama at {url} failed: {type(error).__name__}: {error}")


def _is_transient(error: BaseException) -> bool:
    import httpx
    from ollama import ResponseError

    if isinstance(error, ResponseError):
        return error.status_code == 429 or error.status_code >= 500
    return isinstance(error, (ConnectionError, httpx.TransportError))
