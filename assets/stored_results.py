"""A version's field tables and metric results on disk, never whole in memory.

Ingestion writes each chunk of lines it reads to one Parquet file per field asset, and
the metric assets each chunk of judged rows to a file per metric, as it is judged
(:class:`TableWriter`, :class:`ResultWriter`); each outputs a :class:`TableFile` naming
its file, which the results store (``rag_eval.assets.results_store``) moves into the place of the
asset partition. The metric assets read the field tables they depend on, and the summary
each metric's table, as a :class:`StoredTable`, a query over the stored partition read in
bounded chunks over a connection the step holds. Memory stays flat as a version grows:
Dagster keeps every output value of an in-process run until the run ends, and here that
value is a file name, not the version's lines or results.
"""
from __future__ import annotations

import functools
import json
import os
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from rag_eval.metrics.reports.aggregate import USAGE_COLUMNS
from rag_eval.metrics.reports.formats import ragas_table
from rag_eval.metrics.core.results import Status
from rag_eval.metrics.core.scoring import with_turns
from rag_eval.metrics.core.strong import STRONG_COLUMNS, STRONG_DTYPES
from rag_eval.metrics.errors import StorageError, way_out

#: The columns of a metric's table (``rag_eval.metrics.core.scoring.RESULT_COLUMNS`` after ``version``), as Arrow types.
SCHEMA = pa.schema([("version", pa.string()), ("sample_id", pa.string()), ("row", pa.int64()),
                    ("conversation_id", pa.string()), ("turn", pa.int64()), ("metric", pa.string()), ("status", pa.string()), ("value", pa.float64()),
                    ("passed", pa.bool_()), ("threshold", pa.float64()), ("direction", pa.string()),
                    ("reason", pa.string()), ("details", pa.string()), ("judge", pa.string()),
                    *((column, pa.int64()) for column in USAGE_COLUMNS)])
#: Rows per chunk the summary reads from a table.
READ_ROWS = 2_048  # DuckDB's vector size: a chunk of lines or of results with their evidence (~3 KB each) is a few MB


def scalar(connection: duckdb.DuckDBPyConnection, query: str) -> Any:
    """The value of an aggregate ``query`` over ``connection`` (``select count(*) from ...``: one row, one column)."""
    row = connection.execute(query).fetchone()
    assert row is not None  # an aggregate without GROUP BY always gives one row
    return row[0]


@dataclass(frozen=True)
class TableFile:
    """One asset partition's rows of a run (a field of the version's lines, a metric's
    results), in the Parquet file ``path`` (``rows`` rows; ``dtypes``: the pandas dtypes of
    the frames written, as the asset's column schema shows them)."""

    path: Path
    rows: int
    dtypes: tuple[tuple[str, str], ...]

    def __len__(self) -> int:
        return self.rows

    def frame(self, columns: Sequence[str] | None = None) -> pd.DataFrame:
        """The results (or their ``columns``) as a DataFrame, with the dtypes written.

        Raises
        ------
        FileNotFoundError
            Once the results store has moved the file into its place.
        """
        return pd.read_parquet(self.path, columns=list(columns) if columns else None)


#: Prefix of a table file's name; the writing process's id follows it.
_PREFIX = "rag-eval-results-"


def _remove_orphans(folder: Path) -> None:
    """Delete the table files of processes that are gone (killed before their step ended:
    a SIGKILL runs no clean-up); a file whose process still runs, or is not ours, is kept."""
    for path in folder.glob(f"{_PREFIX}*-*.parquet"):
        try:
            os.kill(int(path.name[len(_PREFIX):].split("-", 1)[0]), 0)
        except ProcessLookupError:
            path.unlink(missing_ok=True)
        except (ValueError, PermissionError, OSError):
            continue


#: Threads converting a frame to Arrow (``pyarrow.Table.from_pandas``): the frames written here have
#: 2,048 rows at most, and Arrow's thread pool for their columns cost more than one thread does
#: (docs/performance.md), in a step whose judging or summary runs beside it.
ARROW_THREADS = 1


