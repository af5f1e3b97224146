"""The judgement cache around every command that sends judge requests (a judgement paid for is
written somewhere, or not bought), and ``rag-eval cache import FILE``.

A command whose parser sets ``judges=True`` (``run``, ``backfill``, ``sweep``, ``traffic``,
``calibrate``, ``align``, ``compare``/``gate``, ``testset``) is wrapped by ``rag-eval`` in
:func:`before_run` and :func:`after_run`. Its parser may also set ``expected``: a function of the
arguments giving the answers the command expects to buy (``rag_eval.metrics.judges.probe.Expected``,
from the dry run's model), or ``None`` when they are not known beforehand.

Before the first request (the endpoint check included) :func:`before_run` checks the LLM judge's
cache (``rag_eval.metrics.judges.probe``), folds into it the spill files earlier runs left for it,
and gives the command its spill sink (``rag_eval.metrics.judges.spill.SpillSink``), which ``rag-eval``
hands to every judgement cache the command opens (``rag_eval.metrics.judges.built.BuiltJudges``); when the
command ends, :func:`after_run` settles what those caches refused and says so in one line (exit status
``rag_eval.metrics.errors.EXIT_SPILLED``).
"""
from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from rag_eval.metrics.judges.spill import SpillSink


class Settled(NamedTuple):
    """What :func:`after_run` settled: the exit status it gives (``None``: every answer is in its cache)
    and the spill files the command wrote (the stop line names them: ``rag_eval.orchestration.cli.stopped``)."""

    status: int | None = None
    spills: tuple[Path, ...] = ()


class Stopped(KeyboardInterrupt):
    """The command was stopped (Ctrl-C, SIGTERM) after :func:`after_run` settled: ``spills``, its spill files."""

    def __init__(self, spills: tuple[Path, ...]) -> None:
        super().__init__()
        self.spills = spills


def cache_path(args: argparse.Namespace) -> str | None:
    """The judgement cache the command's LLM judge would use (``--cache-path``, else the default);
    ``None`` for the offline judge (``--offline`` too), or options the command itself refuses (it says why)."""
    from rag_eval.metrics.judges.config import LLMConfig

    if getattr(args, "offline", False):
        return None
    try:
        config = LLMConfig.from_env(base_url=getattr(args, "base_url", None), cache_path=getattr(args, "cache_path", None))
    except ValueError:
        return None
    return config.cache_path if config.configured else None


def way_out(args: argparse.Namespace) -> str:
    """What to do when the cache cannot take writes before the command, naming only options the
    command has: ``--cache-path`` where its parser takes it (``run``, ``backfill``, ``align``,
    ``testset``); the others use the default cache and can free space or make it writable."""
    elsewhere = "or put the cache on another disk with --cache-path FILE, " if hasattr(args, "cache_path") else ""
    return f"nothing was sent: free space on its disk (or make it writable), {elsewhere}then run again"


def expected(args: argparse.Namespace, which: str = "expected"):
    """The answers the command expects to buy (its parser's ``expected``; ``which="most"``: its
    ``most``, a bound found without planning), ``None`` when not known beforehand or when its
    arguments are wrong (the command says why)."""
    from rag_eval.metrics.judges.cache_file import CacheWarning

    estimate = getattr(args, which, None)
    if estimate is None:
        return None
    with warnings.catch_warnings():  # a cache that cannot be written is said once, by the check or the run
        warnings.simplefilter("ignore", CacheWarning)
        try:
            return estimate(args)
        except (OSError, ValueError, KeyError):
            return None


def predicted_refusal(args: argparse.Namespace, needs) -> str | None:
    """What :func:`before_run` would refuse the command with, for ``needs`` answers
    (``rag_eval.metrics.judges.probe.Expected``), judged without writing (a dry run's:
    ``rag_eval.metrics.judges.probe.unwritable`` and the room check); ``None`` when it would not be
    refused, or sends no request."""
    from rag_eval.metrics.errors import StorageError
    from rag_eval.metrics.judges.probe import cache_file, check_room, shown, unwritable

    path = cache_path(args)
    if path is None or not needs.requests:
        return None
    real = cache_file(path)
    refused = unwritable(real)
    try:
        if refused is not None:
            raise StorageError(shown(path, real), f"the judgement cache cannot take writes: {refused}", way_out(args))
        check_room(real, needs, shown(path, real), way_out(args))
    except StorageError as exc:
        return str(exc)
    return None


