"""The gate's reports: ``report.md`` (a pull-request comment) and ``report.html`` (one file).

``report.md`` puts the verdict first, then the metrics that moved, then the rows that
regressed most with the judge's reasons, then coverage and the method, in that order, so
its first lines are the decision. ``report.html`` is self-contained: every chart is an
inline SVG drawn by matplotlib (the ``report`` extra; without it the page has its tables and
says how to get the charts), no script, font or style is fetched at view time.
"""
from __future__ import annotations

import html
import io
import re
from typing import Any

import numpy as np
import pandas as pd

from rag_eval.metrics.reports.aggregate import USAGE_COLUMNS
from rag_eval.metrics.stats.compare import ALPHA, bootstrap_means
from rag_eval.metrics.stats.comparison import NO_DECISION_HINT, Comparison, MetricComparison
from rag_eval.metrics.reports.diagnosis import moved_line
from rag_eval.metrics.reports.estimates_html import estimates_section, published_line
from rag_eval.metrics.stats.cascade_estimates import frame_estimates
from rag_eval.metrics.core.extras import MissingExtra, require
from rag_eval.metrics.core.results import Status

#: Rows listed under "Rows that regressed most".
LISTED_ROWS = 5


def version_stats(version: str, results: pd.DataFrame, metrics: list[str], resamples: int = 2000,
                  seed: int = 0, stream: bool = False) -> dict[str, Any]:
    """One version's point on the trend charts: per metric its published figure, the share of rows ``ok``,
    and the version's cost (requests and tokens in ``results``, a cascade's strong judge's included). The figure is the judge cascade's estimate
    of the strong judge's mean with its 95 % interval when ``results`` carry one (a cascade run's:
    ``rag_eval.metrics.stats.cascade_estimates.frame_estimates``; ``published`` ``"cascade"``, ``n`` the
    strong-judged rows of ``rows``), else the mean of the ``ok`` rows with a 95 % percentile bootstrap
    interval (seeded like :mod:`rag_eval.metrics.stats.compare`; ``published`` ``"mean"``, ``n`` the rows).
    ``stream``: ``results`` are a sample of production traffic, whose strong mean a cascade estimates."""
    stats: dict[str, Any] = {"version": version, "metrics": {}, "coverage": {}}
    cascades, _ = frame_estimates(results, stream=stream)
    for metric in metrics:
        frame = results[results["metric"] == metric]
        if "repeat" in frame:
            frame = frame[frame["repeat"] == 0]
        values = frame.loc[frame["status"] == Status.OK.value, "value"].to_numpy(float)
        stats["coverage"][metric] = round(len(values) / len(frame), 4) if len(frame) else None
        if metric in cascades:
            e = cascades[metric]
            stats["metrics"][metric] = {"mean": e.estimate, "low": e.ci_low, "high": e.ci_high, "n": e.n,
                                        "published": "cascade", "rows": e.N}
        elif len(values):
            means = bootstrap_means(values, seed, metric, resamples)
            low, high = np.percentile(means, [100 * ALPHA / 2, 100 * (1 - ALPHA / 2)])
            stats["metrics"][metric] = {"mean": float(values.mean()), "low": float(low), "high": float(high),
                                        "n": len(values), "published": "mean"}
    usage = results[results["repeat"] == 0] if "repeat" in results else results
    stats["cost"] = {c: int(usage[c].sum()) + (int(usage[f"strong_{c}"].fillna(0).sum()) if f"strong_{c}" in usage else 0)
                     for c in USAGE_COLUMNS if c in usage}  # a cascade's strong judge's too
    return stats


def _num(value: float | None, digits: int = 3, sign: bool = False) -> str:
    if value is None:
        return "—"
    return f"{value:+.{digits}f}" if sign else f"{value:.{digits}f}"


