"""The ollama and openai backends against a small fake server speaking the API subset they use."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from pydantic import BaseModel

from ragkit.embeddings import OllamaEmbedder, OllamaEmbedParams
from ragkit.llms import LLMClient, LLMError, LLMTimeoutError, LLMUnavailableError, resolve_default_backend
from ragkit.llms.ollama import OllamaLLM, OllamaParams
from ragkit.llms.openai_compat import OpenAICompatibleLLM, OpenAICompatibleParams

pytestmark = pytest.mark.integration

SLOW_SECONDS = 1.5


class Verdict(BaseModel):
    score: int
    reason: str


class FakeOllama(BaseHTTPRequestHandler):
    """Behaviour is chosen by model name: fake-model answers, slow-model sleeps, broken-model fails."""

    requests: list[dict[str, Any]]

    def log_message(self, *args: Any) -> None:  # keep pytest output clean
        pass

    def _send(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up first: exactly what the timeout test provokes

    def do_GET(self) -> None:
        if self.path == "/api/version":
            self._send(200, {"version": "0.0.0-fake"})
        elif self.path == "/api/tags":
            self._send(200, {"models": [{"name": "fake-model:latest"}]})
        else:
            self._send(404, {"error": "not found"})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append({"path": self.path, **body})
        model = body.get("model")
        if model == "slow-model":
            time.sleep(SLOW_SECONDS)
        if model == "broken-model":
            self._send(500, {"error": "model runner crashed"})
        elif model == "missing-model":
            self._send(404, {"error": "model 'missing-model' not found, try pulling it first"})
        elif self.path == "/api/chat":
            wants_json = body.get("format") is not None
            content = '{"score": 90, "reason": "fits"}' if wants_json else "Paris."
            self._send(200, {
                "model": model, "created_at": "2026-01-01T00:00:00Z", "done": True, "done_reason": "stop",
                "message": {"role": "assistant", "content": content}, "prompt_eval_count": 21, "eval_count": 4,
            })
        elif self.path == "/api/embed":
            # A vector per input that a test can predict: (length, number of spaces, 1).
            texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
            self._send(200, {"model": model, "embeddings": [[len(t), t.count(" "), 1.0] for t in texts]})
        elif self.path == "/v1/chat/completions":
            wants_json = body.get("response_format") is not None
            content = '{"score": 70, "reason": "ok"}' if wants_json else "Madrid."
            self._send(200, {
                "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 11, "completion_tokens": 3},
            })
        else:
            self._send(404, {"error": f"no route {self.path}"})


@pytest.fixture
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), FakeOllama)
    httpd.daemon_threads = True
    httpd.requests = []
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    httpd.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def free_port_url() -> str:
    """A URL where nothing listens: a port the OS just handed out and we closed again."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def ollama(url: str, model: str = "fake-model", **params: Any) -> OllamaLLM:
    return OllamaLLM(OllamaParams(base_url=url, model=model, retry_backoff_s=0.01, **params))


def test_chat_returns_text_and_token_counts(server, tmp_path):
    result = LLMClient(ollama(server.url), tmp_path).call("Capital of France?", stage="generate", max_tokens=32)
    assert (result.text, result.prompt_tokens, result.completion_tokens) == ("Paris.", 21, 4)
    (request,) = server.requests
    assert request["path"] == "/api/chat" and request["stream"] is False
    assert request["options"]["num_predict"] == 32 and request["options"]["temperature"] == 0.0
    assert request["messages"][-1] == {"role": "user", "content": "Capital of France?"}


def test_schema_is_passed_as_format_and_the_reply_parses(server, tmp_path):
    result = LLMClient(ollama(server.url), tmp_path).call("Rate it.", stage="judge", schema=Verdict)
    assert result.valid and result.parsed == Verdict(score=90, reason="fits")
    assert server.requests[0]["format"] == Verdict.model_json_schema()


def test_second_call_is_served_from_the_cache(server, tmp_path):
    client = LLMClient(ollama(server.url), tmp_path)
    client.call("q", stage="generate")
    assert client.call("q", stage="generate").cache_hit
    assert len(server.requests) == 1


def test_server_error_is_retried_then_reported(server):
    backend = ollama(server.url, model="broken-model", max_retries=2)
    with pytest.raises(LLMError, match="HTTP 500 after 3 attempts: model runner crashed"):
        backend.chat([{"role": "user", "content": "q"}], json_schema=None, max_tokens=8)
    assert len(server.requests) == 3


def test_missing_model_is_not_retried_and_says_how_to_pull_it(server):
    backend = ollama(server.url, model="missing-model", max_retries=2)
    with pytest.raises(LLMError, match="ollama pull missing-model"):
        backend.chat([{"role": "user", "content": "q"}], json_schema=None, max_tokens=8)
    assert len(server.requests) == 1


