"""The ollama and openai backends against a small fake server speaking the API subset they use."""

from __future__ import annotations

import functools
import re
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from pydantic import BaseModel

import ragkit.llms.ollama
from ragkit.embedders.remote import OllamaEmbedder, OllamaEmbedParams
from ragkit.errors import BackendUnavailable, LLMError, LLMTimeoutError
from ragkit.llms import LLMClient, resolve_default_backend
from ragkit.llms.base import with_retries
from ragkit.llms.ollama import OllamaLLM, OllamaParams
from ragkit.llms.openai_compat import OpenAICompatibleLLM, OpenAICompatibleParams
from tests.llms.fake_ollama import REPULLED_DIGEST, FakeOllama

pytestmark = pytest.mark.integration

QUESTION = [{"role": "user", "content": "q"}]


class Verdict(BaseModel):
    score: int
    reason: str


@pytest.fixture
def server():
    fake = FakeOllama().start()
    yield fake
    fake.stop()


def free_port_url() -> str:
    """A URL where nothing listens: a port the OS just handed out and we closed again."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def ollama(url: str, model: str = "fake-model", **params: Any) -> OllamaLLM:
    return OllamaLLM(OllamaParams(base_url=url, model=model, **{"retry_backoff_s": 0.01, **params}))


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


def test_timeout_is_retried_with_exponential_backoff_then_reported(server, monkeypatch):
    # The waits are recorded, not slept (with_retries takes its sleep as an argument); every
    # attempt times out, since the server answers only after 10 s: a client that waited for a
    # reply would get one and raise nothing.
    waits: list[float] = []
    monkeypatch.setattr(ragkit.llms.ollama, "with_retries", functools.partial(with_retries, sleep=waits.append))
    server.delay_s = 10.0
    backend = ollama(server.url, timeout_s=0.1, max_retries=2, retry_backoff_s=0.3)
    with pytest.raises(LLMTimeoutError, match=re.escape("timeout_s=0.1 (3 attempts)")):
        backend.chat(QUESTION, json_schema=None, max_tokens=8)
    assert server.chats == 3
    assert waits == [0.3, 0.6]


def test_server_down_is_backend_unavailable_naming_the_url():
    url = free_port_url()
    backend = ollama(url, max_retries=1)
    with pytest.raises(BackendUnavailable) as error:
        backend.chat(QUESTION, json_schema=None, max_tokens=8)
    assert str(error.value).startswith(
        f"Ollama is not reachable at {url} — start it with `ollama serve` or choose another backend")
    assert (error.value.backend, error.value.url) == ("ollama", url)
    assert not isinstance(error.value, LLMError)  # judges record an LLMError as an invalid reply: this must pass them


def test_a_server_that_goes_away_is_unavailable_and_the_client_remembers_it(server, tmp_path):
    server.chats_before_down = 1
    client = LLMClient(ollama(server.url, max_retries=1), tmp_path)
    assert client.call("first", stage="generate").text == "Paris."
    with pytest.raises(BackendUnavailable, match=f"not reachable at {server.url}"):
        client.call("second", stage="generate")
    outage = client.take_outage()
    assert isinstance(outage, BackendUnavailable) and outage.url == server.url
    assert client.take_outage() is None  # taken once


def test_a_failed_call_is_not_an_outage(server, tmp_path):
    client = LLMClient(ollama(server.url, model="broken-model", max_retries=0), tmp_path)
    with pytest.raises(LLMError):
        client.call("q", stage="generate")
    assert client.take_outage() is None


def test_the_cache_key_holds_the_digest_and_a_re_pulled_model_is_asked_again(server, tmp_path):
    first = LLMClient(ollama(server.url), tmp_path)
    assert first.call("Capital of France?", stage="generate").text == "Paris."
    assert first.backend.cache_identity()["digest"] == server.digests["fake-model:latest"]

    server.digests["fake-model:latest"] = REPULLED_DIGEST  # `ollama pull` put another model under the tag
    server.reply = "Paris, France."
    unchanged = LLMClient(ollama(server.url), tmp_path).call("Capital of France?", stage="generate")
    assert not unchanged.cache_hit and unchanged.text == "Paris, France."
    assert server.chats == 2
    again = LLMClient(ollama(server.url), tmp_path).call("Capital of France?", stage="generate")
    assert again.cache_hit and again.text == "Paris, France." and server.chats == 2


def test_the_digest_is_asked_once_per_backend_not_per_call(server, tmp_path):
    client = LLMClient(ollama(server.url), tmp_path)
    for number in range(5):
        client.call(f"question {number}", stage="generate")
    sibling = client.with_backend_params(seed=7, temperature=0.7)  # a re-sampled judge shares the lookup
    sibling.call("question 0", stage="judge")
    assert (server.tag_lookups, server.chats) == (1, 6)


def test_transport_params_do_not_change_the_key(server):
    fast = ollama(server.url, timeout_s=1, max_retries=0)
    patient = ollama(server.url, timeout_s=600, max_retries=5)
    assert fast.cache_identity() == patient.cache_identity()


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
    assert result.parsed == Verdict(score=70, reason="ok")
    assert (result.prompt_tokens, result.completion_tokens) == (11, 3)
    assert server.requests[0]["response_format"]["json_schema"]["schema"] == Verdict.model_json_schema()


def test_openai_compatible_server_down_is_a_clear_error():
    url = free_port_url() + "/v1"
    backend = OpenAICompatibleLLM(OpenAICompatibleParams(model="m", base_url=url, max_retries=0))
    with pytest.raises(BackendUnavailable, match="no OpenAI-compatible server is reachable"):
        backend.chat([{"role": "user", "content": "q"}], json_schema=None, max_tokens=8)
