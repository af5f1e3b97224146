"""``rag-eval annotate export|import``, and what ``rag-eval run`` does when only labels changed.

``export`` writes a random sample of a version's rows for people to label (``rag_eval.metrics.sources.annotate``:
a CSV sheet, Label Studio tasks and config); ``import`` reads the filled files back, checks them
(``rag_eval.metrics.sources.labels``) and stores them with the version (``<datasets>/<version>/labels.jsonl``).
``rag-eval run`` of a version otherwise up to date whose labels changed materializes only
``human_labels``, ``label_estimates`` and the gate that decides on them (:func:`refresh_labels`):
nothing is judged again.

Exit status of ``import``: 0 every label line stored; 1 some lines refused (each named with its
line and field; the others stored); 2 bad arguments or a file that cannot be read.
"""
from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rag_eval.orchestration.settings import RunSettings

LABEL_ASSETS = ["human_labels", "label_estimates"]


def _store(args: argparse.Namespace):
    from rag_eval.assets.resources import DatasetStore

    return DatasetStore(root=str(Path(args.datasets).resolve()))


def labels_changed(instance, definitions, version: str) -> str | None:
    """Why ``version``'s label assets must run again, or ``None``: its ``labels.jsonl`` is not the
    file ``human_labels`` last read (new, edited or removed: Dagster does not see the file), or
    Dagster reports ``human_labels`` or ``label_estimates`` missing or stale in ``definitions``
    (the command's, ``rag_eval.orchestration.parsing.definitions``) while the version has labels
    (e.g. ``eval_summary`` re-run alone)."""
    from rag_eval.assets.labels import labels_path
    from rag_eval.assets.registration import sha256_of
    from rag_eval.orchestration.records import latest_record, materialization, out_of_date

    path = labels_path(definitions.resources["dataset_store"], version)
    read = latest_record(instance, "human_labels", version)
    recorded = materialization(read).metadata["labels_sha256"].value if read else ""
    current = sha256_of(path) if path.exists() else ""
    if current != recorded:
        return f"{path.name} is {'new' if not recorded else 'removed' if not current else 'changed'}"
    if current and out_of_date(instance, definitions, version, LABEL_ASSETS):
        return "the label estimates are out of date"
    return None


def refresh_labels(version: str, settings: RunSettings, args: argparse.Namespace, why: str) -> int:
    """Materialize ``human_labels``, ``label_estimates`` and the gate that decides on them of
    ``version`` (no metric, no judge request; a run of ``evaluation_job`` with these three, on the
    command's instance ``args.instance``, with the run config of ``settings``), print the
    summary with its estimates and the gate; 1 if the run failed, 4 if the gate failed."""
    import json

    import dagster as dg

    from rag_eval.orchestration.jobs import run_in_process
    from rag_eval.orchestration.parsing import definitions
    from rag_eval.orchestration.jobs import gate_check, only_the_gate_failed
    from rag_eval.orchestration.gate_cli import GATE_FAILED
    from rag_eval.orchestration.failures import print_run_failure
    from rag_eval.orchestration.report import print_gate, print_table
    from rag_eval.orchestration.runs import after_startup, only_run_of

    warnings.filterwarnings("ignore", category=dg.BetaWarning)  # Output(data_version=...), as evaluate_version
    print(f"dataset version {version}: its metrics are up to date, but {why}: re-estimating from the labels "
          "(human_labels, label_estimates); no metric is judged again", file=sys.stderr)
    selected, folder = [*LABEL_ASSETS, "baseline_comparison"], Path(settings.paths.out) / version
    with only_run_of(version, Path(settings.paths.out)), after_startup():
        result = run_in_process(definitions(args, settings), "evaluation_job", dg.AssetSelection.assets(*selected),
                                version, args.instance, settings.to_run_config(selected))
    if not result.success and not only_the_gate_failed(result):
        print_run_failure(result)
        return 1
    summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    print_table({**summary, "usage": {}})
    gate = gate_check(result)  # the gate decides on the labels' estimates too: decided again
    assert gate is not None  # the run got past the gate (selected), whose asset always reports its check
    print_gate(gate.metadata, gate.passed, folder)
    return 0 if gate.passed else GATE_FAILED


def _version(args: argparse.Namespace) -> str:
    """The version named by ``args.dataset``: a registered key, or a file registered now (same rule as ``run``)."""
    from rag_eval.assets.registration import register_version

    store = _store(args)
    if not Path(args.dataset).exists() and store.samples_path(args.dataset).exists():
        return args.dataset
    version, new = register_version(args.instance, store, Path(args.dataset))
    if new:
        print(f"registered dataset version {version}", file=sys.stderr)
    return version