def _share(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


#: Markdown's punctuation that can start markup (CommonMark: any ASCII punctuation may be backslash-escaped).
_MARKDOWN = re.compile(r"([\\`*_{}\[\]()#+!|~>-])")


def _cell(text: Any, width: int = 160) -> str:
    """Data text (ids, the judge's reasons) for a Markdown table cell, inert: one line, cut at
    ``width`` characters, ``&``, ``<`` and ``>`` as HTML entities and Markdown punctuation
    backslash-escaped, so no link, image, tag or code span of the data renders in a PR comment."""
    flat = " ".join(str(text).split())
    flat = flat if len(flat) <= width else flat[: width - 1] + "…"
    flat = flat.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MARKDOWN.sub(r"\\\1", flat)


def _row(m: MetricComparison) -> str:
    interval = f"{_num(m.difference, sign=True)} [{_num(m.low, sign=True)}, {_num(m.high, sign=True)}]"
    return (f"| {m.metric} | {_num(m.baseline_mean)} | {_num(m.candidate_mean)} | {interval} | {m.n} | "
            f"{m.basis} | ±{m.margin:g} | {m.verdict} |")


def comparison_table(comparison: Comparison) -> str:
    """Every compared metric: means (over the paired rows, or the prediction-powered estimates
    from human labels, or the judge cascades' estimates), the difference with its interval, n (paired rows),
    basis (``judge``, ``ppi (n=…/… vs …/…)`` or ``cascade (n=…/… vs …/…)``), margin, verdict (differences are candidate − baseline, turned so that
    + is better)."""
    lines = ["| metric | baseline | candidate | difference [95 % CI] | n | basis | margin | verdict |",
             "|---|---|---|---|---|---|---|---|"]
    return "\n".join(lines + [_row(m) for m in comparison.metrics.values()])


def worst_rows(comparison: Comparison, limit: int = LISTED_ROWS) -> list[dict[str, Any]]:
    """The rows that lost most on the gated metrics (turned differences, most negative first)."""
    rows = [{"metric": metric, **row} for metric in comparison.gated for row in comparison.worst_rows.get(metric, [])]
    return sorted(rows, key=lambda r: r["difference"])[:limit]


def diagnosis_markdown(diagnosis: dict[str, Any]) -> list[str]:
    """A version's diagnosis (``rag_eval.metrics.reports.diagnosis``) as Markdown lines: the reading, each group's
    diagnostics with the share of rows failing them, and the worst rows of the leading one with what
    failed (data text inert, as in :func:`_cell`)."""
    lines = [f"**{_cell(diagnosis['reading'], 400)}**", "", "| group | diagnostic | mean | rows failing |",
             "|---|---|---|---|"]
    lines += [f"| {group} | {metric} | {_num(e['mean'])} | {_share(e['failing_share'])} |"
              for group, members in diagnosis["groups"].items() for metric, e in members.items()]
    lead = next((members[diagnosis["lead"]] for members in diagnosis["groups"].values()
                 if diagnosis.get("lead") in members), None)
    if lead and lead["worst_rows"]:
        lines += ["", f"Worst rows for {diagnosis['lead']}:", "", "| line | id | value | what failed |", "|---|---|---|---|"]
        lines += [f"| {r['line']} | {_cell(r['id'], 40)} | {r['value']:.3g} | {_cell('; '.join(r['failed']), 400)} |"
                  for r in lead["worst_rows"]]
    return lines


def markdown_report(comparison: Comparison, notes: list[str] | None = None) -> str:
    """report.md: verdict, failures, metrics that moved, worst rows with reasons, coverage, method."""
    c = comparison
    if not c.decided and not c.not_applicable:
        lines = [f"## Regression gate: no decision: `{c.candidate}` shares no row id with baseline `{c.baseline}`; "
                 "nothing was compared", "",
                 f"- another question set? {_cell(NO_DECISION_HINT)}"]
    elif not c.decided:
        lines = [f"## Regression gate: {_cell(c.verdict, 400)}: `{c.candidate}` vs baseline `{c.baseline}`", ""]
    else:
        verdict = "PASSED" if c.passed else "FAILED"
        lines = [f"## Regression gate {verdict}: `{c.candidate}` vs baseline `{c.baseline}`", ""]
        decided = [m for m in c.gated if m not in c.not_applicable]
        lines += [f"- **{_cell(f, 400)}**" for f in c.failures] or \
            [f"- no gated metric regressed beyond its margin ({', '.join(decided)})"]
        if c.not_applicable:
            lines.append(f"- not applicable, no row scored ok in either version: {', '.join(c.not_applicable)}")
    moved = [m for m in c.metrics.values() if m.verdict in ("regressed", "improved")]
    lines += ["", "### Metrics that moved", ""]
    if moved:
        lines += comparison_table(c).splitlines()[:2] + [_row(m) for m in moved]
    else:
        lines.append("None: no metric regressed or improved after the Holm adjustment (see the method below).")
    if c.diagnosis:
        lines += ["", "### Diagnosis", "", f"Diagnostics that moved: {_cell(moved_line(c.diagnosis['moved']), 400)}",
                  "", f"The candidate: {_cell(c.diagnosis['candidate']['reading'], 400)}"]
    worst = worst_rows(c)
    if worst:
        lines += ["", "### Rows that regressed most", "", "| metric | id | baseline → candidate | judge's reason |",
                  "|---|---|---|---|"]
        lines += [f"| {r['metric']} | {_cell(r['id'], 40)} | {r['baseline']:.3g} → {r['candidate']:.3g} | "
                  f"{_cell(r['reason'])} |" for r in worst]
    lines += ["", "<details><summary>All metrics, coverage and method</summary>", "", comparison_table(c), ""]
    for metric, cov in c.coverage.items():
        lines.append(f"- {metric}: not scored {cov['baseline']['unscored_share']:.1%} → "
                     f"{cov['candidate']['unscored_share']:.1%} of rows (errors {cov['baseline']['error_share']:.1%} → "
                     f"{cov['candidate']['error_share']:.1%}); {len(c.status_changes.get(metric, []))} status change(s)")
    lines.append(f"- rows only in the baseline: {len(c.only_in_baseline)}; only in the candidate: "
                 f"{len(c.only_in_candidate)}")
    retest = [f"{m.metric} {m.retest_sd['candidate']:.3f}" for m in c.metrics.values()
              if m.retest_sd.get("candidate") is not None]
    if retest:
        lines.append(f"- judge test-retest SD (candidate, pooled within-row): {', '.join(retest)}")
    s = c.settings
    lines += [f"- method: {s['interval']} ({s['resamples']} draws, seed {s['seed']}) of the paired differences over "
              f"rows `ok` in both; regressed when the interval lies below −margin, Holm-adjusted across the "
              f"{len(c.gated)} gated metrics; coverage limit +{s['max_coverage_drop']:.0%}"]
    if any(m.basis.startswith("ppi") for m in c.metrics.values()):
        lines.append("- basis `ppi`: the metric is decided on the two versions' prediction-powered estimates from "
                     "their human labels (labelled / ok rows of each), the normal interval of their difference")
    if any(m.basis.startswith("cascade") for m in c.metrics.values()):
        lines.append("- basis `cascade`: the metric is decided on the two versions' judge-cascade estimates of the "
                     "strong judge's mean (strong-judged / covered rows of each), the normal interval of their "
                     "difference")
    lines += [f"- {_cell(n, 400)}" for n in notes or []]
    lines += ["", "</details>", ""]
    return "\n".join(lines)


def _short(label: str) -> str:
    """A version key short enough for an axis: its date and its hash."""
    return label if len(label) <= 18 else label[:8] + "…" + label[-8:]


def missing_charts() -> str | None:
    """Why report.html has no charts (matplotlib, the ``report`` extra, is not installed), else ``None``."""
    try:
        require("matplotlib", "report", "Drawing the charts of report.html")
    except MissingExtra as exc:
        return str(exc)
    return None


def _svg(figure) -> str:
    import matplotlib.pyplot as plt

    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", bbox_inches="tight")
    plt.close(figure)
    text = buffer.getvalue()
    text = text[text.index("<svg"):]
    start, end = text.find("<metadata>"), text.find("</metadata>")  # creator and date: not for the page
    return text[:start] + text[end + len("</metadata>"):] if start >= 0 else text


def trend_svg(history: list[dict[str, Any]], metrics: list[str], baseline: str, candidate: str) -> str:
    """Small multiples, one per metric: mean and 95 % interval per version, baseline and
    candidate marked (the legend names a baseline only when ``history`` holds it: the traffic
    report has none)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text (selectable, small)
    columns = min(3, len(metrics)) or 1
    rows = -(-len(metrics) // columns) or 1
    figure, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 2.8 * rows), squeeze=False)
    labels = [h["version"] for h in history]
    short = [_short(label) for label in labels]
    for ax, metric in zip(axes.flat, metrics):
        points = [(i, h["metrics"][metric]) for i, h in enumerate(history) if metric in h["metrics"]]
        for i, p in points:
            colour = "#d62728" if labels[i] == candidate else "#1f77b4" if labels[i] == baseline else "#7f7f7f"
            ax.errorbar(i, p["mean"], yerr=[[p["mean"] - p["low"]], [p["high"] - p["mean"]]], fmt="o",
                        color=colour, capsize=3, markersize=6 if colour != "#7f7f7f" else 4,
                        markerfacecolor="white" if p.get("published") == "cascade" else colour)
        if len(points) > 1:
            ax.plot([i for i, _ in points], [p["mean"] for _, p in points], color="#bbbbbb", lw=1, zorder=0)
        if baseline in labels and points:
            ax.axhline(next((p["mean"] for i, p in points if labels[i] == baseline), np.nan), color="#1f77b4",
                       ls="--", lw=0.8)
        ax.set_title(metric, fontsize=10)
        ax.set_xticks(range(len(labels)), short, rotation=30, ha="right", fontsize=7)
        ax.tick_params(axis="y", labelsize=8)
        ax.grid(axis="y", alpha=0.3)
    for ax in list(axes.flat)[len(metrics):]:
        ax.set_visible(False)
    legend = "blue: baseline (dashed line), red: candidate" if baseline in labels else "red: the day or version shown"
    if any(p.get("published") == "cascade" for h in history for p in h["metrics"].values()):
        legend += "; hollow: a judge cascade's estimate"
    figure.suptitle(f"mean and 95 % interval per version — {legend}", fontsize=9, y=1.0)
    figure.tight_layout()
    return _svg(figure)


def cost_svg(history: list[dict[str, Any]]) -> str:
    """Requests (chat + embeddings) and tokens each version's results cost."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, ax = plt.subplots(figsize=(6, 2.2))
    labels = [h["version"] for h in history]
    requests = [h["cost"].get("chat_requests", 0) + h["cost"].get("embedding_requests", 0) for h in history]
    tokens = [h["cost"].get("prompt_tokens", 0) + h["cost"].get("completion_tokens", 0) for h in history]
    ax.bar(range(len(labels)), requests, color="#9ecae1")
    ax.set_ylabel("requests", fontsize=8)
    ax.set_xticks(range(len(labels)), [_short(label) for label in labels], rotation=30, ha="right", fontsize=7)
    twin = ax.twinx()
    twin.plot(range(len(labels)), tokens, "o-", color="#e6550d", markersize=4)
    twin.set_ylabel("tokens", fontsize=8, color="#e6550d")
    ax.set_title("cost per version (requests: bars; tokens: line)", fontsize=9)
    figure.tight_layout()
    return _svg(figure)


_STYLE = """body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1180px;color:#222;padding:0 16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:26px 0 8px;border-bottom:1px solid #ddd}
.verdict{display:inline-block;padding:4px 12px;border-radius:4px;color:#fff;font-weight:600}
.passed{background:#2ca02c}.failed{background:#d62728}.no{background:#7f7f7f}
table{border-collapse:collapse;font-size:13px}
td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}td:first-child,th:first-child{text-align:left}
td.text{text-align:left;max-width:520px}.regressed{color:#d62728;font-weight:600}.improved{color:#2ca02c}
.small{color:#666;font-size:12px}svg{max-width:100%;height:auto}"""


def html_report(comparison: Comparison, history: list[dict[str, Any]], notes: list[str] | None = None) -> str:
    """report.html: verdict, trend charts, comparison table, coverage, cost, worst rows."""
    c = comparison
    e = html.escape
    metrics = [m for m in c.metrics if any(m in h["metrics"] for h in history)]
    label = "FAILED" if c.failures else "PASSED" if c.decided else "NO DECISION"
    missing = missing_charts()  # the tables without the charts, saying how to get them
    no_chart = f"<p class='small'>{e(missing or '')}</p>"
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{e(c.candidate)} vs {e(c.baseline)}</title>"
             f"<style>{_STYLE}</style></head><body>",
             f"<h1>Regression gate: <span class='verdict {label.split()[0].lower()}'>{label}</span></h1>",
             f"<p>candidate <b>{e(c.candidate)}</b> vs baseline <b>{e(c.baseline)}</b>"
             f"{'' if c.decided else ': ' + e(c.verdict.removeprefix('no decision: '))}</p>"]
    parts += ["<ul>"] + [f"<li class='regressed'>{e(f)}</li>" for f in c.failures] + \
        [f"<li class='small'>{e(n)}</li>" for n in notes or []] + ["</ul>"]
    parts += ["<h2>Trend per metric</h2>", no_chart if missing else trend_svg(history, metrics, c.baseline, c.candidate),
              *published_line(history, metrics)]
    parts += ["<h2>Comparison</h2><table><tr><th>metric</th><th>baseline</th><th>candidate</th>"
              "<th>difference</th><th>95 % interval</th><th>n</th><th>basis</th><th>margin</th>"
              "<th>Holm p (regression)</th><th>test-retest SD</th><th>verdict</th></tr>"]
    for m in c.metrics.values():
        sd = m.retest_sd.get("candidate")
        parts.append(f"<tr><td>{e(m.metric)}</td><td>{_num(m.baseline_mean)}</td><td>{_num(m.candidate_mean)}</td>"
                     f"<td>{_num(m.difference, sign=True)}</td><td>[{_num(m.low, sign=True)}, "
                     f"{_num(m.high, sign=True)}]</td><td>{m.n}</td><td class='text'>{e(m.basis)}</td>"
                     f"<td>±{m.margin:g}</td>"
                     f"<td>{_num(m.p_regression_holm, 4)}</td><td>{'—' if sd is None else f'{sd:.3f}'}</td>"
                     f"<td class='{m.verdict.split()[0]}'>{e(m.verdict)}</td></tr>")
    parts.append("</table><p class='small'>Differences are candidate − baseline over the rows scored ok in both, "
                 "turned so that + is better, on each metric's own scale; "
                 f"{e(c.settings['interval'])}, {c.settings['resamples']} draws, seed {c.settings['seed']}, "
                 "Holm-adjusted across the gated metrics. Basis <i>ppi</i>: the two versions' prediction-powered "
                 "estimates from their human labels (labelled / ok rows of each), <i>cascade</i>: their judge "
                 "cascades' estimates of the strong judge's mean (strong-judged / covered rows of each), and the "
                 "normal interval of their difference, instead of the judge's paired rows.</p>")
    parts += estimates_section(c)
    parts += ["<h2>Coverage</h2><table><tr><th>version</th>" + "".join(f"<th>{e(m)}</th>" for m in metrics)
              + "</tr>"]
    for h in history:
        cells = "".join(f"<td>{_share(h['coverage'].get(m))}</td>" for m in metrics)
        parts.append(f"<tr><td>{e(h['version'])}</td>{cells}</tr>")
    parts.append("</table><p class='small'>Share of rows scored ok (the rest: not_applicable, judge_error, "
                 "input_error).</p>")
    parts += ["<h2>Cost per version</h2><table><tr><th>version</th><th>chat requests</th><th>embeddings requests</th>"
              "<th>prompt tokens</th><th>completion tokens</th><th>cache hits</th></tr>"]
    parts += [f"<tr><td>{e(h['version'])}</td>" + "".join(f"<td>{h['cost'].get(c, 0):,}</td>" for c in USAGE_COLUMNS)
              + "</tr>" for h in history]
    parts.append("</table>")
    if any(h["cost"].get(c) for h in history for c in USAGE_COLUMNS[:4]):
        parts.append(no_chart if missing else cost_svg(history))
    else:
        parts.append("<p class='small'>No request was sent for these versions (offline judge, or answers from the "
                     "judgement cache).</p>")
    if c.diagnosis:
        parts += diagnosis_html(c.diagnosis)
    worst = worst_rows(c, 10)
    parts.append("<h2>Rows that regressed most</h2>")
    if worst:
        parts.append("<table><tr><th>metric</th><th>id</th><th>baseline</th><th>candidate</th>"
                     "<th>judge's reason (candidate)</th><th>judge's reason (baseline)</th></tr>")
        parts += [f"<tr><td>{e(r['metric'])}</td><td class='text'>{e(str(r['id']))}</td><td>{r['baseline']:.3g}</td>"
                  f"<td>{r['candidate']:.3g}</td><td class='text'>{e(str(r['reason']))}</td>"
                  f"<td class='text'>{e(str(r['baseline_reason']))}</td></tr>" for r in worst]
        parts.append("</table>")
    else:
        parts.append("<p>No row scored lower than in the baseline.</p>")
    parts.append("</body></html>")
    return "\n".join(parts)


