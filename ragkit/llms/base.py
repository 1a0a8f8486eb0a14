"""What every LLM backend shares: parameters, the one method a backend writes, retries, errors.

A backend only turns chat messages into a reply and its token counts. Caching, timing,
usage records and JSON parsing live once, in ``ragkit.llms.calls.LLMClient``, so the caller
never branches on the backend.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from pydantic import Field

from ragkit.registry import Component, ComponentParams, Registry

# The built-ins, by import path (loaded on first use); plugins join through entry points.
llms: Registry[LLMBackend] = Registry("llm", builtins={
    "local": "ragkit.llms.local:LocalLLM",
    "ollama": "ragkit.llms.ollama:OllamaLLM",
    "openai": "ragkit.llms.openai_compat:OpenAICompatibleLLM",
})

Message = dict[str, str]  # {"role": "system" | "user" | "assistant", "content": "..."}
T = TypeVar("T")


class LLMParams(ComponentParams):
    temperature: float = Field(
        default=0.0, ge=0.0, le=2.0, description="Sampling temperature; 0 is greedy and repeatable."
    )
    max_tokens: int = Field(default=512, ge=1, le=32768, description="Most tokens generated per reply.")
    seed: int | None = Field(default=0, ge=0, description="Sampling seed; None lets the backend choose.")


class RemoteLLMParams(LLMParams):
    """A backend behind HTTP also needs to know how long to wait and how often to retry."""

    timeout_s: float = Field(default=120.0, gt=0, le=3600, description="Seconds to wait for one reply.")
    max_retries: int = Field(default=2, ge=0, le=10, description="Extra attempts after a timeout or a server error.")
    retry_backoff_s: float = Field(
        default=0.5, ge=0, le=60, description="Wait before the first retry; doubles on each further retry."
    )


# The runs table's column of each LLM role's model digest (``llm_digest.generator``), and its value
# where the backend cannot tell. Analysis code compares these, so they are named once, here.
DIGEST_PREFIX = "llm_digest."
UNKNOWN_DIGEST = "unknown"

# Fields that change how a reply is fetched but never which reply: left out of the cache key.
TRANSPORT_FIELDS = frozenset({"timeout_s", "max_retries", "retry_backoff_s", "threads"})


@dataclass(frozen=True)
class BackendReply:
    text: str
    prompt_tokens: int
    completion_tokens: int


class LLMBackend(Component):
    """A registered LLM backend. Construction stores params only; the model loads on first call."""

    kind: ClassVar[str] = "llm"
    Params: ClassVar[type[LLMParams]] = LLMParams
    params: LLMParams

    def __init__(self, params: LLMParams) -> None:
        self.params = params
        self._client: Any = None
        self._client_lock = threading.Lock()
        # Set on a copy from with_params: the model is loaded (once) by the original.
        self._shares_client_of: LLMBackend | None = None

    @property
    def model_name(self) -> str:
        return str(getattr(self.params, "model", self.name))

    def cache_identity(self) -> dict[str, Any]:
        """Everything about this backend that can change a reply: part of every cache key."""
        params = self.params.model_dump(mode="json", exclude=set(TRANSPORT_FIELDS))
        return {"backend": self.name, "version": self.version, "model": self.model_name, "params": params}

    def model_digest(self) -> str | None:
        """A content digest of the model behind this backend (recorded per role in the runs table
        as ``llm_digest.<role>``, so a model replaced under the same name is noticed); None when
        the backend cannot know it (an OpenAI-compatible server names models, never hashes them)."""
        return None

    def context_window(self) -> int | None:
        """Tokens of prompt plus reply a generator may size its prompt to: the window the model is
        run with (llama.cpp's ``n_ctx``, Ollama's ``num_ctx``: a backend's ``context_window``
        parameter). None when the backend cannot know it (an OpenAI-compatible server does not
        say), or when its model is too small to use a long context: the generator then keeps its
        fixed limits (``ragkit.stages.answer.context_fit``)."""
        window = getattr(self.params, "context_window", None)
        return int(window) if isinstance(window, int) else None

    def problem(self) -> str | None:
        """Why this backend cannot answer now (missing package or model, server down), else None.

        Checked once before a run, so a missing model stops the run with one clear message
        instead of failing every question."""
        return None

    def with_params(self, **update: Any) -> LLMBackend:
        """This backend with some parameters changed, sharing the loaded model or HTTP client."""
        twin = copy.copy(self)
        twin.params = self.params.model_copy(update=update)
        twin._shares_client_of = self._shares_client_of or self
        return twin

    def client(self) -> Any:
        """The loaded model or HTTP client, created once on first use."""
        if self._shares_client_of is not None:
            return self._shares_client_of.client()
        with self._client_lock:
            if self._client is None:
                self._client = self._create_client()
            return self._client

    def chat(self, messages: list[Message], *, json_schema: dict[str, Any] | None, max_tokens: int) -> BackendReply:
        if max_tokens < 1:
            raise ValueError(f"llm '{self.name}': max_tokens must be >= 1, got {max_tokens}")
        if not messages:
            raise ValueError(f"llm '{self.name}': no messages to send")
        return self._chat(messages, json_schema=json_schema, max_tokens=max_tokens)

    def _create_client(self) -> Any:
        raise NotImplementedError

    def _chat(self, messages: list[Message], *, json_schema: dict[str, Any] | None, max_tokens: int) -> BackendReply:
        raise NotImplementedError


def with_retries(
    attempt: Callable[[], T],
    *,
    max_retries: int,
    backoff_s: float,
    is_retryable: Callable[[BaseException], bool],
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Run ``attempt`` up to ``1 + max_retries`` times with exponential backoff.

    Only transient failures (timeouts, 5xx, refused connections) are retried; a bad request
    would fail the same way again, so it is raised at once. The waits are ``backoff_s``,
    ``2 * backoff_s``, ``4 * backoff_s``...
    """
    for number in range(max_retries + 1):
        try:
            return attempt()
        except Exception as error:
            if number == max_retries or not is_retryable(error):
                raise
            sleep(backoff_s * (2**number))
    raise AssertionError("unreachable")
