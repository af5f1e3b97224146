"""``rag-eval sweep CONFIG``: run every configuration of a target file, incrementally, and rank them.

Each configuration becomes a target run (a partition, ``assets/targets.py``). For each,
the graph is materialized level by level — parts and question set, retrieval, generation,
ingestion, metrics, summary — and at each level only the assets stale or missing for the
partition run (the rule of the UI's "Unsynced" on the versions Dagster recorded,
``rag_eval.orchestration.records.out_of_date``; and the retrieval or generation whose every call
failed, as when the endpoint was down: tried again): an unchanged configuration runs nothing, a new generator
runs generation and the metrics whose fields changed, a new ``top_k`` retrieval and what
its new contexts change. The parts and the question set, which Dagster cannot watch
(they are files), run when their version hash or content differs from the last
materialization's. Then the table: configurations ranked on the chosen metrics (mean
with a percentile bootstrap 95 % interval over questions), with their cost.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from rag_eval.metrics.core.registry import Registry
from rag_eval.metrics.sources.targets.config import MAX_CONFIGURATIONS

if TYPE_CHECKING:
    from rag_eval.orchestration.settings import RunSettings

FIELD_LEVEL = ["questions", "responses", "retrieved_contexts", "references", "retrieval_ground_truth",
               "retrieved_documents", "rejected_samples"]


#: Assets whose run certainly makes these stale: a part's new version hash or new questions
#: always reach the step calling it; the ingestion's outputs come from one multi-asset.
_FOLLOWERS = {"retriever": ["system_contexts"], "generator": ["system_responses"],
              "question_set": ["system_contexts", "system_responses", *FIELD_LEVEL],
              **dict.fromkeys(FIELD_LEVEL, FIELD_LEVEL)}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``sweep`` subcommand's arguments."""
    parser.add_argument("config", help="target configuration file (TOML, or YAML): see metrics/sources/targets/config.py")
    parser.add_argument("--metrics", help="metrics to score and rank on, comma-separated (default: the file's "
                                          "`metrics`, else core)")
    parser.add_argument("--max-rejected-share", type=float, default=0.05, metavar="SHARE",
                        help="share of bad question lines above which a run fails (default 0.05)")
    parser.add_argument("--json", help="also write the ranked table as JSON to this file")
    parser.add_argument("--max-configurations", type=int, default=MAX_CONFIGURATIONS, metavar="N",
                        help=f"run a grid of up to N configurations (default {MAX_CONFIGURATIONS}; more are refused)")
    parser.add_argument("--datasets", default="datasets", help="folder of dataset versions (default datasets/)")
    parser.add_argument("--out", default="out", help="folder of reports and rag_eval.duckdb (default out/)")
    parser.add_argument("--base-url", help="OpenAI-compatible judge endpoint (default $OPENAI_BASE_URL)")
    parser.set_defaults(handler=cmd_sweep, judges=True, executor="local", spark_master="local[2]", parallelism=2)


def _recorded(instance, asset: str, key: str, field: str):
    from rag_eval.orchestration.records import latest_record, materialization

    record = latest_record(instance, asset, key)
    value = materialization(record).metadata.get(field) if record else None
    return getattr(value, "value", value)


def _first_level(instance, store, key: str) -> list[str]:
    """The parts and question set whose version hash or content changed since their last materialization."""
    from rag_eval.assets.targets import configuration_of

    configuration = configuration_of(store, key)
    todo = [role for role in ("retriever", "generator")
            if _recorded(instance, role, key, "version_hash") !=
            (configuration.parts.get("system") or configuration.parts[role]).version_hash]
    digest = hashlib.sha256((Path(store.root) / key / "questions.jsonl").read_bytes()).hexdigest()
    if _recorded(instance, "question_set", key, "source_sha256") != digest:
        todo.insert(0, "question_set")
    return todo


def _failed_entirely(instance, key: str, assets: list[str]) -> list[str]:
    """Those of ``assets`` whose latest materialization for ``key`` answered no question and failed on some
    (``answered`` 0, ``target_errors`` above 0: an endpoint down for the whole run). Failed calls are not
    cached, so running them again calls the system again; one answer keeps the run as it is."""
    return [asset for asset in assets if _recorded(instance, asset, key, "answered") == 0
            and (_recorded(instance, asset, key, "target_errors") or 0) > 0]


