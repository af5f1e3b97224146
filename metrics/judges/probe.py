"""Before a command's first judge request: can the judgement cache take this run's answers?

:func:`cache_file` resolves the cache's path (a symbolic link is followed: its real target is
what is checked, and used) and refuses a path that is empty or a folder; :func:`refusal`
*commits* to the cache file (a row of its ``spill_folders`` table: the output folder where this
run would put a spill file, so that a later run of this cache finds that file,
``rag_eval.metrics.judges.spill``); :func:`check_room` checks the room its disk has left against
the answers the run expects, at the bytes an answer takes measured from the cache's own rows
(:func:`answer_bytes`).
"""
from __future__ import annotations

import os
import sqlite3
import time
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from rag_eval.metrics.errors import SettingsError, StorageError
from rag_eval.metrics.judges.cache_file import BUSY_SECONDS, disk_problem, read_only_uri

#: Bytes of one answer when the cache holds none of that kind to measure: a chat judgement's JSON
#: verdicts (about 1 KiB), an embedding's vector (1,536 numbers of about 20 characters).
DEFAULT_ANSWER_BYTES = {"chat": 1024, "embedding": 32 * 1024}
#: Bytes a cached answer takes besides its key, shared key, kind and value (measured): its two index
#: entries (key, shared key, each with a row id), the record's header and creation time, B-tree slack.
ROW_OVERHEAD = 256
#: Rows of each kind measured at most (the newest), so the check stays quick on a large cache.
MEASURED_ROWS = 1000
#: Room kept besides the expected answers: SQLite's write-ahead log, which grows to its automatic
#: checkpoint (1,000 pages of 4 KiB by default; each commit writes whole pages, so a few answers fill
#: it long before the database grows) before it is reused, and a transaction's pages beyond that.
RESERVE_BYTES = 1000 * 4096 + 64 * 1024
_RECORD = ("CREATE TABLE IF NOT EXISTS spill_folders (folder TEXT PRIMARY KEY, used REAL NOT NULL)",
           "INSERT OR REPLACE INTO spill_folders (folder, used) VALUES (?, ?)")


@dataclass(frozen=True)
class Expected:
    """The answers a run expects to buy: chat judgements and embeddings requests, after the cache
    (the dry run's counts: ``rag_eval.metrics.judges.cost.CostEstimate.total``)."""

    chat: int
    embedding: int

    @property
    def requests(self) -> int:
        return self.chat + self.embedding


def cache_file(path: str | Path) -> Path:
    """The judgement cache file ``path`` names: symbolic links resolved (the real target).

    Raises
    ------
    SettingsError
        For an empty path, or one that is a folder.
    """
    if not str(path).strip():
        raise SettingsError("--cache-path '': an empty file name; name the judgement cache file")
    real = Path(path).resolve()
    if real.is_dir():
        where = f"{path} (a link to {real})" if str(real) != str(Path(path).absolute()) else str(path)
        raise SettingsError(f"--cache-path {where} is a folder: name the judgement cache file, e.g. "
                            f"{Path(path) / 'judgements.sqlite'}")
    return real


def answer_bytes(path: Path) -> dict[str, int]:
    """Bytes one new answer takes in the cache file ``path``, ``{"chat": ..., "embedding": ...}``:
    the mean length of the key, shared key, kind and value of its newest :data:`MEASURED_ROWS`
    answers of that kind, plus :data:`ROW_OVERHEAD`; :data:`DEFAULT_ANSWER_BYTES` for a kind it
    holds none of (or a file that cannot be read)."""
    sizes = dict(DEFAULT_ANSWER_BYTES)
    query = ("SELECT avg(length(key) + length(shared) + length(kind) + length(CAST(value AS BLOB))) FROM "
             "(SELECT * FROM answers WHERE (kind = 'embedding') = ? ORDER BY rowid DESC LIMIT ?)")
    try:
        with _read_only(path) as db:
            for kind, embedding in (("chat", False), ("embedding", True)):
                mean = db.execute(query, (embedding, MEASURED_ROWS)).fetchone()[0]
                if mean:
                    sizes[kind] = round(mean) + ROW_OVERHEAD
    except sqlite3.Error:
        pass
    return sizes


