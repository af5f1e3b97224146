"""Command line: register a dataset version and materialize the evaluation graph for it.

``rag-eval run`` (the README's main command) registers a JSONL file as a dataset
version (a dynamic partition), runs ``evaluation_job`` for it in-process against a
project-local Dagster instance (``DAGSTER_HOME``, default ``dagster_home/``), shows
progress, prints the summary table and writes ``summary.json`` and
``results.parquet`` under ``out/<version>/``. The arguments are declared here; what they
mean is ``rag_eval.orchestration.settings`` (a run's settings, ``RunSettings``) and
``rag_eval.orchestration.parsing`` (the resources), what the commands do ``rag_eval.orchestration.commands``
and what they print ``rag_eval.orchestration.report``.
"""
from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rag_eval.orchestration.commands import cmd_backfill, cmd_register, cmd_run, start_judge_check
from rag_eval.orchestration.data_commands import cmd_calibrate, cmd_convert_trec
from rag_eval.orchestration.instance import dagster_home, prepare_instance
from rag_eval.orchestration.dry_run import expected_answers, most_answers
from rag_eval.orchestration.parsing import add_cascade_arguments, add_judge_arguments, named_file
from rag_eval.orchestration.runs import after_startup

if TYPE_CHECKING:  # the metrics are imported once the command starts (test_house: the CLI module imports without them)
    from rag_eval.metrics.core.registry import Registry

DEFAULT_DATASET = Path("examples/fiqa/samples.jsonl")


def add_custom_metrics(parser: argparse.ArgumentParser) -> None:
    """The ``--custom-metrics FILE`` option (``rag_eval.metrics.core.custom``)."""
    parser.add_argument("--custom-metrics", metavar="FILE",
                        help="YAML file of custom metrics (default: the one [tool.rag_eval.metrics] custom_metrics of "
                             "./pyproject.toml names, else ./custom_metrics.yaml when present); the Dagster UI and "
                             "daemon read the same setting where they start")


def command_registry(args: argparse.Namespace) -> Registry:
    """The command's metric registry, built once as it starts (``rag_eval.metrics.core.registry.build_registry``):
    the built-in metrics, the custom metrics of ``--custom-metrics FILE`` (else the file
    ``[tool.rag_eval.metrics] custom_metrics`` of ``./pyproject.toml`` names, else ``./custom_metrics.yaml``:
    ``custom_metrics_file``) and the
    installed plugins'. The handlers take it from ``args.registry``; the in-process runs use it as their
    definitions' (``rag_eval.orchestration.parsing.definitions``).

    Raises
    ------
    SettingsError
        For a file with an invalid definition (naming the file, the metric and the field;
        for ``./custom_metrics.yaml`` found in the working directory, saying so), a plugin
        that cannot be loaded, or a setting ``custom_metrics_file`` refuses.
    NotFoundError, StorageError
        For a file that is not there or cannot be read.
    """
    from rag_eval.metrics.core.custom import CUSTOM_METRICS_FILE, custom_metrics_file
    from rag_eval.metrics.core.registry import build_registry
    from rag_eval.metrics.errors import SettingsError

    named = getattr(args, "custom_metrics", None)
    found = custom_metrics_file(named)
    try:
        return build_registry(found)
    except (OSError, ValueError) as exc:
        if named or found != Path(CUSTOM_METRICS_FILE).resolve() or not str(exc).startswith(str(found)):
            raise  # not the file found in the working directory
        raise SettingsError(f"{exc} (every rag-eval command reads ./custom_metrics.yaml when there is one: fix it, "
                            "or name another file with --custom-metrics or [tool.rag_eval.metrics] custom_metrics "
                            "in ./pyproject.toml)") from None


