"""A judgement paid for is written somewhere, or not bought: the judgement cache's checks and spill files.

Before a run's first request, :func:`check_writable` makes sure the cache's folder takes a write
(a probe file of :data:`PROBE_BYTES`): on a full or read-only disk the run stops there, having
sent nothing. Answers the cache refuses later (its disk fills, or turns read-only, mid-run) are
kept in memory (``rag_eval.metrics.judges.cache``); those it still refuses when the run ends go
to a *spill file* (:func:`write_spill`): JSON lines, a header naming the cache, then one answer a
line, in the first folder that takes it (the output folder, else the system's temporary folder).
The next run with that cache folds every spill file of its own into the cache
(:func:`spills_of`, :func:`import_spill`); ``rag-eval cache import FILE`` folds one by hand.
A spill file holds judge answers and cache keys only (no key, no endpoint credentials).
"""
from __future__ import annotations

import contextlib
import json
import os
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from rag_eval.metrics.errors import StorageError
from rag_eval.metrics.judges.cache import JudgementCache, Key, disk_problem

#: Bytes the probe writes in the cache's folder: a disk with less room cannot take a run's first answers.
PROBE_BYTES = 64 * 1024
#: The names of spill files (``judgement-spill-<UTC time>-<pid>.jsonl``).
SPILL_GLOB = "judgement-spill-*.jsonl"
_FORMAT = "rag-eval judgement spill 1"


def check_writable(path: str | Path, way_out: str) -> None:
    """Check that the judgement cache ``path`` can take writes: its folder is created, takes a probe
    file of :data:`PROBE_BYTES` (written, synced, deleted) and the file, if any, is writable.

    Raises
    ------
    StorageError
        Naming the cache, why (no space left, read-only file system, permissions) and ``way_out``.
    """
    folder = Path(path).absolute().parent
    probe = folder / f".rag-eval-probe-{os.getpid()}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with open(probe, "wb") as handle:
            handle.write(b"\0" * PROBE_BYTES)
            handle.flush()
            os.fsync(handle.fileno())
        if Path(path).exists() and not os.access(path, os.W_OK):
            raise PermissionError(f"[Errno 13] Permission denied: {str(path)!r}")
    except OSError as exc:  # the error without the probe's name: the cache's folder is what the user acts on
        cause = disk_problem(folder, OSError(exc.errno, exc.strerror) if exc.strerror else exc)
        raise StorageError(path, f"the judgement cache cannot take writes: {cause}", way_out) from None
    finally:
        with contextlib.suppress(OSError):
            probe.unlink(missing_ok=True)


def spill_folders(out: str | Path | None) -> list[Path]:
    """Where spill files go and are looked for: the output folder ``out`` (when given), then the
    system's temporary folder."""
    return [*([Path(out).absolute()] if out else []), Path(tempfile.gettempdir())]


def write_spill(cache: JudgementCache, folders: list[Path]) -> Path | None:
    """Hand the answers ``cache`` still refuses (after a last :meth:`~JudgementCache.flush`) to a
    spill file in the first of ``folders`` that takes it whole: its path, or ``None`` when the cache
    took everything.

    Raises
    ------
    StorageError
        When no folder takes the file (the answers are lost with this process: named, with the way out).
    """
    cache.flush()
    entries = cache.take_unwritten()
    if not entries:
        return None
    header = {"format": _FORMAT, "cache": str(Path(cache.path).absolute()), "answers": len(entries)}
    lines = [json.dumps(header)] + [json.dumps({"key": k.own, "shared": k.shared, "kind": kind, "value": text},
                                               ensure_ascii=False) for k, kind, text in entries]
    name = f"judgement-spill-{datetime.now(timezone.utc):%Y%m%dT%H%M%S%fZ}-{os.getpid()}.jsonl"
    problems = []
    for folder in folders:
        target = folder / name
        try:
            folder.mkdir(parents=True, exist_ok=True)
            with open(target, "w", encoding="utf-8") as handle:
                handle.write("\n".join(lines) + "\n")
                handle.flush()
                os.fsync(handle.fileno())
            return target
        except OSError as exc:
            problems.append(f"{folder}: {disk_problem(folder, exc)}")
            with contextlib.suppress(OSError):
                target.unlink(missing_ok=True)
    raise StorageError(cache.path, f"{len(entries)} judgements paid for could not be written to the cache "
                       f"({cache.problem}) nor to a spill file ({'; '.join(problems)})",
                       "they are lost: free space on one of these disks before the next run")


def _header(line: str) -> dict | None:
    """The spill header on ``line``, else ``None``."""
    try:
        header = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return header if isinstance(header, dict) and header.get("format") == _FORMAT else None


def read_spill(path: str | Path) -> tuple[dict, list[tuple[Key, str, str]], int]:
    """The header, the answers ``(key, kind, value as JSON text)`` and the count of unreadable lines
    (a spill file cut short) of the spill file ``path``.

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
    entries, bad = [], 0
    for line in lines:
        try:
            item = json.loads(line)
            json.loads(item["value"])
            entries.append((Key(str(item["key"]), str(item["shared"])), str(item["kind"]), item["value"]))
        except (ValueError, TypeError, KeyError, RecursionError):
            bad += 1
    return header, entries, bad


def import_spill(cache: JudgementCache, path: str | Path) -> tuple[int, int]:
    """Fold the spill file ``path`` into ``cache`` and delete it: ``(answers, unreadable lines)``; a file
    without one readable answer is kept.

    Raises
    ------
    StorageError
        When the file cannot be read, or the cache does not take its answers (the file is kept).
    """
    _, entries, bad = read_spill(path)
    if not entries:  # nothing to fold: kept, for a person to look at
        return 0, bad
    if not cache.store(entries):
        raise StorageError(cache.path, f"the judgement cache cannot take the answers of {path} ({cache.problem})",
                           "the spill file is kept: free space on the cache's disk (or make it writable), then "
                           f"`rag-eval cache import {path}`")
    with contextlib.suppress(OSError):
        Path(path).unlink()
    return len(entries), bad


def spills_of(cache_path: str | Path, folders: list[Path]) -> list[Path]:
    """The spill files in ``folders`` written for the judgement cache ``cache_path`` (their header
    names the same file); spill files of other caches, files that are no spill file, and anything but
    this user's regular files, are left."""
    mine = str(Path(cache_path).absolute())
    found = []
    for folder in dict.fromkeys(folders):
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
