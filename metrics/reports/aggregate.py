"""summary.json in dingo's layout, computed over every measured row, plus coverage.

dingo 2.5 averages only the rows it kept (by default the failing ones), rounds before
averaging and drops the standard deviation for a single score (its ``LocalExecutor``'s summary.json).
Here every ``ok`` row enters the statistics, nothing is rounded before the end, and
the other statuses are counted per metric in ``coverage``, never averaged.
"""
from __future__ import annotations

import json
import statistics
from collections.abc import Mapping
from typing import Any

import pandas as pd

from rag_eval.metrics.reports.conversations import conversation_summary
from rag_eval.metrics.reports.diagnosis import FailedOf, diagnose
from rag_eval.metrics.core.registry import Registry, given

from rag_eval.metrics.core.results import USAGE_COLUMNS, Direction, Status



def field_key(metric: str, registry: Registry | None = None) -> str:
    """dingo's group key: the fields the metric of ``registry`` (default the built-in ones) reads, comma-joined."""
    cls = given(registry).get(metric)
    return ",".join(cls.required_fields) if cls else "default"


def is_ratio(metric: str, registry: Registry | None = None) -> bool:
    """True for a metric of ``registry`` (default the built-in ones) on [0, 1]: the only scale overall figures
    average and ``--scale 10`` stretches."""
    cls = given(registry).get(metric)
    return cls is not None and tuple(cls.value_range) == (0.0, 1.0)


def goodness(mean: float, direction: str, scale: int = 1) -> float:
    """A ratio metric's mean turned so that higher is better (``scale - mean`` when lower is better)."""
    return scale - mean if direction == Direction.LOWER.value else mean


def _usage(frame: pd.DataFrame) -> dict[str, int]:
    return {c: int(frame[c].sum()) for c in USAGE_COLUMNS if c in frame}


def cannot_run(results: pd.DataFrame, skip_rows: set[int] | frozenset[int] = frozenset()) -> dict[str, str]:
    """``{metric: why}`` for the metrics that could use no line because of one field (on
    every line but those of ``skip_rows``, the rejected ones, their result is the
    ``input_error`` of that field: it is absent from the file)."""
    reasons = {}
    for metric, frame in results[~results["row"].isin(skip_rows)].groupby("metric", sort=False):
        if (frame["status"] == Status.INPUT_ERROR.value).all():
            fields = {_details(d).get("field") for d in frame["details"]}
            if len(fields) == 1 and None not in fields:
                reasons[metric] = f"no line has a usable {fields.pop()!r}"
    return reasons


def _details(details: Any) -> dict[str, Any]:
    return json.loads(details) if isinstance(details, str) else dict(details or {})


