"""A judgement paid for is written somewhere, or not bought: spill files.

``rag-eval`` gives a command that judges one :class:`SpillSink`, which every judgement cache the command
opens is built with (``JudgementCache``'s ``sink``): from the first answer the cache file refuses (its disk fills, or turns
read-only, mid-run), every answer that arrives goes to a *spill file* as it is received (appended
and flushed: a process killed after that loses none). A spill file is JSON lines, a header naming
the cache, then one answer a line (written with its first answers: a folder that refuses them is
left without a file), in the first folder that takes it (the output folder, else the
system's temporary folder). When no folder takes writes either, the cache says so
(``JudgementCache.nowhere``) and the judge sends no further request.

Every run with that cache folds the spill files of its own into the cache before its first
request (:func:`spills_of`: in its output folder, the temporary folder and every output folder an
earlier run of that cache recorded in it, ``rag_eval.metrics.judges.probe``; :func:`import_spill`);
``rag-eval cache import FILE`` folds one by hand. A spill file holds judge answers and cache keys
only (no key, no endpoint credentials).
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
import tempfile
import threading
from contextlib import closing
from datetime import datetime, timezone
from pathlib import Path
from typing import IO
from urllib.parse import quote

from rag_eval.metrics.errors import StorageError, command
from rag_eval.metrics.judges.cache import JudgementCache, Key
from rag_eval.metrics.judges.cache_file import BUSY_SECONDS, disk_problem
from rag_eval.metrics.judges.kept import kept_problem

#: The names of spill files (``judgement-spill-<UTC time>-<pid>.jsonl``).
SPILL_GLOB = "judgement-spill-*.jsonl"
_FORMAT = "rag-eval judgement spill 1"
#: What a spilled line's fields must look like (a cache key is a SHA-256 in hex; keys of a cache made
#: before endpoints were keyed carry the prefix ``unknown-endpoint:``).
_SHAPES = {"key": re.compile(r"(unknown-endpoint:)?[0-9a-f]{64}"), "shared": re.compile(r"[0-9a-f]{64}"),
           "kind": re.compile(r"[a-z][a-z0-9_]{0,63}|target\.(retriever|generator|system)")}
#: Skipped lines named in a message at most.
NAMED = 5


def spill_folders(out: str | Path | None) -> list[Path]:
    """Where spill files go: the output folder ``out`` (when given), then the system's temporary folder."""
    return [*([Path(out).absolute()] if out else []), Path(tempfile.gettempdir())]


def _lines(entries: list[tuple[Key, str, str]]) -> str:
    return "".join(json.dumps({"key": k.own, "shared": k.shared, "kind": kind, "value": text}, ensure_ascii=False)
                   + "\n" for k, kind, text in entries)


def _header_line(cache: JudgementCache) -> str:
    """A spill file's first line, naming ``cache`` (written with the file's first answers, never alone)."""
    return json.dumps({"format": _FORMAT, "cache": str(Path(cache.path).resolve())}) + "\n"