def before_run(args: argparse.Namespace) -> SpillSink | None:
    """Check the command's judgement cache and its room (``rag_eval.metrics.judges.probe``), fold the
    spill files left for it (in ``--out``, the system's temporary folder and the output folders the
    cache recorded) into it, a note on stderr for each; the command's spill sink (``None`` for the
    offline judge), to give every judgement cache it opens (``JudgementCache``'s ``sink``): the answers
    a cache refuses go to a spill file in ``--out`` or the temporary folder. A cache that cannot take
    writes does not stop a command expecting no request (its spill files wait for a cache that takes them).

    Raises
    ------
    SettingsError
        An empty ``--cache-path``, or one naming a folder.
    StorageError
        The cache cannot take writes or has too little room (nothing has been sent), or it does not
        take a spill file's answers.
    """
    from rag_eval.metrics.errors import StorageError
    from rag_eval.metrics.judges.probe import cache_file, check_room, refusal, shown
    from rag_eval.metrics.judges.spill import SpillSink, spill_folders

    path = cache_path(args)
    if path is None:
        return None
    out = getattr(args, "out", None)
    real = cache_file(path)
    refused = refusal(real, Path(out).absolute() if out else None)
    if refused is not None:
        needs = expected(args)
        if needs is None or needs.requests:
            raise StorageError(shown(path, real), f"the judgement cache cannot take writes: {refused}", way_out(args))
    else:
        fold(real, spill_folders(out))
        try:  # a bound first (no request planned: the common case of a disk with room)
            check_room(real, expected(args, "most"), shown(path, real), way_out(args), bound=True)
        except StorageError:
            check_room(real, expected(args), shown(path, real), way_out(args))
    return SpillSink(spill_folders(out))


def fold(cache_path: Path, folders: list[Path]) -> None:
    """Fold the spill files of ``cache_path`` (``rag_eval.metrics.judges.spill.spills_of``) into it, a note each.

    Raises
    ------
    StorageError
        The cache does not take a spill file's answers (that file is kept).
    """
    from rag_eval.metrics.judges.cache import JudgementCache
    from rag_eval.metrics.judges.spill import import_spill, skipped_note, spills_of

    spills = spills_of(cache_path, folders)
    if not spills:
        return
    cache = JudgementCache(cache_path)
    try:
        for spill in spills:
            answers, skipped = import_spill(cache, spill)
            print(f"note: {answers} judgements paid for by an earlier run folded from the spill file {spill} into the "
                  f"judgement cache {cache_path}{skipped_note(skipped)}", file=sys.stderr)
    finally:
        cache.close()


def after_run(sink: SpillSink | None) -> Settled:
    """Settle the answers the command's judgement caches refused to its ``sink`` (:func:`before_run`'s;
    ``None``: nothing to settle) (``rag_eval.metrics.judges.spill.settle``),
    saying in one line on stderr where they are: :class:`Settled` with the spill files and
    :data:`~rag_eval.metrics.errors.EXIT_SPILLED`, or no status when every answer is in its cache. Never raises: when no folder takes them either (the
    cache, ``--out`` and the temporary folder, each named in the line), or the command stopped buying
    (no place took its answers), that is the line, and :data:`~rag_eval.metrics.errors.EXIT_USER`:
    storage that cannot be written."""
    from rag_eval.metrics.errors import EXIT_SPILLED, EXIT_USER, StorageError, command
    from rag_eval.metrics.judges.spill import settle

    if sink is None:
        return Settled()
    status, spilled = None, []
    for cache in sink.caches.values():
        try:
            spills = settle(cache, sink)
        except StorageError as exc:
            print(f"error: {exc}" + ("; no judgement was bought after that (the rest are judge_error: not sent)"
                                     if cache.path in sink.refused else ""), file=sys.stderr)
            status = EXIT_USER
            continue
        spilled += spills
        stopped = "; no spill folder took writes for a while, so the judgements left were not bought (judge_error: " \
                  "not sent): run again once there is space" if cache.path in sink.refused else ""
        print(f"error: the judgement cache {cache.path} could not take every judgement paid for ({cache.problem}): "
              f"they are in the spill file {', '.join(map(str, spills))}; free space on the cache's disk (or make it "
              f"writable): the next run folds it into the cache, or `{command(f'cache import {spills[0]}')}` does now"
              f"{stopped}", file=sys.stderr)
        status = status or EXIT_SPILLED
    sink.close()
    return Settled(status, tuple(spilled))


