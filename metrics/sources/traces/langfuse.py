"""Langfuse trace exports, read as traces.

What Langfuse writes: a trace downloaded from its UI (``trace-<id>.json``: the trace with
its ``observations`` and ``scores``), its public API's ``TraceWithFullDetails``, a table
export as JSON (a list, or ``{"data": [...]}``) or JSONL (a trace a line). A trace has
``id``, ``timestamp`` (ISO 8601), ``input``, ``output``, ``sessionId``, ``userId``,
``metadata``, ``latency`` (seconds) and ``observations`` (``type`` ``SPAN``,
``GENERATION``, ``RETRIEVER``...; ``startTime``, ``endTime``, ``input``, ``output``,
``usageDetails``/``usage``).

* ``user_input``: the trace's ``input`` (a string, a ``question``/``query``/``input``
  member, or the last user message of a chat); ``response``: its ``output`` (likewise,
  ``answer``/``output``/``content``), else the last generation's output;
* ``retrieved_contexts``: the output of the RETRIEVER observations (or SPANs named
  ``retriev…``) in start order: a list of strings or of documents with
  ``page_content``/``content``/``text``, their ``id`` and ``score`` (also under ``metadata``)
  giving ``retrieved_documents``;
* tokens: ``usageDetails`` (``input``/``output``/``total``), or ``usage``, summed over
  the generations; the route: ``metadata.route``, else the trace's ``name``.

A problem's ``line`` is the line for JSONL, the record's position (from 1) in a JSON list.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rag_eval.metrics.core.bounded import quote
from rag_eval.metrics.core.decoding import TOO_DEEP, decode_json, field_problem
from rag_eval.metrics.sources.traces.model import (MAX_COUNT, Trace, TraceProblem, count_of, duration_ns, finite,
                                                   in_range, session_id)

_QUESTION_KEYS = ("user_input", "question", "query", "input")
_ANSWER_KEYS = ("response", "answer", "output", "content", "text")
_CONTENT_KEYS = ("page_content", "content", "text")


def iso_ns(value: Any) -> int | None:
    """An ISO 8601 time (``Z`` or an offset; naive means UTC) as nanoseconds since the epoch, or ``None``."""
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return in_range(int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1000)


def text_of(value: Any, keys: tuple[str, ...]) -> Any:
    """A string from a Langfuse input or output: itself, the first string member of ``keys``,
    or the last user (input) or assistant (output) message's content of a chat."""
    if isinstance(value, str) or value is None:
        return value
    if isinstance(value, dict):
        found = next((value[k] for k in keys if isinstance(value.get(k), str)), None)
        if found is None and isinstance(value.get("messages"), list):
            return text_of(value["messages"], keys)
        return found if found is not None else value
    if isinstance(value, list) and value and all(isinstance(m, dict) and "role" in m for m in value):
        role = "user" if keys is _QUESTION_KEYS else "assistant"
        return next((m.get("content") for m in reversed(value) if m.get("role") == role), value)
    return value


def _documents(output: Any) -> list[Any] | None:
    if isinstance(output, dict):
        output = next((output[k] for k in ("documents", "output", "results") if isinstance(output.get(k), list)), None)
    return output if isinstance(output, list) else None


def _is_retrieval(observation: dict) -> bool:
    kind = str(observation.get("type") or "").upper()
    return kind == "RETRIEVER" or (kind == "SPAN" and "retriev" in str(observation.get("name") or "").lower())


