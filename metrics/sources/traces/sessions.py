"""Chat sessions: the traces of one session (OpenInference ``session.id``, Langfuse ``sessionId``) as one
conversation, and which traffic partition a session's trace belongs to.

* :func:`conversations` groups traces: a session's traces in start order (ties by trace id), a trace
  without a session alone.
* :func:`record` is a group's evaluation record: a trace without a session is the single-turn record
  it always was (``{"id": trace id, "user_input", "response", "retrieved_contexts",
  "retrieved_documents"}``); a session is a conversation in Azure AI Evaluation's shape,
  ``{"id", "messages": [{"role": "user", "content"}, {"role": "assistant", "content", "context"}, ...],
  "trace_ids"}``, a user and an assistant message a trace. Its ``id`` is its first trace's id, not
  the session id: session ids are metadata that stay in ``traces.parquet`` and ``sample.parquet``
  (never in results, summaries or reports), and a turn's sample id is ``<id>/<turn>``.
* :func:`in_window` keeps the traces of a partition: a trace without a session when it started in
  the window, a session's trace when the session's earliest trace of the ``horizon`` before it did.
  A session that crosses midnight thus stays with the day it started (when its traces lie within
  ``horizon`` of its first); a longer one is cut, each part judged where it started.
"""
from __future__ import annotations

import json
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from rag_eval.metrics.sources.traces.model import Trace, TraceProblem

#: The fields of a single-turn record, as a trace gives them.
TURN_FIELDS = ("user_input", "response", "retrieved_contexts", "retrieved_documents")


def conversations(traces: Sequence[Trace]) -> list[list[int]]:
    """Positions of ``traces`` grouped into conversations: the traces of a session (same ``session_id``)
    in start order, ties by trace id; a trace without a session a group of its own. Groups come in the
    order of their first position in ``traces``."""
    groups: dict[str, list[int]] = {}
    for i, trace in enumerate(traces):
        groups.setdefault(f"s:{trace.session_id}" if trace.session_id is not None else f"t:{i}", []).append(i)
    return [sorted(members, key=lambda i: (traces[i].start_ns, traces[i].trace_id)) for members in groups.values()]


def single_turn(trace: Trace) -> dict[str, Any]:
    """The single-turn record of ``trace``: ``{"id": trace id, "user_input", "response",
    "retrieved_contexts", "retrieved_documents"}``, a field the trace could not read ``None``."""
    return {"id": trace.trace_id, **{name: None if name in trace.problems else getattr(trace, name)
                                     for name in TURN_FIELDS}}


def record(traces: Sequence[Trace]) -> dict[str, Any]:
    """The evaluation record of one group of :func:`conversations` (see the module's notes). A field a
    trace could not read is ``None`` (a message's ``content`` or ``context``), its reason in
    ``problems``: ``{field: reason}`` of a single trace, ``{"<turn>.<field>": reason}`` (turns from 1)
    of a conversation; no ``problems`` key when there are none."""
    if len(traces) == 1 and traces[0].session_id is None:
        single = single_turn(traces[0])
        return {**single, "problems": dict(traces[0].problems)} if traces[0].problems else single
    messages: list[dict[str, Any]] = []
    problems: dict[str, str] = {}
    for turn, trace in enumerate(traces, start=1):
        fields = single_turn(trace)
        messages += [{"role": "user", "content": fields["user_input"]},
                     {"role": "assistant", "content": fields["response"], "context": fields["retrieved_contexts"]}]
        problems.update({f"{turn}.{name}": reason for name, reason in trace.problems.items()})
    found = {"id": traces[0].trace_id, "messages": messages, "trace_ids": [t.trace_id for t in traces]}
    return {**found, "problems": problems} if problems else found


def write_records(traces: Sequence[Trace], path: Path) -> None:
    """Write the records (:func:`record`) of the conversations of ``traces`` (:func:`conversations`)
    to ``path``, a JSON line each in the order of their first trace, atomically (through
    ``.<name>.partial`` beside it)."""
    partial = path.with_name(f".{path.name}.partial")
    with open(partial, "w", encoding="utf-8") as out:
        for group in conversations(traces):
            out.write(json.dumps(record([traces[i] for i in group]), ensure_ascii=False) + "\n")
    partial.replace(path)


def in_window(items: Iterable[Trace | TraceProblem], start_ns: int, end_ns: int, horizon_ns: int,
              placed: set[str] | None = None) -> Iterator[Trace | TraceProblem]:
    """The traces of the partition [start, end) among ``items`` (read from at least [start − horizon,
    end + horizon)), and the problems of that time or of no known time.

    A trace without a session, and a problem, are given as they come (a problem of no known time only
    when its file is in ``placed``, the files of the window itself: those read for ``horizon`` alone
    report theirs in their own windows; ``None``: every file). A session's traces are held until the
    end: a trace is the partition's when the earliest trace of its session that started at most
    ``horizon`` before it started in [start, end); they are given by session, in start order.
    Memory holds the session traces read, not the others."""
    sessions: dict[str, list[Trace]] = {}
    for item in items:
        if isinstance(item, TraceProblem):
            if (item.time_ns is None and (placed is None or item.file in placed)) or \
                    (item.time_ns is not None and start_ns <= item.time_ns < end_ns):
                yield item
        elif item.session_id is None:
            if start_ns <= item.start_ns < end_ns:
                yield item
        elif start_ns - horizon_ns <= item.start_ns < end_ns + horizon_ns:
            sessions.setdefault(item.session_id, []).append(item)
    for traces in sessions.values():
        traces.sort(key=lambda t: (t.start_ns, t.trace_id))
        starts = [t.start_ns for t in traces]
        for trace in traces:
            anchor = starts[bisect_left(starts, trace.start_ns - horizon_ns)]
            if start_ns <= anchor < end_ns:
                yield trace
