"""OTLP/JSON lines as OpenTelemetry's file exporters write them (one ``ExportTraceServiceRequest`` a line),
decoded: ``rag_eval.metrics.sources.traces.otlp`` reads traces from what :func:`read_request` gives.

A line is decoded into the structs below in one pass (msgspec, in C: the common case); a line that pass
refuses (a member of another type somewhere) is read again with the standard JSON parser, span by span,
so each thing that cannot be read is a ``TraceProblem`` naming its line and field and the rest is kept.
:func:`any_value` and :func:`value_of` give an attribute's Python value, :func:`hex_id` an id, and
:func:`nanoseconds` a time; :func:`span_times` finds the spans' start times without parsing the JSON.
"""
from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

from rag_eval.metrics.core.bounded import quote
from rag_eval.metrics.core.decoding import TOO_DEEP, decode_json, field_problem
from rag_eval.metrics.sources.traces.model import TraceProblem, in_range

_HEX = re.compile(r"[0-9a-f]+")


def any_value(value: dict) -> Any:
    """The Python value of an OTLP ``AnyValue`` (``intValue`` given as a string included).

    Raises
    ------
    ValueError
        For an ``intValue`` that is not an integer or a ``doubleValue`` that is not a number.
    """
    if "stringValue" in value:
        return value["stringValue"]
    if "intValue" in value:
        return int(value["intValue"])
    if "doubleValue" in value:
        return float(value["doubleValue"])
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "arrayValue" in value:
        return [any_value(v) for v in (value["arrayValue"] or {}).get("values", [])]
    if "kvlistValue" in value:
        items = (value["kvlistValue"] or {}).get("values", [])
        return {kv.get("key"): any_value(kv.get("value") or {}) for kv in items}
    if "bytesValue" in value:
        return value["bytesValue"]
    return None


def hex_id(value: Any, length: int) -> str | None:
    """An OTLP id as lower-case hex: hex as the OTLP/JSON spec writes it, or base64 as
    protobuf's JSON mapping writes it; ``None`` when it is neither (or all zeros)."""
    if not isinstance(value, str) or not value:
        return None
    text = value.lower()
    if len(text) == length and _HEX.fullmatch(text):
        return text if text.strip("0") else None
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw.hex() if len(raw) * 2 == length and any(raw) else None


class Value(msgspec.Struct, frozen=True, gc=False):
    """An OTLP ``AnyValue``: one of its members is set (numbers may come as strings)."""

    stringValue: str | None = None
    intValue: int | str | None = None
    doubleValue: float | str | None = None
    boolValue: bool | None = None
    arrayValue: Any = None
    kvlistValue: Any = None
    bytesValue: str | None = None


class Attribute(msgspec.Struct, gc=False):
    """An attribute: its ``key`` and ``value``."""

    key: str
    value: Value = Value()


class Span(msgspec.Struct, gc=False):
    """The members of a span the conventions use (the others are skipped as the line is decoded)."""

    traceId: Any = None
    parentSpanId: Any = None
    name: Any = None
    startTimeUnixNano: Any = None
    endTimeUnixNano: Any = None
    attributes: list[Attribute] = []


class Scope(msgspec.Struct, gc=False):
    """A ``scopeSpans`` item: its spans."""

    spans: list[Span] = []


class Resource(msgspec.Struct, frozen=True, gc=False):
    """A resource: its attributes (``service.name``...)."""

    attributes: tuple[Attribute, ...] = ()


class ResourceSpans(msgspec.Struct, gc=False):
    """A ``resourceSpans`` item: the resource and its scopes' spans (``instrumentationLibrarySpans``: older exporters)."""

    resource: Resource = Resource()
    scopeSpans: list[Scope] = []
    instrumentationLibrarySpans: list[Scope] = []


class Request(msgspec.Struct, gc=False):
    """An ``ExportTraceServiceRequest``: one line of a file."""

    resourceSpans: list[ResourceSpans]


#: Decodes a whole line into the structs above in one pass (msgspec, in C): the common case. A line it
#: refuses (a member of another type somewhere) is read again leniently, span by span, to name the problem.
_DECODE = msgspec.json.Decoder(Request).decode


def value_of(value: Value) -> Any:
    """The Python value of a decoded OTLP ``AnyValue`` (as :func:`any_value`).

    Raises
    ------
    ValueError
        For an ``intValue`` that is not an integer or a ``doubleValue`` that is not a number.
    """
    if value.stringValue is not None:
        return value.stringValue
    if value.intValue is not None:
        return int(value.intValue)
    if value.doubleValue is not None:
        return float(value.doubleValue)
    if value.boolValue is not None:
        return value.boolValue
    if value.arrayValue is not None:
        return any_value({"arrayValue": value.arrayValue})
    if value.kvlistValue is not None:
        return any_value({"kvlistValue": value.kvlistValue})
    return value.bytesValue