def build_parser() -> argparse.ArgumentParser:
    """The ``rag-eval`` argument parser."""
    parser = argparse.ArgumentParser(prog="rag-eval", description=__doc__.splitlines()[0])
    parser.set_defaults(uses_instance=True)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, handler, helptext in (("run", cmd_run, "register a dataset version and evaluate it"),
                                    ("register", cmd_register, "register a dataset version only"),
                                    ("backfill", cmd_backfill, "evaluate a range of registered versions")):
        p = sub.add_parser(name, help=helptext)
        if name == "backfill":
            p.add_argument("--from", dest="start", help="first version key (inclusive; default the first)")
            p.add_argument("--to", dest="end", help="last version key (inclusive; default the last)")
        else:
            p.add_argument("dataset", nargs="?", default=str(DEFAULT_DATASET),
                           help=f"JSONL file of samples (default {DEFAULT_DATASET})")
            p.add_argument("--dataset-version", help="dataset version key (default: the key of a version with the "
                                                     "same content, else <UTC time>-<name>-<content hash>)")
            p.add_argument("--replace", action="store_true", help="replace the content of an existing version")
            if name == "run":
                p.add_argument("--force", action="store_true",
                               help="evaluate even when Dagster reports the version up to date (its ingestion, "
                                    "the selected metrics and the summary materialized and not stale, by a run "
                                    "with the same options and judge, its reports in place): by default that "
                                    "run's summary is shown and nothing is run")
            p.add_argument("--meta", help="the version's meta.json (retriever, generator...; default: the meta.json "
                                          "beside the dataset, if any)")
        p.add_argument("--max-rejected-share", type=float, metavar="SHARE",
                       help="share of lines no selected metric can use above which a version fails (default: the "
                            "version's own, else 0.05); register and run keep it with the version, so a launch from "
                            "the UI, a backfill or the automation uses it too; backfill uses it for these runs")
        p.add_argument("--datasets", default="datasets", help="folder of dataset versions (default datasets/)")
        p.add_argument("--out", default="out", help="folder of reports and rag_eval.duckdb (default out/)")
        p.set_defaults(handler=handler)
        if name in ("run", "backfill"):
            p.set_defaults(judges=True, expected=expected_answers, most=most_answers)
            p.add_argument("--metrics", default="core",
                           help="metrics and families to compute, comma-separated: metric names, core (default), "
                                "ragas, azure, document_retrieval, custom, plugin, all")
            add_custom_metrics(p)
            p.add_argument("--scale", type=int, choices=(1, 10), default=1,
                           help="10 presents the [0, 1] metrics on dingo's 0-10 scale in the table, summary.json "
                                "and --threshold values")
            p.add_argument("--dingo-summary", action="store_true",
                           help="also write summary_dingo.json in dingo 2.5's exact layout")
            p.add_argument("--threshold", action="append", metavar="METRIC=VALUE",
                           help="pass/fail threshold of a metric, e.g. faithfulness=0.7 (repeatable)")
            p.add_argument("--metric-option", action="append", metavar="METRIC.OPTION=VALUE",
                           help="per-metric threshold, model, temperature or strictness, e.g. "
                                "answer_relevancy.strictness=5 (repeatable)")
            p.add_argument("--executor", choices=("local", "spark"), default="local",
                           help="score in this process (default) or in Spark tasks")
            p.add_argument("--spark-master", default="local[2]", help="Spark master URL (default local[2])")
            p.add_argument("--parallelism", type=int, default=2, help="Spark tasks per metric (default 2)")
            p.add_argument("--verifier", metavar="FILE", type=named_file, help="a judge variant rag-eval align wrote, read by its "
                           "content: the offline judge's verifier weights (default the shipped verifier.json), or an "
                           "LLM judge's labelled examples, put into its statement verification prompts (default none)")
            judge = add_judge_arguments(p)
            add_cascade_arguments(p)
            if name == "run":
                judge.add_argument("--dry-run", action="store_true", help="print the requests and tokens the run "
                                   "would send (after the cache) and their price; send and register nothing")
                judge.add_argument("--price", metavar="PROMPT[,COMPLETION]", help="with --dry-run or a --strong-budget in "
                                   "money: price per million prompt (and completion) tokens, e.g. 0.15,0.60")
    calibrate = sub.add_parser("calibrate", help="agreement of the judge with human labels (examples/calibration)")
    calibrate.add_argument("labels", help="JSONL of pairwise or per-sample labels")
    calibrate.add_argument("--json", help="also write the report as JSON to this file")
    calibrate.add_argument("--offline", action="store_true", help="use the offline judge even if an LLM is configured")
    add_custom_metrics(calibrate)
    calibrate.set_defaults(handler=cmd_calibrate, judges=True)
    from rag_eval.orchestration.align import add_arguments as add_align_arguments

    add_align_arguments(sub.add_parser("align", help="align the judge to a version's faithfulness labels: refit the offline "
                                                       "verifier, or give an LLM judge examples of its mistakes"))
    from rag_eval.orchestration.sweep import add_arguments

    sweep = sub.add_parser("sweep", help="run and rank the configurations of a RAG system (a target file)")
    add_arguments(sweep)
    add_custom_metrics(sweep)  # a sweep's metrics may be custom ones
    convert = sub.add_parser("convert-trec", help="TREC qrels + run files to a JSONL dataset")
    convert.add_argument("qrels", help="qrels file: qid iteration docno label")
    convert.add_argument("run", help="run file: qid Q0 docno rank score tag")
    convert.add_argument("-o", "--output", required=True, help="JSONL file to write")
    convert.set_defaults(handler=cmd_convert_trec)
    from rag_eval.orchestration.testset import add_arguments as add_testset_arguments

    add_testset_arguments(sub.add_parser("testset", help="write a test set from a folder of documents"))
    from rag_eval.orchestration.traffic import add_arguments as add_traffic_arguments

    add_traffic_arguments(sub.add_parser("traffic", help="evaluate production traffic: traces in, a judged sample "
                                                         "per day, drift against the trailing days"))
    from rag_eval.orchestration.gate_cli import add_gate_commands

    add_gate_commands(sub)  # compare, gate, tag (the regression gate)
    from rag_eval.orchestration.annotate import add_annotate_commands

    add_annotate_commands(sub)  # annotate export | import (human labels)
    from rag_eval.orchestration.cache_cli import add_cache_commands

    add_cache_commands(sub)  # cache import (a spill file)
    from rag_eval.orchestration.judge_sim_command import add_arguments as add_judge_sim_arguments

    add_judge_sim_arguments(sub.add_parser("serve-judge-sim", help="serve a simulated OpenAI-compatible LLM "
                                           "provider on 127.0.0.1 (latency, rate limits, faults) to try the LLM judge"))
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``rag-eval``. Exit status: 0 done; 1 the run failed (a step or a
    blocking check, for a reason the user can fix); 2 bad arguments or input, or a judgement cache that
    cannot take writes (nothing sent); 3 done, but some results are judge errors; 4 the regression gate
    failed (``rag-eval compare|gate``); 5 done, but judgements paid for went to the spill file named on
    stderr (2 when no place took them: ``rag_eval.orchestration.cache_cli.exit_status``); 70 a bug: "internal error", its traceback and where to report it
    (``rag_eval.metrics.errors``, ``rag_eval.orchestration.failures``).

    Python's cyclic garbage collector is off while the command starts up (its imports, the
    Dagster instance, ``run``'s up-to-date check), up to :func:`rag_eval.orchestration.runs.after_startup`:
    what start-up builds stays alive, and collecting it over and over as it grew took a large share
    of a zero-request re-run (docs/performance.md). The caller's setting is restored on return
    (``rag_eval.metrics.core.collector.collector``; importing ``rag_eval.metrics`` for it, before the pause,
    costs the same CPU with the collector on or off)."""
    from rag_eval.metrics.core.collector import collector

    with collector(enabled=False):
        return _main(argv)


def _main(argv: list[str] | None) -> int:
    """The command: what the user can fix is one ``error: ...`` line and status 2; anything else a bug
    (``rag_eval.orchestration.failures.report_bug``: its traceback, status 70)."""
    try:
        return _command(argv)
    except Exception as exc:  # noqa: BLE001 - every failure is either the user's (one line) or a bug (reported)
        from rag_eval.orchestration.failures import report_bug, user_line

        line = user_line(exc)
        if line is None:
            return report_bug(exc)
        print(line, file=sys.stderr)
        return 2


def _command(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    args.registry = command_registry(args)
    judging = getattr(args, "judges", False) and not getattr(args, "dry_run", False)
    # Imported here, not with this module: `rag_eval.metrics` takes a second to import, and until `entry` has
    # installed its handlers a Ctrl-C would print a traceback (tests/reliability/test_crash.py).
    from rag_eval.orchestration.cache_cli import Stopped, after_run, before_run, exit_status

    # A judgement paid for is written somewhere, or not bought: the cache takes writes, or nothing is sent; every
    # judgement cache the command opens spills to its sink, through the judges it builds (``built_judges``: a field
    # of the judge resources ``settings.judge_resource`` makes of the arguments) or given ``args.spill``.
    args.spill = before_run(args) if judging else None
    if args.spill is not None:
        from rag_eval.metrics.judges.built import BuiltJudges

        args.built_judges = BuiltJudges(args.spill)
    if judging and args.command in ("run", "backfill"):
        start_judge_check(args)  # the endpoint check's requests go out while the Dagster instance opens
    # run and backfill end their start-up themselves, once evaluating
    with after_startup() if args.command not in ("run", "backfill") else contextlib.nullcontext():
        try:  # the gate's and the cache's commands read files only
            status = _in_instance(args) if args.uses_instance else run_handler(args)
        except BaseException as failed:  # Ctrl-C too: what the cache could not take goes to a spill file
            settled = after_run(args.spill)
            if isinstance(failed, KeyboardInterrupt):  # the stop line names the spill files
                raise Stopped(settled.spills) from None
            raise
        settled = after_run(args.spill)
    return exit_status(status, settled.status)


def _in_instance(args: argparse.Namespace) -> int:
    """The command's handler with the Dagster instance open; a storage failure of the instance is one line, status 2."""
    # Entered, so loading definitions reads this instance's defs state, not an ambient one that
    # another instance left behind (Dagster does not reset it; in-process callers: its folder may be gone).
    import sqlite3

    from sqlalchemy.exc import SQLAlchemyError

    try:
        with prepare_instance() as args.instance:
            if args.command != "convert-trec":
                from rag_eval.orchestration.orphans import fail_orphaned_runs

                for run_id in fail_orphaned_runs(args.instance):
                    print(f"note: run {run_id} was left STARTED by a rag-eval process that is gone; marked failed",
                          file=sys.stderr)
            return run_handler(args)
    except (OSError, sqlite3.Error, SQLAlchemyError) as exc:  # the instance's storage (run_handler says the rest)
        if isinstance(exc, OSError) and not exc.errno:  # not the system's: a bug
            raise
        print(instance_unusable(exc), file=sys.stderr)
        return 2