class TableWriter:
    """Appends frames of one asset partition's rows (the columns of ``schema``, in its order)
    to a new Parquet file in the temporary folder, one row group per frame; :meth:`close`
    gives the :class:`TableFile`. The file's name carries the process id, so a later
    writer deletes the files of a process that was killed.

    Raises
    ------
    StorageError
        From each method, when the file cannot be written (a full or read-only temporary folder): naming it.
    """

    def __init__(self, schema: pa.Schema) -> None:
        self.path = Path(tempfile.gettempdir())
        with self._named():
            _remove_orphans(self.path)
            handle, name = tempfile.mkstemp(prefix=f"{_PREFIX}{os.getpid()}-", suffix=".parquet")
            os.close(handle)
        self.path, self.schema, self.rows = Path(name), schema, 0
        self.dtypes: tuple[tuple[str, str], ...] | None = None
        self._writer: pq.ParquetWriter | None = None

    @contextmanager
    def _named(self) -> Iterator[None]:
        """An ``OSError`` (pyarrow's name no file) as a ``StorageError`` naming :attr:`path` and the way out."""
        try:
            yield
        except OSError as exc:
            cause = os.strerror(exc.errno) if exc.errno else str(exc)
            raise StorageError(self.path, f"a results file in the temporary folder could not be written ({cause}); "
                               "TMPDIR names another folder for them", way_out(exc)) from None

    def write(self, frame: pd.DataFrame) -> None:
        """Append ``frame``."""
        table = pa.Table.from_pandas(frame, schema=self.schema, preserve_index=False, nthreads=ARROW_THREADS)
        with self._named():
            if self._writer is None:  # the first frame's pandas metadata: read back with the same dtypes
                self.dtypes = tuple((name, str(dtype)) for name, dtype in frame.dtypes.items())
                self._writer = pq.ParquetWriter(self.path, table.schema)
            self._writer.write_table(table)
        self.rows += len(frame)

    def close(self) -> TableFile:
        """Finish the file (an empty one when nothing was written)."""
        if self._writer is None:
            TableWriter.write(self, pd.DataFrame({field.name: pd.Series(dtype=_EMPTY[field.type])
                                                  for field in self.schema}))
        assert self._writer is not None and self.dtypes is not None  # write() sets both on its first frame
        with self._named():
            self._writer.close()
        return TableFile(self.path, self.rows, self.dtypes)

    def discard(self) -> None:
        """Close and delete the file (the step failed)."""
        if self._writer is not None:
            with suppress(OSError):  # a full disk refuses the footer too: the file goes all the same
                self._writer.close()
        self.path.unlink(missing_ok=True)


_EMPTY = {pa.string(): "object", pa.int64(): "int64", pa.float64(): "float64", pa.bool_(): "boolean"}


class ResultWriter(TableWriter):
    """A :class:`TableWriter` of a metric's per-row results frames (``rag_eval.metrics.core.scoring.results_frame``)
    of the partition ``version`` (:data:`SCHEMA`: ``version`` is put first)."""

    def __init__(self, version: str) -> None:
        super().__init__(SCHEMA)
        self.version = version

    def write(self, frame: pd.DataFrame) -> None:
        """Append ``frame`` (the columns of ``rag_eval.metrics.core.scoring.RESULT_COLUMNS``)."""
        frame = frame.copy(deep=False)
        frame.insert(0, "version", self.version)
        super().write(frame)


