"""A LlamaIndex LLM whose every call goes through an ``LLMClient``: cached, timed, token-counted.

Libraries that take a LlamaIndex LLM (ragas through ``LlamaIndexLLMWrapper``, LlamaIndex's own
evaluators) would otherwise call a model behind ragkit's back. ``ClientLLM`` hands each
completion or chat to ``LLMClient.call`` under one stage name (``eval:faithfulness``), so the
call lands in the same cache and usage records as the judges' calls, and its cost is reported
under that stage.

The per-call options such libraries pass (``temperature``, ``n``, ``stop``) are ignored: the
backend's own parameters decide the reply and are part of the cache key, so a cached reply is
the reply the configured model gives. ``max_tokens`` is honoured.

The async methods run the blocking call in a daemon thread, so an ``asyncio`` timeout around
them returns on time. The abandoned call still finishes in the background (a model cannot be
interrupted mid-reply) and its reply still lands in the cache.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    ChatResponseGen,
    CompletionResponse,
    CompletionResponseGen,
    LLMMetadata,
    MessageRole,
)
from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback
from llama_index.core.llms.custom import CustomLLM
from pydantic import Field, PrivateAttr

from ragkit.llms.base import Message
from ragkit.llms.calls import LLMClient, LLMResult

T = TypeVar("T")


class ClientLLM(CustomLLM):
    """LlamaIndex ``CustomLLM`` over an ``LLMClient``; every call is recorded under ``stage``."""

    stage: str = Field(description="Stage name the calls are recorded under, e.g. 'eval:faithfulness'.")
    max_tokens: int | None = Field(
        default=None, ge=1, le=32768, description="Most tokens per reply; None: the backend's max_tokens."
    )
    _client: LLMClient = PrivateAttr()
    _last_result: LLMResult | None = PrivateAttr(default=None)

    def __init__(self, client: LLMClient, *, stage: str, max_tokens: int | None = None, **kwargs: Any) -> None:
        if not stage.strip():
            raise ValueError("ClientLLM: stage must be a non-empty name, got ''")
        super().__init__(stage=stage, max_tokens=max_tokens, **kwargs)
        self._client = client

    @classmethod
    def class_name(cls) -> str:
        return "ragkit_client_llm"

    @property
    def client(self) -> LLMClient:
        return self._client

    @property
    def last_result(self) -> LLMResult | None:
        """The latest reply (for error messages that quote what the model said)."""
        return self._last_result

    @property
    def metadata(self) -> LLMMetadata:
        backend = self._client.backend
        limit = self.max_tokens or backend.params.max_tokens
        window = getattr(backend.params, "context_window", None)
        return LLMMetadata(
            model_name=backend.model_name,
            num_output=limit,
            is_chat_model=True,  # every ragkit backend takes chat messages
            **({"context_window": window} if window else {}),
        )

    def _call(self, messages: list[Message], kwargs: dict[str, Any]) -> LLMResult:
        max_tokens = kwargs.get("max_tokens") or self.max_tokens
        result = self._client.call(messages, stage=self.stage, max_tokens=max_tokens)
        self._last_result = result
        return result

    @staticmethod
    def _raw(result: LLMResult) -> dict[str, Any]:
        return {
            "cache_hit": result.cache_hit,
            "key": result.key,
            "prompt_tokens": result.prompt_tokens,
            "completion_tokens": result.completion_tokens,
        }

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        result = self._call([{"role": "user", "content": prompt}], kwargs)
        return CompletionResponse(text=result.text, raw=self._raw(result))

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        # LLMClient caches whole replies, so the "stream" is the whole reply at once.
        response = self.complete(prompt, formatted=formatted, **kwargs)
        yield CompletionResponse(text=response.text, delta=response.text, raw=response.raw)

    @llm_chat_callback()
    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        result = self._call([_as_message(message) for message in messages], kwargs)
        return ChatResponse(
            message=ChatMessage(role=MessageRole.ASSISTANT, content=result.text), raw=self._raw(result)
        )

    @llm_chat_callback()
    def stream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseGen:
        response = self.chat(messages, **kwargs)
        yield ChatResponse(message=response.message, delta=response.message.content, raw=response.raw)

    @llm_completion_callback()
    async def acomplete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return await _in_daemon_thread(lambda: self.complete(prompt, formatted=formatted, **kwargs))

    @llm_chat_callback()
    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return await _in_daemon_thread(lambda: self.chat(messages, **kwargs))


def _as_message(message: ChatMessage) -> Message:
    role = message.role.value if isinstance(message.role, MessageRole) else str(message.role)
    if role not in ("system", "user", "assistant"):
        role = "user"  # tool and function messages: ragkit backends only take the three chat roles
    return {"role": role, "content": message.content or ""}


async def _in_daemon_thread(work: Callable[[], T]) -> T:
    """Await ``work()`` run in a daemon thread.

    Not ``asyncio.to_thread``: ``asyncio.run`` waits for the default executor's threads when it
    closes, so a timed-out call would still hold the caller until the model finished.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(value: Any, error: BaseException | None) -> None:
        if future.done():  # cancelled by the caller's timeout
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    def run() -> None:
        value: Any = None
        error: BaseException | None = None
        try:
            value = work()
        except BaseException as raised:  # noqa: BLE001  re-raised in the awaiting coroutine
            error = raised
        try:
            loop.call_soon_threadsafe(settle, value, error)
        except RuntimeError:
            pass  # the loop closed after a timeout: nobody waits for this reply any more

    threading.Thread(target=run, name="ragkit-llm-call", daemon=True).start()
    return await future