def instance_unusable(error: BaseException) -> str:
    """One line on a Dagster instance whose storage failed: where, why, what to do, what is kept."""
    from rag_eval.metrics.errors import command
    from rag_eval.metrics.judges.cache_file import disk_problem

    home = dagster_home()
    cause = disk_problem(home, getattr(error, "orig", None) or error).splitlines()[0]
    advice = "a file of it is damaged: move the folder aside (its run history and registered versions go with it; " \
             f"`{command('register')}` adds a version again)" if "malformed" in cause or "not a database" in cause \
        else "free space or make it writable, then run the same command again"
    return f"error: the Dagster instance in DAGSTER_HOME={home} cannot be used: {cause}; {advice}; every judgement " \
           "already answered is kept in the judgement cache"


def run_handler(args: argparse.Namespace) -> int:
    """The command's handler; what the user can fix (``rag_eval.orchestration.failures.user_line``: a
    ``UserError``, a storage or other system error) is ``error: ...`` and status 2; a bug is raised."""
    from rag_eval.orchestration.failures import user_line

    try:
        return args.handler(args)
    except Exception as exc:
        line = user_line(exc, getattr(args, "out", "out"), getattr(args, "datasets", "datasets"))
        if line is None:
            raise
        print(line, file=sys.stderr)
        return 2


