"""What each ``rag-eval`` command does (``rag_eval.orchestration.cli`` parses the arguments into
them; ``rag_eval.orchestration.report`` renders what they print).

``rag-eval run`` (the README's main command) registers a JSONL file as a dataset version
(``rag_eval.assets.registration``, the rule the sensor uses too), runs the evaluation graph for
it in-process against a project-local Dagster instance (``DAGSTER_HOME``, default
``dagster_home/``), shows progress, prints the summary table and writes ``summary.json``
and ``results.parquet`` under ``out/<version>/``.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from dataclasses import replace
from functools import partial
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING

from rag_eval.orchestration.instance import dagster_home
from rag_eval.orchestration.parsing import definitions
from rag_eval.orchestration.runs import after_startup, only_run_of
from rag_eval.orchestration.settings import RunSettings, judge_resource

if TYPE_CHECKING:
    import dagster as dg


def start_judge_check(args: argparse.Namespace) -> None:
    """Start the LLM judge's endpoint check (``rag_eval.orchestration.dry_run.check_judge`` waits for
    it and reports its failure); options it cannot take are reported there too."""
    from rag_eval.metrics.judges.llm import LLMJudge

    try:
        judge = judge_resource(args).get_judge()
    except ValueError:
        return
    if isinstance(judge, LLMJudge):
        judge.check_endpoint(wait=False)


def register(instance: dg.DagsterInstance, datasets: str | Path, dataset: str | Path, version: str | None = None,
             meta: str | Path | None = None, replace: bool = False,
             max_rejected_share: float | None = None) -> tuple[str, bool]:
    """Register ``dataset`` as a version in the folder ``datasets`` and ``instance``, with its key, ``meta``
    file, ``replace`` and ``max_rejected_share`` kept with it when given: ``(key, new)``; as
    ``rag_eval.assets.registration.register_version`` (the rule the sensor uses too), which raises
    ``RegistrationError`` for what it refuses."""
    from rag_eval.assets.registration import register_version
    from rag_eval.assets.resources import DatasetStore

    settings = {} if max_rejected_share is None else {"max_rejected_share": max_rejected_share}
    return register_version(instance, DatasetStore(root=str(Path(datasets).resolve())), Path(dataset), version,
                            Path(meta) if meta else None, replace, settings)


def check_out(settings: RunSettings) -> None:
    """Refuse an ``--out`` (``settings.paths.out``) that is not a folder, before anything is registered."""
    from rag_eval.metrics.errors import SettingsError
    out = Path(settings.paths.out)
    if out.exists() and not out.is_dir():
        raise SettingsError(f"--out {out} is a file: pass a folder for the reports and the results tables")


def execute_with_progress(version: str, settings: RunSettings, args: argparse.Namespace):
    """Run ``evaluation_job`` of the command's definitions in-process for ``version`` on its instance
    (``args.instance``) with the metrics and run config of ``settings``
    (``rag_eval.orchestration.jobs.evaluation_selection``: ingestion and its checks, the
    metrics, the summary, the label estimates and the regression gate; ``cascade_evaluation_job``,
    the strong sample too, with a judge cascade), showing each metric's
    progress (bars on a terminal, plain lines otherwise): the command's progress display, which its
    execution resource tells (``rag_eval.orchestration.parsing.resources``), is open for the run."""
    import dagster as dg

    from rag_eval.orchestration.jobs import evaluation_selection, run_in_process
    from rag_eval.orchestration.orphans import process_tags

    built = definitions(args, settings)
    cascade = settings.strong is not None  # the strong sample too: cascade_evaluation_job
    with args.progress:
        return run_in_process(built, "cascade_evaluation_job" if cascade else "evaluation_job",
                              evaluation_selection(dg.AssetSelection.assets(*settings.metrics), cascade), version,
                              args.instance, settings.to_run_config(), process_tags())


def up_to_date(version: str, settings: RunSettings, args: argparse.Namespace) -> tuple[str, dict] | None:
    """``(run_id, summary)`` of the run that evaluated ``version`` when running it again would
    redo that run: the ingestion, every selected metric and the summary materialized and not
    stale (``rag_eval.orchestration.records.out_of_date``: code versions and data versions, as the UI's
    "Unsynced"); the summary's run had the same run config (``settings.to_run_config()``), its summary
    the same metrics and judge settings and no judge error, nor a judge cascade's metric without an estimate
    (a new run would ask again); its files and
    tables are where this run would write them. Else ``None`` (the run goes ahead; it writes again
    whatever is missing)."""
    from rag_eval.assets.results_store import set_aside_damaged, table_file
    from rag_eval.metrics.core.registry import describe_judge

    from rag_eval.orchestration.records import changed_since_ingestion, latest_record, materialization, out_of_date

    folder = Path(settings.paths.out).resolve() / version
    selected = settings.metrics
    files = [folder / "summary.json", folder / "results.parquet", folder / "ragas_scores.csv",
             *([folder / "summary_dingo.json"] if settings.dingo_layout else []),
             *(table_file(settings.paths.out, asset, version) for asset in [*selected, *_strong(settings),
                                                                              "eval_summary"])]
    record = latest_record(args.instance, "eval_summary", version)
    if set_aside_damaged([files[1], *files[-len(selected) - len(_strong(settings)) - 1:]],
                         partial(print, file=sys.stderr)) or \
            record is None or not all(f.is_file() for f in files):  # the run goes ahead: it writes them again
        return None
    metadata = materialization(record).metadata
    if metadata["summary_path"].value != str(files[0]) or \
            (metadata["azure_rows"].value and not (folder / "azure_results.jsonl").is_file()):
        return None
    try:
        summary = json.loads(files[0].read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # damaged (a crash, a full disk): the run goes ahead and writes it again
    judge = json.loads(json.dumps(describe_judge(settings.judge.get_judge(), args.registry), default=str))
    built = definitions(args, settings).resources
    strong = settings.strong_judge and settings.strong_judge.get_judge().name
    if set(summary["metrics"]) != set(selected) or any(c["judge_error"] for c in summary["coverage"].values()) or \
            (summary.get("cascade") or {}).get("strong_judge") != strong or \
            any((row.get("cascade") or {}).get("note") for row in summary["metrics"].values()) or \
            {**summary["judge"], "endpoint_check": None} != {**judge, "endpoint_check": None} or \
            summary["dataset_meta"] != built["dataset_store"].meta(version):
        return None
    if changed_since_ingestion(args.instance, built["dataset_store"].samples_path(version), version):
        return None  # its file was replaced since it was ingested (Dagster does not see the file)
    run = args.instance.get_run_by_id(record.run_id)
    if run is None or run.run_config != settings.to_run_config():
        return None
    if any((latest := latest_record(args.instance, asset, version)) is None or latest.run_id != record.run_id
           for asset in [*selected, *_strong(settings)]):
        return None  # re-scored since by a run that did not summarize (e.g. a launch that failed): tables ≠ reports
    ingestion = [spec.key.to_user_string() for spec in definitions(args, settings).resolve_all_asset_specs()
                 if spec.group_name == "ingestion"]
    if out_of_date(args.instance, definitions(args, settings), version,
                   [*ingestion, *selected, *_strong(settings), "eval_summary", "baseline_comparison"]):
        return None
    return record.run_id, summary


def _strong(settings: RunSettings) -> list[str]:
    """The strong sample's asset, in a judge cascade's run."""
    return [] if settings.strong is None else ["strong_sample"]


def interrupted(result) -> bool:
    """Whether a run (``dagster.ExecuteInProcessResult``) was stopped by a signal Dagster caught."""
    return any("DagsterExecutionInterruptedError" in (getattr(event.event_specific_data, "error", None) or
                                                      SimpleNamespace(cls_name="")).cls_name
               for event in result.all_events if event.is_step_failure or event.is_run_failure)


def evaluate_version(version: str, settings: RunSettings, args: argparse.Namespace
                     ) -> tuple[dict, dg.AssetCheckEvaluation] | None:
    """Run ``evaluation_job`` for ``version`` with the metrics and options of ``settings`` (on the
    command's instance, ``args.instance``), the regression gate included: ``(summary, the gate's
    check evaluation)``, or ``None`` when the run failed before the gate. Says first which selected
    metrics no line can feed, last which lines were rejected or lacked fields (also when under the
    limit) and the gate's result."""
    import dagster as dg

    warnings.filterwarnings("ignore", category=dg.BetaWarning)
    warnings.filterwarnings("ignore", category=dg.PreviewWarning)
    from rag_eval.assets.expectations import warm_up
    from rag_eval.assets.ingestion import rejection_limit
    from rag_eval.metrics.core.samples import iter_samples
    from rag_eval.metrics.core.usable import unavailable
    from rag_eval.orchestration.jobs import gate_check, only_the_gate_failed
    from rag_eval.orchestration.failures import print_run_failure
    from rag_eval.orchestration.report import print_cannot_run, print_failed_checks, print_input_errors, print_rejected

    executor, out, datasets = settings.executor, Path(settings.paths.out), settings.paths.datasets
    assert executor is not None and datasets is not None  # a run's settings (from_args of run and backfill) have both
    where = f"on Spark ({executor.master}, {executor.parallelism} tasks per metric)" if executor.kind == "spark" \
        else "in this process"
    print(f"dataset version {version}: evaluating {where} with Dagster (DAGSTER_HOME={dagster_home()})",
          file=sys.stderr)
    # Read line by line up to the first line with every field usable: no copy of the version is held.
    print_cannot_run(unavailable(iter_samples(Path(datasets) / version / "samples.jsonl"),
                                 {m: args.registry[m].required_fields for m in settings.metrics}))

    if executor.kind != "spark":
        warm_up()  # great-expectations' import overlaps the metric steps (its step runs last)
    with only_run_of(version, out), after_startup():
        result = execute_with_progress(version, settings, args)
    if interrupted(result):
        raise KeyboardInterrupt  # Dagster took the signal (SIGINT, SIGTERM) and stopped the run: the command stops
    limit, _ = rejection_limit(settings.max_rejected_share, definitions(args, settings).resources["dataset_store"],
                               version)
    print_failed_checks(result, limit, getattr(args, "dataset", None), Path(datasets) / version)  # no file: a backfill
    if not result.success and not only_the_gate_failed(result):
        print_run_failure(result)
        return None
    summary = json.loads((out / version / "summary.json").read_text(encoding="utf-8"))
    print_rejected(summary["rejected"]["lines"], summary["rejected"]["rows"], summary["rejected"]["total_rows"],
                   limit)
    print_input_errors(summary["input_errors"]["lines"], summary["input_errors"]["rows"])
    gate = gate_check(result)
    assert gate is not None  # the run got past the gate, whose asset always reports its check
    return summary, gate


