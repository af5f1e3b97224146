"""Traces from any table: JSONL or Parquet files, or the rows of a SQL query.

A row is a trace. Its columns are found by a mapping ``{field: column}`` (as dingo's
``fields``); a field not mapped is looked up under its own name and the aliases of
:data:`ALIASES`. The fields (:data:`FIELDS`):

* ``trace_id`` and ``start`` (required): the row's id and when the interaction began
  (a timestamp, an ISO 8601 text, or seconds since the epoch; naive times are UTC);
* ``end`` or ``latency_ms`` (optional; without either the trace lasts 0 ms);
* ``user_input``, ``response``, ``retrieved_contexts`` (a list, or its JSON text),
  ``retrieved_documents`` (Azure's ``[{"document_id", "relevance_score"}]``) or
  ``document_ids`` with ``document_scores`` (lists in rank order);
* ``prompt_tokens``, ``completion_tokens``, ``total_tokens``, ``route``, ``session_id``,
  ``user_id``.

Rows are read in chunks (Parquet row groups, SQL through a server-side cursor): a table is
never whole in memory. A row without a readable id or start is a
:class:`rag_eval.metrics.sources.traces.TraceProblem` naming the file (or the query's database, password
hidden), the row counted from 1 (the line, for JSONL) and the column.
"""
from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any

from rag_eval.metrics.core.bounded import quote
from rag_eval.metrics.core.decoding import json_object
from rag_eval.metrics.core.samples import sample_from_dict
from rag_eval.metrics.sources.traces.model import MAX_COUNT, Trace, TraceProblem, count_of, duration_ns, in_range
from rag_eval.metrics.sources.traces.langfuse import iso_ns
from rag_eval.metrics.errors import InputError, SettingsError

FIELDS = ("trace_id", "start", "end", "latency_ms", "user_input", "response", "retrieved_contexts",
          "retrieved_documents", "document_ids", "document_scores", "prompt_tokens", "completion_tokens",
          "total_tokens", "route", "session_id", "user_id")
ALIASES: dict[str, tuple[str, ...]] = {
    "trace_id": ("id", "request_id"), "start": ("timestamp", "start_time", "created_at", "time"),
    "end": ("end_time",), "latency_ms": ("latency",), "user_input": ("question", "query", "input", "prompt"),
    "response": ("answer", "output", "completion"), "retrieved_contexts": ("contexts", "context", "retrieval_context"),
    "document_ids": ("doc_ids",), "document_scores": ("scores", "doc_scores"),
}
#: Rows read at a time.
CHUNK_ROWS = 5_000


def _columns(mapping: Mapping[str, str] | None) -> dict[str, tuple[str, ...]]:
    mapping = dict(mapping or {})
    unknown = sorted(set(mapping) - set(FIELDS))
    if unknown:
        raise SettingsError(f"trace column mapping names unknown field(s) {quote(unknown)}; known: {list(FIELDS)}")
    return {f: (mapping[f],) if f in mapping else (f, *ALIASES.get(f, ())) for f in FIELDS}


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or str(value) in ("NaT", "<NA>")


def _list(value: Any) -> Any:
    if hasattr(value, "tolist") and not isinstance(value, str):
        value = value.tolist()
    if isinstance(value, str) and value.lstrip().startswith("["):
        try:
            return json.loads(value)
        except (ValueError, RecursionError):  # not JSON, a number no reader holds, nested too deeply
            return value
    return value


def _ns(value: Any) -> int | None:
    """A time as nanoseconds since the epoch (UTC), or ``None`` when unreadable."""
    if isinstance(value, bool):
        return None
    if isinstance(value, datetime) or (isinstance(value, date) and not isinstance(value, datetime)):
        moment = value if isinstance(value, datetime) else datetime(value.year, value.month, value.day)
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
        nanos = getattr(value, "nanosecond", 0)
        return in_range(int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1000 + nanos)
    if isinstance(value, int | float):
        ns = duration_ns(value, 10**9)  # seconds since the epoch
        return None if ns is None else in_range(ns)
    return iso_ns(value)


