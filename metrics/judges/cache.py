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

The cache never costs a run its answers, and never throws away answers paid for. How the
file is kept usable when it is damaged, full, read-only or locked is
``rag_eval.metrics.judges.cache_file``'s; the answers this process cannot write are kept in
memory and written as soon as the file takes them again (and when the cache is closed), so a
full cache stays the cache and is used again once space returns; given a ``sink`` (``rag-eval``
gives each cache of a command that judges the command's: ``rag_eval.metrics.judges.spill``), from the
first refusal on every answer goes to the sink's spill file as it arrives, and when the sink
refuses too, :attr:`JudgementCache.nowhere` says why (a judge then buys nothing more).
"""
from __future__ import annotations

import hashlib
import json
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NamedTuple

from rag_eval.metrics.judges.cache_file import CacheFile
from rag_eval.metrics.judges.kept import kept_problem


class Key(NamedTuple):
    """A judgement's keys: ``own`` names the endpoint, ``shared`` does not."""

    own: str
    shared: str


#: Where a cache sends the answers its file refuses, as they arrive: ``sink(cache, entries)`` with
#: ``entries`` ``(key, kind, value as JSON text)``, whether it took them.
Sink = Callable[["JudgementCache", list[tuple[Key, str, str]]], bool]


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


class JudgementCache(CacheFile):
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
        where no WAL holds answers (``rag_eval.metrics.judges.cache_file.read_only_uri``); an answer put
        is kept in memory only.
    sink : Sink, optional
        Where the answers the file refuses go from the first refusal on (``rag_eval.metrics.judges.spill.SpillSink``);
        without one they are kept in memory until the file takes them.

    Never raises on a damaged, read-only, full or locked file: see the module's notes.
    """

    def __init__(self, path: str | Path, lease: float = 600.0, across_endpoints: bool = False,
                 lock_wait: float = 120.0, read_only: bool = False, sink: Sink | None = None) -> None:
        self.lease = lease
        #: Where the answers the file refuses go (``None``: kept in memory until the file takes them).
        self.sink = sink
        self.across_endpoints = across_endpoints
        self._owner = uuid.uuid4().hex
        self._host = socket.gethostname()
        self._memory: dict[str, Any] = {}  # answers the file could not take (yet)
        self._pending: dict[str, tuple[Key, str, str]] = {}  # ... to write when it takes them again
        #: Why no answer can be written anywhere (the file and the :attr:`sink` refused), else ``None``.
        self.nowhere: str | None = None
        self._spilling = False  # the file refused an answer: the later ones go to the sink
        super().__init__(path, lock_wait, read_only)

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
                sink = self.sink
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