def cmd_run(args: argparse.Namespace) -> int:
    """Register the dataset and materialize the whole graph for it (``--dry-run``: print
    what it would send instead), with the settings of its arguments (``RunSettings.from_args``)."""
    from rag_eval.assets.ingestion import rejection_limit
    from rag_eval.metrics.errors import SettingsError
    from rag_eval.orchestration.dry_run import check_judge, dry_run, priced_budget

    settings = RunSettings.from_args(args)
    if args.price is not None and not args.dry_run and "cost" not in (settings.strong or {}):
        raise SettingsError("--price applies to --dry-run and to a --strong-budget in money only")
    if args.dry_run:
        with after_startup():
            return dry_run(settings, args)
    settings = priced_budget(settings, args)
    for judge in settings.judges():
        check_judge(judge)
    check_out(settings)
    version, new = register(args.instance, args.datasets, args.dataset, args.dataset_version, args.meta, args.replace,
                            settings.max_rejected_share)
    # The limit the version keeps (its settings.json: this run's --max-rejected-share, else an earlier one), in
    # the run's config: a version evaluated under another limit, or failing this one, is not up to date.
    settings = replace(settings, max_rejected_share=rejection_limit(
        None, definitions(args, settings).resources["dataset_store"], version)[0])
    started, out = time.time(), Path(settings.paths.out)
    if not (new or args.replace or args.force):
        with only_run_of(version, out):
            last = up_to_date(version, settings, args)
        if last is not None:
            from rag_eval.orchestration.annotate import labels_changed, refresh_labels

            # New labels of a version otherwise up to date: only the label assets run (no judge request).
            why = labels_changed(args.instance, definitions(args, settings), version)
            return refresh_labels(version, settings, args, why) if why else show_up_to_date(version, settings, args, *last)
    from rag_eval.orchestration.failures import StepBug

    try:
        evaluated = evaluate_version(version, settings, args)
    except StepBug:  # a bug failed a step (the CLI reports it): a version this run registered is not kept either
        if new:
            _forget(version, settings, args)
        raise
    if evaluated is None:
        if new:  # a version this run registered and could not evaluate is not left behind
            _forget(version, settings, args)
        return 1
    from rag_eval.orchestration.report import print_gate, print_table, print_unmeasured

    summary, gate = evaluated
    print_table(summary)
    print_unmeasured(summary, out / version / "results.parquet")
    strong = [row.get("cascade") or {} for row in summary["metrics"].values()]  # a cascade's strong results too
    failed = sum(c["judge_error"] for c in summary["coverage"].values()) + sum(c.get("judge_error", 0) for c in strong)
    total = sum(c["total"] for c in summary["coverage"].values()) + sum(c.get("n", 0) for c in strong)
    folder = out / version
    # This run's files only: a gate report left by an earlier `rag-eval gate` is not this run's.
    written = [p.name for p in sorted(folder.iterdir()) if p.is_file() and p.stat().st_mtime >= started - 0.5]
    print(f"wrote {', '.join(written)} in {folder}/ and its tables in {out / 'tables'}/ (SQL: {out / 'rag_eval.duckdb'})")
    print_gate(gate.metadata, gate.passed, folder)
    if not gate.passed:
        from rag_eval.orchestration.gate_cli import GATE_FAILED

        return GATE_FAILED
    if failed:
        print(f"warning: {failed} of {total} results are judge_error (the judge failed; reasons in results.parquet)",
              file=sys.stderr)
        from rag_eval.metrics.errors import EXIT_JUDGE_ERRORS  # here: rag_eval.metrics is slow to import at start-up

        return EXIT_JUDGE_ERRORS
    return 0


