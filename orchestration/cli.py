"""Command line: register a dataset version and materialize the evaluation graph for it.

``rag-eval run`` (the README's main command) registers a JSONL file as a dataset
version (a dynamic partition), runs ``evaluation_job`` for it in-process against a
project-local Dagster instance (``DAGSTER_HOME``, default ``.dagster_home``), shows
progress, prints the summary table and writes ``summary.json`` and
``results.parquet`` under ``out/<version>/``.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import threading
import warnings
from pathlib import Path

DEFAULT_DATASET = Path("examples/fiqa/samples.jsonl")


def _prepare_instance() -> None:
    """Use a project-local Dagster instance unless DAGSTER_HOME is already set."""
    home = Path(os.environ.setdefault("DAGSTER_HOME", str(Path(".dagster_home").resolve())))
    home.mkdir(parents=True, exist_ok=True)
    if not (home / "dagster.yaml").exists():
        shutil.copyfile(Path(__file__).resolve().parent.parent / "dagster.yaml", home / "dagster.yaml")


def default_version(path: Path) -> str:
    """``<name>-<first 8 hex of the file's sha256>``; name is the folder for ``samples.jsonl``."""
    name = path.parent.name if path.stem == "samples" else path.stem
    return f"{name}-{hashlib.sha256(path.read_bytes()).hexdigest()[:8]}"


def register(dataset: Path, version: str | None, datasets_root: Path) -> str:
    """Copy ``dataset`` to ``<datasets_root>/<version>/samples.jsonl`` and add the partition.

    Raises
    ------
    FileNotFoundError
        If ``dataset`` does not exist.
    ValueError
        If ``dataset`` is not a ``.jsonl`` file.
    """
    from dagster import DagsterInstance

    from assets.partitions import dataset_versions

    if not dataset.exists():
        raise FileNotFoundError(f"dataset file not found: {dataset}")
    if dataset.suffix.lower() not in (".jsonl", ".ndjson"):
        raise ValueError(f"{dataset}: a dataset version is a JSONL file (one JSON object a line)")
    version = version or default_version(dataset)
    target = datasets_root / version / "samples.jsonl"
    target.parent.mkdir(parents=True, exist_ok=True)
    if dataset.resolve() != target.resolve():
        shutil.copyfile(dataset, target)
    instance = DagsterInstance.get()
    if not instance.has_dynamic_partition(dataset_versions.name, version):
        instance.add_dynamic_partitions(dataset_versions.name, [version])
    return version


_METRIC_OPTIONS = {"threshold": float, "model": str, "temperature": float, "strictness": int}
_JUDGE_OPTIONS = ("model", "base_url", "embedding_model", "concurrency", "timeout", "strictness", "temperature",
                  "response_format", "cache_path")


def _run_config(args: argparse.Namespace) -> dict:
    """Run config: the summary's scale and each metric's options (``--threshold``, ``--metric-option``).

    Raises
    ------
    ValueError
        For an unknown metric or option, or a value of the wrong type.
    """
    from metrics.registry import CORE_METRICS

    ops: dict = {"eval_summary": {"config": {"scale": args.scale}}}
    items = [f"{t.partition('=')[0]}.threshold={t.partition('=')[2]}" for t in args.threshold or []]
    for item in items + (args.metric_option or []):
        target, _, value = item.partition("=")
        metric, _, option = target.partition(".")
        if metric not in CORE_METRICS or option not in _METRIC_OPTIONS or not value:
            raise ValueError(f"bad metric option {item!r}: use METRIC.OPTION=VALUE with METRIC one of "
                             f"{', '.join(CORE_METRICS)} and OPTION one of {', '.join(_METRIC_OPTIONS)}")
        try:
            ops.setdefault(metric, {"config": {}})["config"][option] = _METRIC_OPTIONS[option](value)
        except ValueError as exc:
            raise ValueError(f"bad metric option {item!r}: {value!r} is not a {_METRIC_OPTIONS[option].__name__}") from exc
    return {"ops": ops, "loggers": {"console": {"config": {"log_level": "WARNING"}}}}


def _execute_with_progress(job, version: str, run_config: dict, resources: dict):
    """Run ``job`` in a thread while a progress bar follows its asset materializations."""
    from dagster import DagsterEventType, DagsterInstance
    from dagster._core.utils import make_new_run_id
    from rich.progress import Progress, SpinnerColumn, TextColumn

    instance = DagsterInstance.get()
    run_id = make_new_run_id()
    total = len(job.asset_layer.executable_asset_keys)
    outcome: dict = {}

    def target() -> None:
        try:
            outcome["result"] = job.execute_in_process(run_config=run_config, instance=instance, partition_key=version,
                                                       run_id=run_id, raise_on_error=False, resources=resources)
        except BaseException as exc:  # reported below, never swallowed
            outcome["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), *Progress.get_default_columns()[1:3],
                  transient=True) as progress:
        task = progress.add_task("starting", total=total)
        thread.start()
        while thread.is_alive():
            thread.join(0.5)
            logs = instance.all_logs(run_id)
            done = sum(1 for e in logs if e.dagster_event and
                       e.dagster_event.event_type == DagsterEventType.ASSET_MATERIALIZATION)
            messages = [e.user_message for e in logs if not e.dagster_event and e.user_message]
            progress.update(task, completed=done, description=(messages[-1] if messages else "running")[:70])
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]


