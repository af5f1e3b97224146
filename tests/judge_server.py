"""The project's own OpenAI-compatible test server, on 127.0.0.1, with scripted replies.

Tests drive the LLM judge over real HTTP against it (no patched client). A test sets
``server.script``: a function ``(request) -> Reply`` where ``request`` is a
:class:`Seen` (path, JSON body, headers, and for chat requests the judgement kind and
the item keys the schema asks for). The default script is :func:`oracle`, a judge that
answers every kind with valid JSON built from the request's schema.
"""
from __future__ import annotations

import json
import threading
import zlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

BINARY_FIELDS = ("verdict", "attributed", "useful", "noncommittal")


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
        for marker, kind in (("Statements:\n", "statement_support"), ("Write ", "answer_questions"),
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
    """What to answer: a chat ``content``, or a raw ``status``/``body``/``headers``; ``delay`` seconds first."""

    content: str | None = None
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    finish_reason: str = "stop"


def build_answer(schema: dict[str, Any], decide: Callable[[str, str | None], Any], parent: str | None = None) -> Any:
    """A valid instance of any of the judge's schemas, built recursively from the schema.

    ``decide(field, key)`` picks every integer (and list) value: ``field`` is the property
    being filled and ``key`` the property of the object holding it, e.g.
    ``("verdict", "S2")`` for a keyed statement verdict, ``("covered", "R1")`` for
    statement classification, ``("S3", "C1")`` for cell (statement S3, context C1) of the
    context support matrix, ``("rating", None)`` / ``("score", None)`` for top-level
    ratings and Likert scores. For an array field (``("entities", None)``) a list returned
    by ``decide`` is used as is, anything else gives ``[]``. Strings are filled in:
    ``reason`` → "scripted reason for <key>", ``question`` → "What does <key> ask?".
    """
    answer = {}
    for name, sub in schema["properties"].items():
        kind = sub.get("type")
        if kind == "object" or "properties" in sub:
            answer[name] = build_answer(sub, decide, name)
        elif kind == "string":
            answer[name] = {"reason": f"scripted reason for {parent}" if parent else "scripted reason",
                            "question": f"What does {parent} ask?"}.get(name, f"scripted {name}")
        elif kind == "array":
            value = decide(name, parent)
            answer[name] = value if isinstance(value, list) else []
        else:
            answer[name] = decide(name, parent)
    return answer


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


class JudgeServer:
    """Start with :meth:`start`; ``url`` is the ``/v1`` base URL; ``seen`` lists requests."""

    def __init__(self) -> None:
        self.script: Callable[[Seen], Reply] = oracle()
        self.seen: list[Seen] = []
        self.in_flight = 0
        self.peak = 0
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                seen = Seen(self.path, json.loads(self.rfile.read(length) or b"{}"), dict(self.headers))
                with server._lock:
                    server.seen.append(seen)
                    server.in_flight += 1
                    server.peak = max(server.peak, server.in_flight)
                try:
                    reply = server.script(seen)
                    if reply.delay:
                        time.sleep(reply.delay)
                finally:
                    with server._lock:
                        server.in_flight -= 1
                body = reply.body
                if body is None and reply.content is not None:
                    body = {"id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": seen.body.get("model"),
                            "choices": [{"index": 0, "finish_reason": reply.finish_reason,
                                         "message": {"role": "assistant", "content": reply.content}}],
                            "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}}
                payload = (body if isinstance(body, str) else json.dumps(body or {})).encode()
                try:
                    self.send_response(reply.status)
                    for name, value in {"content-type": "application/json", **reply.headers}.items():
                        self.send_header(name, value)
                    self.send_header("content-length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def start(self) -> JudgeServer:
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def chat_requests(self) -> list[Seen]:
        return [s for s in self.seen if s.path.endswith("/chat/completions")]

    def embedding_requests(self) -> list[Seen]:
        return [s for s in self.seen if s.path.endswith("/embeddings")]