def _forget(version: str, settings: RunSettings, args: argparse.Namespace) -> None:
    """Unregister ``version``, registered by this run and not evaluated, saying so."""
    from rag_eval.assets.registration import unregister

    unregister(args.instance, definitions(args, settings).resources["dataset_store"], version)
    print(f"dataset version {version} was not kept (its first run failed); fix the cause and run again",
          file=sys.stderr)


def show_up_to_date(version: str, settings: RunSettings, args: argparse.Namespace, run_id: str, summary: dict) -> int:
    """Say that nothing was run and why, then what the run that evaluated ``version`` found."""
    from rag_eval.assets.ingestion import rejection_limit
    from rag_eval.orchestration.records import latest_record, materialization
    from rag_eval.orchestration.report import (print_cannot_run, print_gate, print_input_errors, print_rejected,
                                               print_table, print_unmeasured)

    folder = Path(settings.paths.out) / version
    print(f"dataset version {version} is up to date: Dagster records its ingestion, {', '.join(summary['metrics'])}"
          f", eval_summary and the gate (baseline_comparison) materialized and not stale, by run {run_id} with the "
          f"same options and judge; nothing was run or sent. Its reports in {folder}/ are that run's; --force evaluates the version again",
          file=sys.stderr)
    print_cannot_run(summary["cannot_run"])
    print_rejected(summary["rejected"]["lines"], summary["rejected"]["rows"], summary["rejected"]["total_rows"],
                   rejection_limit(None, definitions(args, settings).resources["dataset_store"], version)[0])
    print_input_errors(summary["input_errors"]["lines"], summary["input_errors"]["rows"])
    # What that run sent is not this one's (nor, in a judge cascade, what its strong judge sent).
    print_table({**summary, "usage": {}, **({"cascade": {**summary["cascade"], "usage": {}}} if summary.get("cascade")
                                           else {})})
    print_unmeasured(summary, folder / "results.parquet")
    # The gate as that run decided it (up to date: baseline_comparison materialized and not stale).
    record = latest_record(args.instance, "baseline_comparison", version)
    assert record is not None  # up to date: materialized, and not stale
    gate = materialization(record).metadata
    passed = bool(gate["passed"].value) if "passed" in gate else True
    print_gate(gate, passed, folder)
    if not passed:
        from rag_eval.orchestration.gate_cli import GATE_FAILED

        return GATE_FAILED
    return 0


