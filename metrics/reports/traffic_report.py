"""A traffic partition's summary and the traffic page of the HTML report.

``partition_summary`` is what ``summary.json`` of a traffic partition holds: volume (traces and
the conversations they make, unreadable spans or rows, traces and conversations judged), latency and the system's own token counts, per
metric the mean of the judged sample with its 95 % bootstrap interval, or a judge cascade's estimate
of the strong judge's mean with its interval (as the gate's trend charts:
``rag_eval.metrics.reports.gate_report.version_stats``), what judging cost, the drift verdicts and the
worst rows. ``traffic_html`` is ``report.html`` of the traffic folder: metric trends by
partition with their intervals, volume, cost and the worst rows of a partition, self-contained
(inline SVG, as ``rag_eval.metrics.reports.gate_report``). Session and user ids never appear in either.
"""
from __future__ import annotations

import html
import json
from typing import Any

import numpy as np
import pandas as pd

from rag_eval.metrics.reports.aggregate import USAGE_COLUMNS
from rag_eval.metrics.stats.drift import Drift
from rag_eval.metrics.reports.estimates_html import published_line
from rag_eval.metrics.reports.gate_report import (_STYLE, _short, _svg, cost_svg, missing_charts, trend_svg,
                                                  version_stats)
from rag_eval.metrics.core.results import Direction, Status

#: Worst rows kept per metric.
WORST_ROWS = 5
_TEXT = 300


def worst_rows(results: pd.DataFrame, sample: pd.DataFrame, limit: int = WORST_ROWS) -> dict[str, list[dict]]:
    """Per metric, the ``limit`` rows scored worst (direction-aware), with the trace id, the value, the
    judge's reason, the question (cut at 300 characters) and, for a session's trace, its ``turn``: a
    result's ``row`` is its trace's position in ``sample`` (the judged traces: ``trace_id``,
    ``user_input``). The direction is the results' own (their ``direction`` column)."""
    worst = {}
    trace_ids, questions = sample["trace_id"].tolist(), sample["user_input"].fillna("").tolist()
    for metric, frame in results[results["status"] == Status.OK.value].groupby("metric", sort=False):
        lower = frame["direction"].iloc[0] == Direction.LOWER.value
        rows = frame.sort_values("value", ascending=not lower, kind="stable").head(limit)
        worst[metric] = [{"trace_id": trace_ids[int(r.row)], "value": float(r.value), "reason": str(r.reason)[:_TEXT],
                          "user_input": str(questions[int(r.row)])[:_TEXT],
                          **({"turn": int(r.turn)} if "turn" in frame and not pd.isna(r.turn) else {})}
                         for r in rows.itertuples()]
    return worst


def partition_summary(key: str, traces: pd.DataFrame, problems: int, results: pd.DataFrame, metrics: list[str],
                      drifts: dict[str, Drift], sample: pd.DataFrame, budget: dict[str, Any]) -> dict[str, Any]:
    """``summary.json`` of a traffic partition.

    Parameters
    ----------
    key : str
        The partition.
    traces : DataFrame
        The partition's traces (``latency_ms``, the token columns and ``session_id`` are read: the
        conversations are counted, a session's traces being one, no id kept).
    problems : int
        Lines, spans or rows that could not be read.
    results : DataFrame
        Per-row results of the judged sample (``rag_eval.metrics.core.scoring.results_frame``).
    metrics : list of str
    drifts : dict
        ``rag_eval.metrics.stats.drift.drift``'s verdicts.
    sample : DataFrame
        The judged traces (``trace_id``, ``user_input``, ``stratum``, ``session_id``).
    budget : dict
        The budget the sample was drawn under.
    """
    stats = version_stats(key, results, metrics, stream=True)
    latency = traces["latency_ms"].to_numpy(float) if len(traces) else np.array([])
    return {
        "partition": key, "traces": len(traces), "problems": problems, "sampled": len(sample), "budget": budget,
        "conversations": conversation_count(traces), "sampled_conversations": conversation_count(sample),
        "strata": {str(k): int(v) for k, v in sample["stratum"].value_counts().sort_index().items()}
        if "stratum" in sample else {},
        "latency_ms": {"p50": float(np.percentile(latency, 50)), "p95": float(np.percentile(latency, 95)),
                       "mean": float(latency.mean())} if len(latency) else {},
        "system_tokens": {c: int(traces[c].fillna(0).sum()) for c in ("prompt_tokens", "completion_tokens",
                                                                         "total_tokens") if c in traces},
        "metrics": stats["metrics"], "coverage": stats["coverage"], "judging_cost": stats["cost"],
        "drift": {m: d.to_dict() for m, d in drifts.items()},
        "worst_rows": worst_rows(results, sample),
    }


def conversation_count(traces: pd.DataFrame) -> int:
    """The conversations of ``traces``: its distinct ``session_id`` values and its traces without one
    (each trace when there is no ``session_id`` column)."""
    if "session_id" not in traces:
        return len(traces)
    return int(traces["session_id"].nunique() + traces["session_id"].isna().sum())


