"""The judgement cache's SQLite file, kept usable whatever happens to it (``rag_eval.metrics.judges.cache``
keeps the answers in it).

What is done when the file cannot be used depends on why (each case named once in a
:class:`CacheWarning`):

* **damaged** (not a database, a malformed page): the file is set aside as
  ``<file>.unusable-<UTC time>``, every answer that can still be read from it is carried
  over into a new file (:func:`salvage`), and the run goes on with that one;
* **full, read-only or unreachable** (no space left, a read-only file or disk, an I/O
  error, a folder that cannot be created): the file is kept as it is and still read
  where it can be, and opened again for writing every :data:`RETRY_SECONDS`; what it refused is
  said in the user's words (:func:`disk_problem`);
* **locked** by another process past SQLite's busy timeout: the wait is said, and it goes
  on up to ``lock_wait`` seconds, after which the write counts as refused.
"""
from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
import warnings
from collections.abc import Iterable
from contextlib import closing
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import quote

_SCHEMA = ("CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, shared TEXT, kind TEXT NOT NULL, "
           "value TEXT NOT NULL, created TEXT DEFAULT CURRENT_TIMESTAMP)",
           "CREATE INDEX IF NOT EXISTS answers_shared ON answers (shared)",
           "CREATE TABLE IF NOT EXISTS claims (key TEXT PRIMARY KEY, owner TEXT NOT NULL, host TEXT NOT NULL, "
           "pid INTEGER NOT NULL, since REAL NOT NULL)")
_COLUMNS = "key, shared, kind, value, created"
#: Seconds between two attempts to write the answers kept in memory to a file that refused them.
RETRY_SECONDS = 5.0
#: SQLite's busy timeout: a lock held longer than this is said (then waited for up to ``lock_wait``).
BUSY_SECONDS = 5.0


class CacheWarning(UserWarning):
    """The judgement cache file could not be used as usual (damaged, full, read-only, locked):
    what was done about it. The run goes on."""


def disk_problem(folder: str | Path, error: BaseException) -> str:
    """``error`` in the user's words where the file system of ``folder`` tells what is wrong
    (SQLite says "disk I/O error" for a write the disk refused): ``read-only file system
    (...)``, ``no space left on the disk (...)``, else the error as it is."""
    try:
        disk = os.statvfs(folder)
    except OSError:
        return str(error)
    if disk.f_flag & os.ST_RDONLY:
        return f"read-only file system ({error})"
    # f_blocks 0: a file system without storage (/proc, /sys) says 0 bytes free whatever the error
    if (disk.f_blocks and disk.f_bavail == 0) or getattr(error, "sqlite_errorname", "") == "SQLITE_FULL":
        return f"no space left on the disk ({error})"
    return str(error)


def _failure(error: BaseException) -> str:
    """``damaged``, ``locked`` or ``unwritable`` (full, read-only, I/O error, cannot be opened)."""
    name = getattr(error, "sqlite_errorname", "") or ""
    if name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB")):
        return "damaged"
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
        return "locked"
    return "unwritable"


def salvage(path: str | Path) -> list[tuple]:
    """The answers that can still be read from the (damaged) cache file ``path``: rows
    ``(key, shared, kind, value, created)`` whose value is JSON. The whole table when it
    reads, else row by row (a damaged page loses the rows on it only); ``[]`` when the file
    is no database at all."""
    def usable(rows: Iterable[tuple]) -> list[tuple]:
        kept = []
        for row in rows:
            try:
                json.loads(row[3])
            except (TypeError, ValueError):
                continue
            if isinstance(row[0], str) and isinstance(row[2], str):
                kept.append(row)
        return kept

    try:
        db = sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True)
    except sqlite3.Error:
        return []
    with closing(db):
        try:
            return usable(db.execute(f"SELECT {_COLUMNS} FROM answers").fetchall())
        except sqlite3.Error:
            pass
        try:
            top = db.execute("SELECT max(rowid) FROM answers").fetchone()[0] or 0
        except sqlite3.Error:
            top = Path(path).stat().st_size // 64  # no row is smaller: an upper bound of the rowids
        found = []
        for rowid in range(1, top + 1):
            try:
                found += db.execute(f"SELECT {_COLUMNS} FROM answers WHERE rowid = ?", (rowid,)).fetchall()
            except sqlite3.Error:
                continue
        return usable(found)