def input_error_lines(results: pd.DataFrame, skip_rows: set[int] | frozenset[int] = frozenset()) -> list[dict]:
    """One entry per line (per turn, for a conversation's line) with ``input_error`` results, in line
    order: ``{"line", "id", "fields": {field: problem}, "metrics": [...]}``, lines counted from 1. Lines of
    ``skip_rows`` (rejected ones, reported on their own) and the metrics of
    :func:`cannot_run` (reported once) are left out.

    Parameters
    ----------
    results : DataFrame
        Per-row results with ``row``, ``sample_id``, ``metric``, ``status`` and ``details``
        (JSON text or dict holding ``field`` and ``problem``, as ``rag_eval.metrics.core.base`` writes them).
    """
    errors = results[(results["status"] == Status.INPUT_ERROR.value) & ~results["row"].isin(skip_rows)
                     & ~results["metric"].isin(cannot_run(results, skip_rows))]
    turns = errors["turn"].fillna(0).astype(int) if "turn" in errors else [0] * len(errors)
    lines: dict[tuple[int, int, str], dict[str, Any]] = {}  # by line, turn and id: a conversation's turns share a line
    for row, turn, sample_id, metric, details in zip(errors["row"], turns, errors["sample_id"], errors["metric"],
                                                     errors["details"]):
        details = _details(details)
        entry = lines.setdefault((int(row), int(turn), str(sample_id)),
                                 {"line": int(row) + 1, "id": sample_id, "fields": {}, "metrics": []})
        entry["fields"][details.get("field") or "line"] = details.get("problem", "")
        entry["metrics"].append(metric)
    return [lines[key] for key in sorted(lines)]


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
              scale: int = 1, earlier: frozenset[str] | set[str] = frozenset(),
              failed_of: FailedOf | None = None, registry: Registry | None = None) -> dict[str, Any]:
    """Build summary.json from per-row results.

    Parameters
    ----------
    results : DataFrame
        One row per (sample, metric) with columns ``sample_id, metric, status, value,
        passed, direction`` and ``row`` (as made by ``rag_eval.metrics.core.scoring.results_frame``);
        judged units are told apart by ``row`` and ``sample_id`` when rows are given (ids may repeat
        across lines; the turns of a conversation share a line), else by ``sample_id``. With
        ``conversation_id`` and ``turn`` columns, the summary has a ``conversations`` block
        (``rag_eval.metrics.reports.conversations.conversation_summary``).
    task_name : str
        Name written as ``task_name``.
    judge : mapping, optional
        The judge's description, written under ``judge`` when its name is the one on the
        result rows; otherwise (or without it) ``judge`` holds the name(s) on the rows.
    scale : {1, 10}
        1 keeps ratio metrics on [0, 1]; 10 presents the [0, 1] metrics on dingo's 0-10
        scale (values, statistics and the thresholds shown; pass/fail is unchanged; Likert
        and count metrics keep their own scale).
    earlier : set of str
        Metrics whose results were computed by earlier runs (not this one): their cost is
        reported under ``usage_earlier_runs``, not ``usage``.
    failed_of : callable, optional
        The failed claims of rows whose ``details`` ``results`` lacks, for the diagnosis
        (``rag_eval.metrics.reports.diagnosis.diagnose``).
    registry : Registry, optional
        The metrics' classes (their fields, scale): default the built-in ones
        (``rag_eval.metrics.core.registry.builtin_registry``).

    Returns
    -------
    dict
        dingo's keys ``task_name, total, num_good, num_bad, score, type_ratio,
        metrics_score`` plus ``num_unmeasured``, ``overall_average``, ``metrics``,
        ``usage`` (what this run sent: requests, tokens, and judgements answered from the
        cache, which earlier runs paid for), ``usage_earlier_runs``, ``coverage`` (counts
        per status per metric), ``scale``, ``judge`` and, when RAGChecker's diagnostics are among
        the metrics, ``diagnosis`` (``rag_eval.metrics.reports.diagnosis.diagnose``). A row is good when at least one
        metric was measured on it and every measured metric passed; bad when a measured
        metric failed; unmeasured when no metric could be measured. Overall averages
        (``overall_average`` and each field group's) combine only the [0, 1] metrics,
        lower-is-better ones turned (``1 - mean``); Likert and count metrics stand alone.

    Raises
    ------
    ValueError
        If ``scale`` is not 1 or 10.
    """
    if scale not in (1, 10):
        raise ValueError(f"scale must be 1 or 10, got {scale}")
    digits = 4 if scale == 1 else 2
    results = results.assign(_unit=_units(results))
    unit = "_unit"
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
    turned: dict[str, list[float]] = {}
    factors: dict[str, float] = {}
    for metric, frame in results.groupby("metric", sort=False):
        key = field_key(metric, registry)
        labels = pd.Series([_label(metric, status, passed) for status, passed in zip(frame["status"], frame["passed"])])
        for label, count in labels.value_counts().items():
            type_ratio.setdefault(key, {})[label] = round(count / total, 6)
        factor = factors[metric] = scale if is_ratio(metric, registry) else 1  # only [0, 1] metrics have a 0-10 one
        values = [float(v) * factor for v in frame.loc[frame["status"] == Status.OK.value, "value"]]
        group = metrics_score.setdefault(key, {"stats": {}, "summary": {}})
        group["stats"][metric] = metric_stats(values, digits)
        group["summary"][metric] = group["stats"][metric]["score_average"]
        coverage[metric] = {s.value: int((frame["status"] == s.value).sum()) for s in Status}
        coverage[metric]["total"] = len(frame)
        measured = frame[frame["status"] == Status.OK.value]
        overview[metric] = {
            "mean": group["stats"][metric]["score_average"],
            "pass_rate": round(float(measured["passed"].astype(bool).mean()), 4) if len(measured) else None,
            "measured": len(measured), "total": len(frame),
            "threshold": float(frame["threshold"].iloc[0]) * factor, "direction": frame["direction"].iloc[0],
            "scale": ("0-10" if scale == 10 else "0-1") if is_ratio(metric, registry) else _own_scale(metric, registry),
            "usage": _usage(frame), "this_run": metric not in earlier,
        }
        if "judge" in frame:
            overview[metric]["judge"] = ", ".join(sorted({n for n in frame["judge"].dropna() if n})) or None
        if values and is_ratio(metric, registry):
            turned.setdefault(key, []).append(goodness(statistics.fmean(values), overview[metric]["direction"], scale))
    for key, group in metrics_score.items():
        group["overall_average"] = round(statistics.fmean(turned[key]), digits) if turned.get(key) else None
    everything = [mean for means in turned.values() for mean in means]
    this_run = results[~results["metric"].isin(earlier)]
    return {
        "task_name": task_name,
        "total": total,
        "num_good": num_good,
        "num_bad": num_bad,
        "num_unmeasured": total - num_good - num_bad,
        "score": round(num_good / total * 100, 2) if total else 0.0,
        "type_ratio": type_ratio,
        "metrics_score": metrics_score,
        "overall_average": round(statistics.fmean(everything), digits) if everything else None,
        "metrics": overview,
        "usage": _usage(this_run) if USAGE_COLUMNS[0] in results else {},
        "usage_earlier_runs": _usage(results[results["metric"].isin(earlier)]) if earlier else {},
        "coverage": coverage,
        "scale": "0-10" if scale == 10 else "0-1",
        "judge": _judge(results, judge),
        **({"diagnosis": diagnosis} if (diagnosis := diagnose(results, failed_of, scale)) else {}),
        **({"conversations": block} if (block := conversation_summary(results, factors, digits)) else {}),
    }


