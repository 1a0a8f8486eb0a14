"""Web search providers: one result type, any backend, chosen by name from the ``ragkit.web`` group.

None is configured by default. Offline, the pipeline records a web route and answers "not found"
rather than inventing results. A provider subclasses ``WebProvider`` and fills ``_search``; the
public ``search`` checks the arguments and holds every provider to ``k`` results.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import Field

from ragkit.registry import Component, ComponentParams, Registry


@dataclass(frozen=True)
class WebResult:
    title: str
    url: str
    snippet: str


class WebProviderParams(ComponentParams):
    max_results: int = Field(default=5, ge=1, le=50, description="Most results one search returns, whatever k asks.")


class WebProvider(Component):
    """A registered web search backend. Construction stores params only; nothing connects until a search."""

    kind: ClassVar[str] = "web"
    Params: ClassVar[type[WebProviderParams]] = WebProviderParams
    params: WebProviderParams

    def __init__(self, params: WebProviderParams, **_dependencies: Any) -> None:
        self.params = params

    def search(self, query: str, k: int) -> list[WebResult]:
        """At most ``min(k, max_results)`` results, best first; ``WebSearchError`` when the search fails."""
        if k < 1:
            raise ValueError(f"web provider '{self.name}': k must be >= 1, got {k}")
        query = " ".join(query.split())
        if not query:
            raise ValueError(f"web provider '{self.name}': the query is empty")
        limit = min(k, self.params.max_results)
        return self._search(query, limit)[:limit]

    def _search(self, query: str, k: int) -> list[WebResult]:
        raise NotImplementedError


# The built-in, by import path (loaded on first use); plugins join through entry points.
web_providers: Registry[WebProvider] = Registry("web", group="ragkit.web",
                                                builtins={"http": "ragkit.web.http:HTTPSearchProvider"})
