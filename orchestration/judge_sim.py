"""A simulated OpenAI-compatible LLM provider on 127.0.0.1: ``rag-eval serve-judge-sim``.

It answers the judge's chat requests with valid JSON built from the schema each request
carries (``response_format`` ``json_schema``, or the schema written into the system prompt),
and embeddings requests with deterministic hashed-word vectors, so the LLM judge's whole path
(requests, concurrency, retries, re-asks, the judgement cache) runs over real HTTP with no
model and no network. Like a provider it can be slow (latency and jitter), refuse load (429
above a number of requests in flight), fail (429 with ``Retry-After``, 500, a hang), answer
malformed JSON, and demand an API key; it counts what it received (``GET /stats``, reset by
``POST /reset``). The tests and the benches use it; a user can point ``OPENAI_BASE_URL`` at
it to try the LLM path of a pipeline before paying for a model.

In-process use (the tests): :class:`JudgeServer` with a ``script``, a function
``(request) -> Reply`` where ``request`` is a :class:`Seen` (path, JSON body, headers, and
for chat requests the judgement kind and the schema). The default script is :func:`oracle`,
a judge that answers every kind with every verdict 1; ``rag_eval.orchestration.judge_sim_command``
holds the command, its options and their script (random verdicts, latency and faults, seeded).
"""
from __future__ import annotations

import json
import socket
import sys
import threading
import time
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

from rag_eval.metrics.judges.prompts import example_answer as build_answer


@dataclass
class Seen:
    """One request as the server received it."""

    path: str
    body: dict[str, Any]
    headers: dict[str, str]

    @property
    def schema(self) -> dict[str, Any]:
        fmt = self.body.get("response_format") or {}
        if fmt.get("type") == "json_schema":
            return fmt["json_schema"]["schema"]
        system = self.body["messages"][0]["content"]
        return json.loads(system.split("JSON schema of the answer:\n", 1)[1])

    @property
    def kind(self) -> str:
        fmt = self.body.get("response_format") or {}
        if fmt.get("type") == "json_schema":
            return fmt["json_schema"]["name"]
        prompt = self.prompt
        for marker, kind in (("Check this test question", "question_critic"),
                             ("Write the question and the answer in", "question_generation"),
                             ("Statements:\n", "statement_support"), ("Write ", "answer_questions"),
                             ("Answer, as numbered statements", "reference_attribution"), ("Rate how relevant", "context_relevance_a"),
                             ("Below are passages", "context_relevance_b")):
            if marker in prompt:
                return kind
        return "unknown"

    @property
    def prompt(self) -> str:
        return self.body["messages"][1]["content"]


@dataclass
class Reply:
    """What to answer: a chat ``content``, or a raw ``status``/``body``/``headers``; ``delay`` seconds first;
    ``fault`` names a simulated fault (counted in ``/stats``)."""

    content: str | None = None
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    finish_reason: str = "stop"
    fault: str | None = None


def oracle(decide: Callable[[str, str | None], Any] = lambda field, key: int(field != "noncommittal")
           ) -> Callable[[Seen], Reply]:
    """A script answering every chat request validly with ``decide`` (by default every
    verdict, matrix cell, rating and Likert score 1, noncommittal 0, no entity) and every
    embeddings request with :func:`embed`."""
    def script(seen: Seen) -> Reply:
        if seen.path.endswith("/embeddings"):
            return Reply(body=embedding_body(seen.body["input"]))
        return Reply(content=json.dumps(build_answer(seen.schema, decide)))
    return script


def embed(text: str, dim: int = 64) -> list[float]:
    """A deterministic unit vector per text (hashed words), for the embeddings endpoint."""
    vector = np.zeros(dim)
    for word in text.lower().split():
        vector[zlib.crc32(word.encode()) % dim] += 1.0
    norm = np.linalg.norm(vector)
    return list(vector / norm) if norm else [1.0] + [0.0] * (dim - 1)


def embedding_body(texts: list[str], vectors: Callable[[str], list[float]] = embed) -> dict[str, Any]:
    return {"object": "list", "model": "test-embed", "usage": {"prompt_tokens": 1, "total_tokens": 1},
            "data": [{"object": "embedding", "index": i, "embedding": vectors(t)} for i, t in enumerate(texts)]}


def provider_error(status: int, message: str, code: str) -> Reply:
    """An error reply shaped like OpenAI's."""
    return Reply(status=status, body={"error": {"message": message, "type": "invalid_request_error", "code": code}})


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            return  # the client went away mid-request (killed): nothing to report
        super().handle_error(request, client_address)


def endpoint_name(path: str) -> str:
    """``/v1/chat/completions`` → ``chat.completions``, ``/v1/models/x`` → ``models``."""
    parts = [p for p in path.split("?", 1)[0].split("/") if p and p != "v1"]
    return "models" if parts[:1] == ["models"] else ".".join(parts) or "/"