def _commit(path: Path, folder: Path | None) -> BaseException | None:
    """Commit a row recording ``folder`` to the cache file ``path`` (created if need be): the error
    it refused with, else ``None``. A damaged or locked file is not refused here: the cache sets a
    damaged file aside, and waits for a lock."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with closing(sqlite3.connect(path, timeout=BUSY_SECONDS, isolation_level=None)) as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("BEGIN IMMEDIATE")
            db.execute(_RECORD[0])
            db.execute(_RECORD[1], (str(folder or ""), time.time()))
            db.execute("COMMIT")
    except sqlite3.Error as exc:
        name = getattr(exc, "sqlite_errorname", "") or ""
        return None if name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB", "SQLITE_BUSY", "SQLITE_LOCKED")) else exc
    except OSError as exc:
        return exc
    return None


def _read_only(path: str | Path) -> closing[sqlite3.Connection]:
    """The cache file ``path`` opened read-only (nothing created or changed: ``read_only_uri``), closed on leaving."""
    return closing(sqlite3.connect(read_only_uri(path), uri=True, timeout=BUSY_SECONDS))


def is_judgement_cache(path: str | Path) -> bool:
    """Whether ``path`` is an existing judgement cache: a SQLite file with the cache's ``answers``
    table (opened read-only; nothing is created or changed)."""
    if not Path(path).is_file():
        return False
    try:
        with _read_only(path) as db:
            return db.execute("select 1 from sqlite_master where type = 'table' and name = 'answers'").fetchone() \
                is not None
    except sqlite3.Error:
        return False


def shown(path: str | Path, real: Path) -> str:
    """The cache as a message names it: ``path``, and its real file when ``path`` is a link."""
    return str(real) if str(real) == str(Path(path).absolute()) else f"{path} (a link to {real})"


def refusal(real: Path, spill_folder: Path | None) -> str | None:
    """Why the judgement cache file ``real`` refuses a commit (recording ``spill_folder``) in the
    user's words (no space left, read-only file system, permissions), else ``None``."""
    refused = _commit(real, spill_folder)
    if refused is None:
        return None
    if isinstance(refused, OSError) and refused.strerror:  # without the file's name: the message names the cache
        refused = OSError(refused.errno, refused.strerror)
    return disk_problem(real.parent, refused)


def _existing(path: Path) -> Path:
    """``path``, else its nearest folder that exists."""
    return next(p for p in (path, *path.parents) if p.exists())


def unwritable(real: Path) -> str | None:
    """Why the judgement cache file ``real`` would refuse writes, judged without writing (a dry
    run's; :func:`refusal` commits): its file system is read-only or has no space left, or this user
    may not write it (or its folder, for a file not made yet); else ``None``."""
    where = _existing(real)
    disk = os.statvfs(where)
    if disk.f_flag & os.ST_RDONLY:
        return "read-only file system"
    if disk.f_blocks and disk.f_bavail == 0:
        return "no space left on the disk"
    return None if os.access(where, os.W_OK) else f"permission denied ({where} cannot be written by this user)"


def check_room(real: Path, expected: Expected | None, where: str, way_out: str, bound: bool = False) -> None:
    """Check that the disk of the judgement cache file ``real`` has room for ``expected`` answers at
    :func:`answer_bytes` each, plus :data:`RESERVE_BYTES` (``None``: the answers are not known
    beforehand; the reserve only; with ``bound``, an upper bound, and ``None`` fails the check: the
    caller then counts the answers). Free room is the disk's free space plus the file's free pages.

    Raises
    ------
    StorageError
        Naming the cache (``where``), the room needed and free, and ``way_out``; nothing has been sent.
    """
    if bound and expected is None:
        raise StorageError(where, "no bound on the answers", way_out)
    sizes = answer_bytes(real)
    needed = RESERVE_BYTES + (expected.chat * sizes["chat"] + expected.embedding * sizes["embedding"]
                              if expected is not None else 0)
    disk = os.statvfs(_existing(real.parent))
    free = disk.f_bavail * disk.f_frsize + _free_pages(real)
    if free < needed:
        answers = f"{expected.requests:,} answers ({sizes['chat']:,} bytes a chat answer, {sizes['embedding']:,} an " \
                  "embedding, measured from its rows)" if expected is not None else "its first answers"
        raise StorageError(where, f"the judgement cache has too little room: {free:,} bytes free on its disk, this run "
                           f"needs about {needed:,} for {answers}", way_out)


def _free_pages(path: Path) -> int:
    """Bytes of the cache file's free pages (a new answer may go there)."""
    try:
        with _read_only(path) as db:
            return db.execute("PRAGMA freelist_count").fetchone()[0] * db.execute("PRAGMA page_size").fetchone()[0]
    except sqlite3.Error:
        return 0
