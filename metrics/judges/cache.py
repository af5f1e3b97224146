"""A persistent, content-addressed judgement cache in an embedded SQLite file.

The key is the SHA-256 of everything that determines a judgement: the kind of
judgement and its prompt version, the endpoint and the model, the sampling parameters
and exactly the inputs the judgement reads. Each answer is also stored under its
``shared`` key (the same without the endpoint), through which a judge may reuse
answers of other endpoints serving the same model when asked to. Each answer is
committed as soon as it arrives, so a run killed half-way and started again re-sends
nothing it had finished.

Claims make processes that share the file send each judgement once: before asking the
endpoint, a process claims the key; another process that needs the same judgement at
the same time waits for the answer instead of asking too. A claim held by a process
that died (its PID is gone on this host), or older than ``lease`` seconds, is taken over.

The cache never costs a run its answers, and never throws away answers paid for. What
happens when the file cannot be used depends on why (each case named once in a
:class:`CacheWarning`):

* **damaged** (not a database, a malformed page): the file is set aside as
  ``<file>.unusable-<UTC time>``, every answer that can still be read from it is carried
  over into a new file, and the run goes on with that one;
* **full, read-only or unreachable** (no space left, a read-only file or disk, an I/O
  error, a folder that cannot be created): the file is kept as it is and still read
  where it can be; the answers this process cannot write are kept in memory and written
  as soon as the file takes them again (tried every :data:`RETRY_SECONDS` and when the
  cache is closed), so a full cache stays the cache and is used again once space returns;
  with a :attr:`JudgementCache.sink` (``rag-eval`` sets one: ``rag_eval.metrics.judges.spill``),
  from the first refusal on every answer goes to the sink's spill file as it arrives, and when
  the sink refuses too, :attr:`JudgementCache.nowhere` says why (a judge then buys nothing more);
* **locked** by another process past SQLite's busy timeout: the wait is said, and it goes
  on up to ``lock_wait`` seconds, after which the answer is kept in memory as above.
"""
from __future__ import annotations

import hashlib
import json
import os
import socket
import sqlite3
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterable
from contextlib import closing
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, ClassVar, NamedTuple
from urllib.parse import quote

from rag_eval.metrics.judges.kept import kept_problem

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


class Key(NamedTuple):
    """A judgement's keys: ``own`` names the endpoint, ``shared`` does not."""

    own: str
    shared: str