def run_incrementally(key: str, settings: RunSettings, instance, definitions) -> list:
    """Materialize what is stale or missing for target run ``key``, and the system's calls whose every
    call failed last time (a dead endpoint: they are tried again), with the metrics and run config of
    ``settings``, level by level, each level a run of ``target_evaluation_job`` of ``definitions``
    (``rag_eval.orchestration.location``) on ``instance``; the ``ExecuteInProcessResult`` of each run
    (none when nothing changed).

    Raises
    ------
    RuntimeError
        If a run fails for a reason the user can fix (its step's error is in the message).
    rag_eval.orchestration.failures.StepBug
        If a run fails with a bug.
    """
    import dagster as dg

    from rag_eval.orchestration.failures import raise_bugs
    from rag_eval.orchestration.jobs import run_in_process
    from rag_eval.orchestration.failures import run_failures
    from rag_eval.orchestration.records import latest_record, out_of_date

    metrics = list(settings.metrics)
    levels = [["question_set", "retriever", "generator"], ["system_contexts"], ["system_responses"], FIELD_LEVEL,
              metrics, ["eval_summary"]]
    results, done = [], set()
    for depth, level in enumerate(levels):
        if depth == 0:
            todo = set(_first_level(instance, definitions.resources["dataset_store"], key))
        else:
            pending = [a for a in level if a not in done]
            todo = set(out_of_date(instance, definitions, key, pending)) | set(_failed_entirely(instance, key, pending))
        if not todo:
            continue
        for asset in list(todo):  # what is certain to turn stale next runs in the same run
            todo |= set(_FOLLOWERS.get(asset, ()))
        if todo & set(metrics):
            todo.add("eval_summary")
        below = {a for later in levels[depth + 1:] for a in later if latest_record(instance, a, key) is None}
        selection = sorted(todo | below)
        result = run_in_process(definitions, "target_evaluation_job", dg.AssetSelection.assets(*selection), key,
                                instance, settings.to_run_config(selection))
        results.append(result)
        if not result.success:
            failures = run_failures(result)
            raise_bugs(failures)  # a bug ends the sweep (the CLI reports it); what the user can fix, this configuration
            errors = [error.message.strip() for where, error in failures if where != "run"]
            raise RuntimeError(f"{key}: the run of {', '.join(selection)} failed: {'; '.join(errors) or 'see the UI'}")
        done |= set(selection)
    return results


def run_cost(results: list) -> dict[str, int]:
    """What the runs of one target run sent: target calls and judge requests (and tokens)."""
    cost = {"target_calls": 0, "judge_requests": 0, "judge_tokens": 0}
    for result in results:
        for event in result.get_asset_materialization_events():
            meta = event.materialization.metadata
            value = lambda name: int(getattr(meta.get(name), "value", 0) or 0)  # noqa: E731, B023 - called within this iteration
            key = event.asset_key.to_user_string()
            if key in ("system_contexts", "system_responses"):
                cost["target_calls"] += value("target_calls")
            elif "chat_requests" in meta and key != "eval_summary":
                cost["judge_requests"] += value("chat_requests") + value("embedding_requests")
                cost["judge_tokens"] += value("prompt_tokens") + value("completion_tokens")
    return cost


def rank(rows: list[dict], metrics: list[str], registry: Registry) -> list[dict]:
    """``rows`` ordered best first on ``metrics`` in turn (each metric's direction in ``registry``; a
    configuration without a value last)."""
    from rag_eval.metrics.core.results import Direction

    def key(row: dict):
        out = []
        for metric in metrics:
            mean = row["metrics"].get(metric, {}).get("mean")
            sign = -1 if registry[metric].direction is Direction.HIGHER else 1
            out.append((mean is None, sign * (mean or 0.0)))
        return out

    return sorted(rows, key=key)


def table_row(key: str, configuration, metrics: list[str], out: Path, instance, cost: dict,
              registry: Registry) -> dict:
    """One configuration's line: mean and bootstrap 95 % interval per metric (over its ``ok``
    rows, ``rag_eval.metrics.stats.agreement.bootstrap``) and the judge its rows name (None for a metric
    of ``registry`` asking no judgement), target errors and cost."""
    import pandas as pd

    from rag_eval.metrics.stats.agreement import bootstrap

    results = pd.read_parquet(out / key / "results.parquet")
    row = {"configuration": configuration.name, "partition": key, "metrics": {}, **cost}
    for metric in metrics:
        ok = results[(results["metric"] == metric) & (results["status"] == "ok")]
        values = ok["value"].to_numpy(float)
        row["metrics"][metric] = {"mean": round(float(values.mean()), 4) if len(values) else None,
                                  "ci95": bootstrap(values, np.mean) if len(values) else [None, None],
                                  "measured": len(values),
                                  "total": int((results["metric"] == metric).sum()),
                                  "judge": (", ".join(sorted(set(ok["judge"].dropna()))) or None)
                                  if registry[metric].judgements else None}
    row["target_errors"] = int(max((_recorded(instance, a, key, "target_errors") or 0)
                                   for a in ("system_contexts", "system_responses")))
    row["tokens"] = sum(int(_recorded(instance, a, key, t) or 0) for a in ("system_contexts", "system_responses")
                        for t in ("prompt_tokens", "completion_tokens"))
    row["latency_s"] = round(sum(float(_recorded(instance, a, key, "mean_latency_s") or 0.0)
                                 for a in ("system_contexts", "system_responses")), 4)
    return row


