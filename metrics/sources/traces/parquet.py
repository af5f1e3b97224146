"""Traces to and from Parquet: the traces of a partition, written streaming.

``write_traces`` writes a stream of traces to one Parquet file a chunk at a time, column by
column (no pandas), and keeps the problems met; ``table_traces`` reads them back.
"""
from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from rag_eval.metrics.core.collector import collector
from rag_eval.metrics.sources.traces.model import Trace, TraceProblem

#: The Parquet schema of traces (:func:`traces_table`): times in UTC, lists as lists, ``problems`` as JSON text.
TRACE_SCHEMA = pa.schema([
    ("trace_id", pa.string()), ("start", pa.timestamp("ns", tz="UTC")), ("end", pa.timestamp("ns", tz="UTC")),
    ("latency_ms", pa.float64()), ("user_input", pa.string()), ("response", pa.string()),
    ("retrieved_contexts", pa.list_(pa.string())),
    ("retrieved_documents", pa.list_(pa.struct([("document_id", pa.string()), ("relevance_score", pa.float64())]))),
    ("prompt_tokens", pa.int64()), ("completion_tokens", pa.int64()), ("total_tokens", pa.int64()),
    ("route", pa.string()), ("session_id", pa.string()), ("user_id", pa.string()), ("problems", pa.string()),
    ("source", pa.string())])


def traces_table(traces: list[Trace]) -> pa.Table:
    """The traces as an Arrow table of :data:`TRACE_SCHEMA` (built column by column: no pandas)."""
    columns = {
        "trace_id": [t.trace_id for t in traces], "start": [t.start_ns for t in traces],
        "end": [t.end_ns for t in traces], "latency_ms": [t.latency_ms for t in traces],
        "user_input": [t.user_input for t in traces], "response": [t.response for t in traces],
        "retrieved_contexts": [t.retrieved_contexts for t in traces],
        "retrieved_documents": [t.retrieved_documents for t in traces],
        "prompt_tokens": [t.prompt_tokens for t in traces], "completion_tokens": [t.completion_tokens for t in traces],
        "total_tokens": [t.total_tokens for t in traces], "route": [t.route for t in traces],
        "session_id": [t.session_id for t in traces], "user_id": [t.user_id for t in traces],
        "problems": [json.dumps(t.problems, ensure_ascii=False) if t.problems else None for t in traces],
        "source": [t.source for t in traces]}
    return pa.Table.from_arrays([pa.array(columns[f.name], type=f.type) for f in TRACE_SCHEMA], schema=TRACE_SCHEMA)


def table_traces(table: pa.Table) -> list[Trace]:
    """The traces of a table written by :func:`traces_table` (its inverse; extra columns ignored)."""
    table = table.select(TRACE_SCHEMA.names)
    rows = table.drop_columns(["start", "end"]).to_pylist()
    starts = table.column("start").cast(pa.int64()).to_pylist()
    ends = table.column("end").cast(pa.int64()).to_pylist()
    traces = []
    for row, start, end in zip(rows, starts, ends):
        del row["latency_ms"]
        problems = row.pop("problems")
        traces.append(Trace(**row, start_ns=start, end_ns=end, problems=json.loads(problems) if problems else {}))
    return traces


#: The token counts summed over the traces written.
TOKEN_FIELDS = ("prompt_tokens", "completion_tokens", "total_tokens")


@dataclass
class WrittenTraces:
    """What was written: ``traces`` (a count), the ``problems`` met, a ``digest`` of the files
    written (their data version), per-trace latencies (ms), summed token counts and traces per route."""

    traces: int = 0
    problems: list[TraceProblem] = field(default_factory=list)
    digest: str = ""
    latencies: list[float] = field(default_factory=list)
    tokens: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TOKEN_FIELDS, 0))
    routes: Counter = field(default_factory=Counter)


#: Traces converted and written at a time.
WRITE_TRACES = 10_000


def write_traces(items: Iterable[Trace | TraceProblem], path: Path) -> WrittenTraces:
    """Write the traces of ``items`` to the Parquet file ``path`` (:data:`TRACE_SCHEMA`),
    :data:`WRITE_TRACES` at a time, and keep the problems: a stream of any length in bounded
    memory (the problems and one latency a trace excepted). The digest is the file's SHA-256."""
    written, writer = WrittenTraces(), None
    chunk: list[Trace] = []

    def flush() -> None:
        nonlocal writer
        if writer is None:
            writer = pq.ParquetWriter(path, TRACE_SCHEMA)
        writer.write_table(traces_table(chunk))
        chunk.clear()

    path.parent.mkdir(parents=True, exist_ok=True)
    # Reading makes no reference cycles (each object is freed by its count): the cyclic collector is paused,
    # its passes over the traces in flight cost a quarter of the CPU (bench/trace_ingest_bench.py).
    try:
        with collector(enabled=False):
            for item in items:
                if isinstance(item, TraceProblem):
                    written.problems.append(item)
                    continue
                chunk.append(item)
                written.traces += 1
                written.latencies.append(item.latency_ms)
                written.routes[item.route or "-"] += 1
                for name in TOKEN_FIELDS:
                    written.tokens[name] += getattr(item, name) or 0
                if len(chunk) >= WRITE_TRACES:
                    flush()
            if chunk or writer is None:
                flush()
    finally:
        if writer is not None:
            writer.close()
    digest = hashlib.sha256()
    with open(path, "rb") as handle:  # the file's bytes: the same traces give the same file
        while block := handle.read(1 << 20):
            digest.update(block)
    written.digest = digest.hexdigest()[:16]
    return written
