"""The ``openai`` backend: any server speaking the OpenAI chat API (vLLM, llama.cpp server, ...).

Plain httpx against ``/chat/completions``: one POST needs neither the openai SDK nor
llama-index-llms-openai-like (which pulls both in).
"""

from __future__ import annotations

import os
from typing import Any, ClassVar

from pydantic import Field

from ragkit.errors import BackendUnavailable, LLMError, LLMTimeoutError
from ragkit.llms.base import BackendReply, LLMBackend, Message, RemoteLLMParams, with_retries


class OpenAICompatibleParams(RemoteLLMParams):
    model: str = Field(min_length=1, description="Model name as the server knows it.")
    base_url: str = Field(
        default="http://127.0.0.1:8000/v1", description="API root, the part before /chat/completions."
    )
    api_key_env: str | None = Field(
        default=None, description="Name of the environment variable holding the API key (never the key itself)."
    )


class _HTTPStatusError(Exception):
    def __init__(self, status_code: int, body: str) -> None:
        super().__init__(f"HTTP {status_code}: {body[:500]}")
        self.status_code = status_code


class OpenAICompatibleLLM(LLMBackend):
    name: ClassVar[str] = "openai"
    Params: ClassVar[type[OpenAICompatibleParams]] = OpenAICompatibleParams
    params: OpenAICompatibleParams

    def _create_client(self) -> Any:
        import httpx

        headers = {}
        if self.params.api_key_env:
            key = os.environ.get(self.params.api_key_env)
            if not key:
                raise LLMError(f"llm 'openai': environment variable {self.params.api_key_env} is not set")
            headers["Authorization"] = f"Bearer {key}"
        return httpx.Client(base_url=self.params.base_url.rstrip("/"), headers=headers, timeout=self.params.timeout_s)

    def _chat(self, messages: list[Message], *, json_schema: dict[str, Any] | None, max_tokens: int) -> BackendReply:
        body: dict[str, Any] = {
            "model": self.params.model,
            "messages": messages,
            "temperature": self.params.temperature,
            "max_tokens": max_tokens,
        }
        if self.params.seed is not None:
            body["seed"] = self.params.seed
        if json_schema is not None:
            body["response_format"] = {"type": "json_schema", "json_schema": {"name": "reply", "schema": json_schema}}
        client = self.client()

        def post() -> dict[str, Any]:
            response = client.post("/chat/completions", json=body)
            if response.status_code >= 400:
                raise _HTTPStatusError(response.status_code, response.text)
            return response.json()

        try:
            data = with_retries(
                post,
                max_retries=self.params.max_retries,
                backoff_s=self.params.retry_backoff_s,
                is_retryable=_is_transient,
            )
        except Exception as error:
            raise self._explain(error) from error
        usage = data.get("usage") or {}
        return BackendReply(
            text=data["choices"][0]["message"].get("content") or "",
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
        )

    def _explain(self, error: Exception) -> Exception:
        import httpx

        url = self.params.base_url
        attempts = self.params.max_retries + 1
        if isinstance(error, (httpx.ConnectError, httpx.ConnectTimeout)):
            return BackendUnavailable(
                f"no OpenAI-compatible server is reachable at {url} — start it or choose another backend",
                backend=self.name, url=url,
            )
        if isinstance(error, httpx.TimeoutException):
            return LLMTimeoutError(
                f"{url} did not answer within timeout_s={self.params.timeout_s} ({attempts} attempts)"
            )
        if _is_transient(error):
            return LLMError(f"OpenAI-compatible server at {url} failed after {attempts} attempts: {error}")
        return LLMError(f"OpenAI-compatible server at {url} refused the request: {error}")


def _is_transient(error: BaseException) -> bool:
    import httpx

    if isinstance(error, _HTTPStatusError):
        return error.status_code == 429 or error.status_code >= 500
    return isinstance(error, httpx.TransportError)
