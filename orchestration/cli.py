"""Command line: register a dataset version and materialize the evaluation graph for it.

``rag-eval run`` (the README's main command) registers a JSONL file as a dataset
version (a dynamic partition), runs ``evaluation_job`` for it in-process against a
project-local Dagster instance (``DAGSTER_HOME``, default ``dagster_home/``), shows
progress, prints the summary table and writes ``summary.json`` and
``results.parquet`` under ``out/<version>/``.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import warnings
from contextlib import contextmanager
from pathlib import Path

DEFAULT_DATASET = Path("examples/fiqa/samples.jsonl")


def _prepare_instance() -> None:
    """Use the project-local Dagster instance ``dagster_home/`` unless DAGSTER_HOME is set;
    an instance folder without ``dagster.yaml`` gets a copy of the project's. Its storage
    is created by one process at a time (two first runs at once would race on it)."""
    import fcntl

    from dagster import DagsterInstance

    home = Path(os.environ.setdefault("DAGSTER_HOME", str(Path("dagster_home").resolve())))
    home.mkdir(parents=True, exist_ok=True)
    with open(home / ".rag-eval-setup.lock", "w", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        template = Path(__file__).resolve().parent.parent / "dagster_home" / "dagster.yaml"
        if not (home / "dagster.yaml").exists() and template.exists():
            shutil.copyfile(template, home / "dagster.yaml")
        instance = DagsterInstance.get()
        instance.get_runs(limit=1)  # creates the run storage
        instance.get_dynamic_partitions("dataset_version")  # and the event log's


def register(args: argparse.Namespace) -> tuple[str, bool]:
    """Register ``args.dataset`` as a version (``assets.registration``, the rule the
    sensor uses too): ``(key, new)``."""
    from dagster import DagsterInstance

    from assets.registration import register_version
    from assets.resources import DatasetStore

    meta = Path(args.meta) if args.meta else None
    return register_version(DagsterInstance.get(), DatasetStore(root=str(Path(args.datasets).resolve())),
                            Path(args.dataset), args.dataset_version, meta, args.replace)


def _check_out(args: argparse.Namespace) -> None:
    """Refuse an ``--out`` that is not a folder, or whose results database cannot be used,
    before anything is registered."""
    from assets.resources import check_database

    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} is a file: pass a folder for the reports and rag_eval.duckdb")
    check_database(out / "rag_eval.duckdb", say=lambda message: print(message, file=sys.stderr))


@contextmanager
def _only_run_of(version: str, out: Path):
    """Hold the version for this process: a second ``rag-eval`` evaluating the same
    version at the same time is refused with the first one's PID."""
    import fcntl

    (out / ".locks").mkdir(parents=True, exist_ok=True)
    with open(out / ".locks" / f"{version}.lock", "a+", encoding="utf-8") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            raise ValueError(f"dataset version {version} is being evaluated right now by another rag-eval run "
                             f"({lock.read().strip() or 'PID unknown'}); wait for it to finish") from None
        lock.truncate(0)
        lock.write(f"PID {os.getpid()}")
        lock.flush()
        yield


_METRIC_OPTIONS = {"threshold": float, "model": str, "temperature": float, "strictness": int, "mode": str, "k": int,
                   "label_min": int, "label_max": int, "gain": str, "tie_break": str}
_JUDGE_OPTIONS = ("model", "base_url", "embedding_model", "concurrency", "timeout", "strictness", "temperature",
                  "response_format", "cache_path", "cache_across_endpoints", "max_row_requests", "max_row_tokens")