def volume_svg(summaries: list[dict[str, Any]]) -> str:
    """Traces per partition (bars) and traces judged (dark bars)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, ax = plt.subplots(figsize=(6, 2.2))
    labels = [s["partition"] for s in summaries]
    ax.bar(range(len(labels)), [s["traces"] for s in summaries], color="#c6dbef", label="traces")
    ax.bar(range(len(labels)), [s["sampled"] for s in summaries], color="#3182bd", width=0.5, label="judged")
    ax.set_xticks(range(len(labels)), [_short(label) for label in labels], rotation=30, ha="right", fontsize=7)
    ax.legend(fontsize=7)
    ax.set_title("volume per partition", fontsize=9)
    figure.tight_layout()
    return _svg(figure)


def traffic_html(summaries: list[dict[str, Any]], focus: str) -> str:
    """report.html of the traffic: drift verdicts of partition ``focus``, metric trends by
    partition with 95 % intervals, volume, latency, cost per partition, the worst rows of ``focus``."""
    e = html.escape
    missing = missing_charts()  # the tables without the charts, saying how to get them
    no_chart = f"<p class='small'>{e(missing or '')}</p>"
    summaries = sorted(summaries, key=lambda s: s["partition"])
    current = next(s for s in summaries if s["partition"] == focus)
    metrics = list(dict.fromkeys(m for s in summaries for m in s["metrics"]))
    failed = [d for d in current["drift"].values() if d["verdict"] == "drop"]
    label = "DRIFT" if failed else "NO DRIFT"
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>traffic {e(focus)}</title>"
             f"<style>{_STYLE}</style></head><body>",
             f"<h1>Production traffic {e(focus)}: <span class='verdict {'failed' if failed else 'passed'}'>"
             f"{label}</span></h1>",
             f"<p>{current['traces']:,} traces in {_conversations(current)} conversations, {current['sampled']:,} "
             f"judged in {_conversations(current, 'sampled_')} conversations, {current['problems']:,} unreadable spans "
             "or rows</p>",
             "<h2>Drift against the trailing window</h2><table><tr><th>metric</th><th>day</th><th>window</th>"
             "<th>difference [95 % CI]</th><th>n day / window</th><th>basis</th><th>margin</th><th>verdict</th></tr>"]
    for d in current["drift"].values():
        interval = "—" if d["difference"] is None else \
            f"{d['difference']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]"
        mean = [("—" if v is None else f"{v:.3f}") for v in (d["day_mean"], d["window_mean"])]
        parts.append(f"<tr><td>{e(d['metric'])}</td><td>{mean[0]}</td><td>{mean[1]}</td><td>{interval}</td>"
                     f"<td>{d['n_day']} / {d['n_window']}</td><td class='text'>{e(d.get('basis', 'judge'))}</td>"
                     f"<td>±{d['margin']:g}</td>"
                     f"<td class='{'regressed' if d['verdict'] == 'drop' else ''}'>{e(d['verdict'])}</td></tr>")
    parts.append("</table><p class='small'>Day − trailing window, turned so that + is better; two-sample percentile "
                 "bootstrap of the judge's ok rows (n), Holm-adjusted across the metrics (rag_eval.metrics.stats.drift). "
                 "Basis <i>cascade</i>: both sides' judge-cascade estimates of the strong judge's mean (strong-judged / "
                 "covered rows of the day and of the window) and the normal interval of their difference.</p>")
    if metrics:
        history = [{"version": s["partition"], "metrics": s["metrics"]} for s in summaries]
        parts += ["<h2>Metric trends</h2>", no_chart if missing else trend_svg(history, metrics, "", focus),
                  *published_line(history, metrics)]
    parts += ["<h2>Volume</h2>", no_chart if missing else volume_svg(summaries),
              "<table><tr><th>partition</th><th>turns (traces)</th><th>judged turns</th><th>unreadable</th>"
              "<th>latency p50 ms</th><th>p95 ms</th><th>system tokens</th><th>conversations</th>"
              "<th>judged conversations</th></tr>"]
    for s in summaries:
        lat = s["latency_ms"]
        parts.append(f"<tr><td>{e(s['partition'])}</td><td>{s['traces']:,}</td><td>{s['sampled']:,}</td>"
                     f"<td>{s['problems']:,}</td><td>{lat.get('p50', 0):.0f}</td><td>{lat.get('p95', 0):.0f}</td>"
                     f"<td>{s['system_tokens'].get('total_tokens', 0):,}</td><td>{_conversations(s)}</td>"
                     f"<td>{_conversations(s, 'sampled_')}</td></tr>")
    parts += ["</table><h2>Judging cost</h2><table><tr><th>partition</th>"
              + "".join(f"<th>{c.replace('_', ' ')}</th>" for c in USAGE_COLUMNS) + "</tr>"]
    parts += [f"<tr><td>{e(s['partition'])}</td>" + "".join(f"<td>{s['judging_cost'].get(c, 0):,}</td>"
                                                              for c in USAGE_COLUMNS) + "</tr>" for s in summaries]
    parts.append("</table>")
    if any(s["judging_cost"].get(c) for s in summaries for c in USAGE_COLUMNS[:4]):
        parts.append(no_chart if missing else cost_svg([{"version": s["partition"], "cost": s["judging_cost"]}
                                                        for s in summaries]))
    parts.append(f"<h2>Worst rows of {e(focus)}</h2><table><tr><th>metric</th><th>trace</th><th>value</th>"
                 "<th>question</th><th>judge's reason</th></tr>")
    for metric, rows in current["worst_rows"].items():
        parts += [f"<tr><td>{e(metric)}</td><td class='text'>{e(r['trace_id'])}</td><td>{r['value']:.3g}</td>"
                  f"<td class='text'>{e(r['user_input'])}</td><td class='text'>{e(r['reason'])}</td></tr>"
                  for r in rows]
    parts.append("</table></body></html>")
    return "\n".join(parts)


def _conversations(summary: dict[str, Any], prefix: str = "") -> str:
    """A summary's conversations (``prefix`` ``sampled_``: judged), formatted; a summary written before
    conversations were counted: its traces, each then judged alone."""
    found = summary.get(f"{prefix}conversations", summary["sampled" if prefix else "traces"])
    return f"{found:,}"


def read_summaries(paths: list) -> list[dict[str, Any]]:
    """The partition summaries (``summary.json``) at ``paths``, skipping unreadable ones."""
    found = []
    for path in paths:
        try:
            found.append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
    return found