def trace_from_row(row: Mapping[str, Any], columns: dict[str, tuple[str, ...]], file: str,
                   line: int) -> Iterator[Trace | TraceProblem]:
    """The trace of one row (``columns``: each field's candidate columns), and its problems."""
    values: dict[str, Any] = {}
    named: dict[str, str] = {}
    for name, candidates in columns.items():
        column = next((c for c in candidates if c in row and not _missing(row[c])), None)
        if column is not None:
            values[name], named[name] = row[column], column
    trace_id, start = values.get("trace_id"), _ns(values.get("start"))
    if trace_id is None or (isinstance(trace_id, str) and not trace_id.strip()):
        yield TraceProblem(file, line, columns["trace_id"][0], "missing: a trace needs an id", None, start)
        return
    trace_id = str(trace_id)
    if start is None:
        got = "missing" if "start" not in values else f"not a time: {values['start']!r}"
        yield TraceProblem(file, line, named.get("start", columns["start"][0]), got, trace_id)
        return
    trace = Trace(trace_id, start, start, source=f"{file}:{line}")
    problems: list[tuple[str, str, str]] = []  # (sample field, column, reason)
    end = _ns(values["end"]) if "end" in values else None
    latency = values.get("latency_ms")
    if end is not None:
        trace.end_ns = end
    elif (lasted := duration_ns(latency, 10**6)) is not None and in_range(start + lasted) is not None:
        trace.end_ns = start + lasted
    elif "end" in values or "latency_ms" in values:
        name = "end" if "end" in values else "latency_ms"
        problems.append((name, named[name], f"not a {'time' if name == 'end' else 'number'} within range: "
                                            f"{values[name]!r}"))
    for name in ("user_input", "response", "route", "session_id", "user_id"):
        value = values.get(name)
        if value is None:
            continue
        if isinstance(value, str) or (name in ("session_id", "user_id") and isinstance(value, int)):
            setattr(trace, name, str(value) if name in ("session_id", "user_id") else value)
        else:
            problems.append((name, named[name], f"expected a string, got {type(value).__name__}"))
    if "retrieved_contexts" in values:
        contexts = _list(values["retrieved_contexts"])
        if isinstance(contexts, str):
            contexts = [contexts]
        if isinstance(contexts, list) and all(isinstance(c, str) for c in contexts):
            trace.retrieved_contexts = contexts
        else:
            problems.append(("retrieved_contexts", named["retrieved_contexts"], "expected a list of strings"))
    documents = _list(values.get("retrieved_documents"))
    ids, scores = _list(values.get("document_ids")), _list(values.get("document_scores"))
    column = named.get("retrieved_documents", "retrieved_documents")  # named when the values hold it
    if documents is None and ids is not None and scores is not None:  # two lists in rank order
        column = named["document_scores"]
        if isinstance(ids, list) and isinstance(scores, list) and len(scores) == len(ids):
            documents = [{"document_id": d, "relevance_score": s} for d, s in zip(ids, scores)]
        else:
            problems.append(("retrieved_documents", column,
                             "document_ids and document_scores must be lists of the same length"))
    if documents is not None:
        checked = sample_from_dict({"retrieved_documents": documents}, 0)  # Azure's field, as a sample takes it
        if "retrieved_documents" in checked.problems:
            problems.append(("retrieved_documents", column, checked.problems["retrieved_documents"]))
        else:
            trace.retrieved_documents = checked.retrieved_documents
    for name in ("prompt_tokens", "completion_tokens", "total_tokens"):
        value = values.get(name)
        if value is None:
            continue
        whole = int(value) if isinstance(value, float) and value.is_integer() else value  # a float column of counts
        if (count := count_of(whole)) is not None:
            setattr(trace, name, count)
        else:
            problems.append((name, named[name], f"expected a whole number up to {MAX_COUNT}, got {value!r}"))
    for name, column, reason in problems:
        trace.problems.setdefault(name, f"{file}:{line}: {column}: {reason}")
        yield TraceProblem(file, line, column, reason, trace_id, start)
    yield trace


def read_table_files(paths: Iterable[Path], mapping: Mapping[str, str] | None = None) -> Iterator[Trace | TraceProblem]:
    """The traces of JSONL (a row a line) and Parquet files, with ``mapping``.

    Raises
    ------
    ValueError
        For a mapping naming an unknown field, or a file that is neither JSONL nor Parquet.
    """
    columns = _columns(mapping)
    for path in paths:
        seen: set[str] = set()  # the columns of the file's rows
        if path.suffix == ".parquet":
            import pyarrow.parquet as pq

            number = 0
            table = pq.ParquetFile(path)
            seen.update(table.schema_arrow.names)
            for batch in table.iter_batches(batch_size=CHUNK_ROWS):
                for row in batch.to_pylist():
                    number += 1
                    yield from trace_from_row(row, columns, str(path), number)
        elif path.suffix in (".jsonl", ".ndjson"):
            with open(path, "rb") as handle:
                for number, raw in enumerate(handle, start=1):
                    if not raw.strip():
                        continue
                    row, problem = json_object(raw)  # a number no reader holds, deep nesting: this line's problem
                    if row is None:
                        yield TraceProblem(str(path), number, "line", str(problem))
                        continue
                    seen.update(row)
                    yield from trace_from_row(row, columns, str(path), number)
        else:
            raise InputError(f"{path}: a trace table is .jsonl or .parquet, not {quote(path.suffix)}")
        yield from unmapped(mapping, seen, str(path))