class JudgeServer:
    """The simulated provider. Start with :meth:`start`; ``url`` is the ``/v1`` base URL.

    ``seen`` lists the POST requests (when ``record`` is true; the command keeps none),
    ``probes`` the GET requests (the judge's endpoint check); ``in_flight`` and ``peak`` count
    requests being answered, ``replied`` when each reply was written (``time.monotonic()``), and
    :meth:`stats` (``GET /stats``; ``POST /reset`` clears it) the requests per endpoint, the
    statuses and the simulated faults.

    Like a provider, it answers 401 to a request without ``Authorization: Bearer
    <api_key>`` when ``api_key`` is set, 404 ``model_not_found`` for a model outside
    ``models`` when that is a list (``None``: every model exists), and 429 at once to a
    request above ``max_concurrency`` in flight (0: no limit). ``GET /models/{id}`` answers
    only when ``model_route`` is true (vLLM has no such route).

    Raises
    ------
    OSError
        When ``host``:``port`` cannot be bound (in use, or not an address of this machine).
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0, record: bool = True) -> None:
        self.script: Callable[[Seen], Reply] = oracle()
        self.seen: list[Seen] = []
        self.probes: list[str] = []
        self.api_key: str | None = None
        self.models: list[str] | None = None
        self.model_route = True
        self.max_concurrency = 0
        self.record = record
        self.in_flight = 0
        self.peak = 0
        #: When each reply was written (``time.monotonic()``), in order.
        self.replied: list[float] = []
        self._counts: dict[str, Counter[str]] = {"requests": Counter(), "status": Counter(), "faults": Counter()}
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def setup(self) -> None:
                super().setup()
                with server._lock:
                    server._connections.add(self.connection)

            def do_GET(self) -> None:
                if self.path == "/stats":
                    return self.answer(Reply(body=server.stats()), None)
                server.probes.append(self.path)
                server.count("requests", endpoint_name(self.path))
                name = self.path.split("/models", 1)[1].strip("/") if "/models" in self.path else None
                reply = server.refusal(self.headers, name or None)
                if reply is None and name is not None and not name:
                    reply = Reply(body={"object": "list", "data": [{"id": m, "object": "model", "created": 0,
                                                                     "owned_by": "test"} for m in server.models or []]})
                elif reply is None and name and server.model_route:
                    reply = Reply(body={"id": name, "object": "model", "created": 0, "owned_by": "test"})
                self.answer(reply or provider_error(404, f"no route {self.path}", "not_found"), None)

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                seen = Seen(self.path, json.loads(self.rfile.read(length) or b"{}"), dict(self.headers))
                if self.path == "/reset":
                    return self.answer(Reply(body=server.stats(reset=True)), None)
                server.count("requests", endpoint_name(self.path))
                with server._lock:
                    if server.record:
                        server.seen.append(seen)
                    busy = 0 < server.max_concurrency <= server.in_flight
                    if not busy:
                        server.in_flight += 1
                        server.peak = max(server.peak, server.in_flight)
                if busy:
                    reply = provider_error(429, "Too many requests in flight.", "rate_limit_exceeded")
                    reply.headers, reply.fault = {"retry-after": "1"}, "concurrency_429"
                    return self.answer(reply, seen)
                try:
                    try:
                        reply = server.refusal(self.headers, seen.body.get("model")) or server.script(seen)
                    except (KeyError, IndexError, TypeError, AttributeError, ValueError):  # not a judge's request
                        reply = provider_error(400, "The simulated judge answers the requests of rag-eval's LLM "
                                                    "judge (a JSON schema in the request).", "invalid_request_error")
                    if reply.delay:
                        time.sleep(reply.delay)
                finally:
                    with server._lock:
                        server.in_flight -= 1
                self.answer(reply, seen)

            def answer(self, reply: Reply, seen: Seen | None) -> None:
                body = reply.body
                if body is None and reply.content is not None:
                    body = {"id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": seen.body.get("model") if seen else None,
                            "choices": [{"index": 0, "finish_reason": reply.finish_reason,
                                         "message": {"role": "assistant", "content": reply.content}}],
                            "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}}
                payload = (body if isinstance(body, str) else json.dumps(body or {})).encode()
                if seen is not None:
                    server.count("status", str(reply.status))
                    if reply.fault:
                        server.count("faults", reply.fault)
                try:
                    self.send_response(reply.status)
                    for name, value in {"content-type": "application/json", **reply.headers}.items():
                        self.send_header(name, value)
                    self.send_header("content-length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    if seen is not None:
                        server.replied.append(time.monotonic())
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout)

        self._httpd = _Server((host, port), Handler)

    def refusal(self, headers: Any, model: str | None) -> Reply | None:
        """401 for a missing or wrong key, 404 for an unknown model, else ``None``."""
        if self.api_key is not None and headers.get("authorization") != f"Bearer {self.api_key}":
            return provider_error(401, "Incorrect API key provided.", "invalid_api_key")
        if self.models is not None and model is not None and model not in self.models:
            return provider_error(404, f"The model `{model}` does not exist or you do not have access to it.",
                                  "model_not_found")
        return None

    def count(self, kind: str, key: str) -> None:
        with self._lock:
            self._counts[kind][key] += 1

    def stats(self, reset: bool = False) -> dict[str, Any]:
        """``{"requests": {endpoint: n}, "status": {code: n}, "faults": {fault: n}, "peak": n,
        "in_flight": n}`` since the start or the last reset (``reset=True`` clears it after)."""
        with self._lock:
            snapshot: dict[str, Any] = {kind: dict(sorted(counts.items())) for kind, counts in self._counts.items()}
            snapshot.update(peak=self.peak, in_flight=self.in_flight)
            if reset:
                self._counts = {kind: Counter() for kind in self._counts}
                self.peak = self.in_flight
        return snapshot

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        assert isinstance(host, str)  # an IPv4 server's (HTTPServer types an address str | bytes)
        return f"http://{host}:{port}/v1"

    def start(self) -> JudgeServer:
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        """Stop like a dead provider: the port refuses connections and open ones are closed."""
        self._httpd.shutdown()
        self._httpd.server_close()
        with self._lock:
            for connection in self._connections:
                try:
                    connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass  # already closed

    def chat_requests(self) -> list[Seen]:
        return [s for s in self.seen if s.path.endswith("/chat/completions")]

    def embedding_requests(self) -> list[Seen]:
        return [s for s in self.seen if s.path.endswith("/embeddings")]