def _digest(parts: dict[str, Any]) -> str:
    payload = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def cache_key(endpoint: str | None, **parts: Any) -> Key:
    """SHA-256 of the canonical JSON of ``parts`` (sorted keys, no whitespace), with the
    endpoint (the base URL without credentials) and without it."""
    return Key(_digest({**parts, "endpoint": endpoint}), _digest(parts))


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` of this host still exists (a signal-0 probe)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's live process
    return True


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


def _usable(row: tuple | None) -> Any | None:
    """The value of an ``(kind, value as JSON text)`` row, ``None`` when it no longer decodes or is
    no answer of its kind (``rag_eval.metrics.judges.kept``): a miss, asked again and overwritten."""
    if not row:
        return None
    try:
        value = json.loads(row[1])
    except (ValueError, TypeError, RecursionError):
        return None
    return value if value is not None and kept_problem(row[0], value) is None else None


class JudgementCache:
    """``get``/``put`` of JSON values by key in SQLite (WAL mode, safe across threads and
    processes), and ``claim``/``release`` of keys being asked.

    Parameters
    ----------
    path : str or Path
        The database file; its folder is created. ``":memory:"`` keeps it in memory.
    lease : float
        Seconds after which another process's claim is taken over even if its process
        still runs (it hangs); a claim of a dead process is taken over at once.
    across_endpoints : bool
        Answer ``get`` from any endpoint's answer to the same judgement (the ``shared``
        key), not only from the endpoint's own.
    lock_wait : float
        Seconds to wait, after saying so, for a file another process keeps locked.
    read_only : bool
        Only read the file (a dry run's): nothing is created or changed, not even SQLite's WAL index
        where no WAL holds answers (:func:`read_only_uri`); an answer put is kept in memory only.

    Never raises on a damaged, read-only, full or locked file: see the module's notes.
    """

    #: Where every cache of this process sends the answers its file refuses, as they arrive:
    #: ``sink(cache, entries)``, whether it took them (``None``: kept in memory until the file takes them).
    sink: ClassVar[Callable[[JudgementCache, list[tuple[Key, str, str]]], bool] | None] = None

    def __init__(self, path: str | Path, lease: float = 600.0, across_endpoints: bool = False,
                 lock_wait: float = 120.0, read_only: bool = False) -> None:
        self.path = str(path)
        self.read_only = read_only
        self.lease = lease
        self.across_endpoints = across_endpoints
        self.lock_wait = lock_wait
        self._owner = uuid.uuid4().hex
        self._host = socket.gethostname()
        self._lock = threading.Lock()
        self._memory: dict[str, Any] = {}  # answers the file could not take (yet)
        self._pending: dict[str, tuple[Key, str, str]] = {}  # ... to write when it takes them again
        self._retry_at = 0.0
        self._said: set[str] = set()
        self._set_aside_once = False
        self._identity: tuple[int, int] | None = None
        self._db: sqlite3.Connection | None = None
        self._read_only = False
        #: Why the file last refused a write, in the user's words (``None``: it never did).
        self.problem: str | None = None
        #: Why no answer can be written anywhere (the file and the :attr:`sink` refused), else ``None``.
        self.nowhere: str | None = None
        self._spilling = False  # the file refused an answer: the later ones go to the sink
        with self._lock:
            self._guard(self._open)

    # ------------------------------------------------------------ resilience
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

    def _flush(self) -> None:
        """Write the answers kept in memory, if the file takes them now (lock held)."""
        if not self._pending or time.monotonic() < self._retry_at:
            return
        entries = list(self._pending.values())
        if self._write(entries):
            for key, _, _ in entries:
                self._pending.pop(key.own, None)
                self._memory.pop(key.own, None)
                self._memory.pop(key.shared, None)
            self.nowhere = None

    def _write(self, entries: list[tuple[Key, str, str]]) -> bool:
        """Write ``(key, kind, JSON text)`` entries in one transaction (lock held): whether the file took them."""
        def write() -> bool:
            with self._conn:
                self._conn.execute("BEGIN IMMEDIATE")
                self._conn.executemany("INSERT OR IGNORE INTO answers (key, shared, kind, value) VALUES (?, ?, ?, ?)",
                                     [(k.own, k.shared, kind, text) for k, kind, text in entries])
            return True

        return bool(self._guard(write, fallback=False))

    # ---------------------------------------------------------------- values
    def get(self, key: Key) -> Any | None:
        """The value stored under the ``own`` key, else, across endpoints, the latest under
        the ``shared`` one; ``None`` when there is none, or it no longer decodes or is no answer of its
        kind (``rag_eval.metrics.judges.kept``: asked again, and :meth:`put` overwrites it)."""
        shared = key.shared if self.across_endpoints else None
        with self._lock:
            if key.own in self._memory or shared in self._memory:
                return self._memory.get(key.own, None if shared is None else self._memory.get(shared))
            row = self._guard(lambda: self._conn.execute(
                "SELECT kind, value FROM answers WHERE key = ? OR shared = ? ORDER BY key = ? DESC, created DESC "
                "LIMIT 1", (key.own, shared, key.own)).fetchone())
        return _usable(row)

    def put(self, key: Key, kind: str, value: Any) -> None:
        """Store ``value`` (JSON-serialisable) under ``key`` and drop this process's claim
        on it, committed at once (kept in memory while the file cannot take it)."""
        text = json.dumps(value, ensure_ascii=False)

        def write() -> bool:
            with self._conn:
                self._conn.execute("BEGIN IMMEDIATE")
                self._conn.execute("INSERT OR REPLACE INTO answers (key, shared, kind, value) VALUES (?, ?, ?, ?)",
                                 (key.own, key.shared, kind, text))
                self._conn.execute("DELETE FROM claims WHERE key = ? AND owner = ?", (key.own, self._owner))
            return True

        with self._lock:
            self._flush()
            if self._spilling or self._pending or not self._guard(write, fallback=False):
                self._memory[key.own] = self._memory[key.shared] = json.loads(text)
                sink = type(self).sink  # the class's: a function stored there is not a method
                self._spilling = sink is not None
                if sink is not None and sink(self, [(key, kind, text)]):
                    return  # in a spill file: no longer this cache's to write
                self.nowhere = f"it cannot take writes ({self.problem}) and no spill folder takes them either" \
                    if sink is not None else None
                self._pending[key.own] = (key, kind, text)

    # ---------------------------------------------------------------- claims
    def claim(self, keys: Iterable[Key]) -> set[Key]:
        """Claim, in one transaction, the ``keys`` that hold no value yet: all of them, or
        none while another live process holds any of them (so a batch of keys is asked in
        one request, as by a run alone). The keys this cache now holds. Without a file that
        can be written every key is granted (there is no one to share with)."""
        keys = list(keys)
        now = time.time()

        def claimable() -> set[Key] | None:
            """The keys without a value, or ``None`` while a live process holds any of them."""
            wanted = set()
            for key in keys:
                row = self._conn.execute("SELECT kind, value FROM answers WHERE key = ?", (key.own,)).fetchone()
                if _usable(row) is not None:
                    continue  # an answer that is no answer of its kind is asked again
                row = self._conn.execute("SELECT owner, host, pid, since FROM claims WHERE key = ?",
                                       (key.own,)).fetchone()
                if row is not None and row[0] != self._owner and now - row[3] <= self.lease \
                        and (row[1] != self._host or process_alive(row[2])):
                    return None
                wanted.add(key)
            return wanted

        def take() -> set[Key]:
            if claimable() is None:  # a plain read first: waiting runs poll without taking the write lock
                return set()
            with self._conn:
                self._conn.execute("BEGIN IMMEDIATE")
                wanted = claimable()
                if wanted is None:
                    return set()
                self._conn.executemany("INSERT OR REPLACE INTO claims (key, owner, host, pid, since) VALUES "
                                     "(?, ?, ?, ?, ?)", [(k.own, self._owner, self._host, os.getpid(), now)
                                                         for k in wanted])
            return wanted

        with self._lock:
            if self._pending and time.monotonic() < self._retry_at:
                return set(keys)
            return self._guard(take, fallback=set(keys))

    def release(self, keys: Iterable[Key]) -> None:
        """Drop this process's claims on ``keys`` (its request failed: others may ask)."""
        keys = list(keys)

        def drop() -> None:
            self._conn.executemany("DELETE FROM claims WHERE key = ? AND owner = ?",
                                   [(k.own, self._owner) for k in keys])

        if keys:
            with self._lock:
                self._guard(drop)

    def store(self, entries: Iterable[tuple[Key, str, str]]) -> bool:
        """Write ``(key, kind, value as JSON text)`` entries (a spill file's, folded back) in one
        transaction, an answer the file holds already kept as it is: whether the file took them (if
        not, :attr:`problem` says why; nothing is kept)."""
        with self._lock:
            self._retry_at = 0.0
            return self._write(list(entries))

    def take_unwritten(self) -> list[tuple[Key, str, str]]:
        """After :meth:`flush`: the answers the file still refuses, ``(key, kind, value as JSON
        text)``, handed over (to a spill file): this cache no longer tries to write them, and
        keeps serving them from memory."""
        with self._lock:
            entries = list(self._pending.values())
            self._pending.clear()
            return entries

    def flush(self) -> None:
        """Write the answers kept in memory (the file refused them) if it takes them now."""
        with self._lock:
            self._retry_at = 0.0
            self._flush()

    def close(self) -> None:
        """:meth:`flush`, then close the database connection (its file, WAL and shared-memory
        handles); answers kept in memory stay readable."""
        self.flush()
        with self._lock:
            self._close()

    def __len__(self) -> int:
        with self._lock:
            count = self._guard(lambda: self._conn.execute("SELECT COUNT(*) FROM answers").fetchone()[0], fallback=0)
            return count + len(self._pending)
