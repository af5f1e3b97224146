"""How far a judge agrees with human labels: ``calibrate`` and ``rag-eval calibrate``.

RAGAS documents aligning an LLM judge with annotations by hand; this measures any judge
(LLM or offline) against labels in one call. Two label formats, one JSON object per line:

* **pairwise**: ``{"metric": "faithfulness", "a": {sample}, "b": {sample}, "preferred": "a"}``
  (a person preferred ``a`` over ``b`` on that metric);
* **per-sample**: ``{"metric": "faithfulness", "sample": {sample}, "label": ...}`` where the
  label is binary (``true``/``false``, "accept"/"reject"), a grade (an integer, e.g. 1-5) or
  a score (a float); ``"label_type"`` (``binary``, ``grade``, ``score``) may say which.

Samples use the usual field names (``user_input``, ``response``, ``retrieved_contexts``,
``reference`` and their aliases). See ``examples/calibration/labels.jsonl``.
"""
from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rag_eval.metrics.stats.agreement import auroc, bootstrap, kendall, spearman
from rag_eval.metrics.sources.labels import VERDICTS, read_records
from rag_eval.metrics.core.scoring import default_judge, score_all
from rag_eval.metrics.judges.base import Judge
from rag_eval.metrics.core.registry import Registry, build_metrics, describe_judge
from rag_eval.metrics.core.results import MetricResult
from rag_eval.metrics.core.samples import sample_from_dict
from rag_eval.metrics.errors import InputError

_ACCEPT: dict[Any, int] = {True: 1, False: 0, **{word: int(passes) for word, passes in VERDICTS.items()}}


def _label_type(records: list[dict[str, Any]]) -> str:
    given = {t for r in records if (t := r.get("label_type")) is not None}
    if len(given) > 1:
        raise InputError(f"metric {records[0]['metric']!r} mixes label types {sorted(given)}")
    if given:
        return given.pop()
    labels = [r["label"] for r in records]
    if all(isinstance(v, bool) or (isinstance(v, str) and v.lower() in _ACCEPT) for v in labels) \
            or set(labels) <= {0, 1}:
        return "binary"
    return "grade" if all(isinstance(v, int) for v in labels) else "score"


def _as_label(value: Any, kind: str, line: int) -> float:
    if kind == "binary":
        key = value.lower() if isinstance(value, str) else value
        if key not in _ACCEPT and key not in (0, 1):
            raise InputError(f"line {line}: field 'label': {value!r} is not a binary label (true/false, accept/reject)")
        return float(_ACCEPT.get(key, key))
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InputError(f"line {line}: field 'label': {value!r} is not a number")
    return float(value)


