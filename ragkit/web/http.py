"""A web search provider behind a plain HTTP endpoint (a small adapter, a SearXNG-style proxy...).

``GET <url>?<query_param>=<query>&k=<k>`` (added to any query string the URL has) must answer JSON
``{"results": [{"title": "...", "url": "...", "snippet": "..."}]}`` with the best result first;
``url`` is required in each result, ``title`` and ``snippet`` may be missing or empty. Anything
else (connection refused, a timeout, an HTTP error status, a body that is not that JSON) raises
``WebSearchError`` naming the URL and what went wrong, on one line.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ragkit.errors import WebSearchError, validation_problems
from ragkit.web.base import WebProvider, WebProviderParams, WebResult

_PREVIEW_CHARS = 120


class HTTPSearchParams(WebProviderParams):
    url: str = Field(description="The search endpoint, http:// or https://, e.g. http://127.0.0.1:8888/search.")
    timeout: float = Field(default=10.0, gt=0.0, le=120.0, description="Seconds to wait for one search.")
    query_param: str = Field(
        default="q", min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.\-]+$",
        description="Name of the query-string parameter carrying the query.",
    )

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"must be an http:// or https:// URL with a host, got {value!r}")
        return value


class _Result(BaseModel):
    model_config = ConfigDict(extra="ignore")

    title: str | None = None
    url: str = Field(min_length=1)
    snippet: str | None = None


class _Reply(BaseModel):
    model_config = ConfigDict(extra="ignore")

    results: list[_Result]


class HTTPSearchProvider(WebProvider):
    name: ClassVar[str] = "http"
    Params: ClassVar[type[HTTPSearchParams]] = HTTPSearchParams
    params: HTTPSearchParams

    def _search(self, query: str, k: int) -> list[WebResult]:
        import httpx

        url = self.params.url
        try:
            # Merged into the URL's own query string (e.g. ?format=json), which ``params=`` would replace.
            request_url = httpx.URL(url).copy_merge_params({self.params.query_param: query, "k": k})
            response = httpx.get(request_url, timeout=self.params.timeout)
        except httpx.TimeoutException as error:
            raise WebSearchError(f"web search at {url} did not answer within {self.params.timeout} s") from error
        except httpx.HTTPError as error:
            reason = _one_line(str(error)) or type(error).__name__
            raise WebSearchError(f"web search at {url} failed: {reason}") from error
        if not response.is_success:
            raise WebSearchError(f"web search at {url} answered HTTP {response.status_code}: {_preview(response.text)}")
        return [WebResult(title=item.title or "", url=item.url, snippet=item.snippet or "")
                for item in _parse(url, response.text).results]


def _parse(url: str, body: str) -> _Reply:
    try:
        value: Any = json.loads(body)
    except json.JSONDecodeError as error:
        raise WebSearchError(f"web search at {url} did not answer JSON ({error.msg}): {_preview(body)}") from error
    try:
        return _Reply.model_validate(value)
    except ValidationError as error:
        problems = validation_problems(error, "field", "(reply)")
        raise WebSearchError(f"web search at {url} answered JSON without a results list of "
                             f"{{title, url, snippet}}: {_cut(problems)}") from error


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _cut(text: str) -> str:
    text = _one_line(text)
    return text if len(text) <= _PREVIEW_CHARS else text[:_PREVIEW_CHARS] + "..."


def _preview(text: str) -> str:
    return repr(_cut(text))