def judged_by(rows: list[dict], metrics: list[str], judge: dict, registry: Registry) -> str:
    """Who scored the table's metrics, as their result rows name it (``judge``: the
    configured judge's description, for its rule version): ``judge offline-heuristic (rule
    version 6): context_recall, context_precision; no judge: ndcg``; ``metrics`` of ``registry``."""

    groups: dict[str, list[str]] = {}
    for metric in metrics:
        names = sorted({n for row in rows for n in (row["metrics"][metric]["judge"] or "").split(", ") if n})
        label = ("judge " + ", ".join(names) if names else "nothing scored") if registry[metric].judgements \
            else "no judge"
        if names == [judge.get("judge")] and judge.get("rule_version"):
            label += f" (rule version {judge['rule_version']})"
        groups.setdefault(label, []).append(metric)
    return "; ".join(f"{label}: {', '.join(group)}" for label, group in groups.items())


def print_ranking(rows: list[dict], metrics: list[str], stream=None) -> None:
    """The ranked table, one line per configuration (Markdown, readable in a terminal)."""
    stream = stream or sys.stdout
    heads = ["#", "configuration", *metrics, "target_error", "target calls", "judge requests", "tokens",
             "latency s/question"]
    print("| " + " | ".join(heads) + " |", file=stream)
    print("|" + "---|" * len(heads), file=stream)
    for place, row in enumerate(rows, start=1):
        cells = [str(place), row["configuration"]]
        for metric in metrics:
            entry = row["metrics"][metric]
            low, high = entry["ci95"]
            cells.append("–" if entry["mean"] is None else
                         f"{entry['mean']:.4f} [{low:.2f}, {high:.2f}]" if low is not None and low == low
                         else f"{entry['mean']:.4f}")
        cells += [str(row["target_errors"]), str(row["target_calls"]), str(row["judge_requests"]), str(row["tokens"]),
                  f"{row['latency_s']:.3f}"]
        print("| " + " | ".join(cells) + " |", file=stream)


def cmd_sweep(args: argparse.Namespace) -> int:
    """Register every configuration of ``args.config`` as a target run, run each
    incrementally, print the ranked table. Exit 0; 1 when a run failed; 2 for a bad file."""
    import warnings

    import dagster as dg

    warnings.filterwarnings("ignore", category=dg.BetaWarning)
    warnings.filterwarnings("ignore", category=dg.PreviewWarning)
    from rag_eval.assets.targets import register_target_run
    from rag_eval.metrics.sources.targets.config import load_config
    from rag_eval.orchestration.commands import check_out
    from rag_eval.orchestration.parsing import definitions
    from rag_eval.orchestration.dry_run import check_judge
    from rag_eval.orchestration.report import printable
    from rag_eval.orchestration.settings import RunSettings

    sweep = load_config(args.config, args.max_configurations, args.registry)
    settings = RunSettings.from_args(args, sweep)
    metrics = list(settings.metrics)  # ranked in this order
    for part, why in sweep.skipped.items():
        print(f"note: {part} left out of the sweep: {why}", file=sys.stderr)
    built = definitions(args, settings)
    check_judge(built.resources["judge"])
    check_out(settings)
    instance, store = args.instance, built.resources["dataset_store"]
    rows, failed = [], []
    for configuration in sweep.configurations:
        key = register_target_run(instance, store, sweep, configuration)
        print(f"{configuration.name}: target run {key}", file=sys.stderr)
        try:
            results = run_incrementally(key, settings, instance, built)
        except RuntimeError as exc:
            print(f"error: {exc}", file=sys.stderr)
            failed.append(key)
            continue
        cost = run_cost(results)
        ran = sorted({e.asset_key.to_user_string() for r in results for e in r.get_asset_materialization_events()})
        if set(FIELD_LEVEL) <= set(ran):
            ran = [a for a in ran if a not in FIELD_LEVEL] + ["ingest_dataset (all fields)"]
        print(f"  {len(results)} run(s), {cost['target_calls']} target calls, {cost['judge_requests']} judge "
              f"requests; materialized: {', '.join(ran) or 'nothing (unchanged)'}", file=sys.stderr)
        rows.append(table_row(key, configuration, metrics, Path(settings.paths.out), instance, cost, args.registry))
    ranked = rank(rows, metrics, args.registry)
    print(printable(judged_by(ranked, metrics, built.resources["judge"].get_judge().describe(), args.registry)))
    print_ranking(ranked, metrics)
    if args.json:
        Path(args.json).write_text(json.dumps({"metrics": metrics, "ranking": ranked}, indent=2), encoding="utf-8")
    return 1 if failed else 0