def diagnosis_html(diagnosis: dict[str, Any]) -> list[str]:
    """The report's diagnosis section: which diagnostics moved, the candidate's reading, its diagnostics
    by group (retriever, generator, overall) and, for each failing diagnostic, its worst rows with what failed."""
    e = html.escape
    candidate = diagnosis["candidate"]
    parts = ["<h2>Diagnosis (RAGChecker's claim-level metrics)</h2>",
             f"<p>Diagnostics that moved: <b>{e(moved_line(diagnosis['moved']))}</b></p>",
             f"<p>The candidate: <b>{e(candidate['reading'])}</b></p>",
             "<table><tr><th>group</th><th>diagnostic</th><th>mean</th><th>rows failing</th><th>threshold</th>"
             "<th>what a failing row shows</th></tr>"]
    parts += [f"<tr><td>{e(group)}</td><td>{e(metric)}</td><td>{_num(x['mean'])}</td><td>{_share(x['failing_share'])}"
              f"</td><td>{'≥' if x['direction'] == 'higher_is_better' else '≤'} {x['threshold']:g}</td>"
              f"<td class='text'>{e(x['problem'])}</td></tr>"
              for group, members in candidate["groups"].items() for metric, x in members.items()]
    parts.append("</table>")
    for members in candidate["groups"].values():
        for metric, x in members.items():
            if not x["worst_rows"]:
                continue
            parts.append(f"<p class='small'>Worst rows for {e(metric)} (the candidate):</p><table><tr><th>line</th>"
                         "<th>id</th><th>value</th><th>what failed</th></tr>")
            for r in x["worst_rows"]:
                more = f" (+{r['more_failed']} more)" if r["more_failed"] else ""
                parts.append(f"<tr><td>{r['line']}</td><td class='text'>{e(str(r['id']))}</td><td>{r['value']:.3g}</td>"
                             f"<td class='text'>{'<br>'.join(e(c) for c in r['failed'])}{more}</td></tr>")
            parts.append("</table>")
    return parts