class SpillSink:
    """Appends the answers a judgement cache refuses to its spill file, in the first of ``folders``
    that takes them (a folder that fails later is left for the next one, with a new file).

    Called as ``sink(cache, entries)``: whether the answers ``(key, kind, value as JSON text)`` are
    in a spill file now. :attr:`files` lists each cache's spill files (by its path), :attr:`problems`
    why folders refused."""

    def __init__(self, folders: list[Path]) -> None:
        self.folders = list(folders)
        self.files: dict[str, list[Path]] = {}
        self.problems: list[str] = []
        #: The caches that called the sink, by path; the paths of those it could not take answers of.
        self.caches: dict[str, JudgementCache] = {}
        self.refused: set[str] = set()
        self._open: dict[str, tuple[IO[str], int]] = {}
        self._lock = threading.Lock()

    def __call__(self, cache: JudgementCache, entries: list[tuple[Key, str, str]]) -> bool:
        text = _lines(entries)
        with self._lock:
            self.caches[cache.path] = cache
            handle, start = self._open.get(cache.path, (None, 0))
            for index in range(start, len(self.folders)):
                folder, new = self.folders[index], handle is None
                try:
                    if handle is None:
                        handle = self._new_file(cache, folder)
                        self._open[cache.path] = (handle, index)
                    handle.write((_header_line(cache) if new else "") + text)
                    handle.flush()
                    return True
                except OSError as exc:
                    self.problems.append(f"{folder}: {disk_problem(folder, exc)}")
                    self._open.pop(cache.path, None)
                    if handle is not None:
                        with contextlib.suppress(OSError):
                            handle.close()
                        if new:  # a file without one answer in it is no spill file: removed
                            self._remove(cache, Path(handle.name))
                    handle = None
            self.refused.add(cache.path)
            return False

    def _new_file(self, cache: JudgementCache, folder: Path) -> IO[str]:
        folder.mkdir(parents=True, exist_ok=True)
        name = f"judgement-spill-{datetime.now(timezone.utc):%Y%m%dT%H%M%S%fZ}-{os.getpid()}.jsonl"
        handle = open(folder / name, "x", encoding="utf-8")  # kept open: answers are appended
        self.files.setdefault(cache.path, []).append(folder / name)
        return handle

    def _remove(self, cache: JudgementCache, path: Path) -> None:
        with contextlib.suppress(OSError):
            path.unlink()
        self.files[cache.path].remove(path)

    def close(self) -> None:
        """Sync and close the spill files."""
        with self._lock:
            for handle, _ in self._open.values():
                if handle is not None:
                    with contextlib.suppress(OSError):
                        handle.flush()
                        os.fsync(handle.fileno())
                        handle.close()
            self._open.clear()


def settle(cache: JudgementCache, sink: SpillSink) -> list[Path]:
    """At the end of a run: the answers ``cache`` still holds in memory (its file and the spill
    folders refused them) are written to the file if it takes them now, else to a spill file; the
    spill files of ``cache`` (``[]``: every answer is in the cache).

    Raises
    ------
    StorageError
        When answers paid for could be written nowhere (they are lost with this process: named, with the way out).
    """
    cache.flush()
    entries = cache.take_unwritten()
    if entries and not sink(cache, entries):
        raise StorageError(cache.path, f"{len(entries)} judgements paid for could not be written to the cache "
                           f"({cache.problem}) nor to a spill file ({'; '.join(dict.fromkeys(sink.problems))})",
                           "they are lost: free space on one of these disks before the next run")
    return sink.files.get(cache.path, [])


def _header(line: str) -> dict | None:
    """The spill header on ``line``, else ``None``."""
    try:
        header = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return header if isinstance(header, dict) and header.get("format") == _FORMAT else None


def _entry(line: str) -> tuple[Key, str, str]:
    """The answer on a spilled ``line``.

    Raises
    ------
    ValueError
        Naming the field that is missing or not of its shape (a value must be JSON text of an answer
        of its kind: ``rag_eval.metrics.judges.kept``).
    """
    try:
        item = json.loads(line)
    except (ValueError, RecursionError):
        raise ValueError("not a JSON object") from None
    if not isinstance(item, dict):
        raise ValueError("not a JSON object")
    for field, shape in _SHAPES.items():
        if not isinstance(item.get(field), str) or not shape.fullmatch(item[field]):
            raise ValueError(f"{field}: missing or not a cache {field}")
    try:
        value = json.loads(item["value"], parse_constant=_no_constant)
    except (ValueError, TypeError, RecursionError):
        raise ValueError("value: missing or not JSON text") from None
    problem = kept_problem(item["kind"], value)
    if problem is not None:
        raise ValueError(f"value: not an answer of kind {item['kind']} ({problem})")
    return Key(item["key"], item["shared"]), item["kind"], item["value"]


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is no JSON value")


