"""summary.json in dingo's layout, computed over every measured row, plus coverage.

dingo 2.5 averages only the rows it kept (by default the failing ones), rounds before
averaging and drops the standard deviation for a single score (metric-spec fault 17).
Here every ``ok`` row enters the statistics, nothing is rounded before the end, and
the other statuses are counted per metric in ``coverage``, never averaged.
"""
from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any

import pandas as pd

from metrics.registry import METRICS

#: Per-row cost columns of a results frame (``metrics.evaluate.results_frame``).
USAGE_COLUMNS = ["chat_requests", "embedding_requests", "prompt_tokens", "completion_tokens", "cache_hits"]
from metrics.results import Direction, Status


def field_key(metric: str) -> str:
    """dingo's group key: the fields a metric reads, comma-joined."""
    cls = METRICS.get(metric)
    return ",".join(cls.required_fields) if cls else "default"


def _label(metric: str, status: str, passed: Any) -> str:
    if status == Status.OK.value:
        return f"QUALITY_GOOD.{metric.upper()}_PASS" if passed else f"QUALITY_BAD.{metric.upper()}_FAIL"
    return f"QUALITY_UNMEASURED.{metric.upper()}_{status.upper()}"


def metric_stats(values: list[float], digits: int) -> dict[str, Any]:
    """Average, count, min, max and population standard deviation of measured values.

    The standard deviation is the population one, as dingo reports it, and is present
    for a single value too (0.0). With no value every statistic is ``None``.
    """
    if not values:
        return {"score_average": None, "score_count": 0, "score_min": None, "score_max": None,
                "score_std_dev": None}
    return {"score_average": round(statistics.fmean(values), digits), "score_count": len(values),
            "score_min": round(min(values), digits), "score_max": round(max(values), digits),
            "score_std_dev": round(statistics.pstdev(values), digits)}


def summarize(results: pd.DataFrame, task_name: str = "rag_eval", judge: Mapping[str, Any] | None = None,
              scale: int = 1) -> dict[str, Any]:
    """Build summary.json from per-row results.

    Parameters
    ----------
    results : DataFrame
        One row per (sample, metric) with columns ``sample_id, metric, status, value,
        passed, direction`` and ``row`` (as made by ``metrics.evaluate.results_frame``);
        rows are told apart by ``row`` when present (ids may repeat), else by ``sample_id``.
    task_name : str
        Name written as ``task_name``.
    judge : mapping, optional
        The judge's description, written under ``judge``.
    scale : {1, 10}
        1 keeps ratio metrics on [0, 1]; 10 presents the [0, 1] metrics on dingo's 0-10
        scale (values, statistics and the thresholds shown; pass/fail is unchanged; Likert
        and count metrics keep their own scale).

    Returns
    -------
    dict
        dingo's keys ``task_name, total, num_good, num_bad, score, type_ratio,
        metrics_score`` plus ``num_unmeasured``, ``coverage`` (counts per status per
        metric), ``scale`` and ``judge``. A row is good when at least one metric was
        measured on it and every measured metric passed; bad when a measured metric
        failed; unmeasured when no metric could be measured.

    Raises
    ------
    ValueError
        If ``scale`` is not 1 or 10.
    """
    if scale not in (1, 10):
        raise ValueError(f"scale must be 1 or 10, got {scale}")
    digits = 4 if scale == 1 else 2
    unit = "row" if "row" in results and results["row"].notna().all() else "sample_id"
    total = int(results[unit].nunique()) if len(results) else 0
    ok = results[results["status"] == Status.OK.value]
    failed_rows = set(ok.loc[ok["passed"] == False, unit])  # noqa: E712 (pandas mask)
    measured_rows = set(ok[unit])
    num_bad = len(failed_rows)
    num_good = len(measured_rows - failed_rows)

    type_ratio: dict[str, dict[str, float]] = {}
    metrics_score: dict[str, dict[str, Any]] = {}
    coverage: dict[str, dict[str, int]] = {}
    overview: dict[str, dict[str, Any]] = {}
    goodness: list[float] = []
    for metric, frame in results.groupby("metric", sort=False):
        key = field_key(metric)
        labels = pd.Series([_label(metric, status, passed) for status, passed in zip(frame["status"], frame["passed"])])
        for label, count in labels.value_counts().items():
            type_ratio.setdefault(key, {})[label] = round(count / total, 6)
        ratio = METRICS.get(metric) is not None and METRICS[metric].value_range == (0.0, 1.0)
        factor = scale if ratio else 1  # only [0, 1] metrics have a 0-10 presentation
        values = [float(v) * factor for v in frame.loc[frame["status"] == Status.OK.value, "value"]]
        group = metrics_score.setdefault(key, {"stats": {}, "summary": {}})
        group["stats"][metric] = metric_stats(values, digits)
        group["summary"][metric] = group["stats"][metric]["score_average"]
        coverage[metric] = {s.value: int((frame["status"] == s.value).sum()) for s in Status}
        coverage[metric]["total"] = len(frame)
        measured = frame[frame["status"] == Status.OK.value]
        usage = {c: int(frame[c].sum()) for c in USAGE_COLUMNS if c in frame}
        overview[metric] = {
            "mean": group["stats"][metric]["score_average"],
            "pass_rate": round(float(measured["passed"].astype(bool).mean()), 4) if len(measured) else None,
            "measured": len(measured), "total": len(frame),
            "threshold": float(frame["threshold"].iloc[0]) * factor, "direction": frame["direction"].iloc[0],
            "usage": usage,
        }
        if values and ratio:
            mean = statistics.fmean(values)
            lower = frame["direction"].iloc[0] == Direction.LOWER.value
            goodness.append(scale - mean if lower else mean)
    for group in metrics_score.values():
        means = [m for m in group["summary"].values() if m is not None]
        group["overall_average"] = round(statistics.fmean(means), digits) if means else None
    return {
        "task_name": task_name,
        "total": total,
        "num_good": num_good,
        "num_bad": num_bad,
        "num_unmeasured": total - num_good - num_bad,
        "score": round(num_good / total * 100, 2) if total else 0.0,
        "type_ratio": type_ratio,
        "metrics_score": metrics_score,
        "overall_average": round(statistics.fmean(goodness), digits) if goodness else None,
        "metrics": overview,
        "usage": {c: int(results[c].sum()) for c in USAGE_COLUMNS if c in results},
        "coverage": coverage,
        "scale": "0-10" if scale == 10 else "0-1",
        "judge": dict(judge or {}),
    }
