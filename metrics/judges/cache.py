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

The cache never costs a run its answers: a file that cannot be opened, read or written
(damaged, not a database, read-only, full disk) is named once in a :class:`CacheWarning`,
set aside as ``<file>.unusable-<UTC time>`` and rebuilt; if it cannot be rebuilt
either, the run goes on with its judgements kept in memory.
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
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, NamedTuple

_SCHEMA = ("CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, shared TEXT, kind TEXT NOT NULL, "
           "value TEXT NOT NULL, created TEXT DEFAULT CURRENT_TIMESTAMP)",
           "CREATE INDEX IF NOT EXISTS answers_shared ON answers (shared)",
           "CREATE TABLE IF NOT EXISTS claims (key TEXT PRIMARY KEY, owner TEXT NOT NULL, host TEXT NOT NULL, "
           "pid INTEGER NOT NULL, since REAL NOT NULL)")


class CacheWarning(UserWarning):
    """The judgement cache file could not be used; it was set aside and the run went on."""


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

    Never raises on a damaged, read-only or full file: see the module's notes.
    """

    def __init__(self, path: str | Path, lease: float = 600.0, across_endpoints: bool = False) -> None:
        self.path = str(path)
        self.lease = lease
        self.across_endpoints = across_endpoints
        self._owner = uuid.uuid4().hex
        self._host = socket.gethostname()
        self._lock = threading.Lock()
        self._memory: dict[str, Any] = {}  # only when no file can be used
        self._failures = 0
        self._db: sqlite3.Connection | None = None
        with self._lock:
            self._guard(self._open)

    # ------------------------------------------------------------ resilience
    def _open(self) -> None:
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
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

    def _guard(self, operation, *args: Any, fallback: Any = None) -> Any:
        """Run a database operation (lock held). On its first failure the file is set aside
        and rebuilt and the operation retried; if that fails too, or the file cannot be
        moved, the cache keeps to memory. Either way one warning names the file."""
        if self._db is None and self._failures:
            return fallback
        try:
            return operation(*args)
        except (sqlite3.Error, OSError) as exc:
            error = exc
        self._close()
        self._failures += 1
        aside = self._set_aside() if self._failures == 1 else None
        if aside is not None:
            try:
                self._open()
                result = None if operation == self._open else operation(*args)
                warnings.warn(f"judgement cache {self.path} cannot be used ({error}); it was set aside as {aside} "
                              "and rebuilt, the run goes on", CacheWarning, stacklevel=3)
                return result
            except (sqlite3.Error, OSError) as again:
                self._close()
                error = again
        self._failures += 1
        warnings.warn(f"judgement cache {self.path} cannot be used ({error}); this run keeps its judgements in "
                      "memory only and goes on", CacheWarning, stacklevel=3)
        return fallback

    def _close(self) -> None:
        if self._db is not None:
            try:
                self._db.close()
            except sqlite3.Error:
                pass
            self._db = None

    def _set_aside(self) -> str | None:
        """Rename the file (and its WAL) out of the way: the new name, or ``None`` when
        there is no file or it cannot be moved."""
        if self.path == ":memory:" or not Path(self.path).is_file():
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

    # ---------------------------------------------------------------- values
    def get(self, key: Key) -> Any | None:
        """The value stored under the ``own`` key, else, across endpoints, the latest under
        the ``shared`` one; ``None`` when there is none (or it no longer decodes)."""
        shared = key.shared if self.across_endpoints else None
        with self._lock:
            if key.own in self._memory or shared in self._memory:
                return self._memory.get(key.own, self._memory.get(shared))
            row = self._guard(lambda: self._db.execute(
                "SELECT value FROM answers WHERE key = ? OR shared = ? ORDER BY key = ? DESC, created DESC LIMIT 1",
                (key.own, shared, key.own)).fetchone())
        try:
            return json.loads(row[0]) if row else None
        except (json.JSONDecodeError, TypeError):
            return None  # a damaged entry is a miss: the judgement is asked again and rewritten

    def put(self, key: Key, kind: str, value: Any) -> None:
        """Store ``value`` (JSON-serialisable) under ``key`` and drop this process's claim
        on it, committed at once."""
        text = json.dumps(value, ensure_ascii=False)

        def write() -> None:
            with self._db:
                self._db.execute("BEGIN IMMEDIATE")
                self._db.execute("INSERT OR REPLACE INTO answers (key, shared, kind, value) VALUES (?, ?, ?, ?)",
                                 (key.own, key.shared, kind, text))
                self._db.execute("DELETE FROM claims WHERE key = ? AND owner = ?", (key.own, self._owner))

        with self._lock:
            if self._guard(write, fallback=False) is False:
                self._memory[key.own] = self._memory[key.shared] = json.loads(text)

    # ---------------------------------------------------------------- claims
    def claim(self, keys: Iterable[Key]) -> set[Key]:
        """Claim, in one transaction, the ``keys`` that hold no value yet: all of them, or
        none while another live process holds any of them (so a batch of keys is asked in
        one request, as by a run alone). The keys this cache now holds. Without a usable
        file every key is granted (there is no one to share with)."""
        keys = list(keys)
        now = time.time()

        def claimable() -> set[Key] | None:
            """The keys without a value, or ``None`` while a live process holds any of them."""
            wanted = set()
            for key in keys:
                if self._db.execute("SELECT 1 FROM answers WHERE key = ?", (key.own,)).fetchone():
                    continue
                row = self._db.execute("SELECT owner, host, pid, since FROM claims WHERE key = ?",
                                       (key.own,)).fetchone()
                if row is not None and row[0] != self._owner and now - row[3] <= self.lease \
                        and (row[1] != self._host or process_alive(row[2])):
                    return None
                wanted.add(key)
            return wanted

        def take() -> set[Key]:
            if claimable() is None:  # a plain read first: waiting runs poll without taking the write lock
                return set()
            with self._db:
                self._db.execute("BEGIN IMMEDIATE")
                wanted = claimable()
                if wanted is None:
                    return set()
                self._db.executemany("INSERT OR REPLACE INTO claims (key, owner, host, pid, since) VALUES "
                                     "(?, ?, ?, ?, ?)", [(k.own, self._owner, self._host, os.getpid(), now)
                                                         for k in wanted])
            return wanted

        with self._lock:
            return self._guard(take, fallback=set(keys))

    def release(self, keys: Iterable[Key]) -> None:
        """Drop this process's claims on ``keys`` (its request failed: others may ask)."""
        keys = list(keys)

        def drop() -> None:
            self._db.executemany("DELETE FROM claims WHERE key = ? AND owner = ?", [(k.own, self._owner) for k in keys])

        if keys:
            with self._lock:
                self._guard(drop)

    def close(self) -> None:
        """Close the database connection (its file, WAL and shared-memory handles); answers
        kept in memory stay readable."""
        with self._lock:
            self._close()

    def __len__(self) -> int:
        with self._lock:
            count = self._guard(lambda: self._db.execute("SELECT COUNT(*) FROM answers").fetchone()[0], fallback=0)
            return count + len(self._memory)