def trace_from_langfuse(record: Any, file: str, line: int) -> Iterator[Trace | TraceProblem]:
    """The trace of one Langfuse trace object, and the problems met in it."""
    if not isinstance(record, dict):
        yield TraceProblem(file, line, "line", f"a JSON {type(record).__name__}, not a trace object")
        return
    if found := field_problem(record):  # nested too deeply, a number no reader holds
        yield TraceProblem(file, line, *found)
        return
    trace_id = record.get("id")
    start = iso_ns(record.get("timestamp"))
    if not isinstance(trace_id, str) or not trace_id:
        yield TraceProblem(file, line, "id", f"missing or not a string: {quote(trace_id)}", None, start)
        return
    if start is None:
        yield TraceProblem(file, line, "timestamp", f"missing or not an ISO 8601 time: {record.get('timestamp')!r}",
                           trace_id)
        return
    where = f"{file}:{line}"
    observations = record.get("observations") or []
    if not isinstance(observations, list):
        yield TraceProblem(file, line, "observations", "not a list", trace_id, start)
        observations = []
    observations = [o for o in observations if isinstance(o, dict)]
    end = max([start, *(t for o in observations if (t := iso_ns(o.get("endTime"))) is not None)])
    latency = record.get("latency")
    if latency is not None and end == start:
        lasted = duration_ns(latency, 10**9)
        if lasted is not None and in_range(start + lasted) is not None:
            end = start + lasted
        else:
            shown = repr(latency) if len(repr(latency)) <= 40 else repr(latency)[:40] + "…"
            yield TraceProblem(file, line, "latency", f"not a number of seconds within range: {shown}", trace_id,
                               start)
    metadata = given_metadata if isinstance(given_metadata := record.get("metadata"), dict) else {}
    session, reason = session_id(record.get("sessionId"))
    trace = Trace(trace_id, start, end, session_id=session, user_id=_id(record.get("userId")),
                  route=metadata.get("route") if isinstance(metadata.get("route"), str) else record.get("name"),
                  source=where)
    if reason:  # the value itself is metadata: never in a problem (problems are logged)
        trace.problems["session_id"] = f"{where}: sessionId: {reason}"
        yield TraceProblem(file, line, "sessionId", reason, trace_id, start)
    trace.user_input = text_of(record.get("input"), _QUESTION_KEYS)
    generations = sorted((o for o in observations if str(o.get("type") or "").upper() == "GENERATION"),
                         key=lambda o: iso_ns(o.get("endTime")) or 0)
    trace.response = text_of(record.get("output"), _ANSWER_KEYS)
    if trace.response is None and generations:
        trace.response = text_of(generations[-1].get("output"), _ANSWER_KEYS)
    for name in ("user_input", "response"):
        value = getattr(trace, name)
        if value is not None and not isinstance(value, str):
            trace.problems[name] = f"{where}: {'input' if name == 'user_input' else 'output'}: no text found in a " \
                                   f"{type(value).__name__}"
            yield TraceProblem(file, line, "input" if name == "user_input" else "output",
                               f"no text found in a {type(value).__name__}", trace_id, start)
            setattr(trace, name, None)
    retrievals = sorted((o for o in observations if _is_retrieval(o)), key=lambda o: iso_ns(o.get("startTime")) or 0)
    if retrievals:
        contexts, documents = [], []
        for o in retrievals:
            items = _documents(o.get("output"))
            if items is None:
                reason = f"observation {o.get('name')!r}: output is not a list of documents"
                trace.problems.setdefault("retrieved_contexts", f"{where}: {reason}")
                yield TraceProblem(file, line, "observations.output", reason, trace_id, start)
                continue
            for rank, item in enumerate(items):
                content, doc_id, score = _document(item)
                if content is None:
                    reason = f"observation {o.get('name')!r}: document {rank} has no text"
                    trace.problems.setdefault("retrieved_contexts", f"{where}: {reason}")
                    yield TraceProblem(file, line, "observations.output", reason, trace_id, start)
                else:  # a document without text leaves the contexts unknown (None, below)
                    contexts.append(content)
                documents.append((doc_id, score))
        trace.retrieved_contexts = None if "retrieved_contexts" in trace.problems else contexts
        if documents and all(d is not None and s is not None for d, s in documents):
            trace.retrieved_documents = [{"document_id": str(d), "relevance_score": s} for d, s in documents]
    for generation in generations:
        usage = generation.get("usageDetails") or generation.get("usage") or {}
        if not isinstance(usage, dict):
            continue
        for slot, keys in (("prompt_tokens", ("input", "promptTokens")),
                           ("completion_tokens", ("output", "completionTokens")),
                           ("total_tokens", ("total", "totalTokens"))):
            given = next((k for k in keys if usage.get(k) is not None), None)
            if given is None:
                continue
            if (value := count_of(usage[given])) is None:
                reason = f"expected a whole number up to {MAX_COUNT}, got {usage[given]!r}"
                trace.problems.setdefault(slot, f"{where}: usage.{given}: {reason}")
                yield TraceProblem(file, line, f"observations.usage.{given}", reason, trace_id, start)
                continue
            setattr(trace, slot, (getattr(trace, slot) or 0) + value)
    yield trace


def _id(value: Any) -> str | None:
    return str(value) if isinstance(value, str | int) and not isinstance(value, bool) else None


def _document(item: Any) -> tuple[str | None, Any, Any]:
    """(text, id, score) of one retrieved document."""
    if isinstance(item, str):
        return item, None, None
    if not isinstance(item, dict):
        return None, None, None
    meta = given_metadata if isinstance(given_metadata := item.get("metadata"), dict) else {}
    content = next((item[k] for k in _CONTENT_KEYS if isinstance(item.get(k), str)), None)
    doc_id = next((d[k] for d in (item, meta) for k in ("id", "document_id", "doc_id") if d.get(k) is not None), None)
    score = next((s for d in (item, meta) for k in ("score", "relevance_score") if (s := finite(d.get(k))) is not None),
                 None)
    return content, doc_id, score


def read_langfuse(paths: Iterable[Path]) -> Iterator[Trace | TraceProblem]:
    """The traces of Langfuse export files (``.json``: one trace, a list, or ``{"data"|"traces": [...]}``;
    ``.jsonl``: a trace a line) and the problems met. JSONL is read line by line; a JSON
    file is read whole (Langfuse's downloads are one trace or one page)."""
    for path in paths:
        if path.suffix in (".jsonl", ".ndjson"):
            with open(path, "rb") as handle:
                for number, raw in enumerate(handle, start=1):
                    if raw.strip():
                        record = _parse(raw, str(path), number)
                        yield from [record] if isinstance(record, TraceProblem) else \
                            trace_from_langfuse(record, str(path), number)
            continue
        document = _parse(path.read_bytes(), str(path), 1)
        if isinstance(document, TraceProblem):
            yield document
            continue
        records = document if isinstance(document, list) else \
            next((document[k] for k in ("data", "traces") if isinstance(document, dict)
                  and isinstance(document.get(k), list)), [document])
        for number, record in enumerate(records, start=1):
            yield from trace_from_langfuse(record, str(path), number)


def _parse(raw: bytes, file: str, line: int) -> Any:
    try:
        return decode_json(raw)  # a number no reader holds is its trace's problem (trace_from_langfuse)
    except UnicodeDecodeError as exc:
        return TraceProblem(file, line, "line", f"not valid UTF-8 (byte {exc.start})")
    except json.JSONDecodeError as exc:
        return TraceProblem(file, line, "line", f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})")
    except RecursionError:
        return TraceProblem(file, line, "line", TOO_DEEP)