def _stop(signum: int, frame) -> None:
    raise KeyboardInterrupt


def _relay_ctrl_c(wake: int) -> None:
    """Take Ctrl-C in this process only. A terminal sends SIGINT to its whole foreground process
    group, so Dagster's log-mirroring helpers and the great-expectations worker would each die
    printing a traceback. SIGINT is blocked in this thread before any other thread or child
    exists (both inherit the mask, so the children never see it); a thread of its own takes it
    (``sigwait``), notes it on ``wake`` and interrupts the main thread with SIGUSR1, whose handler
    is SIGINT's current one (:func:`_stop`, or Dagster's while it runs a step): a blocking wait
    of the main thread is interrupted as by SIGINT itself."""
    import os
    import signal
    import threading

    def as_sigint(signum: int, frame) -> None:
        handler = signal.getsignal(signal.SIGINT)
        if not callable(handler):
            raise KeyboardInterrupt
        handler(signal.SIGINT, frame)

    def relay(main: int) -> None:
        while True:
            signal.sigwait({signal.SIGINT})
            os.write(wake, bytes([signal.SIGINT]))
            signal.pthread_kill(main, signal.SIGUSR1)

    signal.signal(signal.SIGUSR1, as_sigint)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    threading.Thread(target=relay, args=(threading.main_thread().ident,), daemon=True, name="ctrl-c").start()