def _refuse_unimported(sheet: Path, stored: set[tuple[int, str, str]]) -> None:
    """Refuse to write over a sheet someone filled in: labels in it that are not stored yet.

    Raises
    ------
    ValueError
        Naming the sheet, how many labels it holds that were not imported, and what to do.
    """
    from rag_eval.metrics.errors import SettingsError, command
    from rag_eval.metrics.sources.labels import read_records

    if not sheet.exists():
        return
    waiting = 0
    for _, _, record in read_records(sheet):
        if isinstance(record, dict) and str(record.get("label") or "").strip():
            line, named = str(record.get("line") or "").strip(), str(record.get("id") or "").strip()
            waiting += not (line.isdigit() and (int(line) - 1, named, str(record.get("metric") or "").strip()) in stored)
    if waiting:
        raise SettingsError(f"{sheet} holds {waiting} filled label(s) not imported yet: import them first "
                            f"({command(f'annotate import {sheet}')}) or move the sheet aside; it was not overwritten")


def cmd_export(args: argparse.Namespace) -> int:
    """Write a seeded random sample of a version's rows to a CSV sheet and Label Studio tasks."""
    from rag_eval.metrics.errors import SettingsError, command
    import pandas as pd

    from rag_eval.metrics.sources.annotate import draw, tasks, write_label_studio, write_sheet
    from rag_eval.metrics.sources.labels import read_stored
    from rag_eval.metrics.core.samples import load_samples

    version = _version(args)
    registry = args.registry
    metrics = [m.strip() for m in args.metrics.split(",") if m.strip()]
    unknown = [m for m in metrics if m not in registry]
    if unknown or not metrics:
        raise SettingsError(f"--metrics: unknown metric(s) {unknown}" if unknown else "--metrics: name a metric")
    store = _store(args)
    samples = [s for s in load_samples(store.samples_path(version)) if "row" not in s.problems]
    results = Path(args.out) / version / "results.parquet"
    needed = args.stratify or args.show_judge
    if needed and not results.exists():
        raise SettingsError(f"{'--stratify' if args.stratify else '--show-judge'} needs the judge's results: evaluate "
                            f"the version first ({command(f'run {args.dataset}')}); {results} does not exist")
    columns = ["row", "metric", "status", "value", "passed", "reason"]
    frame = pd.read_parquet(results) if needed else pd.DataFrame(columns=columns)  # read when needed
    # A turn is drawn, shown and labelled on its own: (row, turn) keys it, a single turn's turn 0.
    turns = frame["turn"].fillna(0).astype(int) if "turn" in frame else pd.Series(0, index=frame.index)
    strata = None
    if args.stratify:
        if args.stratify not in registry:
            raise SettingsError(f"--stratify {args.stratify}: not a metric")
        mine = frame["metric"] == args.stratify
        strata = {(int(r), int(t)): ("pass" if p else "fail") if s == "ok" else s
                  for r, t, s, p in zip(frame.loc[mine, "row"], turns[mine], frame.loc[mine, "status"],
                                        frame.loc[mine, "passed"])}
    by_unit = {(s.row, s.turn or 0): s for s in samples}
    units = draw(list(by_unit), args.n, args.seed, strata)
    labelled = {(r["line"] - 1, str(r["id"]), r["metric"]) for r in read_stored(store.samples_path(version).parent)}
    judged = {(int(r), int(t), m): (None if pd.isna(v) else float(v), reason) for r, t, m, v, reason in
              zip(frame["row"], turns, frame["metric"], frame["value"], frame["reason"])} if args.show_judge else None
    chosen = [by_unit[unit] for unit in units]
    records = [r for sample in chosen for r in tasks([sample], metrics, version, judged, registry)
               if (sample.row, sample.id, r["metric"]) not in labelled
               and all(sample.missing(f) is None for f in registry[r["metric"]].required_fields)]
    folder = Path(args.out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    _refuse_unimported(folder / f"{version}.csv", labelled)
    sheet = write_sheet(records, folder / f"{version}.csv")
    label_studio, config = write_label_studio(records, metrics, folder, version, registry)
    how = f"stratified by the judge's verdict on {args.stratify}, proportional allocation" if args.stratify \
        else "uniform; its first rows are a uniform sample too: label from the top"
    print(f"drew {len(units)} of {len(samples)} rows of {version} (seed {args.seed}, {how}): {len(records)} to label "
          f"({', '.join(metrics)}; rows already labelled and rows lacking a field a metric reads left out)")
    print(f"wrote {sheet} (fill the label column: pass/fail, or a number on the metric's scale), {label_studio} and "
          f"{config} (Label Studio: import the tasks into a project with this labeling config, export as JSON)")
    print(f"then: {command(f'annotate import {sheet}')}")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    """Read filled label files, check them, store them with their version (newest label wins)."""
    from rag_eval.metrics.errors import SettingsError, command
    from rag_eval.metrics.sources.labels import merge, read_records, read_stored, validate, write_stored
    from rag_eval.metrics.core.samples import iter_samples
    from rag_eval.orchestration.report import printable

    store = _store(args)
    records = [record for path in args.files for record in read_records(path)]
    named = {str(r[2]["version"]).strip() for r in records if isinstance(r[2], dict) and r[2].get("version")}
    version = args.dataset_version or (named.pop() if len(named) == 1 else None)
    if version is None:
        raise SettingsError("say which dataset version the labels are for: --dataset-version KEY" +
                            (f" (the files name {sorted(named)})" if named else ""))
    if not store.samples_path(version).exists():
        raise SettingsError(f"dataset version {version} is not registered under {args.datasets}/")
    ids = [(s.row, s.id) for s in iter_samples(store.samples_path(version))]
    labels, problems, blank = validate(records, ids, version)
    for problem in problems:
        print(f"refused: {printable(problem)}", file=sys.stderr)
    folder = store.samples_path(version).parent
    stored = read_stored(folder)
    before = {(r["line"], str(r["id"]), r["metric"]) for r in stored}
    merged = merge(stored, labels)
    path = write_stored(folder, merged) if labels else folder / "labels.jsonl"
    given = {(r["line"], str(r["id"]), r["metric"]) for r in labels}
    replaced, twice = len(given & before), len(labels) - len(given)
    counts: dict[str, int] = {}
    for record in merged:
        counts[record["metric"]] = counts.get(record["metric"], 0) + 1
    print(f"{version}: stored {len(given)} label(s) in {path} ({replaced} replacing earlier ones"
          f"{f'; {twice} given again for the same row and metric: the newest kept' if twice else ''}); "
          f"{blank} row(s) left blank, {len(problems)} line(s) refused; labels now: "
          f"{', '.join(f'{m} {n}' for m, n in sorted(counts.items())) or 'none'}")
    if labels:
        print(f"then: {command(f'run {Path(args.datasets) / version}')} (re-estimates from the labels; nothing is "
              "judged again when the metrics are up to date)")
    return 1 if problems else 0


def add_annotate_commands(sub) -> None:
    """Add ``annotate export`` and ``annotate import`` to the ``rag-eval`` subcommands ``sub``."""
    annotate = sub.add_parser("annotate", help="human labels: export rows to label, import the labels")
    which = annotate.add_subparsers(dest="annotate_command", required=True)
    export = which.add_parser("export", help="write a random sample of a version's rows to label (CSV, Label Studio)")
    export.add_argument("dataset", help="a version key, or a dataset file (registered as `rag-eval run` does)")
    export.add_argument("-n", type=int, default=30, help="rows to draw (default 30)")
    export.add_argument("--metrics", default="faithfulness",
                        help="metrics to label, comma-separated (default faithfulness)")
    export.add_argument("--seed", type=int, default=0, help="the draw's seed (default 0; a larger -n extends it)")
    export.add_argument("--stratify", metavar="METRIC",
                        help="stratify by the judge's verdict on METRIC (proportional allocation; needs results)")
    export.add_argument("--show-judge", action="store_true",
                        help="add the judge's score and reason (annotators are blind to them by default)")
    export.add_argument("--out-dir", default="annotate", help="where the files go (default annotate/)")
    export.set_defaults(handler=cmd_export, uses_instance=True)
    load = which.add_parser("import", help="read filled label files (CSV, JSONL, Label Studio JSON) into a version")
    load.add_argument("files", nargs="+", help="label files (.csv, .jsonl, Label Studio's .json export)")
    load.add_argument("--dataset-version", help="the version (default: the version column of the files)")
    load.set_defaults(handler=cmd_import, uses_instance=False)
    for p in (export, load):
        p.add_argument("--datasets", default="datasets", help="folder of dataset versions (default datasets/)")
        p.add_argument("--out", default="out", help="folder of evaluated versions (default out/)")