def test_timeout_is_retried_then_reported(server):
    backend = ollama(server.url, model="slow-model", timeout_s=0.3, max_retries=1)
    started = time.perf_counter()
    with pytest.raises(LLMTimeoutError, match="timeout_s=0.3 \\(2 attempts\\)"):
        backend.chat([{"role": "user", "content": "q"}], json_schema=None, max_tokens=8)
    assert time.perf_counter() - started < SLOW_SECONDS * 2
    assert len(server.requests) == 2


def test_server_down_says_ollama_is_not_reachable():
    url = free_port_url()
    backend = ollama(url, max_retries=1)
    with pytest.raises(LLMUnavailableError) as error:
        backend.chat([{"role": "user", "content": "q"}], json_schema=None, max_tokens=8)
    assert str(error.value).startswith(f"Ollama is not reachable at {url} — start it with `ollama serve` or choose another backend")


@pytest.mark.parametrize(("model", "problem"), [
    ("fake-model", None),
    ("fake-model:latest", None),  # the tag Ollama lists for an untagged pull
    ("llama3.2", "no model 'llama3.2' — pull it with `ollama pull llama3.2` or choose one it has: fake-model:latest"),
])
def test_the_pre_run_check_names_a_model_that_is_not_pulled(server, model, problem):
    found = ollama(server.url, model=model).problem()
    assert found == (None if problem is None else f"Ollama at {server.url} has {problem}")


def test_the_pre_run_check_says_when_something_else_answers():
    class NotOllama(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            body = b"<html>hello</html>"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), NotOllama)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}"
        assert ollama(url).problem().startswith(f"Ollama is not reachable at {url}")
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_the_pre_run_check_says_when_ollama_is_down():
    url = free_port_url()
    assert ollama(url).problem().startswith(f"Ollama is not reachable at {url}")


def test_default_backend_is_ollama_when_a_server_answers(server):
    spec = resolve_default_backend(SimpleNamespace(ollama_url=server.url, ollama_model="fake-model"))
    assert spec.type == "ollama" and spec.params == {"base_url": server.url, "model": "fake-model"}


def test_default_backend_reads_the_url_from_the_environment(server, monkeypatch):
    from ragkit.settings import get_settings

    monkeypatch.setenv("RAGKIT_OLLAMA_URL", server.url)
    get_settings.cache_clear()
    assert resolve_default_backend().params["base_url"] == server.url


def test_default_backend_is_local_when_nothing_listens():
    settings = SimpleNamespace(ollama_url=free_port_url(), ollama_model="fake-model")
    assert resolve_default_backend(settings).type == "local"


def test_ollama_embedder_embeds_texts_and_queries_through_the_server(server):
    embedder = OllamaEmbedder(OllamaEmbedParams(model_name="fake-embed", base_url=server.url))
    texts = embedder.embed_texts(["ab cd", "x"])
    expected = np.array([[5, 1, 1], [1, 0, 1]], dtype=np.float32)
    np.testing.assert_allclose(texts, expected / np.linalg.norm(expected, axis=1, keepdims=True), rtol=1e-6)
    np.testing.assert_allclose(embedder.embed_query("ab cd"), texts[0], rtol=1e-6)
    embeds = [r for r in server.requests if r["path"] == "/api/embed"]
    assert embeds and all(r["model"] == "fake-embed" for r in embeds)


def test_ollama_embedder_reports_a_missing_model(server):
    embedder = OllamaEmbedder(OllamaEmbedParams(model_name="missing-model", base_url=server.url))
    with pytest.raises(Exception, match="missing-model"):
        embedder.embed_texts(["a"])


def test_openai_compatible_backend_sends_json_schema_response_format(server, tmp_path):
    backend = OpenAICompatibleLLM(OpenAICompatibleParams(model="m", base_url=server.url + "/v1"))
    result = LLMClient(backend, tmp_path).call("Rate it.", stage="judge", schema=Verdict)
    assert result.parsed == Verdict(score=70, reason="ok") and (result.prompt_tokens, result.completion_tokens) == (11, 3)
    assert server.requests[0]["response_format"]["json_schema"]["schema"] == Verdict.model_json_schema()


def test_openai_compatible_server_down_is_a_clear_error():
    url = free_port_url() + "/v1"
    backend = OpenAICompatibleLLM(OpenAICompatibleParams(model="m", base_url=url, max_retries=0))
    with pytest.raises(LLMUnavailableError, match="no OpenAI-compatible server is reachable"):
        backend.chat([{"role": "user", "content": "q"}], json_schema=None, max_tokens=8)