def print_table(summary: dict) -> None:
    """Print metric, mean, pass rate and measured/total as a table."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{summary['task_name']} — judge: {summary['judge'].get('judge')} (scale {summary['scale']})")
    for column in ("metric", "mean", "pass rate", "measured/total"):
        table.add_column(column, justify="left" if column == "metric" else "right")
    for metric, row in summary["metrics"].items():
        mean = "—" if row["mean"] is None else f"{row['mean']:.4g}"
        rate = "—" if row["pass_rate"] is None else f"{row['pass_rate']:.0%}"
        table.add_row(metric, mean, rate, f"{row['measured']}/{row['total']}")
    Console().print(table)
    print(f"rows: {summary['total']}  good: {summary['num_good']}  bad: {summary['num_bad']}  "
          f"unmeasured: {summary['num_unmeasured']}")
    usage = summary.get("usage") or {}
    if usage.get("chat_requests") or usage.get("embedding_requests") or usage.get("cache_hits"):
        print(f"judge requests: {usage['chat_requests']} chat, {usage['embedding_requests']} embeddings, "
              f"{usage['prompt_tokens']} prompt + {usage['completion_tokens']} completion tokens, "
              f"{usage['cache_hits']} cache hits")
    if summary["judge"].get("embedding_fallback"):
        print(f"note: {summary['judge']['embedding_fallback']}")


def cmd_run(args: argparse.Namespace) -> int:
    """Register the dataset and materialize the whole graph for it."""
    import dagster as dg

    warnings.filterwarnings("ignore", category=dg.BetaWarning)
    from assets.resources import DatasetStore, JudgeResource, ReportStore
    from orchestration.definitions import defs

    run_config = _run_config(args)
    version = register(Path(args.dataset), args.version, Path(args.datasets))
    print(f"dataset version {version}: evaluating with Dagster (DAGSTER_HOME={os.environ['DAGSTER_HOME']})",
          file=sys.stderr)
    judge = JudgeResource(**{k: getattr(args, k) for k in _JUDGE_OPTIONS if getattr(args, k) is not None})
    resources = {"dataset_store": DatasetStore(root=str(Path(args.datasets).resolve())),
                 "report_store": ReportStore(root=str(Path(args.out).resolve())), "judge": judge}
    result = _execute_with_progress(defs.resolve_job_def("evaluation_job"), version, run_config, resources)
    failed_checks = [c.check_name for c in result.get_asset_check_evaluations() if not c.passed]
    if failed_checks:
        print(f"quality checks that failed: {', '.join(failed_checks)} (details in the Dagster UI)", file=sys.stderr)
    if not result.success:
        for event in result.all_events:
            if event.is_step_failure:
                print(f"step {event.step_key} failed: {event.event_specific_data.error.message.strip()}",
                      file=sys.stderr)
        return 1
    summary = result.output_for_node("eval_summary")
    print_table(summary)
    folder = Path(args.out) / version
    print(f"wrote {folder / 'summary.json'} and {folder / 'results.parquet'}")
    return 0


def cmd_register(args: argparse.Namespace) -> int:
    """Register a dataset version without running it."""
    print(register(Path(args.dataset), args.version, Path(args.datasets)))
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The ``rag-eval`` argument parser."""
    parser = argparse.ArgumentParser(prog="rag-eval", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, handler, helptext in (("run", cmd_run, "register a dataset version and evaluate it"),
                                    ("register", cmd_register, "register a dataset version only")):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("dataset", nargs="?", default=str(DEFAULT_DATASET),
                       help=f"JSONL file of samples (default {DEFAULT_DATASET})")
        p.add_argument("--version", help="dataset version key (default <name>-<sha8 of the file>)")
        p.add_argument("--datasets", default="datasets", help="folder of dataset versions (default datasets/)")
        p.add_argument("--out", default="out", help="folder of reports (default out/)")
        p.set_defaults(handler=handler)
        if name == "run":
            p.add_argument("--scale", type=int, choices=(1, 10), default=1,
                           help="10 writes dingo's 0-10 presentation in summary.json")
            p.add_argument("--threshold", action="append", metavar="METRIC=VALUE",
                           help="pass/fail threshold of a metric, e.g. faithfulness=0.7 (repeatable)")
            p.add_argument("--metric-option", action="append", metavar="METRIC.OPTION=VALUE",
                           help="per-metric threshold, model, temperature or strictness, e.g. "
                                "answer_relevancy.strictness=5 (repeatable)")
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
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``rag-eval``."""
    args = build_parser().parse_args(argv)
    _prepare_instance()
    try:
        return args.handler(args)
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
