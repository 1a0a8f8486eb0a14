"""A fake Ollama server speaking the API subset ragkit uses (plus OpenAI's /v1/chat/completions).

Tests steer it through attributes, which survive a restart on the same port:

- ``digests``: what ``/api/tags`` lists, name -> digest; change a digest to re-pull a model.
- ``reply``: the chat answer; a JSON request gets it as ``answer`` when the schema asks for one.
- ``replier``: if set, ``/api/chat`` answers ``replier(request_body)`` instead (a scripted model).
- ``delay_s``: seconds each chat waits before answering (slower than a client's timeout).
- ``chats_before_down``: answer that many chats, then go away: connections are refused after.

It counts what it served: ``requests`` (every POST body, with its path) and ``tag_lookups``.
Model names still choose a failure: ``broken-model`` answers HTTP 500, ``missing-model`` 404.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

FIRST_DIGEST = "sha256:" + "1" * 64
REPULLED_DIGEST = "sha256:" + "2" * 64


class FakeOllama:
    def __init__(self) -> None:
        self.digests: dict[str, str] = {"fake-model:latest": FIRST_DIGEST}
        self.reply = "Paris."
        self.replier: Callable[[dict[str, Any]], str] | None = None
        self.delay_s = 0.0
        self.chats_before_down: int | None = None
        self.requests: list[dict[str, Any]] = []
        self.tag_lookups = 0
        self.port = 0
        self._httpd: ThreadingHTTPServer | None = None
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def chats(self) -> int:
        return sum(request["path"] == "/api/chat" for request in self.requests)

    def start(self) -> FakeOllama:
        """Listen (again) on this server's port, or on a free one the first time."""
        httpd = ThreadingHTTPServer(("127.0.0.1", self.port), _Handler)
        httpd.daemon_threads = True
        httpd.fake = self  # type: ignore[attr-defined]
        self._httpd, self.port = httpd, httpd.server_address[1]
        threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        """Stop listening: from now on a connection is refused, as when Ollama is killed."""
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def record(self, path: str, body: dict[str, Any]) -> bool:
        """Record a POST; True if it is the chat after which the server goes away."""
        with self._lock:
            self.requests.append({"path": path, **body})
            return path == "/api/chat" and self.chats_before_down is not None and self.chats == self.chats_before_down


class _Handler(BaseHTTPRequestHandler):
    server: Any

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
            pass  # the client gave up first: exactly what the timeout tests provoke

    def do_GET(self) -> None:
        fake: FakeOllama = self.server.fake
        if self.path == "/api/version":
            self._send(200, {"version": "0.0.0-fake"})
        elif self.path == "/api/tags":
            fake.tag_lookups += 1
            self._send(200, {"models": [{"name": name, "model": name, "digest": digest}
                                        for name, digest in fake.digests.items()]})
        else:
            self._send(404, {"error": "not found"})

    def do_POST(self) -> None:
        fake: FakeOllama = self.server.fake
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        goes_down_after = fake.record(self.path, body)
        model = body.get("model")
        if self.path in ("/api/chat", "/v1/chat/completions") and fake.delay_s:
            time.sleep(fake.delay_s)
        if goes_down_after:
            fake.stop()  # refuse every later connection; this one still gets its answer
        if model == "broken-model":
            self._send(500, {"error": "model runner crashed"})
        elif model == "missing-model":
            self._send(404, {"error": "model 'missing-model' not found, try pulling it first"})
        elif self.path == "/api/chat":
            self._send(200, {
                "model": model, "created_at": "2026-01-01T00:00:00Z", "done": True, "done_reason": "stop",
                "message": {"role": "assistant", "content": fake.replier(body) if fake.replier
                            else _content(fake.reply, body.get("format"), 90)},
                "prompt_eval_count": 21, "eval_count": 4,
            })
        elif self.path == "/api/embed":
            # A vector per input that a test can predict: (length, number of spaces, 1).
            texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
            self._send(200, {"model": model, "embeddings": [[len(t), t.count(" "), 1.0] for t in texts]})
        elif self.path == "/v1/chat/completions":
            schema = (body.get("response_format") or {}).get("json_schema", {}).get("schema")
            content = _content("Madrid.", schema, 70)
            self._send(200, {
                "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                             "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 11, "completion_tokens": 3},
            })
        else:
            self._send(404, {"error": f"no route {self.path}"})


def _content(reply: str, schema: Any, score: int) -> str:
    """The reply, as JSON of the requested shape when a schema was sent."""
    if schema is None:
        return reply
    if isinstance(schema, dict) and "answer" in (schema.get("properties") or {}):  # the generator's reply
        return json.dumps({"answer": reply, "citations": [1]})
    return json.dumps({"score": score, "reason": "fits" if score == 90 else "ok"})
