"""Web search for the router's web route and the quality gate's web fallback (pluggable, none by default)."""

from ragkit.errors import WebSearchError
from ragkit.web.base import WebProvider, WebProviderParams, WebResult, web_providers
from ragkit.web.nodes import WEB_SOURCE, web_nodes

__all__ = ["WEB_SOURCE", "WebProvider", "WebProviderParams", "WebResult", "WebSearchError", "web_nodes",
           "web_providers"]
