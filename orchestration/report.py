"""What ``rag-eval`` prints: progress, the summary table, and the account of bad lines.

Everything from the data passes through :func:`printable` first, so a control character
in a field (an escape sequence, a carriage return) is shown escaped, never interpreted by
the terminal. Progress is a live bar on a terminal and plain lines elsewhere (CI logs).
"""
from __future__ import annotations

import re
import sys
import time
from pathlib import Path
from collections.abc import Mapping
from typing import Any, TextIO

#: Lines of rejected rows and of input errors printed (all are in summary.json and the tables).
SHOWN = 5
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def printable(text: object) -> str:
    """``text`` with control characters (C0, DEL, C1, line separators, bidi overrides)
    escaped as ``\\xNN``/``\\uNNNN``, so data cannot move the cursor, recolour or clear a
    terminal."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), str(text))


class ProgressDisplay:
    """A listener ``(metric, done, total)`` drawing progress while it is open (``with``): rich bars when
    ``stream`` (default stderr) is a terminal, else a plain line per metric at its start, every ``every``
    seconds and at its end. Told anything while closed, it draws nothing (a command's runs that show no
    progress share its execution resource)."""

    def __init__(self, stream: TextIO | None = None, every: float = 10.0) -> None:
        self.stream, self.every = stream or sys.stderr, every
        self._bars: Any = None
        self._tasks: dict[str, Any] = {}
        self._last: dict[str, float] | None = None

    def __enter__(self) -> ProgressDisplay:
        self._tasks, self._last = {}, {}
        if self.stream.isatty():
            from rich.console import Console
            from rich.progress import Progress

            self._bars = Progress(transient=True, console=Console(file=self.stream))
            self._bars.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        bars, self._bars, self._last = self._bars, None, None
        if bars is not None:
            bars.__exit__(*exc)

    def __call__(self, metric: str, done: int, total: int) -> None:
        if self._bars is not None:
            if metric not in self._tasks:
                self._tasks[metric] = self._bars.add_task(metric, total=total)
            self._bars.update(self._tasks[metric], completed=done)
            return
        if self._last is None:  # closed
            return
        now = time.monotonic()
        if metric in self._last and done < total and now - self._last[metric] < self.every:
            return
        self._last[metric] = now
        print(f"{metric}: {done}/{total} scored", file=self.stream, flush=True)


def _fmt(value: float | None, digits: str = ".4g") -> str:
    return "—" if value is None else format(value, digits)


def print_table(summary: dict, width: int | None = None) -> None:
    """Metric, mean, pass rate, threshold and measured/total, readable at 80 columns;
    then rows good/bad/unmeasured and what this run sent to the judge."""
    from rich.console import Console
    from rich.table import Table

    console = Console(width=width) if width else Console()
    print(printable(f"{summary['task_name']} — judge {summary['judge'].get('judge')}, scale {summary['scale']}"))
    table = Table(pad_edge=False)
    for column in ("metric", "mean", "pass", "threshold", "measured"):
        table.add_column(column, justify="left" if column == "metric" else "right",
                         overflow="fold", no_wrap=column != "metric")
    for group, names in _sections(summary):
        if group:  # RAGChecker's diagnostics under their group's name
            table.add_section()
            table.add_row(f"{group}:", "", "", "", "", style="bold")
        for metric in names:
            row = summary["metrics"][metric]
            sign = "≥" if row["direction"] == "higher_is_better" else "≤"
            rate = "—" if row["pass_rate"] is None else f"{row['pass_rate']:.0%}"
            table.add_row(f"  {metric}" if group else metric, _fmt(row["mean"]), rate,
                          f"{sign} {row['threshold']:g}", f"{row['measured']}/{row['total']}")
    console.print(table)
    print_conversations(summary, console)
    print_estimates(summary, console)
    print_cascade(summary, console)
    print(f"rows: {summary['total']}  good: {summary['num_good']}  bad: {summary['num_bad']}  "
          f"unmeasured: {summary['num_unmeasured']}")
    if summary.get("overall_average") is not None:
        print(f"overall ([0, 1] metrics, lower-is-better turned): {summary['overall_average']:g}")
    usage = summary.get("usage") or {}
    if any(usage.get(c) for c in ("chat_requests", "embedding_requests", "cache_hits", "shared_hits")):
        print(f"this run sent: {usage['chat_requests']} chat + {usage['embedding_requests']} embeddings requests, "
              f"{usage['prompt_tokens']} prompt + {usage['completion_tokens']} completion tokens" + _reused(usage))
    if summary["judge"].get("embedding_fallback"):
        print(f"note: {printable(summary['judge']['embedding_fallback'])}")
    if summary.get("diagnosis"):
        print_diagnosis(summary["diagnosis"])


def print_conversations(summary: dict, console) -> None:
    """For a file of conversations: per metric, the mean over conversations of their mean over turns,
    of their worst turn, the share whose every turn passed, the mean by turn index, and the worst
    conversation (``rag_eval.metrics.reports.conversations``), on the ``console`` of :func:`print_table`."""
    from rich.table import Table

    block = summary.get("conversations")
    if not block:
        return
    print(f"conversations: {block['conversations']} ({block['turns']} turns); per conversation: mean of turns, "
          "worst turn")
    table = Table(pad_edge=False, box=None)
    for column in ("metric", "mean", "worst turn", "all pass", "by turn 1, 2, …", "worst (turn id)"):
        table.add_column(column, justify="left" if column in ("metric", "worst (turn id)") else "right",
                         overflow="fold", no_wrap=column != "worst (turn id)")
    for metric, row in block["metrics"].items():
        rate = "—" if row["pass_rate"] is None else f"{row['pass_rate']:.0%}"
        turns = " ".join(_fmt(row["by_turn"][k]["mean"], ".2f") for k in sorted(row["by_turn"], key=int))
        worst = row["worst"][0] if row["worst"] else None
        table.add_row(metric, _fmt(row["mean"], ".3f"), _fmt(row["worst_turn_mean"], ".3f"), rate, turns or "—",
                      printable(f"{worst['conversation_id']}/{worst['turn']} {worst['value']:.2f}") if worst
                      else "—")
    console.print(table)


def _reused(usage: dict) -> str:
    """The judgements of ``usage`` not bought again, each kind said apart (``Usage``): those another request of
    this run paid for (``shared_hits``, absent from a summary of before they were counted apart) and those
    found in the cache, paid by earlier runs (``cache_hits``); empty when there were none."""
    parts = [f"{count} {what}" for count, what in ((usage.get("shared_hits", 0), "shared within this run"),
                                                   (usage.get("cache_hits", 0), "reused from the cache (paid by earlier runs)"))
             if count]
    return f"; judgements not bought again: {', '.join(parts)}" if parts else ""


def _sections(summary: dict) -> list[tuple[str | None, list[str]]]:
    """The table's metrics: those outside the diagnosis first, then each diagnosis group's."""
    groups = [(group, list(members)) for group, members in (summary.get("diagnosis") or {}).get("groups", {}).items()]
    grouped = {metric for _, members in groups for metric in members}
    return [(None, [m for m in summary["metrics"] if m not in grouped]), *groups]


#: Characters of a failed claim printed (summary.json keeps 200).
CLAIM_SHOWN = 70


def print_diagnosis(diagnosis: dict, stream: TextIO | None = None) -> None:
    """The one-line diagnosis, then the worst rows of its leading diagnostic with the claims that failed
    (``rag_eval.metrics.reports.diagnosis``; every diagnostic's worst rows are in summary.json)."""
    stream = stream or sys.stdout
    print(f"diagnosis: {printable(diagnosis['reading'])}", file=stream)
    lead = diagnosis.get("lead")
    entry = next((members[lead] for members in diagnosis["groups"].values() if lead in members), None)
    if not entry or not entry["worst_rows"]:
        return
    print(f"  worst rows for {lead} (what failed):", file=stream)
    for row in entry["worst_rows"]:
        failed = [f'"{c if len(c) <= CLAIM_SHOWN else c[:CLAIM_SHOWN - 1] + "…"}"' for c in row["failed"][:2]]
        more = len(row["failed"]) - len(failed) + row.get("more_failed", 0)
        print(printable(f"    line {row['line']} (id {row['id']}): {row['value']:g}: {'; '.join(failed) or '—'}"
                        + (f" (+{more} more)" if more else "")), file=stream)


def print_estimates(summary: dict, console) -> None:
    """For each metric with human labels: the judge's raw mean, the prediction-powered estimate
    with its 95 % interval, labelled/scored rows and the agreement on them (kappa for binary
    labels, Spearman's rho for a scale), on the ``console`` of :func:`print_table`."""
    from rich.table import Table

    labelled = {m: row for m, row in summary["metrics"].items() if "labels" in row}
    if not labelled:
        return
    print("human labels: prediction-powered estimate, 95 % interval; agreement on labelled rows")
    table = Table(pad_edge=False, box=None)  # no borders: two spaces between columns, the names on one line
    for column in ("metric", "judge", "estimate [95 % CI]", "labelled", "acc", "κ/ρ", "AUROC"):
        table.add_column(column, justify="left" if column == "metric" else "right", overflow="fold",
                         no_wrap=column != "metric")
    for metric, row in labelled.items():
        ppi, agreement = row["ppi"], row["agreement"]
        shown = f"{ppi['estimate']:.3f} [{ppi['ci_low']:.3f}, {ppi['ci_high']:.3f}]" if ppi else \
            f"needs {summary.get('labels', {}).get('min_labels', '?')} labels"
        second = f"κ {_fmt(agreement['cohen_kappa'], '.2f')}" if "cohen_kappa" in agreement else \
            f"ρ {_fmt(agreement.get('spearman'), '.2f')}" if agreement else "—"
        table.add_row(metric, _fmt(row["raw_mean"], ".3f"), shown, f"{row['labels']['n']}/{row['labels']['rows_ok']}",
                      _fmt(agreement.get("accuracy"), ".2f"), second, _fmt(agreement.get("auroc"), ".2f"))
    console.print(table)


def print_cascade(summary: dict, console) -> None:
    """For each metric a judge cascade estimated: the cheap judge's raw mean, the strong judge's
    estimated mean with its 95 % interval (or why there is none), strong-judged / covered rows, the
    two judges' agreement and the strong judge's requests against a full strong run's; on the
    ``console`` of :func:`print_table`."""
    from rich.table import Table

    cascade = summary.get("cascade")
    if not cascade:
        return
    print(printable(f"judge cascade: {cascade.get('strong_judge') or 'the strong judge'} on n of N rows (sampling "
                    f"{cascade['sampling']}, budget {cascade['budget']}, seed {cascade['seed']}); its mean estimated "
                    "with a 95 % interval beside the cheap judge's; its requests, and a full strong run's"))
    table = Table(pad_edge=False, box=None)
    width = max(len(m) for m, row in summary["metrics"].items() if row.get("cascade") is not None)
    for column in ("metric", "cheap", "strong [95 % CI]", "n/N", "agree", "requests"):  # a note wraps, not the name
        table.add_column(column, justify="left" if column == "metric" else "right", overflow="fold",
                         no_wrap=column != "strong [95 % CI]", min_width=width if column == "metric" else None)
    for metric, row in summary["metrics"].items():
        if (block := row.get("cascade")) is None:
            continue
        found = block["estimate"]
        shown = f"{found['estimate']:.3f} [{found['ci_low']:.3f}, {found['ci_high']:.3f}]" if found else \
            printable(block.get("note") or "no estimate")
        requests = block["requests"]
        table.add_row(metric, _fmt(row["mean"], ".3f"), shown, f"{block['n']}/{block['rows']}",
                      _fmt(block["agreement"], ".2f"), _requests(requests))
    console.print(table)
    usage = cascade.get("usage") or {}
    if any(usage.get(c) for c in ("chat_requests", "embedding_requests", "cache_hits", "shared_hits")):
        print(f"the strong judge sent: {usage['chat_requests']} chat + {usage['embedding_requests']} embeddings "
              f"requests" + _reused(usage))


def _requests(requests: dict) -> str:
    """A cascade block's strong chat requests against a full strong run's: ``12 of 200`` (planned exactly),
    ``12 of ~200`` (estimated from the draw), ``20 of 200 rows`` (a strong judge reporting no usage)."""
    if requests["unit"] == "rows":
        return f"{requests['used']:,} of {requests['full_run']:,} rows"
    return f"{requests['sent']:,} of {'' if requests['from'] == 'plan' else '~'}{requests['full_run']:,}"


def published_figure(row: dict) -> str:
    """A summary metric row's figure to read (its ``published``): the human-label or cascade
    estimate with its interval, else the raw mean."""
    found = {"ppi": row.get("ppi"), "cascade": (row.get("cascade") or {}).get("estimate")}.get(row.get("published", ""))
    if not found:
        return str(row["mean"])
    return f"{found['estimate']:.4f} [{found['ci_low']:.4f}, {found['ci_high']:.4f}] ({row['published']})"


def print_cannot_run(cannot_run: dict[str, str], stream: TextIO | None = None) -> None:
    """One line per selected metric that no line of the file can feed, with why."""
    for metric, why in cannot_run.items():
        print(f"note: {metric} cannot run: {printable(why)}; its results are input_error, the other metrics run",
              file=stream or sys.stderr)


def print_gate(metadata: Mapping[str, Any], passed: bool, folder: Path, stream: TextIO | None = None) -> None:
    """The regression gate of a run in one line (``metadata``: its ``no_regression_vs_baseline``
    evaluation's, or ``baseline_comparison``'s materialization's), then its warnings (the two versions
    judged by different judges) and each failure; its reports are in ``folder``."""
    from rag_eval.metrics.errors import command

    if "verdict" not in metadata:  # nothing to compare: no earlier version, or the baseline is this version
        print(f"regression gate: nothing to compare ({metadata['baseline'].value})", file=stream)
        return
    print(printable(f"regression gate vs baseline {metadata['baseline'].value}: {metadata['verdict'].value} "
                    f"(report: {folder / 'report.html'}; `{command(f'gate {folder.name}')}` prints the table)"),
          file=stream or (sys.stdout if passed else sys.stderr))
    for note in metadata["notes"].value if "notes" in metadata else []:  # its warnings (rag-eval gate: all)
        if note.startswith("WARNING"):
            print(printable(note), file=stream or sys.stderr)
    for failure in metadata["failures"].value:
        print(f"gate failed: {printable(failure)}", file=stream or sys.stderr)


def print_unmeasured(summary: dict, results: Path, stream: TextIO | None = None) -> None:
    """One line per metric with no row scored because every row was ``not_applicable``
    (e.g. a custom metric with the offline judge), with the reason most rows gave; the
    results file (``results.parquet``) is read only for such metrics."""
    unmeasured = [m for m, c in summary["coverage"].items() if c["total"] and c["not_applicable"] == c["total"]]
    if not unmeasured:
        return
    import pandas as pd

    rows = pd.read_parquet(results, columns=["metric", "reason"], filters=[("metric", "in", unmeasured)])
    for metric, group in rows.groupby("metric", sort=True):
        reason = group["reason"].mode().iloc[0] if group["reason"].notna().any() else "no reason given"
        print(f"note: {metric}: not applicable on all {len(group)} rows: {printable(reason)}",
              file=stream or sys.stderr)


def print_rejected(rejected: list[dict], count: int, total: int, limit: float | None,
                   stream: TextIO | None = None) -> None:
    """``count`` rejected lines of ``total`` (against ``limit``), then the first few, one a line."""
    if not count:
        return
    stream = stream or sys.stderr
    share = f"{count / total:.1%} of {total}" if total else str(count)
    bound = f", limit {limit:.1%}" if limit is not None else ""
    print(f"{count} line(s) rejected: no selected metric can use them ({share}{bound}); "
          "listed in rejected_samples with the line as read", file=stream)
    for entry in rejected[:SHOWN]:
        print(f"  line {entry['line']} (id {printable(entry['id'])}): {printable(entry['reason'])}", file=stream)
    if count > SHOWN:
        print(f"  … and {count - SHOWN} more", file=stream)


def print_input_errors(errors: list[dict], count: int, stream: TextIO | None = None) -> None:
    """``count`` lines some metrics could not use, then the first few, one message a line
    (every field of the line in it, with the metrics that needed it)."""
    if not count:
        return
    stream = stream or sys.stderr
    print(f"{count} line(s) with input errors: the metrics that need a missing or malformed field report "
          "input_error for them, the others scored them", file=stream)
    for entry in errors[:SHOWN]:
        fields = "; ".join(f"{name} {printable(why)}" for name, why in entry["fields"].items())
        print(f"  line {entry['line']} (id {printable(entry['id'])}): {fields} "
              f"({', '.join(entry['metrics'])})", file=stream)
    if count > SHOWN:
        print(f"  … and {count - SHOWN} more", file=stream)


def print_failed_checks(result, limit: float, dataset: str | None, folder: Path, stream: TextIO | None = None) -> None:
    """The failed quality checks of a run (``dagster.ExecuteInProcessResult``): the blocking
    one, the share of rejected lines against ``limit`` and how to raise it for the ``dataset`` file run or the
    version's ``folder`` (``rag_eval.assets.ingestion.raise_limit``), then the lines; then the
    great-expectations checks that failed (none blocks), each with its first failing lines, and their Data Docs page."""
    from rag_eval.assets.ingestion import raise_limit

    stream = stream or sys.stderr
    evaluations = result.get_asset_check_evaluations()
    for check in evaluations:
        if not check.passed and check.check_name == "rejected_share_within_limit":
            meta = check.metadata
            print(f"quality check {check.check_name} failed: {meta['rejected_share'].value:.1%} of the lines "
                  f"rejected > limit {limit:.1%} ({raise_limit(meta['rejected_share'].value, folder, dataset)})",
                  file=stream)
            print_rejected(meta["rejected"].value, meta["rejected_rows"].value, meta["total_rows"].value, limit,
                           stream)
            print_input_errors(meta["input_errors"].value, meta["input_error_rows"].value, stream)
    suite = [check for check in evaluations if "data_docs_path" in check.metadata]
    if failed := [check for check in suite if not check.passed]:
        print(f"great-expectations: {len(failed)} of {len(suite)} checks failed, none blocking (Data Docs: "
              f"{printable(failed[0].metadata['data_docs_path'].value)})", file=stream)
    for check in failed:
        count = check.metadata["failing_lines"].value
        print(f"  {check.check_name} ({check.severity.value} on {check.asset_key.to_user_string()}): "
              f"{count} line(s)", file=stream)
        for failure in check.metadata["failures"].value[:SHOWN]:
            print(f"    {printable(failure['message'])}", file=stream)
        if count > SHOWN:
            print(f"    … and {count - SHOWN} more", file=stream)
