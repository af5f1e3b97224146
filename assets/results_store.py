"""The results store: one Parquet file per asset partition, taking any number of runs at once.

``<out>/tables/<asset>/<partition>.parquet`` holds an asset's rows of one partition (a field of
a version's lines, a metric's per-row results, the summary's rows...), written by Dagster's
``UPathIOManager`` (:class:`PartitionFiles`). A file is staged beside its place and renamed into
it: a reader sees the partition's old rows or its new ones, never a part, and a run that
stops loses nothing stored before (a file it staged is removed by the partition's next write). Runs of different partitions never write the same file,
so runs store their results at once with no lock and no wait; two runs of one partition are
kept apart by the run queue's per-partition limit (``dagster_home/dagster.yaml``) and
``rag-eval``'s per-version lock. Steps read the partitions they depend on with DuckDB, over
a connection of their own in memory (:meth:`PartitionFiles.connection`, :meth:`PartitionFiles.stored`).

A file that cannot be written (a full or read-only disk) fails its step in one line naming the
file and the cause (:class:`StoreError`); what was stored before stays as it was. A damaged file
(bytes overwritten, cut short by a copy) is set aside as ``<file>.unusable-<UTC time>``, said
in one line, wherever it is found: by ``rag-eval run`` before it decides a version is up to
date (:func:`set_aside_damaged`), or by a step reading it; the version's next run writes it
again, its judgements read from the judgement cache.

``<out>/rag_eval.duckdb`` is for users' SQL: schema ``eval`` holds one view per table over
its files (``select * from eval.faithfulness where version = ...``), made when a table's
first file appears (:func:`refresh_views`). No run needs it: held by another process (a
DuckDB shell) or unwritable, it is named in a warning and the run goes on; damaged (not a DuckDB
file), it is set aside as ``rag_eval.duckdb.unusable-<UTC time>`` and made again (it holds views
only; the rows are in the files). A database of the
earlier layout (one DuckDB table per asset) has each table's rows moved to files as the
table is written again.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

import dagster as dg
import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from rag_eval.assets.outputs import output_file, output_folder
from rag_eval.assets.stored_results import StoredTable, TableFile, scalar
from rag_eval.metrics.errors import InputError, UserError

TABLES = "tables"
DATABASE = "rag_eval.duckdb"
SCHEMA = "eval"
#: The connections steps read partitions over: in memory, within 128 MB (DuckDB's default is 80 % of the
#: machine's memory), spilling to the temporary folder rather than the working one.
READ_CONFIG: dict[str, str | bool | int | float | list[str]] = {
    "memory_limit": "128MB", "temp_directory": str(Path(tempfile.gettempdir()) / "rag-eval-duckdb")}
#: Seconds the results database is waited for when another run adds views to it at the same moment.
VIEW_WAIT = 3.0


def table_file(root: str | Path, asset: str, partition: str) -> Path:
    """Where the rows of ``asset`` for ``partition`` are stored under the output folder ``root``."""
    return Path(root) / TABLES / asset / f"{partition}.parquet"


class StoreError(UserError, OSError):
    """A partition file that could not be written (no space left, a read-only disk): names the
    file and the cause; nothing of the step is stored, its judgements are in the judgement cache."""


class DamagedFile(InputError):
    """A partition file that is not Parquet, met by a step reading it: set aside, said in the
    message (:func:`damaged_file`)."""


def set_aside(path: Path) -> Path:
    """Rename the damaged ``path`` to ``<path>.unusable-<UTC time>`` beside it (as the judgement
    cache does); where it went."""
    aside = path.with_name(f"{path.name}.unusable-{datetime.now(timezone.utc):%Y%m%dT%H%M%S%fZ}")
    os.replace(path, aside)
    return aside


def damaged_file(path: Path, why: object) -> str:
    """Set the damaged partition file ``path`` aside; the line saying so, what caused it and what to do."""
    aside = set_aside(path)
    return (f"results file {path} is damaged ({_one_line(why)}): set aside as {aside.name}; a run of its dataset "
            f"version writes it again (the judgements come from the judgement cache)")


def set_aside_damaged(paths: Iterable[Path], say: Callable[[str], None]) -> list[Path]:
    """Of ``paths`` (partition files), those present whose Parquet footer cannot be read: each set
    aside (:func:`damaged_file`) and said through ``say``; the list of them."""
    found = []
    for path in paths:
        try:
            if path.is_file():
                pq.read_metadata(path)
        except (pa.ArrowException, OSError) as exc:
            say(damaged_file(path, exc))
            found.append(path)
    return found


def _one_line(why: object) -> str:
    return " ".join(str(why).split("LINE 1:")[0].split())


def write_frame(frame: pd.DataFrame, path: Path) -> None:
    """``frame`` as a Parquet file; a column of nulls only is typed as text, so that the files
    of one table share their columns' types whatever a partition holds."""
    table = pa.Table.from_pandas(frame, preserve_index=False)
    for index, field in enumerate(table.schema):
        if pa.types.is_null(field.type):
            table = table.set_column(index, pa.field(field.name, pa.string()), table.column(index).cast(pa.string()))
    pq.write_table(table, path)


