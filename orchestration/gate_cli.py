"""``rag-eval compare``, ``rag-eval gate`` and ``rag-eval tag``: the regression gate from the CLI.

Exit status of ``compare`` and ``gate``: 0 the gate passed (or there is no baseline yet, or no
row id in common with it: "no decision", nothing was compared);
4 the gate failed (a gated metric regressed, was absent or had no row scored ``ok`` in both
versions, or lost coverage beyond ``max_coverage_drop``); 2 bad arguments or input (as every
``rag-eval`` command).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

GATE_FAILED = 4


def _config(args: argparse.Namespace):
    from dataclasses import replace

    from rag_eval.metrics.core.bounded import quote
    from rag_eval.metrics.errors import SettingsError
    from rag_eval.metrics.stats.gate import GateConfig

    margins = {}
    for item in args.margin or []:
        metric, _, value = item.partition("=")
        try:
            margins[metric] = float(value)
        except ValueError:
            raise SettingsError(f"--margin {quote(item)}: use METRIC=VALUE, e.g. faithfulness=0.03") from None
    config = GateConfig.load(args.config, registry=args.registry, metrics=args.metrics.split(",") if args.metrics else None,
                             repeats=args.repeats, max_coverage_drop=args.max_coverage_drop)
    config.margins.update(margins)
    replace(config, registry=args.registry)  # validate the merged settings
    return config


def _judge(args: argparse.Namespace):
    from rag_eval.metrics.evaluate import default_judge
    from rag_eval.metrics.judges.offline import OfflineJudge

    return OfflineJudge() if args.offline else default_judge(args.spill)


def _print_table(comparison) -> None:
    from rich import box
    from rich.console import Console
    from rich.table import Table

    from rag_eval.metrics.reports.gate_report import _num
    from rag_eval.orchestration.report import printable

    table = Table(pad_edge=False, box=box.SIMPLE_HEAD)
    for column in ("metric", "base", "cand", "diff", "95 % CI", "n", "verdict"):
        # Numbers never wrap; a long verdict ("not in baseline …") wraps rather than being cut at 80 columns.
        table.add_column(column, justify="left" if column in ("metric", "verdict") else "right",
                         no_wrap=column != "verdict", overflow="fold")
    for m in comparison.metrics.values():
        verdict = m.verdict.replace(" detected", "") + ("" if m.metric in comparison.gated else " (info)")
        # A metric decided on estimates says so: its means and interval are the PPI (human labels) or cascade ones.
        table.add_row(m.metric, _num(m.baseline_mean), _num(m.candidate_mean), _num(m.difference, sign=True),
                      f"{_num(m.low, sign=True)}..{_num(m.high, sign=True)}", str(m.n),
                      verdict if m.basis == "judge" else f"{verdict} on {m.basis}")
    print(printable(f"{comparison.candidate} vs baseline {comparison.baseline}"))
    Console().print(table)
    if comparison.diagnosis:  # RAGChecker's diagnostics: which moved, and the candidate's reading
        from rag_eval.metrics.reports.diagnosis import moved_line

        print(printable(f"diagnostics moved: {moved_line(comparison.diagnosis['moved'])}"))
        print(printable(f"diagnosis of the candidate: {comparison.diagnosis['candidate']['reading']}"))


def _finish(comparison, notes: list[str], folder: Path, history) -> int:
    from rag_eval.metrics.stats.gate import write_reports
    from rag_eval.metrics.reports.gate_report import missing_charts
    from rag_eval.orchestration.report import printable

    _print_table(comparison)
    for note in [*notes, *filter(None, [missing_charts()])]:
        print(printable(note) if note.startswith("WARNING") else f"note: {printable(note)}")
    paths = write_reports(comparison, notes, folder, history)
    print(f"wrote {', '.join(str(p) for p in paths.values())}")
    if comparison.passed:
        print(printable(comparison.verdict))
        if not comparison.decided:
            from rag_eval.metrics.stats.comparison import NO_DECISION_HINT

            print(f"note: {NO_DECISION_HINT}")
        return 0
    for failure in comparison.failures:
        print(f"gate failed: {printable(failure)}", file=sys.stderr)
    return GATE_FAILED


def _report_folder(args: argparse.Namespace, candidate) -> Path:
    from rag_eval.metrics.stats.gate import evaluated_versions

    if args.report_dir:
        return Path(args.report_dir)
    return Path(args.out) / (candidate.name if candidate.name in evaluated_versions(args.out) else "gate")


def expected_answers(args: argparse.Namespace):
    """No judge request (``rag_eval.metrics.judges.probe.Expected`` of 0) when both sides are evaluated
    results and ``repeats`` is 1; else ``None``: a side judged now, or repeats, are not counted beforehand."""
    from rag_eval.metrics.judges.probe import Expected

    if _config(args).repeats > 1:
        return None
    sides = [s for s in (args.baseline, args.candidate) if s and s != "previous" and not s.startswith("tag:")]
    stored = all((Path(args.out) / s / "results.parquet").is_file() or (Path(s) / "results.parquet").is_file() or
                 Path(s).suffix == ".parquet" for s in sides)
    return Expected(0, 0) if stored else None


def cmd_compare(args: argparse.Namespace) -> int:
    """Compare CANDIDATE with BASELINE (version keys, results files or datasets)."""
    from rag_eval.metrics.stats.gate import history, load_version, run_comparison

    config = _config(args)
    judge = _judge(args)
    try:
        base, candidate = (load_version(spec, args.out, args.datasets, judge, config.metrics, args.registry)
                           for spec in (args.baseline, args.candidate))
        comparison, notes = run_comparison(base, candidate, config, judge)
    finally:
        if hasattr(judge, "close"):
            judge.close()
    return _finish(comparison, notes, _report_folder(args, candidate), history(args.out, base, candidate))


def cmd_gate(args: argparse.Namespace) -> int:
    """Compare CANDIDATE (default: the latest evaluated version) with its configured baseline."""
    from rag_eval.metrics.errors import SettingsError, command
    from rag_eval.metrics.stats.gate import evaluated_versions, is_timed, no_baseline, read_tags, resolve_baseline

    config = _config(args)
    versions = evaluated_versions(args.out)
    timed = [v for v in versions if is_timed(v)]  # registered files, in time order; target runs have no time
    candidate = args.candidate or ((timed or versions)[-1] if versions else None)
    if candidate is None:
        raise SettingsError(f"no evaluated version under {args.out}/: run `{command('run')}` first, or name a candidate")
    rule = args.baseline or config.baseline
    if rule == "previous" and candidate not in versions:
        raise SettingsError(f"{candidate} is not an evaluated version under {args.out}/, so it has no previous version: "
                            f"name its baseline: `{command(f'gate {candidate} --baseline VERSION')}`")
    baseline = rule
    if rule == "previous" or rule.startswith("tag:") or (rule in versions and not Path(rule).exists()):
        baseline = resolve_baseline(candidate, rule, versions, read_tags(args.datasets))
    if baseline is None or baseline == candidate:
        why = "it is the baseline itself" if baseline else "no earlier version" if is_timed(candidate) else \
            no_baseline(candidate)
        print(f"no baseline for {candidate} ({rule}: {why}); nothing to compare, the gate passes")
        return 0
    args.baseline, args.candidate = baseline, candidate
    return cmd_compare(args)


def cmd_tag(args: argparse.Namespace) -> int:
    """Point tag NAME at VERSION (``<datasets>/tags.json``), or list the tags."""
    from rag_eval.metrics.errors import SettingsError, command
    from rag_eval.metrics.stats.gate import evaluated_versions, read_tags, set_tag

    if args.name and args.version:
        if args.version not in evaluated_versions(args.out):
            raise SettingsError(f"{args.version} is not an evaluated version under {args.out}/ (no results.parquet): "
                                f"evaluate it with `{command('run')}` first, or pass --out")
        set_tag(args.datasets, args.name, args.version)
        print(f"tag {args.name} -> {args.version} ({Path(args.datasets) / 'tags.json'})")
        return 0
    if args.name or args.version:
        raise SettingsError(f"{command('tag NAME VERSION')} sets a tag; without arguments it lists them")
    for name, version in sorted(read_tags(args.datasets).items()):
        print(f"{name}\t{version}")
    return 0


def add_gate_commands(sub) -> None:
    """Add ``compare``, ``gate`` and ``tag`` to the ``rag-eval`` subcommands ``sub``."""
    compare = sub.add_parser("compare", help="compare two versions; exit 4 when the gate fails")
    compare.add_argument("baseline", help="version key, results .parquet, or dataset (.jsonl / folder)")
    compare.add_argument("candidate", help="version key, results .parquet, or dataset (.jsonl / folder)")
    compare.set_defaults(handler=cmd_compare, uses_instance=False)
    gate = sub.add_parser("gate", help="compare a version with its configured baseline; exit 4 when it fails")
    gate.add_argument("candidate", nargs="?", help="version key or file (default: the latest evaluated version by its key's time)")
    gate.add_argument("--baseline", help="override the config's baseline: previous, tag:NAME, a version key or a file")
    gate.set_defaults(handler=cmd_gate, uses_instance=False)
    for p in (compare, gate):
        p.set_defaults(judges=True, expected=expected_answers)
        p.add_argument("--config", help="gate settings (TOML; default [tool.rag_eval.gate] of ./pyproject.toml)")
        p.add_argument("--metrics", help="gated metrics, comma-separated (default: the config's)")
        p.add_argument("--margin", action="append", metavar="METRIC=VALUE",
                       help="margin of a metric on its own scale (repeatable; default 0.02 on [0, 1] metrics)")
        p.add_argument("--repeats", type=int, help="judgements per row, LLM judge (default: the config's, 1)")
        p.add_argument("--max-coverage-drop", type=float, metavar="SHARE",
                       help="largest allowed rise of the share of rows not scored ok (default 0.05)")
        p.add_argument("--report-dir", help="where report.md, report.html and comparison.json go (default "
                                            "out/<candidate version>/, or out/gate/ for files)")
        p.add_argument("--offline", action="store_true", help="judge datasets and repeats with the offline judge")
        p.add_argument("--out", default="out", help="folder of evaluated versions (default out/)")
        p.add_argument("--datasets", default="datasets", help="folder of dataset versions and tags.json")
    tag = sub.add_parser("tag", help="name a version (e.g. production) for the gate's baseline = tag:NAME")
    tag.add_argument("name", nargs="?", help="tag name")
    tag.add_argument("version", nargs="?", help="version key")
    tag.add_argument("--datasets", default="datasets", help="folder holding tags.json (default datasets/)")
    tag.add_argument("--out", default="out", help="folder of evaluated versions (default out/): a tag names one")
    tag.set_defaults(handler=cmd_tag, uses_instance=False)