def _run_config(args: argparse.Namespace) -> dict:
    """Run config: the summary's scale and each metric's options (``--threshold``, ``--metric-option``).

    Raises
    ------
    ValueError
        For an unknown metric or option, or a value of the wrong type.
    """
    from metrics.aggregate import is_ratio
    from metrics.judges.llm import LLMConfig
    from metrics.registry import METRICS, resolve_names

    resolve_names(args.metrics)  # unknown names fail here, before anything is registered
    if not 0 <= args.max_rejected_share <= 1:
        raise ValueError(f"--max-rejected-share {args.max_rejected_share:g}: give a share between 0 and 1")
    ops: dict = {"eval_summary": {"config": {"scale": args.scale, "dingo_layout": args.dingo_summary}},
                 "ingest_dataset": {"config": {"max_rejected_share": args.max_rejected_share}}}
    items = [f"{t.partition('=')[0]}.threshold={t.partition('=')[2]}" for t in args.threshold or []]
    per_metric: dict[str, dict] = {}
    for item in items + (args.metric_option or []):
        target, _, value = item.partition("=")
        metric, _, option = target.partition(".")
        if metric not in METRICS or option not in _METRIC_OPTIONS or not value:
            raise ValueError(f"bad metric option {item!r}: use METRIC.OPTION=VALUE with METRIC a metric name "
                             f"(see --metrics) and OPTION one of {', '.join(_METRIC_OPTIONS)}")
        try:
            converted = _METRIC_OPTIONS[option](value)
        except ValueError as exc:
            raise ValueError(f"bad metric option {item!r}: {value!r} is not a {_METRIC_OPTIONS[option].__name__}") from exc
        low, high = METRICS[metric].value_range
        if option == "threshold":  # a [0, 1] metric's threshold is given on the table's scale (--scale)
            factor = args.scale if is_ratio(metric) else 1
            if not low * factor <= converted <= high * factor:
                raise ValueError(f"bad metric option {item!r}: the threshold of {metric} lies in "
                                 f"[{low * factor:g}, {high * factor:g}] at --scale {args.scale}")
            converted /= factor
        per_metric.setdefault(metric, {})[option] = converted
    if per_metric:  # the metric assets are one op (assets.evaluation): one config per metric under it
        ops["score_metrics"] = {"config": per_metric}
    judging = [o for o in ("model", "temperature", "strictness") if getattr(args, o, None) is not None] + \
        [f"{m}.{o}" for m, options in per_metric.items() for o in options if o in ("model", "temperature", "strictness")]
    if judging and not LLMConfig.from_env(base_url=args.base_url).configured:
        raise ValueError(f"{', '.join(judging)} apply to the LLM judge only: set OPENAI_BASE_URL or OPENAI_API_KEY, "
                         "or pass --base-url")
    return {"ops": ops, "loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}


def _execute_with_progress(metrics: list[str], version: str, run_config: dict, resources: dict):
    """Materialize ingestion, ``metrics`` and the summary in-process for ``version``, showing
    each metric's progress (bars on a terminal, plain lines otherwise)."""
    import dagster as dg

    from assets.evaluation import metric_assets, progress_listeners
    from assets.ingestion import ingest_dataset
    from assets.summary import eval_summary
    from dagster import DagsterInstance

    from orchestration.orphans import process_tags
    from orchestration.report import progress_display

    with progress_display() as listener:
        progress_listeners.append(listener)
        try:
            selection = dg.AssetSelection.groups("ingestion") | dg.AssetSelection.assets(*metrics, "eval_summary")
            return dg.materialize([ingest_dataset, *metric_assets, eval_summary], selection=selection,
                                  run_config=run_config, instance=DagsterInstance.get(), partition_key=version,
                                  raise_on_error=False, resources=resources, tags=process_tags())
        finally:
            progress_listeners.remove(listener)


def _judge(args: argparse.Namespace):
    from assets.resources import JudgeResource

    return JudgeResource(**{k: getattr(args, k) for k in _JUDGE_OPTIONS if getattr(args, k) is not None})


def _resources(args: argparse.Namespace) -> dict:
    from assets.resources import DatasetStore, ExecutionResource, ReportStore, ResultsDatabase

    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    return {"dataset_store": DatasetStore(root=str(Path(args.datasets).resolve())),
            "report_store": ReportStore(root=str(out)),
            "judge": _judge(args),
            "io_manager": ResultsDatabase(database=str(out / "rag_eval.duckdb"), schema="eval"),
            "execution": ExecutionResource(executor=args.executor, master=args.spark_master,
                                           parallelism=args.parallelism)}


def _evaluate(version: str, args: argparse.Namespace, run_config: dict) -> dict | None:
    """Materialize the selected metrics for ``version``; the summary, or ``None`` on failure.
    Says first which selected metrics no line can feed, and last which lines were rejected
    or lacked fields (also when under the limit)."""
    import dagster as dg

    warnings.filterwarnings("ignore", category=dg.BetaWarning)
    warnings.filterwarnings("ignore", category=dg.PreviewWarning)
    from metrics.registry import METRICS, resolve_names
    from metrics.samples import load_samples, unavailable
    from orchestration.report import print_cannot_run, print_input_errors, print_rejected, printable

    where = f"on Spark ({args.spark_master}, {args.parallelism} tasks per metric)" if args.executor == "spark" \
        else "in this process"
    print(f"dataset version {version}: evaluating {where} with Dagster (DAGSTER_HOME={os.environ['DAGSTER_HOME']})",
          file=sys.stderr)
    selected = resolve_names(args.metrics)
    samples = load_samples(Path(args.datasets) / version / "samples.jsonl")
    print_cannot_run(unavailable(samples, {m: METRICS[m].required_fields for m in selected}))
    with _only_run_of(version, Path(args.out)):
        result = _execute_with_progress(selected, version, run_config, _resources(args))
    limit = run_config["ops"]["ingest_dataset"]["config"]["max_rejected_share"]
    for check in result.get_asset_check_evaluations():
        if not check.passed:
            meta = check.metadata
            print(f"quality check {check.check_name} failed: {meta['rejected_share'].value:.1%} of the lines "
                  f"rejected > limit {limit:.1%}", file=sys.stderr)
            print_rejected(meta["rejected"].value, meta["rejected_rows"].value, meta["total_rows"].value, limit)
            print_input_errors(meta["input_errors"].value, meta["input_error_rows"].value)
    if not result.success:
        for event in result.all_events:
            error = getattr(event.event_specific_data, "error", None)
            if event.is_step_failure or (event.is_run_failure and error is not None):  # e.g. a resource that failed
                print(f"{f'step {event.step_key}' if event.step_key else 'run'} failed: "
                      f"{printable(error.message.strip())}", file=sys.stderr)
                while error.cause is not None:  # the chain down to the root cause
                    error = error.cause
                    print(f"  caused by: {printable(error.message.strip())}", file=sys.stderr)
        return None
    summary = json.loads((Path(args.out) / version / "summary.json").read_text(encoding="utf-8"))
    print_rejected(summary["rejected"]["lines"], summary["rejected"]["rows"], summary["total"], limit)
    print_input_errors(summary["input_errors"]["lines"], summary["input_errors"]["rows"])
    return summary


def cmd_run(args: argparse.Namespace) -> int:
    """Register the dataset and materialize the whole graph for it (``--dry-run``: print
    what it would send instead)."""
    from orchestration.dry_run import check_judge, dry_run

    run_config = _run_config(args)
    if args.price is not None and not args.dry_run:
        raise ValueError("--price applies to --dry-run only")
    if args.dry_run:
        return dry_run(args, run_config, _judge(args))
    check_judge(_judge(args))
    _check_out(args)
    version, new = register(args)
    summary = _evaluate(version, args, run_config)
    if summary is None:
        if new:  # a version this run registered and could not evaluate is not left behind
            from assets.registration import unregister
            from assets.resources import DatasetStore
            from dagster import DagsterInstance

            unregister(DagsterInstance.get(), DatasetStore(root=str(Path(args.datasets).resolve())), version)
            print(f"dataset version {version} was not kept (its first run failed); fix the cause and run again",
                  file=sys.stderr)
        return 1
    from orchestration.report import print_table

    print_table(summary)
    failed = sum(c["judge_error"] for c in summary["coverage"].values())
    total = sum(c["total"] for c in summary["coverage"].values())
    folder = Path(args.out) / version
    written = [p.name for p in sorted(folder.iterdir()) if p.is_file()]
    print(f"wrote {', '.join(written)} in {folder}/ and the tables of {Path(args.out) / 'rag_eval.duckdb'}")
    if failed:
        print(f"warning: {failed} of {total} results are judge_error (the judge failed; reasons in results.parquet)",
              file=sys.stderr)
        return 3
    return 0


def cmd_backfill(args: argparse.Namespace) -> int:
    """Evaluate registered versions in key order, from ``--from`` to ``--to`` inclusive."""
    from dagster import DagsterInstance

    from assets.partitions import dataset_versions

    from orchestration.dry_run import check_judge

    run_config = _run_config(args)
    check_judge(_judge(args))
    _check_out(args)
    versions = sorted(DagsterInstance.get().get_dynamic_partitions(dataset_versions.name))
    chosen = [v for v in versions if (not args.start or v >= args.start) and (not args.end or v <= args.end)]
    if not chosen:
        raise ValueError(f"no registered version between {args.start or 'the first'} and {args.end or 'the last'}")
    failed = []
    for version in chosen:
        summary = _evaluate(version, args, run_config)
        if summary is None:
            failed.append(version)
            continue
        means = ", ".join(f"{m} {row['mean']}" for m, row in summary["metrics"].items())
        print(f"{version}: {means}")
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


def cmd_register(args: argparse.Namespace) -> int:
    """Register a dataset version without running it."""
    version, new = register(args)
    print(f"{'registered' if new else 'already registered:'} dataset version {version}; evaluate it with "
          f"`rag-eval run {args.dataset} --dataset-version {version}`, or materialize its partition in the Dagster UI")
    return 0


def cmd_convert_trec(args: argparse.Namespace) -> int:
    """Write a JSONL dataset from TREC qrels and run files (for the document retrieval metrics)."""
    from metrics.retrieval.trec import read_trec

    records = read_trec(args.qrels, args.run)
    Path(args.output).write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    print(f"wrote {len(records)} queries to {args.output}; evaluate with "
          f"`rag-eval run {args.output} --metrics document_retrieval`")
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    """Agreement of the configured judge (or the offline one) with human labels."""
    from metrics import OfflineJudge, calibrate
    from metrics.calibrate import print_report
    from metrics.evaluate import default_judge

    judge = OfflineJudge() if args.offline else default_judge()
    try:
        report = calibrate(args.labels, judge=judge)
    finally:
        if hasattr(judge, "close"):
            judge.close()
    print_report(report)
    if args.json:
        Path(args.json).write_text(json.dumps(report, ensure_ascii=False, indent=2, default=str), encoding="utf-8")
    return 0


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
            p.add_argument("--meta", help="the version's meta.json (retriever, generator...; default: the meta.json "
                                          "beside the dataset, if any)")
        p.add_argument("--datasets", default="datasets", help="folder of dataset versions (default datasets/)")
        p.add_argument("--out", default="out", help="folder of reports and rag_eval.duckdb (default out/)")
        p.set_defaults(handler=handler)
        if name in ("run", "backfill"):
            p.add_argument("--metrics", default="core",
                           help="metrics and families to compute, comma-separated: metric names, core (default), "
                                "ragas, azure, document_retrieval, all")
            p.add_argument("--scale", type=int, choices=(1, 10), default=1,
                           help="10 presents the [0, 1] metrics on dingo's 0-10 scale in the table, summary.json "
                                "and --threshold values")
            p.add_argument("--max-rejected-share", type=float, default=0.05, metavar="SHARE",
                           help="share of lines no selected metric can use above which the version fails "
                                "(default 0.05)")
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
            judge = p.add_argument_group("LLM judge (used when OPENAI_API_KEY or OPENAI_BASE_URL is set, or "
                                         "--base-url is given; API keys are read from the environment only)")
            judge.add_argument("--base-url", help="OpenAI-compatible endpoint (default $OPENAI_BASE_URL)")
            judge.add_argument("--model", help="chat model (default $OPENAI_MODEL or gpt-4o-mini)")
            judge.add_argument("--embedding-model", help="embedding model (default $EMBEDDING_MODEL)")
            judge.add_argument("--concurrency", type=int, help="requests in flight at most (default 16)")
            judge.add_argument("--timeout", type=float, help="seconds per request (default 60)")
            judge.add_argument("--strictness", type=int, help="questions generated for answer_relevancy (default 3)")
            judge.add_argument("--temperature", type=float, help="sampling temperature (default 0)")
            judge.add_argument("--response-format", choices=("json_schema", "json_object"),
                               help="json_object for endpoints without json_schema (DeepSeek, some vLLM builds)")
            judge.add_argument("--cache-path", help="judgement cache file (default .rag_eval_cache/judgements.sqlite)")
            judge.add_argument("--cache-across-endpoints", action="store_true", default=None,
                               help="reuse cached judgements of another endpoint serving the same model")
            judge.add_argument("--max-row-requests", type=int, help="requests one row may send per metric, after "
                               "the cache (default 50; 0 no limit); a row over it is judge_error, nothing sent")
            judge.add_argument("--max-row-tokens", type=int, help="estimated tokens one row may send per metric "
                               "(default 200000; 0 no limit)")
            if name == "run":
                judge.add_argument("--dry-run", action="store_true", help="print the requests and tokens the run "
                                   "would send (after the cache) and their price; send and register nothing")
                judge.add_argument("--price", metavar="PROMPT[,COMPLETION]", help="with --dry-run: price per "
                                   "million prompt (and completion) tokens, e.g. 0.15,0.60")
    calibrate = sub.add_parser("calibrate", help="agreement of the judge with human labels (examples/calibration)")
    calibrate.add_argument("labels", help="JSONL of pairwise or per-sample labels")
    calibrate.add_argument("--json", help="also write the report as JSON to this file")
    calibrate.add_argument("--offline", action="store_true", help="use the offline judge even if an LLM is configured")
    calibrate.set_defaults(handler=cmd_calibrate)
    from orchestration.sweep import add_arguments

    add_arguments(sub.add_parser("sweep", help="run and rank the configurations of a RAG system (a target file)"))
    convert = sub.add_parser("convert-trec", help="TREC qrels + run files to a JSONL dataset")
    convert.add_argument("qrels", help="qrels file: qid iteration docno label")
    convert.add_argument("run", help="run file: qid Q0 docno rank score tag")
    convert.add_argument("-o", "--output", required=True, help="JSONL file to write")
    convert.set_defaults(handler=cmd_convert_trec)
    from orchestration.gate_cli import add_gate_commands

    add_gate_commands(sub)  # compare, gate, tag (the regression gate)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``rag-eval``. Exit status: 0 done; 1 the run failed (a step or a
    blocking check); 2 bad arguments or input; 3 done, but some results are judge errors; 4 the
    regression gate failed (``rag-eval compare|gate``)."""
    args = build_parser().parse_args(argv)
    if args.uses_instance:  # the gate's commands read files only
        _prepare_instance()
    if args.command != "convert-trec" and args.uses_instance:
        from dagster import DagsterInstance

        from orchestration.orphans import fail_orphaned_runs

        for run_id in fail_orphaned_runs(DagsterInstance.get()):
            print(f"note: run {run_id} was left STARTED by a rag-eval process that is gone; marked failed",
                  file=sys.stderr)
    try:
        return args.handler(args)
    except (OSError, ValueError, KeyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