def stopped(signals: bytes, spilled: Sequence[Path] = ()) -> int:
    """Say in one line that the command was stopped (``signals``: the numbers of the signals
    received, as the wake-up pipe got them) and what is kept (``spilled``: the spill files it wrote,
    ``rag_eval.orchestration.cache_cli.Stopped``); the shell's status for the signal (130 for SIGINT,
    143 for SIGTERM)."""
    import signal

    signum = next((s for s in signals if s in (signal.SIGINT, signal.SIGTERM)), signal.SIGINT)
    name = "SIGINT (Ctrl-C)" if signum == signal.SIGINT else "SIGTERM"
    kept = f"the judgement cache and the spill file {', '.join(map(str, spilled))} (the next run folds it into the " \
           "cache)" if spilled else "the judgement cache"
    print(f"rag-eval: stopped by {name}; every judgement already answered is kept in {kept} and nothing "
          "half-written was kept: run the same command again to finish (it sends only what is left)", file=sys.stderr)
    return 128 + signum


def entry() -> None:
    """The ``rag-eval`` program: :func:`main`, then the process ends at once with its status.
    SIGINT (Ctrl-C) and SIGTERM stop it cleanly: one line (:func:`stopped`), no traceback.

    Its outputs are written and its databases committed when ``main`` returns; what is left
    is the interpreter's teardown, where a native library's threads (pyarrow's jemalloc
    background thread, DuckDB's and BLAS's pools) could abort the process ("terminate called
    without an active exception", status -6 after a run that succeeded; seen once in CI with
    two runs at once). ``os._exit`` skips that teardown, after flushing what was printed."""
    import os
    import signal

    # Dagster takes SIGINT and SIGTERM over while it executes a run (its own handler, then an error in the
    # step): every signal's number also reaches this pipe, so the one that stopped the command is known.
    received, wake = os.pipe()
    for end in (received, wake):
        os.set_blocking(end, False)
    signal.set_wakeup_fd(wake, warn_on_full_buffer=False)
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _stop)
    _relay_ctrl_c(wake)
    try:
        status = main()
    except KeyboardInterrupt as stop:
        try:
            signals = os.read(received, 64)
        except BlockingIOError:
            signals = b""
        status = stopped(signals, getattr(stop, "spills", ()))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


if __name__ == "__main__":
    entry()