def exit_status(status: int, settled: int | None) -> int:
    """The exit status of a command that ended with ``status`` and whose :func:`after_run` gave
    ``settled``: a failure says so first (the spill line is printed), except that answers paid for
    that could be written nowhere (:data:`~rag_eval.metrics.errors.EXIT_USER`) are also why its steps
    failed; judge errors may be the rows not bought."""
    from rag_eval.metrics.errors import EXIT_FAILED, EXIT_JUDGE_ERRORS, EXIT_OK, EXIT_USER

    if settled is not None and status in (EXIT_OK, EXIT_JUDGE_ERRORS, *((EXIT_FAILED,) if settled == EXIT_USER else ())):
        return settled
    return status


def add_cache_commands(sub: argparse._SubParsersAction) -> None:
    """``rag-eval cache import FILE [--cache-path FILE]``."""
    from rag_eval.orchestration.parsing import named_file

    cache = sub.add_parser("cache", help="the judgement cache: fold a spill file into it")
    commands = cache.add_subparsers(dest="cache_command", required=True)
    imported = commands.add_parser("import", help="fold a spill file (judgements the cache could not take) into it")
    imported.add_argument("file", help="a judgement-spill-*.jsonl file a run wrote")
    imported.add_argument("--cache-path", type=named_file,
                          help="judgement cache file (default: the one the spill file's header names)")
    imported.set_defaults(handler=cmd_cache_import, uses_instance=False)


def cmd_cache_import(args: argparse.Namespace) -> int:
    """Fold ``args.file`` into the judgement cache (``--cache-path``, else the one its header names
    when that is an existing judgement cache: a header never creates or changes another file) and
    delete it; one line says how many answers, and names the lines skipped."""
    from rag_eval.metrics.errors import InputError, StorageError
    from rag_eval.metrics.judges.cache import JudgementCache
    from rag_eval.metrics.core.bounded import quote
    from rag_eval.metrics.judges.probe import cache_file, is_judgement_cache, refusal, shown
    from rag_eval.metrics.judges.spill import import_spill, read_spill, skipped_note

    if not Path(args.file).is_file():  # a FIFO would block, a device never end
        raise InputError(f"{args.file}: not a regular file: name a judgement-spill-*.jsonl file a run wrote")
    path = args.cache_path or read_spill(args.file)[0].get("cache")
    if not isinstance(path, str) or not path:
        raise StorageError(args.file, "its header names no judgement cache", "name one with --cache-path FILE")
    if not args.cache_path and not is_judgement_cache(path):  # a file's header never makes or changes another file
        raise StorageError(args.file, f"its header names {quote(path)}, which is not an existing judgement cache",
                           "name the cache to fold it into with --cache-path FILE")
    real = cache_file(path)
    refused = refusal(real, None)
    if refused is not None:
        raise StorageError(shown(path, real), f"the judgement cache cannot take writes: {refused}",
                           "free space on its disk (or make it writable), then import again: the spill file is kept")
    cache = JudgementCache(real)
    try:
        answers, skipped = import_spill(cache, args.file)
    finally:
        cache.close()
    print(f"folded {answers} judgements from {Path(args.file)} into the judgement cache {path}{skipped_note(skipped)}")
    return 0
