"""The Ollama and OpenAI-compatible embedders against a real HTTP server on 127.0.0.1: timeouts,
retries with exponential backoff on refused / timed-out / 5xx / 429 requests, no retry on a
4xx, and one clear error naming the embedder and the server when it stays down."""

from __future__ import annotations

import functools
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

import ragkit.llms.base
from ragkit.embedders.base import embedders
from ragkit.embedders.remote import EmbeddingServerError
from ragkit.errors import BackendUnavailable, ConfigError
from ragkit.experiments.plan import component_key
from ragkit.llms.base import with_retries

pytestmark = pytest.mark.integration

VECTOR = [3.0, 4.0]


class Server:
    """Replies from a script: each item is (status, body) or ("hang",), which answers only once the
    test is over (``release``); the last item repeats."""

    def __init__(self, script):
        self.script = list(script)
        self.requests: list[tuple[str, dict]] = []
        self.release = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append((self.path, body))
                step = outer.script[min(len(outer.requests), len(outer.script)) - 1]
                if step[0] == "hang":
                    outer.release.wait(timeout=60)
                    step = (200, outer.reply(body))
                status, payload = step if step[1] is not None else (step[0], outer.reply(body))
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def reply(self, body):
        texts = body["input"]
        if "/v1/" in self.requests[-1][0]:
            return {"data": [{"index": i, "embedding": VECTOR} for i in reversed(range(len(texts)))]}
        return {"embeddings": [VECTOR for _ in texts]}

    def close(self):
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def serve():
    servers = []

    def start(*script):
        server = Server(script)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


def embedder(kind, url, **params):
    base = url + ("/v1" if kind == "openai" else "")
    spec = {"type": kind, "params": {"model_name": "m", "base_url": base, "backoff_s": 0.05, **params}}
    return embedders.build(spec)


KINDS = ["ollama", "openai"]


@pytest.mark.parametrize("kind", KINDS)
def test_vectors_come_back_normalised_in_order(serve, kind):
    server = serve((200, None))
    vectors = embedder(kind, server.url).embed_texts(["a", "b", "c"])
    assert np.allclose(vectors, [[0.6, 0.8]] * 3)
    (path, body), = server.requests
    assert path == ("/v1/embeddings" if kind == "openai" else "/api/embed") and body == {"model": "m",
                                                                                          "input": ["a", "b", "c"]}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("status", [503, 429])
def test_transient_failures_are_retried_with_doubling_waits(serve, kind, status, monkeypatch):
    # The waits are recorded, not slept: with_retries takes its sleep as an argument.
    waits: list[float] = []
    monkeypatch.setattr(ragkit.llms.base, "with_retries", functools.partial(with_retries, sleep=waits.append))
    server = serve((status, {"error": "busy"}), (status, {"error": "busy"}), (200, None))
    vectors = embedder(kind, server.url, backoff_s=0.2).embed_texts(["a"])
    assert np.allclose(vectors, [[0.6, 0.8]]) and len(server.requests) == 3
    assert waits == [0.2, 0.4]


@pytest.mark.parametrize("kind", KINDS)
def test_a_server_that_keeps_failing_is_named_after_the_last_retry(serve, kind):
    server = serve((500, {"error": "model crashed"}))
    with pytest.raises(BackendUnavailable, match=rf"embedder '{kind}' at {server.url}.* HTTP 500 after 3 attempts: "
                                                 "model crashed"):
        embedder(kind, server.url, max_retries=2).embed_texts(["a"])
    assert len(server.requests) == 3


@pytest.mark.parametrize("kind", KINDS)
def test_a_request_past_the_timeout_is_retried_then_reported(serve, kind):
    server = serve(("hang",))
    with pytest.raises(BackendUnavailable, match=rf"no answer from {server.url}.*timeout_s=0.2 after 2 attempts"):
        embedder(kind, server.url, timeout_s=0.2, max_retries=1).embed_texts(["a"])
    # The server has answered neither request yet: the client gave up on its own timeout.
    assert len(server.requests) == 2 and not server.release.is_set()


@pytest.mark.parametrize("kind", KINDS)
def test_a_server_that_is_down_is_named(kind):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    with pytest.raises(BackendUnavailable, match=rf"embedder '{kind}' could not reach {url}.* after 2 attempts: "
                                                 "connection refused"):
        embedder(kind, url, max_retries=1).embed_query("a")


@pytest.mark.parametrize("kind", KINDS)
def test_a_refused_request_is_not_retried_and_shows_the_servers_message(serve, kind):
    server = serve((404, {"error": "model 'm' not found, try pulling it first"}))
    with pytest.raises(EmbeddingServerError, match=r"HTTP 404, model .m.*not found, try pulling it first"):
        embedder(kind, server.url).embed_texts(["a"])
    assert len(server.requests) == 1
    assert issubclass(EmbeddingServerError, ConfigError)  # one line in the CLI, no traceback


@pytest.mark.parametrize("kind", KINDS)
def test_a_reply_with_the_wrong_number_of_vectors_is_an_error(serve, kind):
    bad = {"data": []} if kind == "openai" else {"embeddings": []}
    server = serve((200, bad))
    with pytest.raises(EmbeddingServerError, match="not 1 embeddings"):
        embedder(kind, server.url).embed_texts(["a"])


@pytest.mark.unit
def test_timeouts_and_retries_are_in_no_content_key():
    """They change how a server is reached, not its vectors: the embedding cache and run ids stay."""
    plain = embedders.resolve({"type": "ollama"})
    patient = embedders.resolve({"type": "ollama", "params": {"timeout_s": 300, "max_retries": 8}})
    assert patient.params["timeout_s"] == 300  # kept in the spec, so the embedder uses it
    assert component_key(embedders, plain) == component_key(embedders, patient)
    other = embedders.resolve({"type": "ollama", "params": {"model_name": "mxbai-embed-large"}})
    assert component_key(embedders, other) != component_key(embedders, plain)
    assert "timeout_s" not in plain.params  # an added option at its default: the old resolved spec


@pytest.mark.unit
def test_the_api_key_comes_from_the_named_variable(serve, monkeypatch):
    monkeypatch.delenv("RAGKIT_TEST_KEY", raising=False)
    with pytest.raises(EmbeddingServerError, match="RAGKIT_TEST_KEY is not set"):
        embedder("openai", "http://127.0.0.1:9", api_key_env="RAGKIT_TEST_KEY").embed_texts(["a"])