def read_spill(path: str | Path) -> tuple[dict, list[tuple[Key, str, str]], list[str]]:
    """The header, the answers ``(key, kind, value as JSON text)`` and the lines skipped
    (``"line N: field: why"``, lines counted from 1, the header being line 1) of the spill file ``path``.

    Raises
    ------
    StorageError
        For a file that cannot be read or is no spill file (its first line is not a spill header).
    """
    try:
        with open(path, encoding="utf-8") as handle:
            header = _header(handle.readline())
            lines = handle.read().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise StorageError(path, f"the spill file cannot be read ({exc})") from None
    if header is None:
        raise StorageError(path, "not a judgement spill file (its first line is not a spill header)",
                           "name a judgement-spill-*.jsonl file a run wrote")
    entries, skipped = [], []
    for number, line in enumerate(lines, 2):
        try:
            entries.append(_entry(line))
        except ValueError as exc:
            skipped.append(f"line {number}: {exc}")
    return header, entries, skipped


def skipped_note(skipped: list[str]) -> str:
    """``""``, or how many spilled lines were skipped and the first :data:`NAMED` of them."""
    if not skipped:
        return ""
    more = f"; … and {len(skipped) - NAMED} more" if len(skipped) > NAMED else ""
    return f" ({len(skipped)} unreadable lines skipped: {'; '.join(skipped[:NAMED])}{more})"


def import_spill(cache: JudgementCache, path: str | Path) -> tuple[int, list[str]]:
    """Fold the spill file ``path`` into ``cache`` and delete it: ``(answers, lines skipped)``. An
    answer the cache already holds is kept as it is (never replaced by a spilled one); a file without
    one readable answer is kept.

    Raises
    ------
    StorageError
        When the file cannot be read, or the cache does not take its answers (the file is kept).
    """
    _, entries, skipped = read_spill(path)
    if not entries:  # nothing to fold: kept, for a person to look at
        return 0, skipped
    if not cache.store(entries):
        raise StorageError(cache.path, f"the judgement cache cannot take the answers of {path} ({cache.problem})",
                           "the spill file is kept: free space on the cache's disk (or make it writable), then "
                           f"`{command(f'cache import {path}')}`")
    with contextlib.suppress(OSError):
        Path(path).unlink()
    return len(entries), skipped


def recorded_folders(cache_path: str | Path) -> list[Path]:
    """The output folders runs of the judgement cache ``cache_path`` recorded in it (where they
    would have put a spill file), newest first; ``[]`` when it records none or cannot be read."""
    try:
        with closing(sqlite3.connect(f"file:{quote(str(cache_path))}?mode=ro", uri=True, timeout=BUSY_SECONDS)) as db:
            rows = db.execute("SELECT folder FROM spill_folders WHERE folder != '' ORDER BY used DESC").fetchall()
    except sqlite3.Error:
        return []
    return [Path(folder) for (folder,) in rows]


def spills_of(cache_path: str | Path, folders: list[Path]) -> list[Path]:
    """The spill files in ``folders`` and in the folders the cache recorded (:func:`recorded_folders`)
    written for the judgement cache ``cache_path`` (their header names the same file); spill files
    of other caches, files that are no spill file, and anything but this user's regular files, are left."""
    mine = str(Path(cache_path).resolve())
    found = []
    for folder in dict.fromkeys([*folders, *recorded_folders(cache_path)]):
        for path in sorted(folder.glob(SPILL_GLOB)) if folder.is_dir() else []:
            try:  # a regular file of this user only (a FIFO would hang the run; another user's file is not ours)
                if not path.is_file() or path.is_symlink() or path.stat().st_uid != os.getuid():
                    continue
                with open(path, encoding="utf-8") as handle:
                    header = _header(handle.readline(1 << 16))
            except (OSError, UnicodeDecodeError):
                continue  # not ours to judge: `rag-eval cache import` says what is wrong with it
            if header is not None and header.get("cache") == mine:
                found.append(path)
    return found