def nanoseconds(value: Any) -> int | None:
    """A time in nanoseconds since the epoch (an integer, or its decimal digits as OTLP/JSON writes it) a
    timestamp can hold (``rag_eval.metrics.sources.traces.model.in_range``), else ``None``."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return in_range(value)
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 19:
        return in_range(int(value))
    return None


def read_request(raw: bytes, file: str, line: int) -> tuple[Request | None, list[TraceProblem]]:
    """The ``ExportTraceServiceRequest`` of ``raw``, line ``line`` (counted from 1) of ``file``, and the
    problems met: decoded in one pass, else read leniently (:func:`_lenient`); ``None`` for a line that is
    not UTF-8 JSON of that shape (its problem names the line)."""
    try:
        return _DECODE(raw), []
    except (msgspec.DecodeError, RecursionError):
        return _lenient(raw, file, line)


def _lenient(raw: bytes, file: str, line: int) -> tuple[Request | None, list[TraceProblem]]:
    """A line the one-pass decoding refused, read with the standard JSON parser: the spans that
    can be read, and a problem naming the line and field of each thing that cannot."""
    try:
        record = decode_json(raw)  # a number no reader holds is its span's problem, below
    except UnicodeDecodeError as exc:
        return None, [TraceProblem(file, line, "line", f"not valid UTF-8 (byte {exc.start})")]
    except json.JSONDecodeError as exc:
        return None, [TraceProblem(file, line, "line", f"not valid JSON: {exc.msg} (column {exc.colno})")]
    except RecursionError:
        return None, [TraceProblem(file, line, "line", TOO_DEEP)]
    resources = record.get("resourceSpans") if isinstance(record, dict) else None
    if not isinstance(resources, list):
        got = "missing" if resources is None else f"a {type(resources).__name__}, not a list"
        return None, [TraceProblem(file, line, "resourceSpans", f"{got}: not an OTLP ExportTraceServiceRequest line")]
    problems, kept = [], []
    for item in resources:
        if not isinstance(item, dict):
            problems.append(TraceProblem(file, line, "resourceSpans", "an item is not an object"))
            continue
        try:
            resource = msgspec.convert(item.get("resource") or {}, Resource)
        except msgspec.ValidationError:
            resource = Resource()  # no service name: the route comes from the spans, or is unknown
        scopes = []
        for scope in item.get("scopeSpans") or item.get("instrumentationLibrarySpans") or ():
            spans = []
            for span in (scope.get("spans") or ()) if isinstance(scope, dict) else ():
                if isinstance(span, dict) and (found := field_problem(span)):
                    problems.append(TraceProblem(file, line, found[0], f"{found[1]} (span {quote(span.get('name'))})"))
                    continue
                try:
                    spans.append(msgspec.convert(span, Span))
                except msgspec.ValidationError as exc:
                    at = re.search(r"at `\$\.?(.*)`", str(exc))
                    trace = hex_id(span.get("traceId"), 32) if isinstance(span, dict) else None
                    name = span.get("name") if isinstance(span, dict) else None
                    problems.append(TraceProblem(file, line, at[1] if at and at[1] else "spans",
                                                 f"{str(exc).split(' - at ')[0]} (span {name!r})", trace,
                                                 nanoseconds(span.get("startTimeUnixNano")) if isinstance(span, dict)
                                                 else None))
            scopes.append(Scope(spans))
        kept.append(ResourceSpans(resource, scopes))
    return Request(kept), problems


#: A span's start time in an OTLP/JSON line (what :func:`span_times` finds without parsing the JSON).
_START = re.compile(rb'"startTimeUnixNano"\s*:\s*"?(\d+)')


def span_times(path: Path) -> Iterator[int]:
    """Every span's start time (ns) in an OTLP/JSON file, found by a pattern over the raw
    bytes a megabyte at a time (no JSON parsing: the sensor's quick look at new files)."""
    with open(path, "rb") as handle:
        rest = b""
        while chunk := handle.read(1 << 20):
            block = rest + chunk
            cut = block.rfind(b"\n") + 1  # whole lines only: a match is never cut in two
            yield from _starts(block, cut)
            rest = block[cut:]
        yield from _starts(rest, len(rest))


def _starts(block: bytes, end: int) -> Iterator[int]:
    """The start times in ``block[:end]`` that a timestamp can hold (:func:`in_range`)."""
    for match in _START.finditer(block, 0, end):
        if len(match[1]) <= 19 and (ns := in_range(int(match[1]))) is not None:
            yield ns