def _units(results: pd.DataFrame) -> pd.Series:
    """What tells the judged units of ``results`` apart: the line (``row``; ids may repeat across lines)
    and the id (the turns of a conversation share its line), or the id alone without rows."""
    if "row" in results and results["row"].notna().all():
        return results["row"].astype(str) + "\x1f" + results["sample_id"].astype(str)
    return results["sample_id"]


def _own_scale(metric: str, registry: Registry | None) -> str:
    cls = given(registry).get(metric)
    if cls is None:
        return "unknown"
    low, high = cls.value_range
    return "1-5 Likert" if (low, high) == (1.0, 5.0) else f"{low:g}-{high:g}"


def _judge(results: pd.DataFrame, judge: Mapping[str, Any] | None) -> dict[str, Any]:
    """The judge named on the result rows, with ``judge``'s settings when it is that judge."""
    names = sorted({name for name in results["judge"].dropna() if name}) if "judge" in results else []
    described = dict(judge or {})
    if not names or names == [described.get("judge")]:
        return described
    return {"judge": ", ".join(names)}


#: Our metric -> dingo 2.5's evaluator class, and the label stem dingo gives it.
DINGO_NAMES = {"faithfulness": ("LLMRAGFaithfulness", "FAITHFULNESS"),
               "answer_relevancy": ("LLMRAGAnswerRelevancy", "ANSWER_RELEVANCY"),
               "context_relevancy": ("LLMRAGContextRelevancy", "CONTEXT_RELEVANCY"),
               "context_recall": ("LLMRAGContextRecall", "CONTEXT_RECALL"),
               "context_precision": ("LLMRAGContextPrecision", "CONTEXT_PRECISION")}
#: dingo's RAG example maps prompt/content/context/reference to these columns: its one field group.
DINGO_FIELD_KEY = "user_input,response,retrieved_contexts,reference"


def dingo_summary(results: pd.DataFrame, task_name: str = "rag_eval") -> dict[str, Any]:
    """summary.json exactly as dingo 2.5's LocalExecutor writes it, for dingo's five RAG metrics.

    Keys ``task_name, total, num_good, num_bad, score, type_ratio, metrics_score``; one
    field group, ``user_input,response,retrieved_contexts,reference`` (dingo's RAG
    example); metrics under dingo's class names (``LLMRAGFaithfulness``...); scores on
    0-10 rounded to 2 digits; ``score_std_dev`` (population) only for two or more
    scores; ``type_ratio`` with dingo's labels ``QUALITY_GOOD.<X>_PASS`` and
    ``QUALITY_BAD.<X>_FAIL``. As in dingo, a row is bad when any of its metrics failed
    or could not be scored (``QUALITY_BAD.<X>_<STATUS>``, no score), else good. Unlike
    dingo's default (which keeps only failing details), every row enters the statistics
    (dingo's ``all_labels=True``). Other metrics have no dingo counterpart and are left
    out (dingo's ``LocalExecutor`` writes its summary.json so).
    """
    rows = results[results["metric"].isin(DINGO_NAMES)]
    unit = "row" if "row" in rows and rows["row"].notna().all() else "sample_id"
    total = int(rows[unit].nunique()) if len(rows) else 0
    good = rows["status"].eq(Status.OK.value) & rows["passed"].fillna(False).astype(bool)
    bad_rows = set(rows.loc[~good, unit])
    counts: dict[str, int] = {}
    stats: dict[str, dict[str, Any]] = {}
    for metric, frame in rows.groupby("metric", sort=False):
        name, stem = DINGO_NAMES[metric]
        for status, passed in zip(frame["status"], frame["passed"]):
            label = (f"QUALITY_GOOD.{stem}_PASS" if passed else f"QUALITY_BAD.{stem}_FAIL") \
                if status == Status.OK.value else f"QUALITY_BAD.{stem}_{status.upper()}"
            counts[label] = counts.get(label, 0) + 1
        values = [float(v) * 10 for v in frame.loc[frame["status"] == Status.OK.value, "value"]]
        if values:
            stats[name] = {"score_average": round(statistics.fmean(values), 2), "score_count": len(values),
                           "score_min": round(min(values), 2), "score_max": round(max(values), 2)}
            if len(values) > 1:
                stats[name]["score_std_dev"] = round(statistics.pstdev(values), 2)
    summary = {name: row["score_average"] for name, row in stats.items()}
    num_bad = len(bad_rows)
    return {
        "task_name": task_name, "total": total, "num_good": total - num_bad, "num_bad": num_bad,
        "score": round((total - num_bad) / total * 100, 2) if total else 0.0,
        "type_ratio": {DINGO_FIELD_KEY: {label: round(n / total, 6) for label, n in counts.items()}} if total else {},
        "metrics_score": {DINGO_FIELD_KEY: {
            "stats": stats, "summary": summary,
            "overall_average": round(statistics.fmean(summary.values()), 2) if summary else None}} if stats else {},
    }
