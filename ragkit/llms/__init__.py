"""LLM backends (ollama, embedded local model, OpenAI-compatible) and the one call wrapper.

Backends are registered in ``llms`` (entry-point group ``ragkit.llms``); every call goes
through ``LLMClient``, which caches, times and counts it. Importing this package loads no
model and no HTTP client library.
"""

from ragkit.errors import BackendUnavailable, LLMError, LLMTimeoutError
from ragkit.llms.base import BackendReply, LLMBackend, LLMParams, Message, RemoteLLMParams, llms
from ragkit.llms.calls import CallRecord, LLMCache, LLMClient, LLMResult, StageUsage, summarise
from ragkit.llms.defaults import LLMRoles, ollama_answers, resolve_default_backend
from ragkit.llms.parsing import extract_json_text, parse_json_reply

__all__ = [
    "BackendReply",
    "BackendUnavailable",
    "CallRecord",
    "LLMBackend",
    "LLMCache",
    "LLMClient",
    "LLMError",
    "LLMParams",
    "LLMResult",
    "LLMRoles",
    "LLMTimeoutError",
    "Message",
    "RemoteLLMParams",
    "StageUsage",
    "extract_json_text",
    "llms",
    "ollama_answers",
    "parse_json_reply",
    "resolve_default_backend",
    "summarise",
]