def cmd_backfill(args: argparse.Namespace) -> int:
    """Evaluate registered versions in key order, from ``--from`` to ``--to`` inclusive, with the
    settings of its arguments (``RunSettings.from_args``)."""
    from rag_eval.assets.partitions import dataset_versions
    from rag_eval.metrics.errors import BusyError, SettingsError, command
    from rag_eval.orchestration.dry_run import check_judge, priced_budget

    settings = priced_budget(RunSettings.from_args(args), args)  # a sum is refused: the rows are not known
    for judge in settings.judges():
        check_judge(judge)
    check_out(settings)
    versions = sorted(args.instance.get_dynamic_partitions(dataset_versions.name))
    chosen = [v for v in versions if (not args.start or v >= args.start) and (not args.end or v <= args.end)]
    if not chosen:
        raise SettingsError(f"no registered version between {args.start or 'the first'} and {args.end or 'the last'}")
    failed, regressed = [], 0
    for version in chosen:
        try:
            summary = evaluate_version(version, settings, args)
        except BusyError as exc:  # that process evaluates it: the backfill goes on with the others
            print(f"{version}: skipped: {exc}", file=sys.stderr)
            continue
        except FileNotFoundError as exc:  # its folder moved or deleted since registration: the others go on
            print(f"{version}: failed: {exc} (register its file again: "
                  f"`{command(f'register FILE --dataset-version {version} --replace')}`)", file=sys.stderr)
            failed.append(version)
            continue
        if summary is None:
            failed.append(version)
            continue
        from rag_eval.orchestration.report import published_figure

        means = ", ".join(f"{m} {published_figure(row)}" for m, row in summary[0]["metrics"].items())
        print(f"{version}: {means}" + ("" if summary[1].passed else "; the regression gate failed"))
        regressed += not summary[1].passed
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    if regressed:
        from rag_eval.orchestration.gate_cli import GATE_FAILED

        print(f"the regression gate failed for {regressed} version(s): `{command('gate VERSION')}` shows why",
              file=sys.stderr)
        return 1 if failed else GATE_FAILED
    return 1 if failed else 0


def cmd_register(args: argparse.Namespace) -> int:
    """Register a dataset version without running it."""
    from rag_eval.metrics.errors import command

    version, new = register(args.instance, args.datasets, args.dataset, args.dataset_version, args.meta, args.replace,
                            args.max_rejected_share)
    said = "registered" if new else "registered again (--replace: its file is this one now)" if args.replace \
        else "already registered:"
    print(f"{said} dataset version {version}; evaluate it with "
          f"`{command(f'run {args.dataset} --dataset-version {version}')}`, or materialize its partition in the Dagster UI")
    return 0
