"""Production traffic as input: traces of a RAG system turned into samples (no Dagster).

A *trace* is one user interaction as a tracing backend recorded it; it becomes one
:class:`Trace`: the question (``user_input``), what the retriever returned
(``retrieved_contexts`` with their ``retrieved_documents`` ids and scores), the
``response``, its start and end, latency and token counts, and the session and user ids
(metadata: kept in the samples, never logged). Three sources are read, each streaming:

* OTLP/JSON span files as OpenTelemetry's file exporter writes them (one
  ``ExportTraceServiceRequest`` a line) with the OpenInference semantic conventions
  (:mod:`rag_eval.metrics.sources.traces.otlp`);
* a Langfuse trace export, JSON or JSONL (:mod:`rag_eval.metrics.sources.traces.langfuse`);
* any table with a column mapping: JSONL or Parquet files in a folder, or a SQL query
  against a database URL (:mod:`rag_eval.metrics.sources.traces.tables`).

Nothing is dropped silently: a line, span or row that cannot be read is a
:class:`TraceProblem` naming the file (or query), the line or row counted from 1, the
field and why; a field of a trace that is malformed is the trace's problem for that
field (the metrics reading it report ``input_error`` with that reason).
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rag_eval.metrics.core.bounded import quote
from rag_eval.metrics.sources.traces.model import Trace, TraceProblem, utc
from rag_eval.metrics.errors import NotFoundError, SettingsError

if TYPE_CHECKING:  # the readers import neither (their worker processes start faster)
    import pandas as pd

    from rag_eval.metrics.core.samples import Sample

FORMATS = ("otlp", "langfuse", "table", "sql")
#: Columns of a problems frame (:func:`problems_frame`), in order.
PROBLEM_COLUMNS = ["file", "line", "field", "reason", "trace_id", "time"]
__all__ = ["FORMATS", "PROBLEM_COLUMNS", "Trace", "TraceProblem", "problems_frame", "read_traces",
           "source_files", "to_sample", "trace_samples", "utc"]


def read_traces(source: str | Path, format: str = "otlp", mapping: dict[str, str] | None = None,
                query: str | None = None, files: list[Path] | None = None) -> Iterator[Trace | TraceProblem]:
    """The traces of ``source`` and the problems met reading it, one at a time.

    Parameters
    ----------
    source : path or str
        A file or a folder of files (``otlp``: ``*.json``/``*.jsonl``; ``langfuse``: the
        same; ``table``: ``*.jsonl``/``*.parquet``), or for ``sql`` a database URL
        (SQLAlchemy's form, ``postgresql+psycopg2://user@host:port/db``).
    format : {"otlp", "langfuse", "table", "sql"}
    mapping : dict, optional
        ``table``/``sql``: ``{field: column}`` (:data:`rag_eval.metrics.sources.traces.tables.FIELDS`).
    query : str, optional
        ``sql``: the query whose rows are the traces.
    files : list of Path, optional
        Read these files only (in this order) instead of every file of ``source``.

    Raises
    ------
    ValueError
        For an unknown format, a ``sql`` source without a query, or a bad mapping.
    NotFoundError
        For a ``source`` path that does not exist.
    """
    if format not in FORMATS:
        raise SettingsError(f"unknown trace format {quote(format)}; one of {list(FORMATS)}")
    if format == "sql":
        from rag_eval.metrics.sources.traces.tables import read_sql

        if not query:
            raise SettingsError("a sql trace source needs a query")
        return read_sql(str(source), query, mapping)
    paths = files if files is not None else source_files(source, format)
    if format == "otlp":
        from rag_eval.metrics.sources.traces.otlp import read_otlp

        return read_otlp(paths)
    if format == "langfuse":
        from rag_eval.metrics.sources.traces.langfuse import read_langfuse

        return read_langfuse(paths)
    from rag_eval.metrics.sources.traces.tables import read_table_files

    return read_table_files(paths, mapping)


def source_files(source: str | Path, format: str) -> list[Path]:
    """The files of a file source, sorted by name (a file is itself; hidden files skipped).

    Raises
    ------
    NotFoundError
        If ``source`` does not exist.
    """
    path = Path(source)
    if not path.exists():
        raise NotFoundError(f"trace source not found: {path}")
    if path.is_file():
        return [path]
    suffixes = (".jsonl", ".parquet") if format == "table" else (".json", ".jsonl", ".ndjson")
    return sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in suffixes
                  and not any(part.startswith(".") for part in p.relative_to(path).parts))


def to_sample(trace: Trace, row: int) -> Sample:
    """The :class:`rag_eval.metrics.core.samples.Sample` of ``trace`` alone (id: the trace id; its
    single-turn record, ``rag_eval.metrics.sources.traces.sessions.single_turn``), the trace's own
    problems kept as the fields' problems."""
    from rag_eval.metrics.core.samples import sample_from_dict
    from rag_eval.metrics.sources.traces.sessions import single_turn

    sample = sample_from_dict(single_turn(trace), row)  # a field with a problem is None, its reason kept
    sample.problems.update(trace.problems)
    return sample


def trace_samples(traces: Sequence[Trace]) -> list[Sample]:
    """The samples of ``traces``, one per trace in order (its ``row`` its position): a trace without a
    session alone (:func:`to_sample`); the traces of a session as the turns of one conversation
    (``rag_eval.metrics.sources.traces.sessions.conversations``: in start order), ``conversation_id``
    its first trace's id (session ids stay out of results), ``turn`` k from 1, id
    ``<conversation_id>/<k>`` and ``history`` the earlier turns' questions and answers (a field a trace
    could not read left out), so each turn is judged with the turns before it as a file's conversation is."""
    from rag_eval.metrics.sources.traces.sessions import conversations

    samples = [to_sample(t, i) for i, t in enumerate(traces)]
    for group in conversations(traces):
        if len(group) == 1 and traces[group[0]].session_id is None:
            continue
        first, history = traces[group[0]].trace_id, list[dict[str, str]]()
        for turn, i in enumerate(group, start=1):
            sample = samples[i]
            sample.id, sample.conversation_id, sample.turn, sample.history = f"{first}/{turn}", first, turn, list(history)
            history += [{"role": role, "content": text} for role, text in (("user", sample.user_input),
                                                                           ("assistant", sample.response)) if text]
    return samples


def problems_frame(problems: list[TraceProblem]) -> pd.DataFrame:
    """One row per problem, :data:`PROBLEM_COLUMNS` (``time``: UTC timestamp, or missing)."""
    import pandas as pd

    frame = pd.DataFrame([{"file": p.file, "line": p.line, "field": p.field, "reason": p.reason,
                           "trace_id": p.trace_id, "time": p.time_ns} for p in problems], columns=PROBLEM_COLUMNS)
    frame["time"] = pd.to_datetime(frame["time"].astype("Int64"), unit="ns", utc=True)
    frame["line"] = frame["line"].astype("int64")
    for column in ("file", "field", "reason", "trace_id"):
        frame[column] = frame[column].astype("string")
    return frame
