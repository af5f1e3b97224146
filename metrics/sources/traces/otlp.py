"""OTLP/JSON span files with OpenInference semantic conventions, read as traces.

OpenTelemetry's file exporter (``opentelemetry-exporter-otlp-json-file``, the Collector's
``file`` exporter) writes one ``ExportTraceServiceRequest`` a line: ``resourceSpans`` →
``scopeSpans`` → ``spans``, ids as hex, times as nanosecond strings, attributes as
``{"key", "value": {"stringValue" | "intValue" | ...}}``. The spans of a trace (same
``traceId``) are gathered as they are read and the trace is given out when its root span
(no ``parentSpanId``; the last to end, so the last exported) is read; traces whose root
never came are given out at the end. Only unfinished traces are held: memory is bounded by
the traces in flight, not by the files.

What the OpenInference conventions (Arize ``openinference-semantic-conventions``) give:

* ``user_input``: ``input.value`` of the outermost CHAIN or AGENT span, else of the
  RETRIEVER span (its query), else the last user message of the LLM span
  (``llm.input_messages.{i}.message.content`` with role ``user``);
* ``response``: ``output.value`` of that CHAIN/AGENT span, else of the last LLM span to end
  (or its ``llm.output_messages.0.message.content``);
* ``retrieved_contexts``: ``retrieval.documents.{i}.document.content`` of the RETRIEVER
  span(s), in start order then rank ``i``; ``retrieved_documents``: their
  ``document.id`` and ``document.score`` when every document has both;
* tokens: ``llm.token_count.prompt/completion/total`` summed over the LLM spans;
* ``session.id``, ``user.id``; the route: ``http.route``, else ``route`` in the ``metadata``
  JSON attribute, else the resource's ``service.name``.

A JSON ``input.value``/``output.value`` (``input.mime_type`` ``application/json``) gives its
``user_input``/``question``/``query``/``input`` (``response``/``answer``/``output``/``content``) member.
How a line is decoded (OTLP's values, ids and times; a line read leniently to name its problems) is
``rag_eval.metrics.sources.traces.otlp_wire``'s.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from rag_eval.metrics.sources.traces.model import MAX_COUNT, Trace, TraceProblem, count_of, finite, session_id
from rag_eval.metrics.sources.traces.otlp_wire import Span, hex_id, nanoseconds, read_request, value_of

_DOCUMENTS = "retrieval.documents."
_INPUT_MESSAGES = "llm.input_messages."
_WANTED = {"openinference.span.kind", "input.value", "input.mime_type", "output.value", "output.mime_type",
           "llm.token_count.prompt", "llm.token_count.completion", "llm.token_count.total", "session.id", "user.id",
           "metadata", "http.route", "llm.output_messages.0.message.content"}
_TOKENS = ("llm.token_count.prompt", "llm.token_count.completion", "llm.token_count.total")
_QUESTION_KEYS = ("user_input", "question", "query", "input")
_ANSWER_KEYS = ("response", "answer", "output", "content")


class _Pending:
    """What the spans of one unfinished trace gave so far."""

    __slots__ = (
        "chains",
        "end",
        "llms",
        "problems",
        "queries",
        "retrievals",
        "route",
        "service",
        "session",
        "source",
        "start",
        "tokens",
        "user",
    )

    def __init__(self, source: str) -> None:
        self.source = source
        self.start: int | None = None
        self.end: int | None = None
        self.chains: list[tuple[int, Any, Any]] = []          # (start, input, output) of CHAIN/AGENT spans
        self.retrievals: list[tuple[int, list[dict]]] = []    # (start, documents by rank)
        self.queries: list[tuple[int, Any]] = []              # (start, input.value) of RETRIEVER spans
        self.llms: list[tuple[int, Any, Any]] = []            # (end, output, last user message)
        self.tokens: list[int | None] = [None, None, None]
        self.session: str | None = None
        self.user: str | None = None
        self.route: str | None = None
        self.service: str | None = None
        self.problems: dict[str, str] = {}


def _member(text: Any, mime: Any, keys: tuple[str, ...]) -> Any:
    """``text``, or for a JSON value (``application/json``) the first string member of ``keys``."""
    if mime != "application/json" or not isinstance(text, str):
        return text
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        return text
    if isinstance(parsed, str):
        return parsed
    if isinstance(parsed, dict):
        return next((parsed[k] for k in keys if isinstance(parsed.get(k), str)), text)
    return text


def _documents(found: dict[int, dict[str, Any]]) -> tuple[list[dict], list[tuple[str, str, str]]]:
    """Documents by rank from ``{i: {"content", "id", "score"}}``, and the problems found:
    ``(sample field, attribute, reason)``."""
    problems = []
    documents = []
    ranks = sorted(found)
    if ranks and ranks[-1] >= len(ranks):  # a gap: said once (a rank of 10^8 is one problem, not 10^8)
        gap = next(rank for rank, given in enumerate(ranks) if rank != given)
        shown = ", ".join(map(str, ranks[:10])) + (", …" if len(ranks) > 10 else "")
        problems.append(("retrieved_contexts", f"{_DOCUMENTS}{gap}",
                         f"missing: {ranks[-1] + 1 - len(ranks)} of ranks 0..{ranks[-1]} not given "
                         f"(ranks {shown} given)"))
    for rank in ranks:
        doc = found[rank]
        if not isinstance(doc.get("content"), str):
            got = "missing" if doc.get("content") is None else f"expected a string, got {type(doc['content']).__name__}"
            problems.append(("retrieved_contexts", f"{_DOCUMENTS}{rank}.document.content", got))
        score = doc.get("score")
        if score is not None:
            doc["score"] = finite(score)
            if doc["score"] is None:
                problems.append(("retrieved_documents", f"{_DOCUMENTS}{rank}.document.score",
                                 f"expected a finite number, got {score!r}"))
        documents.append(doc)
    return documents, problems


def _finish(trace_id: str, pending: _Pending) -> Trace | TraceProblem:
    """The trace of what its spans gave (or a problem when no span had a readable time)."""
    if pending.start is None:
        file, _, line = pending.source.rpartition(":")
        return TraceProblem(file, int(line), "startTimeUnixNano", "no span of the trace has a readable start time: "
                            "it cannot be placed in a partition", trace_id)
    trace = Trace(trace_id, pending.start, pending.end if pending.end is not None else pending.start,
                  session_id=pending.session, user_id=pending.user, route=pending.route or pending.service,
                  source=pending.source, problems=dict(pending.problems))
    outer = min(pending.chains, key=lambda c: c[0]) if pending.chains else None
    last_llm = max(pending.llms, key=lambda c: c[0]) if pending.llms else None
    trace.user_input = next((v for v in (outer and outer[1], min(pending.queries, key=lambda q: q[0])[1]
                                         if pending.queries else None, last_llm and last_llm[2]) if v is not None),
                            None)
    trace.response = next((v for v in (outer and outer[2], last_llm and last_llm[1]) if v is not None), None)
    if pending.retrievals:
        documents = [d for _, docs in sorted(pending.retrievals, key=lambda r: r[0]) for d in docs]
        if "retrieved_contexts" not in trace.problems:  # every document's content is text (_documents)
            trace.retrieved_contexts = [d["content"] for d in documents]
        if documents and all(d.get("id") is not None and d.get("score") is not None for d in documents) \
                and "retrieved_documents" not in trace.problems:
            trace.retrieved_documents = [{"document_id": str(d["id"]), "relevance_score": d["score"]}
                                         for d in documents]
    # A count that could not be read leaves its total unknown (never a sum that silently lacks it).
    trace.prompt_tokens, trace.completion_tokens, trace.total_tokens = (
        None if key in pending.problems else count for key, count in zip(_TOKENS, pending.tokens))
    for name in ("user_input", "response"):
        value = getattr(trace, name)
        if value is not None and not isinstance(value, str):
            trace.problems[name] = f"{pending.source}: expected a string, got {type(value).__name__}"
            setattr(trace, name, None)
    return trace


class _Reader:
    """The state of one read: unfinished traces, finished ids, and what was found."""

    def __init__(self) -> None:
        self.pending: dict[str, _Pending] = {}
        self.done: set[str] = set()

    def span(self, span: Span, file: str, line: int, service: str | None) -> list[Trace | TraceProblem]:
        """What reading one span gives: its problems, and its trace when it is the root."""
        start = nanoseconds(span.startTimeUnixNano)
        trace_id = hex_id(span.traceId, 32)
        if trace_id is None:
            return [TraceProblem(file, line, "traceId", f"missing or not a 16-byte id: {span.traceId!r} "
                                 f"(span {span.name!r})", None, start)]
        if trace_id in self.done:
            return [TraceProblem(file, line, "spanId", f"span {span.name!r} arrived after its trace's root "
                                 "span was read: it is not part of the trace's sample", trace_id, start)]
        out: list[Trace | TraceProblem] = []
        where = f"{file}:{line}"
        pending = self.pending.get(trace_id)
        if pending is None:
            pending = self.pending[trace_id] = _Pending(where)
        end = nanoseconds(span.endTimeUnixNano)
        for name, value in (("startTimeUnixNano", start), ("endTimeUnixNano", end)):
            if value is None:
                out.append(TraceProblem(file, line, name, f"missing or not a number of nanoseconds up to 2^63: "
                                        f"{getattr(span, name)!r} (span {span.name!r})", trace_id))
        if start is not None and (pending.start is None or start < pending.start):
            pending.start = start
        if end is not None and (pending.end is None or end > pending.end):
            pending.end = end
        if service is not None:
            pending.service = service
        attributes = {a.key: a.value for a in span.attributes}
        found: dict[str, Any] = {}
        errors: list[tuple[str, Exception]] = []
        for key in attributes.keys() & _WANTED:
            _take(attributes, key, found, key, errors)
        kind = found.get("openinference.span.kind")
        kind = kind.upper() if isinstance(kind, str) else None
        documents: dict[int, dict[str, Any]] = {}
        messages: dict[int, dict[str, Any]] = {}
        prefix = _DOCUMENTS if kind == "RETRIEVER" else _INPUT_MESSAGES if kind == "LLM" else ""
        for key in [k for k in attributes if k.startswith(prefix)] if prefix else ():
            index, _, slot = key[len(prefix):].partition(".document." if kind == "RETRIEVER" else ".message.")
            if index.isdigit() and slot in (("content", "id", "score") if kind == "RETRIEVER" else ("role", "content")):
                _take(attributes, key, (documents if kind == "RETRIEVER" else messages).setdefault(int(index), {}),
                      slot, errors)
        for key, exc in errors:
            pending.problems.setdefault(_field_of(key), f"{where}: {key}: {exc}")
            out.append(TraceProblem(file, line, key, f"unreadable value: {exc}", trace_id, start))
        if kind in ("CHAIN", "AGENT") and ("input.value" in found or "output.value" in found):
            pending.chains.append((start or 0, _member(found.get("input.value"), found.get("input.mime_type"),
                                                       _QUESTION_KEYS),
                                   _member(found.get("output.value"), found.get("output.mime_type"), _ANSWER_KEYS)))
        elif kind == "RETRIEVER":
            docs, problems = _documents(documents)
            for name, key, reason in problems:
                pending.problems.setdefault(name, f"{where}: {key}: {reason}")
                out.append(TraceProblem(file, line, key, reason, trace_id, start))
            pending.retrievals.append((start or 0, docs))
            if "input.value" in found:
                pending.queries.append((start or 0, _member(found["input.value"], found.get("input.mime_type"),
                                                            _QUESTION_KEYS)))
        elif kind == "LLM":
            output = found.get("output.value", found.get("llm.output_messages.0.message.content"))
            user = next((m.get("content") for _, m in sorted(messages.items(), reverse=True)
                         if m.get("role") == "user"), None)
            pending.llms.append((end or 0, _member(output, found.get("output.mime_type"), _ANSWER_KEYS), user))
            for i, key in enumerate(_TOKENS):
                value = found.get(key)
                if value is None:
                    continue
                summed = (pending.tokens[i] or 0) + value if isinstance(value, int) else None
                if count_of(value) is None or count_of(summed) is None:
                    reason = f"expected a whole number up to {MAX_COUNT} (summed over the trace's LLM spans), " \
                             f"got {value!r}"
                    pending.problems.setdefault(key, f"{where}: {key}: {reason}")
                    out.append(TraceProblem(file, line, key, reason, trace_id, start))
                    continue
                pending.tokens[i] = (pending.tokens[i] or 0) + value
        if len(found) > 1:  # more than the span's kind: ids and the route, when a span carries them
            if isinstance(found.get("user.id"), str | int) and pending.user is None:
                pending.user = str(found["user.id"])
            if "session.id" in found and pending.session is None:
                pending.session, invalid = session_id(found["session.id"])
                if invalid:  # the value itself is metadata: never in a problem (problems are logged)
                    pending.problems.setdefault("session_id", f"{where}: session.id: {invalid}")
                    out.append(TraceProblem(file, line, "session.id", invalid, trace_id, start))
            route = found.get("http.route") or _route(found.get("metadata"))
            if isinstance(route, str) and route and pending.route is None:
                pending.route = route
        if not span.parentSpanId:  # the root: the last span of its trace to end
            self.done.add(trace_id)
            out.append(_finish(trace_id, self.pending.pop(trace_id)))
        return out

    def finish(self) -> Iterator[Trace | TraceProblem]:
        """The traces whose root span never came, in the order their first span was read."""
        for trace_id, pending in self.pending.items():
            yield _finish(trace_id, pending)
        self.pending.clear()


def _take(attributes: dict, key: str, target: dict, slot: str, errors: list) -> None:
    """``target[slot]`` = the value of attribute ``key``; an unreadable value is added to ``errors``."""
    value = attributes[key]
    if value.stringValue is not None:
        target[slot] = value.stringValue
        return
    try:
        target[slot] = value_of(value)
    except (ValueError, TypeError, AttributeError) as exc:
        errors.append((key, exc))


def _field_of(key: str) -> str:
    if key.startswith(_DOCUMENTS):
        return "retrieved_contexts"
    if key in ("input.value", "llm.input_messages"):
        return "user_input"
    return "response" if key.startswith(("output.value", "llm.output_messages")) else key


def _route(metadata: Any) -> str | None:
    if not isinstance(metadata, str) or "route" not in metadata:
        return None
    try:
        parsed = json.loads(metadata)
    except json.JSONDecodeError:
        return None
    route = parsed.get("route") if isinstance(parsed, dict) else None
    return route if isinstance(route, str) else None


def read_otlp(paths: Iterable[Path]) -> Iterator[Trace | TraceProblem]:
    """The traces of OTLP/JSON span files (one ``ExportTraceServiceRequest`` a line), read
    line by line, and the problems met (:class:`rag_eval.metrics.sources.traces.TraceProblem`: a line that
    is not UTF-8 or JSON, a span without a trace id or readable times, an attribute of the
    wrong type, a retrieved document without content). See the module's notes for what
    each field is read from."""
    reader = _Reader()
    for path in paths:
        file = str(path)
        with open(path, "rb") as handle:
            for number, raw in enumerate(handle, start=1):
                if not raw.strip():
                    continue
                request, problems = read_request(raw, file, number)
                yield from problems
                for resource_spans in request.resourceSpans if request is not None else ():
                    service = next((a.value.stringValue for a in resource_spans.resource.attributes
                                    if a.key == "service.name"), None)
                    for scope in resource_spans.scopeSpans or resource_spans.instrumentationLibrarySpans:
                        for span in scope.spans:
                            found = reader.span(span, file, number, service)
                            if found:
                                yield from found
    yield from reader.finish()
