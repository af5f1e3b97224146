"""The judgement cache around ``rag-eval run`` and ``backfill`` (a judgement paid for is written
somewhere, or not bought), and ``rag-eval cache import FILE``.

Before the first request (the endpoint check included) :func:`before_run` checks that the LLM
judge's cache takes writes (``rag_eval.metrics.judges.spill.check_writable``) and folds into it
the spill files earlier runs left for it; when the run ends, :func:`after_run` writes what the
cache still refuses to a spill file and says so in one line (exit status
``rag_eval.metrics.errors.EXIT_SPILLED``).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rag_eval.metrics.errors import EXIT_SPILLED

#: What to do when the cache cannot take writes before the run.
WAY_OUT = ("nothing was sent: free space on its disk (or make it writable), or put the cache on another disk with "
           "--cache-path FILE, then run again")


def cache_path(args: argparse.Namespace) -> str | None:
    """The judgement cache the run's LLM judge would use (``--cache-path``, else the default);
    ``None`` for the offline judge, or options the run itself refuses (it says why)."""
    from rag_eval.metrics.judges.config import LLMConfig

    try:
        config = LLMConfig.from_env(base_url=getattr(args, "base_url", None), cache_path=getattr(args, "cache_path", None))
    except ValueError:
        return None
    return config.cache_path if config.configured else None


def before_run(args: argparse.Namespace) -> None:
    """Check the run's judgement cache takes writes, then fold the spill files left for it (in
    ``--out``, then the system's temporary folder) into it, a note on stderr for each.

    Raises
    ------
    StorageError
        The cache cannot take writes (nothing has been sent), or it does not take a spill file's answers.
    """
    from rag_eval.metrics.judges.cache import JudgementCache
    from rag_eval.metrics.judges.spill import check_writable, import_spill, spill_folders, spills_of

    path = cache_path(args)
    if path is None:
        return
    check_writable(path, WAY_OUT)
    spills = spills_of(path, spill_folders(args.out))
    if not spills:
        return
    cache = JudgementCache(path)
    try:
        for spill in spills:
            answers, bad = import_spill(cache, spill)
            print(f"note: {answers} judgements paid for by an earlier run folded from the spill file {spill} into the "
                  f"judgement cache {path}" + (f" ({bad} unreadable lines skipped)" if bad else ""), file=sys.stderr)
    finally:
        cache.close()


def after_run(args: argparse.Namespace) -> int | None:
    """Write the answers the run's judgement caches still refuse to a spill file (in ``--out``, else
    the system's temporary folder), saying so in one line on stderr: :data:`EXIT_SPILLED`, or
    ``None`` when every answer is in its cache. Never raises: when no folder takes the spill file
    either, that is the line."""
    from rag_eval.assets.resources import built_judges
    from rag_eval.metrics.errors import StorageError
    from rag_eval.metrics.judges.spill import spill_folders, write_spill

    status = None
    for cache in dict.fromkeys(j.cache for j in built_judges() if getattr(j, "cache", None) is not None):
        try:
            spill = write_spill(cache, spill_folders(getattr(args, "out", None)))
        except StorageError as exc:
            print(f"error: {exc}", file=sys.stderr)
            status = EXIT_SPILLED
            continue
        if spill is not None:
            print(f"error: the judgement cache {cache.path} could not take every judgement paid for ({cache.problem}): "
                  f"they are in the spill file {spill}; free space on the cache's disk (or make it writable): the next "
                  f"run folds it into the cache, or `rag-eval cache import {spill}` does now", file=sys.stderr)
            status = EXIT_SPILLED
    return status


def add_cache_commands(sub: argparse._SubParsersAction) -> None:
    """``rag-eval cache import FILE [--cache-path FILE]``."""
    cache = sub.add_parser("cache", help="the judgement cache: fold a spill file into it")
    commands = cache.add_subparsers(dest="cache_command", required=True)
    imported = commands.add_parser("import", help="fold a spill file (judgements the cache could not take) into it")
    imported.add_argument("file", help="a judgement-spill-*.jsonl file a run wrote")
    imported.add_argument("--cache-path", help="judgement cache file (default: the LLM judge's)")
    imported.set_defaults(handler=cmd_cache_import, uses_instance=False)


def cmd_cache_import(args: argparse.Namespace) -> int:
    """Fold ``args.file`` into the judgement cache and delete it; one line says how many answers."""
    from rag_eval.metrics.judges.cache import JudgementCache
    from rag_eval.metrics.judges.config import LLMConfig
    from rag_eval.metrics.judges.spill import check_writable, import_spill

    path = args.cache_path or LLMConfig.from_env().cache_path
    check_writable(path, "free space on its disk (or make it writable), then import again: the spill file is kept")
    cache = JudgementCache(path)
    try:
        answers, bad = import_spill(cache, args.file)
    finally:
        cache.close()
    print(f"folded {answers} judgements from {Path(args.file)} into the judgement cache {path}" +
          (f"; {bad} unreadable lines skipped" if bad else ""))
    return 0
