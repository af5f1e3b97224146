"""The records every trace reader gives: :class:`Trace` (one traced interaction) and
:class:`TraceProblem` (what could not be read), and :func:`utc`. The readers
(:mod:`rag_eval.metrics.sources.traces.otlp`, :mod:`~rag_eval.metrics.sources.traces.langfuse`, :mod:`~rag_eval.metrics.sources.traces.tables`)
and :mod:`rag_eval.metrics.sources.traces` itself import them from here; :mod:`rag_eval.metrics.sources.traces` re-exports them."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any


@dataclass
class Trace:
    """One traced interaction, as a sample and its traffic metadata.

    Attributes
    ----------
    trace_id : str
        The trace's id (OTLP: 32 lower-case hex digits), the sample's id.
    start_ns, end_ns : int
        First span's start and last span's end, nanoseconds since the Unix epoch (UTC).
    user_input, response : str or None
    retrieved_contexts : list of str or None
        The retrieved documents' texts, in rank order; ``None`` when no retrieval was traced.
    retrieved_documents : list of dict or None
        ``[{"document_id", "relevance_score"}]`` when the retriever recorded ids and scores.
    prompt_tokens, completion_tokens, total_tokens : int or None
        Summed over the trace's LLM calls; ``None`` when none recorded them.
    route : str or None
        The application or route that served it (OTLP: ``http.route``, ``metadata.route``,
        else the resource's ``service.name``).
    session_id, user_id : str or None
        Metadata: stored with the sample, never written to a log.
    problems : dict
        ``{field: reason}`` for malformed fields, each reason naming the file and line.
    source : str
        ``<file>:<line>`` of the trace's first span read.
    """

    trace_id: str
    start_ns: int
    end_ns: int
    user_input: str | None = None
    response: str | None = None
    retrieved_contexts: list[str] | None = None
    retrieved_documents: list[dict[str, Any]] | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    route: str | None = None
    session_id: str | None = None
    user_id: str | None = None
    problems: dict[str, str] = field(default_factory=dict)
    source: str = ""

    @property
    def latency_ms(self) -> float:
        """End minus start, in milliseconds."""
        return (self.end_ns - self.start_ns) / 1e6


@dataclass
class TraceProblem:
    """A line, span or row that could not be read: ``file`` (or the query), ``line`` counted
    from 1, ``field`` (``line`` for the whole line), ``reason``; ``trace_id`` and ``time_ns``
    when they could be read."""

    file: str
    line: int
    field: str
    reason: str
    trace_id: str | None = None
    time_ns: int | None = None

    def __str__(self) -> str:
        return f"{self.file} line {self.line}: {self.field}: {self.reason}"


#: The last nanosecond a timestamp can hold (Arrow's and pandas' int64 nanoseconds: 2262-04-11).
MAX_NS = 2**63 - 1
#: The largest token count read (float64 holds every whole number up to it exactly; sums stay int64).
MAX_COUNT = 2**53


def in_range(ns: int) -> int | None:
    """``ns`` when it is a time after the epoch a timestamp can hold (:data:`MAX_NS`), else ``None``."""
    return ns if 0 < ns <= MAX_NS else None


def duration_ns(value: object, per_unit: int) -> int | None:
    """A duration of ``value`` units (``per_unit`` ns each: 10**9 for seconds, 10**6 for ms) in whole
    ns, or ``None`` unless it is a number (not a bool) from 0 to :data:`MAX_NS` ns."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, int):
        ns = value * per_unit
    else:
        ns_float = value * per_unit
        if not math.isfinite(ns_float) or abs(ns_float) > MAX_NS:
            return None
        ns = int(ns_float)
    return ns if 0 <= ns <= MAX_NS else None


def finite(value: object) -> float | None:
    """``value`` as a float when it is a finite number (not a bool; an integer too large for a float
    is not), else ``None``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def count_of(value: object) -> int | None:
    """A token count: an integer (not a bool, not a float) in 0..:data:`MAX_COUNT`, else ``None``."""
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT else None


def session_id(value: object) -> tuple[str | None, str | None]:
    """A trace's session id and, when ``value`` is given but is not a non-empty string, why it is not
    one (naming its type only: a session id is metadata, never shown): ``(value, None)``,
    ``(None, None)`` for ``None``, else ``(None, reason)``."""
    if value is None:
        return None, None
    if isinstance(value, str) and value:
        return value, None
    got = "an empty string" if value == "" else f"a value of type {type(value).__name__}"
    return None, f"expected a non-empty string, got {got}: the trace is judged as a single turn"


def utc(ns: int) -> datetime:
    """Nanoseconds since the epoch as an aware UTC datetime (microsecond precision)."""
    return datetime.fromtimestamp(ns / 1e9, tz=timezone.utc)