@dataclass(frozen=True)
class StoredTable:
    """One asset's stored partition (a metric's results, a field of the samples), read from
    the results database on demand over the connection each method is given: ``query``
    (a select of the partition's rows), ``rows`` rows."""

    query: str
    rows: int

    def __len__(self) -> int:
        return self.rows

    def count(self, connection: duckdb.DuckDBPyConnection) -> int:
        """The partition's rows now (``rows`` is their number when it was found)."""
        return scalar(connection, f"select count(*) from ({self.query})")

    def frame(self, connection: duckdb.DuckDBPyConnection, compact: bool = False) -> pd.DataFrame:
        """The partition as the IO manager loads it (``fetchdf``); ``compact`` (results, for the summary):
        ``details`` only on ``input_error`` rows and ``reason`` only on rows not ``ok`` (the only ones the
        summary reads them from), null elsewhere, and the texts repeated from row to row and from table to
        table (ids, metric, status, direction, judge, version) held once each."""
        if not compact:
            return connection.execute(self.query).fetchdf()
        names = [d[0] for d in connection.execute(f"select * from ({self.query}) limit 0").description]
        kept = {"details": f"case when status = '{Status.INPUT_ERROR.value}' then details end as details",
                "reason": f"case when status <> '{Status.OK.value}' then reason end as reason"}
        columns = ", ".join(kept.get(n, f'"{n}"') for n in names)
        result = connection.execute(f"select {columns} from ({self.query})")
        parts: list[pd.DataFrame] = []
        while len(part := result.fetch_df_chunk(READ_ROWS // 2048)) or not parts:  # each chunk compacted as read
            for name in ("version", "sample_id", "metric", "status", "direction", "judge"):
                part[name] = [sys.intern(v) if isinstance(v, str) else v for v in part[name]]
            parts.append(part)
        return pd.concat(parts, ignore_index=True)

    def failed_at(self, connection: duckdb.DuckDBPyConnection,
                  rows: list[tuple[int, str]]) -> dict[tuple[int, str], list[str]]:
        """What counts against the metric on the results at ``rows`` (``(row, sample_id)``: a conversation's
        turns share their row): their details' ``failed`` list (a diagnostic's failed claims,
        ``rag_eval.metrics.reports.diagnosis``), ``[]`` when there is none."""
        if not rows:
            return {}
        found = connection.execute(f"select row, sample_id, details from ({self.query}) where row in "
                                   f"({', '.join(str(int(r)) for r, _ in rows)})").fetchall()
        wanted = {(int(r), str(i)) for r, i in rows}
        return {(int(row), str(sample_id)): json.loads(details or "{}").get("failed", [])
                for row, sample_id, details in found if (int(row), str(sample_id)) in wanted}

    def rows_at(self, connection: duckdb.DuckDBPyConnection, start: int, stop: int) -> pd.DataFrame:
        """The rows at positions ``start`` to ``stop`` (excluded) in ``row`` order (the turns of a
        conversation's line by ``turn``), as :meth:`frame` gives them. The position is found on ``row`` alone:
        DuckDB holds the rows before it as numbers, not whole."""
        names = [d[0] for d in connection.execute(f"select * from ({self.query}) limit 0").description]
        order = "row, turn" if "turn" in names else "row"  # tables stored before conversations: one row per line
        found = connection.execute(f"select row from ({self.query}) order by row limit 1 offset {start}").fetchone()
        if found is None:
            return connection.execute(f"select * from ({self.query}) limit 0").fetchdf()
        first = int(found[0])  # the line at ``start``; the turns of it before ``start`` are skipped
        skip = start - scalar(connection, f"select count(*) from ({self.query}) where row < {first}")
        return connection.execute(f"select * from ({self.query}) where row >= {first} order by {order} "
                                  f"limit {max(stop - start, 0)} offset {skip}").fetchdf()

    def nullable_passed(self, connection: duckdb.DuckDBPyConnection) -> bool:
        """Whether some result has no pass/fail (``passed`` loads as ``boolean``, else ``bool``)."""
        return bool(scalar(connection, f"select count(*) - count(passed) from ({self.query})"))

    def chunks(self, connection: duckdb.DuckDBPyConnection, passed_dtype: str) -> Iterator[pd.DataFrame]:
        """The results in frames of at most :data:`READ_ROWS` rows, in table order, ``passed``
        as ``passed_dtype`` (what it is in the whole table loaded at once); ``connection``
        runs nothing else until the last frame is read."""
        result = connection.execute(self.query)
        while len(chunk := result.fetch_df_chunk(READ_ROWS // 2048)):
            yield chunk.astype({"passed": passed_dtype})


#: The strong frame's columns put beside each result (:func:`with_strong`).
_STRONG_BESIDE = [c for c in STRONG_COLUMNS if c not in ("row", "metric")]


def strong_by_pair(strong: pd.DataFrame) -> pd.DataFrame:
    """The strong frame (``STRONG_COLUMNS``) indexed by (row, metric) once, for :func:`with_strong` on each chunk."""
    return strong.astype({"metric": object}).set_index(["row", "metric"])[_STRONG_BESIDE]


def with_strong(results: pd.DataFrame, indexed: pd.DataFrame) -> pd.DataFrame:
    """``results`` with the strong frame's columns beside each (row, metric) (``indexed``: :func:`strong_by_pair`),
    typed as ``STRONG_DTYPES`` (NA on the rows not drawn)."""
    found = indexed.reindex(pd.MultiIndex.from_arrays([results["row"], results["metric"].astype(object)]))
    return results.assign(**{c: found[c].to_numpy() for c in _STRONG_BESIDE}).astype(
        {c: STRONG_DTYPES[c] for c in _STRONG_BESIDE})


def concat_dtype(dtypes: Sequence[str]) -> str:
    """The dtype ``pandas.concat`` gives a column whose pieces have ``dtypes``."""
    return str(pd.concat([pd.Series([True], dtype=d) for d in dtypes], ignore_index=True).dtype)


@contextmanager
def staged(path: Path) -> Iterator[Path]:
    """Write ``path`` whole or not at all: the block writes the staged file it is given
    (``.<name>.partial`` beside it; one writer per version holds the version's lock), which then
    replaces ``path``. A process killed meanwhile leaves ``path`` as it was (a half-written report
    file would be taken for a damaged one); the next write of ``path`` overwrites the staged file."""
    partial = path.with_name(f".{path.name}.partial")
    try:
        yield partial
        if partial.exists():  # the block may have had nothing to write
            os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


def write_results_parquet(connection: duckdb.DuckDBPyConnection, stored: Sequence[StoredTable], path: Path,
                          strong: pd.DataFrame | None = None) -> None:
    """Write the results of ``stored`` one after the other, read over ``connection``, without
    ``version``, to the Parquet file ``path``, chunk by chunk: the same content as
    ``with_turns(pd.concat([s.frame(connection) for s in stored]).drop(columns="version")).to_parquet(path, index=False)``
    (``rag_eval.metrics.core.scoring.with_turns``: results stored before conversations get NA turns);
    with ``strong`` (a judge cascade's strong frame, ``rag_eval.metrics.core.strong.STRONG_COLUMNS``), its
    columns beside each (row, metric), as ``evaluate`` gives them."""
    passed = concat_dtype(["boolean" if s.nullable_passed(connection) else "bool" for s in stored])
    indexed = None if strong is None else strong_by_pair(strong)
    writer = None
    with staged(path) as partial:
        try:
            for results in stored:
                for chunk in map(with_turns, results.chunks(connection, passed)):
                    if indexed is not None:
                        chunk = with_strong(chunk, indexed)
                    table = pa.Table.from_pandas(chunk.drop(columns="version"), preserve_index=False,
                                                 schema=writer.schema if writer else None, nthreads=ARROW_THREADS)
                    writer = writer or pq.ParquetWriter(partial, table.schema)
                    writer.write_table(table)
        finally:
            if writer is not None:
                writer.close()


def write_ragas_csv_by_chunks(connection: duckdb.DuckDBPyConnection, results: pd.DataFrame,
                              fields: dict[str, StoredTable], columns: Sequence[str], path: Path) -> None:
    """``ragas_scores.csv`` of ``results`` and the text ``fields`` (``{field: stored partition}``,
    every one holding every line, read over ``connection``), :data:`READ_ROWS` lines at a time: the file
    ``rag_eval.metrics.reports.formats.write_ragas_csv(ragas_table(results, merged[columns]), path)`` writes,
    ``merged`` being the fields merged on ``row`` and the sample's id (``sample_id``: the turns of a
    conversation share a row), without the version's texts in memory at once."""
    rows = len(next(iter(fields.values())))
    with staged(path) as partial, open(partial, "w", encoding="utf-8", newline="") as handle:
        for start in range(0, max(rows, 1), READ_ROWS):
            part = functools.reduce(lambda left, right: left.merge(right, on=["row", "sample_id"], how="outer"),
                                    [stored.rows_at(connection, start, start + READ_ROWS)[["row", "id", name]]
                                     .rename(columns={"id": "sample_id"}) for name, stored in fields.items()])
            chosen = results[results["row"].isin(part["row"]) & results["sample_id"].isin(part["sample_id"])]
            table = ragas_table(chosen, part[[*columns, "sample_id"]])
            table.to_csv(handle, index=False, header=start == 0, lineterminator="\r\n")
