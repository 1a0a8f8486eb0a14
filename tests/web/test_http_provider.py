"""The HTTP web search provider against a small local search server started by the test."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from ragkit.errors import ConfigError, WebSearchError
from ragkit.web import WebProvider, WebResult, web_providers
from ragkit.web.http import HTTPSearchParams, HTTPSearchProvider

RESULTS = [{"title": f"Result {n}", "url": f"https://example.org/{n}", "snippet": f"snippet {n}"} for n in range(5)]


class SearchServer:
    """Answers every GET with ``status`` and ``body`` after ``delay_s``; remembers each query string."""

    def __init__(self) -> None:
        self.status = 200
        self.body = json.dumps({"results": RESULTS})
        self.delay_s = 0.0
        self.queries: list[dict[str, list[str]]] = []
        self.paths: list[str] = []
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.daemon_threads = True
        self._httpd.search = self  # type: ignore[attr-defined]
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/search"
        threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


class _Handler(BaseHTTPRequestHandler):
    server: Any

    def log_message(self, *args: Any) -> None:  # keep pytest output clean
        pass

    def do_GET(self) -> None:
        search: SearchServer = self.server.search
        parts = urlsplit(self.path)
        search.paths.append(parts.path)
        search.queries.append(parse_qs(parts.query, keep_blank_values=True))
        time.sleep(search.delay_s)
        data = search.body.encode()
        try:
            self.send_response(search.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout test)
            pass


@pytest.fixture
def server() -> Iterator[SearchServer]:
    search = SearchServer()
    yield search
    search.stop()


def provider(url: str, **params: Any) -> HTTPSearchProvider:
    return web_providers.build({"type": "http", "params": {"url": url, **params}})


@pytest.mark.unit
def test_results_are_parsed_in_order(server):
    results = provider(server.url).search("why do cats purr", 3)
    assert results == [WebResult(f"Result {n}", f"https://example.org/{n}", f"snippet {n}") for n in range(3)]
    assert server.paths == ["/search"]


@pytest.mark.unit
def test_the_server_receives_the_query_exactly_and_k(server):
    query = "cats & dogs: naïve ?q=1 #2"
    provider(server.url).search(query, 2)
    assert server.queries == [{"q": [query], "k": ["2"]}]


@pytest.mark.unit
def test_k_is_honoured_when_the_server_sends_more(server):
    assert len(provider(server.url).search("cats", 2)) == 2  # the server ignores k and sends 5
    assert len(provider(server.url, max_results=3).search("cats", 10)) == 3
    assert server.queries[-1]["k"] == ["3"]


@pytest.mark.unit
def test_query_param_and_an_existing_query_string(server):
    provider(server.url + "?lang=en", query_param="text").search("  cats   purr ", 1)
    assert server.queries == [{"lang": ["en"], "text": ["cats purr"], "k": ["1"]}]


@pytest.mark.unit
def test_missing_title_and_snippet_are_empty(server):
    server.body = json.dumps({"results": [{"url": "https://example.org/a", "title": None, "rank": 1}]})
    assert provider(server.url).search("cats", 5) == [WebResult("", "https://example.org/a", "")]


def _search_error(url: str, **params: Any) -> str:
    with pytest.raises(WebSearchError) as raised:
        provider(url, **params).search("cats", 3)
    message = str(raised.value)
    assert url in message and "\n" not in message
    return message


@pytest.mark.unit
def test_a_server_that_is_down_is_a_search_error(server):
    server.stop()
    assert "failed" in _search_error(server.url)


@pytest.mark.unit
@pytest.mark.parametrize(("body", "says"), [
    ("<html>\n<body>Search is down</body>\n</html>", "did not answer JSON"),
    ("", "did not answer JSON"),
    (json.dumps({"items": RESULTS}), "'results': Field required"),
    (json.dumps({"results": "none"}), "'results'"),
    (json.dumps({"results": [{"title": "no url"}]}), "'results.0.url'"),
    (json.dumps([1, 2, 3]), "without a results list"),
])
def test_a_junk_body_is_a_search_error(server, body, says):
    server.body = body
    assert says in _search_error(server.url)


@pytest.mark.unit
def test_an_http_error_status_is_a_search_error(server):
    server.status, server.body = 503, "overloaded\ntry later"
    assert "answered HTTP 503: 'overloaded try later'" in _search_error(server.url)


@pytest.mark.unit
def test_a_slow_server_is_a_search_error(server):
    server.delay_s = 1.0
    assert "did not answer within 0.2 s" in _search_error(server.url, timeout=0.2)


@pytest.mark.unit
def test_search_checks_its_arguments(server):
    search = provider(server.url)
    with pytest.raises(ValueError, match="k must be >= 1, got 0"):
        search.search("cats", 0)
    with pytest.raises(ValueError, match="the query is empty"):
        search.search("   ", 3)
    assert server.queries == []


@pytest.mark.unit
def test_the_registry_lists_http_from_the_entry_point():
    assert "http" in web_providers.names()
    assert web_providers.get("http") is HTTPSearchProvider and issubclass(HTTPSearchProvider, WebProvider)
    with pytest.raises(ConfigError, match=r"unknown web 'bing'\. Valid choices: .*http"):
        web_providers.get("bing")


@pytest.mark.unit
@pytest.mark.parametrize(("params", "says"), [
    ({}, "'url': Field required"),
    ({"url": "ftp://example.org/search"}, "must be an http:// or https:// URL"),
    ({"url": "example.org/search"}, "must be an http:// or https:// URL"),
    ({"url": "http://127.0.0.1:1/s", "timeout": 0}, "'timeout'"),
    ({"url": "http://127.0.0.1:1/s", "timeout": 600}, "'timeout'"),
    ({"url": "http://127.0.0.1:1/s", "max_results": 0}, "'max_results'"),
    ({"url": "http://127.0.0.1:1/s", "max_results": 500}, "'max_results'"),
    ({"url": "http://127.0.0.1:1/s", "query_param": "q&x"}, "'query_param'"),
    ({"url": "http://127.0.0.1:1/s", "api_key": "secret"}, "unknown parameter 'api_key'"),
])
def test_params_are_validated(params, says):
    with pytest.raises(ConfigError, match=says):
        web_providers.validate_params("http", params)


@pytest.mark.unit
def test_params_round_trip_as_a_spec():
    built = provider("https://search.example.org/api", max_results=7)
    spec = built.spec_dict()
    assert spec == {"type": "http", "params": {"max_results": 7, "url": "https://search.example.org/api",
                                               "timeout": 10.0, "query_param": "q"}}
    assert web_providers.build(spec).spec_key() == built.spec_key()
    assert isinstance(built.params, HTTPSearchParams)
