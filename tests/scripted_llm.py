"""The one scripted LLM backend the tests share: replies from a list, remembers what it was sent.

For parsing and control-flow tests of anything that calls an LLM (judges, generators, metrics,
the call wrapper itself); the real embedded model is the ``local_backend`` fixture in
``tests/conftest.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from ragkit.llms import LLMBackend, LLMParams
from ragkit.llms.base import BackendReply
from ragkit.registry import ComponentParams


class ScriptedParams(LLMParams):
    model: str = "scripted"


class ScriptedLLM(LLMBackend):
    """Replies from a list in order (the last one repeats; an Exception in the list is raised).

    ``requests`` holds the messages of every call, ``calls`` the same calls with the JSON schema
    and token limit they were sent with. Each reply counts one prompt and one completion token,
    or, with ``count_words=True``, the words of the prompt and of the reply.
    ``ScriptedLLM(["reply"], model="m", seed=1)``; the registry builds it from its params alone.
    """

    name: ClassVar[str] = "scripted"
    Params: ClassVar[type[ComponentParams]] = ScriptedParams

    def __init__(self, replies: Sequence[Any] | ScriptedParams = ("ok",), *, count_words: bool = False,
                 **params: Any) -> None:
        if isinstance(replies, ScriptedParams):  # llms.build({"type": "scripted", ...}) passes params
            super().__init__(replies)
            replies = ("ok",)
        else:
            super().__init__(ScriptedParams(**params))
        self.replies = list(replies)
        self.count_words = count_words
        self.requests: list[list[dict[str, str]]] = []
        self.calls: list[dict[str, Any]] = []

    def _chat(self, messages, *, json_schema, max_tokens) -> BackendReply:
        self.requests.append(messages)
        self.calls.append({"messages": messages, "json_schema": json_schema, "max_tokens": max_tokens})
        text = self.replies[min(len(self.requests), len(self.replies)) - 1]
        if isinstance(text, Exception):
            raise text
        if self.count_words:
            return BackendReply(text=text, prompt_tokens=sum(len(m["content"].split()) for m in messages),
                                completion_tokens=len(text.split()))
        return BackendReply(text=text, prompt_tokens=1, completion_tokens=1)