class PartitionFiles(dg.UPathIOManager):
    """Dagster's ``UPathIOManager`` on ``<root>/tables/``: an output (a :class:`TableFile` a step
    wrote, moved into place; or a DataFrame) is the Parquet file of its asset partition, staged
    and renamed into place; an input loads as a DataFrame. Also gives the steps what they read
    their upstream partitions with: :meth:`connection` and :meth:`stored`."""

    extension = ".parquet"

    def __init__(self, root: Path) -> None:
        from upath import UPath

        super().__init__(base_path=UPath(root / TABLES))
        self.root, self.views_refused = root, False

    def make_directory(self, path) -> None:
        """``out/tables/<asset>/``, never through a symbolic link out of the output folder
        (``rag_eval.assets.outputs.output_folder``)."""
        output_folder(self.root, Path(path))

    def dump_to_path(self, context: dg.OutputContext, obj: TableFile | pd.DataFrame, path) -> None:
        path = Path(path)
        for left in path.parent.glob(f".{path.name}.*"):  # staged by a run of this partition killed before its rename
            left.unlink(missing_ok=True)
        staged = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
        try:
            if isinstance(obj, TableFile):
                shutil.move(obj.path, staged)  # a rename when the temporary folder is on the same disk
            elif isinstance(obj, pd.DataFrame):
                write_frame(obj, staged)
            else:
                raise TypeError(f"{context.asset_key.to_user_string()}: the results store takes a DataFrame or a "
                                f"TableFile, not {type(obj).__name__}")
            os.replace(staged, path)
        except OSError as exc:
            raise StoreError(f"results file {path} could not be written ({exc.strerror or exc}): "
                             f"nothing of this step is stored and what was stored before is kept; "
                             f"free the disk of {self.root} and run again") from None
        finally:
            staged.unlink(missing_ok=True)
        if not self.views_refused and views_missing(self.root):  # tried once a run when the database is refused

            def say(message: str) -> None:  # in the run's log (the UI) and on stderr (rag-eval shows no log)
                context.log.warning(message)
                print(message, file=sys.stderr)

            self.views_refused = not refresh_views(self.root, say)

    def load_from_path(self, context: dg.InputContext, path) -> pd.DataFrame:
        try:
            return pd.read_parquet(path)
        except pa.ArrowInvalid as exc:
            raise DamagedFile(damaged_file(Path(path), exc)) from None

    def get_metadata(self, context: dg.OutputContext, obj: TableFile | pd.DataFrame) -> dict:
        rows, dtypes = (obj.rows, obj.dtypes) if isinstance(obj, TableFile) \
            else (len(obj), tuple((name, str(dtype)) for name, dtype in obj.dtypes.items()))
        return {"dagster/partition_row_count" if context.has_partition_key else "dagster/row_count": rows,
                "dagster/column_schema": dg.TableSchema(columns=[dg.TableColumn(name, kind) for name, kind in dtypes])}

    @contextmanager
    def connection(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A DuckDB connection in memory (:data:`READ_CONFIG`) to read stored partitions over,
        closed when the block ends."""
        with duckdb.connect(config=READ_CONFIG) as connection:
            yield connection

    def stored(self, connection: duckdb.DuckDBPyConnection, version: str, tables: list[str]) -> dict[str, StoredTable]:
        """``{table: its partition version}`` for each of ``tables`` holding rows of ``version``
        (a metric never computed for it, or no rejected line, is left out), counted over
        ``connection``; nothing else is read yet (:class:`rag_eval.assets.stored_results.StoredTable`)."""
        found: dict[str, StoredTable] = {}
        for table in tables:
            path = table_file(self.root, table, version)
            if path.is_file():
                query = f"select * from read_parquet({_quoted(path)})"
                try:
                    rows = scalar(connection, f"select count(*) from ({query})")
                except duckdb.InvalidInputException as exc:  # not Parquet: no magic bytes, a bad footer
                    raise DamagedFile(damaged_file(path, exc)) from None
                if rows:
                    found[table] = StoredTable(query, rows)
        return found


class ResultsStore(dg.ConfigurableIOManagerFactory):
    """The IO manager of every asset: its partitions' rows as Parquet files under
    ``<root>/tables/`` (:class:`PartitionFiles`), and the views of ``<root>/rag_eval.duckdb``."""

    root: str = "out"

    def create_io_manager(self, context) -> PartitionFiles:
        return PartitionFiles(Path(self.root).resolve())


def _quoted(path: Path) -> str:
    return "'" + path.as_posix().replace("'", "''") + "'"


def _tables(root: Path) -> dict[str, Path]:
    """``{table: its folder}`` for the tables holding at least one file."""
    folder = root / TABLES
    return {path.name: path for path in sorted(folder.iterdir()) if not path.name.startswith(".")
            and path.is_dir() and next(path.rglob("*.parquet"), None)} if folder.is_dir() else {}


def _record(root: Path) -> Path:
    return root / TABLES / ".views.json"


def _identity(database: Path) -> list[int]:
    """The database file as :func:`refresh_views` left it: another file, or this one changed since
    (a user's SQL, damage), has its views checked again."""
    found = database.stat()
    return [found.st_ino, found.st_size, found.st_mtime_ns]


def views_missing(root: Path) -> bool:
    """Whether ``<root>/rag_eval.duckdb`` may lack the view of some table, as recorded by the last
    :func:`refresh_views` (the database file it made them in, as it left it; the views): no
    database is opened."""
    database = root / DATABASE
    try:
        record = json.loads(_record(root).read_text(encoding="utf-8"))
        return record["file"] != _identity(database) or bool(set(_tables(root)) - set(record["views"]))
    except (OSError, ValueError, KeyError):
        return True


def refresh_views(root: Path, say: Callable[[str], None]) -> bool:
    """Make ``eval.<table>`` in ``<root>/rag_eval.duckdb`` a view over the table's files, for each
    table holding files (a table of the earlier layout has its rows moved to files first); whether
    it was done. Another run adding views at the same moment is waited for up to :data:`VIEW_WAIT`
    s; a database held longer (a DuckDB shell), or that cannot be written, is named through ``say``
    and left as it is: the results are in their files, and the next run makes the views. A damaged
    database (not a DuckDB file) is set aside (:func:`set_aside`), said, and made again; a link
    leading out of ``root`` is refused (``rag_eval.assets.outputs.output_file``: ``StorageError``)."""
    database, deadline = output_file(root, root / DATABASE), time.monotonic() + VIEW_WAIT
    while True:
        tables = _tables(root)
        try:
            with duckdb.connect(str(database)) as connection:
                connection.execute(f"create schema if not exists {SCHEMA}")
                kinds = dict(connection.execute("select table_name, table_type from information_schema.tables "
                                                "where table_schema = ?", [SCHEMA]).fetchall())
                for name, folder in tables.items():
                    if kinds.get(name) == "BASE TABLE":
                        _move_to_files(connection, name, folder)
                    connection.execute(f'create or replace view {SCHEMA}."{name}" as select * from read_parquet('
                                       f'{_quoted(folder / "**" / "*.parquet")}, union_by_name = true)')
            _record(root).write_text(json.dumps({"file": _identity(database), "views": sorted(tables)}),
                                     encoding="utf-8")
            return True
        except duckdb.Error as exc:
            holder = re.search(r"lock is held in (.*?) \(PID (\d+)\)", str(exc))
            if "not a valid DuckDB database file" in str(exc):  # it holds views only: made again
                try:
                    aside = set_aside(database)
                except OSError:
                    pass
                else:
                    say(f"results database {database} is damaged (not a DuckDB file): set aside as {aside.name}; "
                        f"its views are made again over {root / TABLES}/")
                    continue
            if holder and time.monotonic() < deadline:
                time.sleep(0.2)
                continue
            why = f"is held by PID {holder[2]} ({holder[1]})" if holder else f"cannot be opened ({exc})"
            then = "" if holder else " once the file is moved away"
            say(f"results database {database} {why}: its views of the tables are not updated (the results are "
                f"stored in {root / TABLES}/; the next run updates them{then})")
            return False


def _move_to_files(connection: duckdb.DuckDBPyConnection, name: str, folder: Path) -> None:
    """Move the rows of the earlier layout's table ``eval.<name>`` to one file per version (a
    version already stored in a file keeps its file: it is newer), then drop the table."""
    versions = [v for (v,) in connection.execute(f'select distinct version from {SCHEMA}."{name}"').fetchall()]
    for version in versions:
        path = table_file(folder.parent.parent, name, version)
        if not path.exists():
            staged = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
            literal = version.replace("'", "''")
            connection.execute(f"copy (select * from {SCHEMA}.\"{name}\" where version = '{literal}') "
                               f"to {_quoted(staged)} (format parquet)")
            os.replace(staged, path)
    connection.execute(f'drop table {SCHEMA}."{name}"')