def unmapped(mapping: Mapping[str, str] | None, seen: set[str], source: str) -> Iterator[TraceProblem]:
    """A problem (line 1) for each column of ``mapping`` that no row of ``source`` has (a typo in the
    mapping, else every row would only say its field is missing), naming the columns it has."""
    if not seen:
        return
    shown = ", ".join(sorted(seen)[:20]) + (", …" if len(seen) > 20 else "")
    for field, column in (mapping or {}).items():
        if column not in seen:
            yield TraceProblem(source, 1, column, f"the mapping reads {field} from the column {quote(column)}, which no "
                               f"row has (its columns: {shown})")


def public_url(url: str) -> str:
    """A database URL with its password hidden (for messages and problems)."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - an unparsable URL is named by its scheme only
        return url.split(":", 1)[0] + "://…"


def _rows(url: str, query: str, params: Mapping[str, Any] | None) -> Iterator[Mapping[str, Any]]:
    """The rows of ``query`` (bound ``params``), :data:`CHUNK_ROWS` at a time through a server-side cursor.

    Raises
    ------
    ValueError
        For a URL SQLAlchemy cannot use, or a query the database refuses (the URL's password hidden).
    """
    import sqlalchemy

    where = public_url(url)
    try:
        engine = sqlalchemy.create_engine(url)
    except Exception as exc:  # noqa: BLE001 - the driver's own words, without the URL's password
        raise InputError(f"trace database {where}: {type(exc).__name__}: {str(exc).replace(url, where)}") from None
    try:
        with engine.connect() as connection:
            try:
                result = connection.execution_options(stream_results=True, max_row_buffer=CHUNK_ROWS).execute(
                    sqlalchemy.text(query), dict(params or {}))
            except sqlalchemy.exc.SQLAlchemyError as exc:
                raise InputError(f"trace database {where}: {str(exc.orig if hasattr(exc, 'orig') else exc).strip()}"
                                 ) from None
            while rows := result.mappings().fetchmany(CHUNK_ROWS):
                yield from (dict(row) for row in rows)
    except sqlalchemy.exc.OperationalError as exc:  # cannot connect: the driver's words, password hidden
        raise InputError(f"trace database {where}: {str(exc.orig).strip().replace(url, where)}") from None
    finally:
        engine.dispose()


def sql_times(url: str, query: str, column: str) -> Iterator[int]:
    """The start times (ns) of the rows of ``query``: only its ``column`` is fetched (the
    sensor's look at new rows); unreadable times are left out (the window's read reports them)."""
    quoted = '"' + column.replace('"', '""') + '"'
    for row in _rows(url, f"select {quoted} as start from ({query}) as traffic", None):
        if (ns := _ns(row["start"])) is not None:
            yield ns


def read_sql(url: str, query: str, mapping: Mapping[str, str] | None = None,
             params: Mapping[str, Any] | None = None) -> Iterator[Trace | TraceProblem]:
    """The traces of the rows of ``query`` against the database at ``url`` (SQLAlchemy's URL
    form; PostgreSQL: ``postgresql+psycopg2://user:password@host:port/db``), fetched
    :data:`CHUNK_ROWS` at a time through a server-side cursor. Problems name the database
    with its password hidden and the row counted from 1.

    Raises
    ------
    ValueError
        For a mapping naming an unknown field, or a URL SQLAlchemy cannot use (password hidden).
    """
    columns = _columns(mapping)
    where = public_url(url)
    seen: set[str] = set()
    for number, row in enumerate(_rows(url, query, params), start=1):
        if number == 1:
            seen.update(row)  # a query's rows share their columns
        yield from trace_from_row(row, columns, where, number)
    yield from unmapped(mapping, seen, where)
