"""Web search for the router's web route and the quality gate's web fallback (pluggable, none by default).

``web_nodes`` (LlamaIndex nodes of web results) is imported on first access (PEP 562 module
``__getattr__``): a config that names a provider is checked without LlamaIndex.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ragkit.errors import WebSearchError
from ragkit.web.base import WebProvider, WebProviderParams, WebResult, web_providers

if TYPE_CHECKING:
    from ragkit.web.nodes import WEB_SOURCE, web_nodes

__all__ = ["WEB_SOURCE", "WebProvider", "WebProviderParams", "WebResult", "WebSearchError", "web_nodes",
           "web_providers"]


def __getattr__(name: str) -> Any:
    if name in ("WEB_SOURCE", "web_nodes"):
        return getattr(importlib.import_module("ragkit.web.nodes"), name)
    raise AttributeError(f"module 'ragkit.web' has no attribute {name!r}")