def read_labels(source: str | Path | Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Label records from a JSONL (or CSV) file or an iterable of dicts, each with its ``line`` (from 1).

    Raises
    ------
    ValueError
        Naming the line and the field, for a line that is not JSON, lacks ``metric``, or is
        neither pairwise (``a``, ``b``, ``preferred``) nor per-sample (``sample``, ``label``).
    """
    raw: list[tuple[int, Any]] = []
    if isinstance(source, (str, Path)):
        for number, _, record in read_records(source):  # the one reader of label files (rag_eval.metrics.sources.labels)
            if isinstance(record, str):
                raise InputError(f"line {number}: {record}")
            raw.append((number, record))
    else:
        raw = list(enumerate(source, start=1))
    records = []
    for number, record in raw:
        if not isinstance(record, dict) or not isinstance(record.get("metric"), str):
            raise InputError(f"line {number}: field 'metric': missing (a metric name is required)")
        if {"a", "b", "preferred"} <= record.keys():
            if record["preferred"] not in ("a", "b"):
                raise InputError(f"line {number}: field 'preferred': {record['preferred']!r} is not 'a' or 'b'")
        elif not {"sample", "label"} <= record.keys():
            raise InputError(f"line {number}: neither pairwise (a, b, preferred) nor per-sample (sample, label)")
        records.append({**record, "line": number})
    return records


def _why(result: MetricResult) -> str:
    """The metric's reason, with the judge's reason for each statement when there are some."""
    items = (result.details or {}).get("statements") or []
    said = "; ".join(f"{i['statement'][:80]!r}: {i['reason']}" for i in items[:3] if "reason" in i)
    return f"{result.reason} ({said})" if said else result.reason


def _pairwise(records: list[dict], results: dict[tuple[int, str], MetricResult], worst: int) -> dict:
    rows = []
    for record in records:
        a, b = results[(record["line"], "a")], results[(record["line"], "b")]
        good, bad = (a, b) if record["preferred"] == "a" else (b, a)
        outcome = 1.0 if (good.value is not None and bad.value is not None and good.value > bad.value) else 0.0
        rows.append({"line": record["line"], "agree": outcome, "preferred": good.value, "other": bad.value,
                     "tie": good.value is not None and good.value == bad.value,
                     "reason_preferred": _why(good), "reason_other": _why(bad)})
    agree = np.array([r["agree"] for r in rows])
    ranked = sorted((r for r in rows if not r["agree"]),
                    key=lambda r: -((r["other"] or 0) - (r["preferred"] or 0)))
    return {"format": "pairwise", "n": len(rows), "accuracy": round(float(agree.mean()), 4),
            "accuracy_ci95": bootstrap(agree, np.mean), "ties": sum(r["tie"] for r in rows),
            "unscored": sum(r["preferred"] is None or r["other"] is None for r in rows),
            "worst_disagreements": ranked[:worst]}


def _best_threshold(scores: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    """The cut (score ≥ cut means accept) with the highest accuracy; the lowest such cut."""
    best = (math.nan, -1.0)
    for cut in np.unique(scores):
        accuracy = float(((scores >= cut) == labels).mean())
        if accuracy > best[1]:
            best = (float(cut), accuracy)
    return best


def _per_sample(records: list[dict], results: dict, kind: str, threshold: float, worst: int) -> dict:
    rows = [{"line": r["line"], "label": _as_label(r["label"], kind, r["line"]), "score": results[(r["line"], "s")].value,
             "reason": _why(results[(r["line"], "s")])} for r in records]
    scored = [r for r in rows if r["score"] is not None]
    report: dict[str, Any] = {"format": "per-sample", "label_type": kind, "n": len(rows),
                              "unscored": len(rows) - len(scored)}
    if not scored:  # say why: e.g. a custom metric with the offline judge needs an LLM endpoint
        why = Counter(f"{results[(r['line'], 's')].status.value}: {results[(r['line'], 's')].reason}" for r in records)
        report["unscored_reasons"] = dict(why.most_common(3))
        return report
    scores, labels = np.array([r["score"] for r in scored]), np.array([r["label"] for r in scored])
    both = np.column_stack([scores, labels])
    if kind == "binary":
        predicted = scores >= threshold
        accept = labels == 1
        cut, best_accuracy = _best_threshold(scores, labels)
        report.update({
            "threshold": threshold, "accuracy": round(float((predicted == accept).mean()), 4),
            "accuracy_ci95": bootstrap(both, lambda v: float(((v[:, 0] >= threshold) == (v[:, 1] == 1)).mean())),
            "auroc": round(auroc(scores, labels), 4) if len(set(labels)) > 1 else None,
            "auroc_ci95": bootstrap(both, lambda v: auroc(v[:, 0], v[:, 1])),
            "confusion": {"human_accept_judge_pass": int((accept & predicted).sum()),
                          "human_accept_judge_fail": int((accept & ~predicted).sum()),
                          "human_reject_judge_pass": int((~accept & predicted).sum()),
                          "human_reject_judge_fail": int((~accept & ~predicted).sum())},
            "best_threshold": cut, "best_threshold_accuracy": round(best_accuracy, 4)})
        distance = [abs(r["score"] - threshold) if (r["score"] >= threshold) != (r["label"] == 1) else -1 for r in scored]
    else:
        report.update({"spearman": _round(spearman(scores, labels)),
                       "spearman_ci95": bootstrap(both, lambda v: spearman(v[:, 0], v[:, 1])),
                       "kendall": _round(kendall(scores, labels)),
                       "kendall_ci95": bootstrap(both, lambda v: kendall(v[:, 0], v[:, 1]))})
        score_rank, label_rank = pd.Series(scores).rank(pct=True), pd.Series(labels).rank(pct=True)
        distance = list((score_rank - label_rank).abs())
    order = sorted((i for i, d in enumerate(distance) if d > 0), key=lambda i: -distance[i])
    report["worst_disagreements"] = [scored[i] for i in order[:worst]]
    return report


def _round(value: float) -> float | None:
    return None if math.isnan(value) else round(value, 4)


def calibrate(labels: str | Path | Iterable[Mapping[str, Any]], judge: Judge | None = None,
              worst: int = 5, registry: Registry | None = None) -> dict[str, Any]:
    """Agreement of ``judge`` with human labels, per metric.

    Parameters
    ----------
    labels : path or iterable of dict
        A JSONL file or records in the pairwise or per-sample format (module docstring).
    judge : Judge, optional
        Defaults to :func:`rag_eval.metrics.evaluate.default_judge` (the LLM judge when configured
        in the environment, else the offline judge).
    worst : int, default 5
        How many of the worst disagreements to list per metric, with the judge's reasons.
    registry : Registry, optional
        The metrics the labels name: default the built-in ones (custom ones:
        ``rag_eval.metrics.build_registry``).

    Returns
    -------
    dict
        ``{"judge": describe_judge(judge), "metrics": {name: report}}``. A pairwise report has
        strict accuracy (the preferred sample must score strictly higher: ties and
        unscored pairs count as disagreements) with a bootstrap 95 % interval. A binary
        per-sample report has accuracy at the metric's threshold, AUROC, the confusion
        table, the best-matching threshold; a grade or score report has Spearman and
        Kendall (tau-b); with no sample scored, ``unscored_reasons`` instead (``{"status:
        reason": count}``, the three most common). Every figure in [−1, 1] or [0, 1], higher is
        better; intervals are percentile bootstrap (1,000 resamples, seed 0).

    Raises
    ------
    ValueError
        For a label line that cannot be read (naming the line and the field).
    KeyError
        For an unknown metric name.
    """
    records = read_labels(labels)
    judge = judge or default_judge()
    report: dict[str, Any] = {"judge": describe_judge(judge, registry), "metrics": {}}
    for name in dict.fromkeys(r["metric"] for r in records):
        mine = [r for r in records if r["metric"] == name]
        [metric] = build_metrics([name], registry=registry)
        keyed = [((r["line"], side), r[side]) for r in mine for side in ("a", "b") if "preferred" in r] + \
                [((r["line"], "s"), r["sample"]) for r in mine if "preferred" not in r]
        samples = [sample_from_dict(raw, line - 1) for (line, _), raw in keyed]
        results = dict(zip((key for key, _ in keyed), score_all(samples, [metric], judge)))
        pairwise = [r for r in mine if "preferred" in r]
        single = [r for r in mine if "preferred" not in r]
        if pairwise and single:
            raise InputError(f"metric {name!r} mixes pairwise and per-sample labels (line {single[0]['line']})")
        report["metrics"][name] = _pairwise(pairwise, results, worst) if pairwise else \
            _per_sample(single, results, _label_type(single), metric.threshold, worst)
    return report


def print_report(report: dict[str, Any]) -> None:
    """A short plain-text rendering of :func:`calibrate`'s report."""
    judge = report["judge"]
    print(f"judge: {judge.get('judge')} (rule version {judge.get('rule_version', judge.get('version', '-'))})")
    for name, r in report["metrics"].items():
        if r["format"] == "pairwise":
            line = (f"accuracy {r['accuracy']:.3f} {r['accuracy_ci95']} over {r['n']} pairs "
                    f"({r['ties']} ties, {r['unscored']} unscored)")
        elif r["label_type"] == "binary" and "accuracy" in r:
            c = r["confusion"]
            line = (f"accuracy {r['accuracy']:.3f} {r['accuracy_ci95']} at threshold {r['threshold']}, AUROC "
                    f"{r['auroc']} {r['auroc_ci95']}, best threshold {r['best_threshold']} "
                    f"(accuracy {r['best_threshold_accuracy']:.3f}); confusion human accept/reject x judge pass/fail: "
                    f"{c['human_accept_judge_pass']}/{c['human_accept_judge_fail']}/"
                    f"{c['human_reject_judge_pass']}/{c['human_reject_judge_fail']}")
        elif "spearman" in r:
            line = f"Spearman {r['spearman']} {r['spearman_ci95']}, Kendall {r['kendall']} {r['kendall_ci95']}"
        else:
            line = "no sample scored: " + "; ".join(f"{n} {why}" for why, n in r.get("unscored_reasons", {}).items())
        print(f"{name} ({r['format']}, n={r['n']}): {line}")
        for item in r.get("worst_disagreements", [])[:3]:
            shown = json.dumps({k: v for k, v in item.items() if k != "line"}, ensure_ascii=False)
            print(f"  line {item['line']}: {shown[:300]}")