def read_only_uri(path: str | Path) -> str:
    """The SQLite URI opening ``path`` for reading only without creating or changing any file: immutable
    when no WAL holds answers (a read-only open of a WAL database would create its ``-wal`` and ``-shm``)."""
    wal = Path(f"{path}-wal")
    pending = wal.exists() and wal.stat().st_size > 0
    return f"file:{quote(str(path))}?mode=ro" + ("" if pending else "&immutable=1")




class CacheFile:
    """The cache's SQLite file (WAL mode, safe across threads and processes), each operation on it run by
    :meth:`_guard`, which handles a damaged, full, read-only or locked file as the module's notes say.

    Parameters
    ----------
    path : str or Path
        The database file; its folder is created. ``":memory:"`` keeps it in memory.
    lock_wait : float
        Seconds to wait, after saying so, for a file another process keeps locked.
    read_only : bool
        Only read the file: nothing is created or changed, not even SQLite's WAL index where no WAL
        holds answers (:func:`read_only_uri`).

    Never raises on a damaged, read-only, full or locked file: an operation that fails returns its fallback.
    """

    def __init__(self, path: str | Path, lock_wait: float = 120.0, read_only: bool = False) -> None:
        self.path = str(path)
        self.read_only = read_only
        self.lock_wait = lock_wait
        self._lock = threading.Lock()
        self._retry_at = 0.0
        self._said: set[str] = set()
        self._set_aside_once = False
        self._identity: tuple[int, int] | None = None
        self._db: sqlite3.Connection | None = None
        self._read_only = False
        #: Why the file last refused a write, in the user's words (``None``: it never did).
        self.problem: str | None = None
        with self._lock:
            self._guard(self._open)

    def _open(self) -> None:
        if self.read_only:
            self._read_only = True
            self._db = sqlite3.connect(read_only_uri(self.path), uri=True, check_same_thread=False,
                                       isolation_level=None, timeout=BUSY_SECONDS)
            return
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._read_only = False
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=BUSY_SECONDS)
        self._identity = self._file_identity()
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")  # durable at each commit in WAL mode, no fsync per write
            for statement in _SCHEMA:
                self._db.execute(statement)
            with self._db:  # a cache of before endpoints were keyed: its keys are today's shared keys
                self._db.execute("BEGIN IMMEDIATE")
                if self._db.execute("SELECT 1 FROM sqlite_master WHERE name = 'judgements'").fetchone():
                    self._db.execute("INSERT OR IGNORE INTO answers (key, shared, kind, value, created) "
                                     "SELECT 'unknown-endpoint:' || key, key, kind, value, created FROM judgements")
                    self._db.execute("DROP TABLE judgements")
        except sqlite3.Error as exc:
            if _failure(exc) != "unwritable":
                raise
            self._close()
            if not self._open_read_only():
                raise
            self._unwritable(exc)  # full or read-only: its answers are still read

    def _open_read_only(self) -> bool:
        """Open the file for reading only (full disk, read-only file system): through its WAL
        index when one exists, else, when no WAL holds answers, as an immutable file (no WAL
        index need be created). Whether it reads."""
        wal = Path(self.path + "-wal")
        for query in ("mode=ro", "mode=ro&immutable=1"):
            if "immutable" in query and wal.exists() and wal.stat().st_size:
                break  # answers in the WAL that an immutable open would not see
            try:
                self._db = sqlite3.connect(f"file:{quote(self.path)}?{query}", uri=True, check_same_thread=False,
                                           isolation_level=None, timeout=BUSY_SECONDS)
                if self._readable():
                    self._read_only = True
                    return True
            except sqlite3.Error:
                pass
            self._close()
        return False

    @property
    def _conn(self) -> sqlite3.Connection:
        """The open file, which every operation run by :meth:`_guard` has (it opens it first, or
        returns the operation's fallback without running it)."""
        assert self._db is not None, "the judgement cache's file is not open"  # see the docstring
        return self._db

    def _readable(self) -> bool:
        """Whether the open file holds the answers table (it can be read though not written)."""
        try:
            self._conn.execute("SELECT 1 FROM answers LIMIT 1").fetchall()
            return True
        except sqlite3.Error:
            return False

    def _file_identity(self) -> tuple[int, int] | None:
        try:
            stat = os.stat(self.path)
        except OSError:
            return None
        return stat.st_dev, stat.st_ino

    def _say(self, what: str, message: str) -> None:
        if what not in self._said:
            self._said.add(what)
            warnings.warn(f"judgement cache {self.path}: {message}", CacheWarning, stacklevel=4)

    def _cause(self, error: BaseException) -> str:
        self.problem = disk_problem(Path(self.path).parent, error)
        return self.problem

    def _unwritable(self, error: BaseException) -> None:
        if time.monotonic() >= self._retry_at:  # the next attempt: in RETRY_SECONDS, not later
            self._retry_at = time.monotonic() + RETRY_SECONDS
        self._say("unwritable", f"cannot be written: {self._cause(error)}; the file is kept as it is and still read, and the "
                                "answers it cannot take are kept in memory and written as soon as it takes them "
                                "again; the run goes on")

    def _guard(self, operation, *args: Any, fallback: Any = None) -> Any:
        """Run a database operation (lock held); on failure, as the module's notes say: the
        operation's ``fallback`` when the file cannot serve it."""
        if operation != self._open:
            moved = self._db is not None and self._identity != self._file_identity()  # set aside by another process
            degraded = self._db is None or self._read_only
            if moved or (degraded and time.monotonic() >= self._retry_at):
                self._close()
                try:
                    self._open()
                except (sqlite3.Error, OSError) as exc:
                    return self._failed(exc, operation, args, fallback)
            elif self._db is None:
                return fallback
        started = time.monotonic()
        while True:
            try:
                return operation(*args)
            except (sqlite3.Error, OSError) as exc:
                if _failure(exc) == "locked" and time.monotonic() - started < self.lock_wait:
                    self._say("locked", f"locked by another process for more than {BUSY_SECONDS:g} s ({exc}); "
                                        f"waiting for it, up to {self.lock_wait:g} s")
                    time.sleep(0.05)
                    continue
                return self._failed(exc, operation, args, fallback)

    def _failed(self, error: BaseException, operation, args: tuple, fallback: Any) -> Any:
        if _failure(error) != "damaged" or self._set_aside_once:
            if self._db is not None and operation != self._open and self._readable():
                self._unwritable(error)  # full, read-only, locked too long: the file stays the cache
                return fallback
            self._close()
            self._retry_at = time.monotonic() + RETRY_SECONDS
            self._say("unusable", f"cannot be used: {self._cause(error)}; the file (if any) is left as it is and this run keeps "
                                  "its judgements in memory only (written to it if it becomes usable); the run goes on")
            return fallback
        self._close()
        self._set_aside_once = True
        aside = self._set_aside()
        try:
            self._open()
            carried = self._carry_over(aside) if aside else 0
            result = None if operation == self._open else operation(*args)
        except (sqlite3.Error, OSError) as again:
            return self._failed(again, operation, args, fallback)
        self._say("damaged", f"damaged ({error}); set aside as {aside}, {carried} answers that could still be read "
                             "carried over into a new cache; the run goes on" if aside else
                             f"damaged ({error}); another process set it aside and rebuilt it; the run goes on")
        return result

    def _carry_over(self, aside: str) -> int:
        rows = salvage(aside)
        with self._conn:
            self._conn.execute("BEGIN IMMEDIATE")
            self._conn.executemany(f"INSERT OR IGNORE INTO answers ({_COLUMNS}) VALUES (?, ?, ?, ?, ?)", rows)
        return len(rows)

    def _close(self) -> None:
        if self._db is not None:
            try:
                self._db.close()
            except sqlite3.Error:
                pass
            self._db = None

    def _set_aside(self) -> str | None:
        """Rename the damaged file (and its WAL) out of the way: the new name, or ``None`` when
        there is no file, another process already replaced it, or it cannot be moved."""
        if self.path == ":memory:" or not Path(self.path).is_file() or \
                (self._identity is not None and self._file_identity() != self._identity):
            return None
        aside = f"{self.path}.unusable-{datetime.now(timezone.utc):%Y%m%dT%H%M%S%fZ}"
        try:
            os.replace(self.path, aside)
        except OSError:
            return None
        for suffix in ("-wal", "-shm"):
            if Path(self.path + suffix).exists():
                try:
                    os.replace(self.path + suffix, aside + suffix)
                except OSError:
                    pass
        return aside
