"""The Python API for users who do not run Dagster: ``evaluate`` and ``score_sample``."""
from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from metrics.aggregate import summarize
from metrics.base import Metric
from metrics.judges.base import Judge
from metrics.judges.offline import OfflineJudge
from metrics.registry import build_metrics
from metrics.results import MetricResult
from metrics.samples import Sample, load_samples, sample_from_dict

RESULT_COLUMNS = ["sample_id", "row", "metric", "status", "value", "passed", "threshold", "direction",
                  "reason", "details", "judge"]


@dataclass
class EvaluationResult:
    """What :func:`evaluate` returns: per-row results, the summary and the samples."""

    results: pd.DataFrame
    summary: dict[str, Any]
    samples: list[Sample]


def default_judge() -> Judge:
    """The judge used when none is given: the offline heuristic judge (no key, no network)."""
    return OfflineJudge()


def results_frame(results: Iterable[MetricResult], rows: Mapping[str, int] | None = None) -> pd.DataFrame:
    """Per-row results as a DataFrame with :data:`RESULT_COLUMNS`.

    ``details`` is serialised to a JSON string so the frame writes to Parquet as is.
    """
    records = []
    for result in results:
        record = result.to_record()
        record["details"] = json.dumps(record["details"], ensure_ascii=False, default=str)
        record["row"] = (rows or {}).get(result.sample_id)
        records.append(record)
    frame = pd.DataFrame(records, columns=RESULT_COLUMNS)
    frame["value"] = frame["value"].astype("float64")
    frame["passed"] = frame["passed"].astype("boolean")
    return frame


def score_metric(samples: list[Sample], metric: Metric, judge: Judge,
                 progress: Callable[[int], None] | None = None) -> list[MetricResult]:
    """Score every sample with one metric, in order; ``progress(1)`` after each sample."""
    results = []
    for sample in samples:
        results.append(metric.score(sample, judge))
        if progress:
            progress(1)
    return results


def evaluate(samples: str | Path | pd.DataFrame | Iterable[Mapping[str, Any]] | list[Sample],
             metrics: Iterable[str | Metric] | None = None, judge: Judge | None = None,
             fields: Mapping[str, str] | None = None, thresholds: Mapping[str, float] | None = None,
             task_name: str = "rag_eval", scale: int = 1,
             progress: Callable[[int], None] | None = None) -> EvaluationResult:
    """Evaluate a RAG dataset with the given metrics and judge.

    Parameters
    ----------
    samples : path, DataFrame, iterable of dicts, or list of Sample
        A ``.jsonl``/``.json``/``.csv``/``.parquet`` file or in-memory rows with RAGAS
        field names or their aliases.
    metrics : iterable of str or Metric, optional
        Defaults to the five core metrics.
    judge : Judge, optional
        Defaults to :class:`~metrics.judges.offline.OfflineJudge`.
    fields : mapping, optional
        ``{canonical_name: column}`` for columns under other names (dingo's ``fields``).
    thresholds : mapping, optional
        ``{metric_name: threshold}``.
    task_name, scale
        Passed to :func:`metrics.aggregate.summarize`.
    progress : callable, optional
        Called with 1 after each (sample, metric) pair.

    Returns
    -------
    EvaluationResult
        ``results`` has one row per (sample, metric), every row with a status and a
        reason; nothing is dropped.

    Raises
    ------
    FileNotFoundError, ValueError, KeyError
        For a missing file, an unsupported format or field mapping, an unknown metric.
    """
    judge = judge or default_judge()
    loaded = samples if isinstance(samples, list) and all(isinstance(s, Sample) for s in samples) \
        else load_samples(samples, fields)
    built = build_metrics(metrics, thresholds)
    rows = {s.id: s.row for s in loaded}
    results = [r for metric in built for r in score_metric(loaded, metric, judge, progress)]
    frame = results_frame(results, rows)
    return EvaluationResult(frame, summarize(frame, task_name, judge.describe(), scale), loaded)


def score_sample(sample: Sample | Mapping[str, Any], metrics: Iterable[str | Metric] | None = None,
                 judge: Judge | None = None, fields: Mapping[str, str] | None = None) -> dict[str, MetricResult]:
    """Score one sample; returns ``{metric_name: MetricResult}``.

    Raises
    ------
    KeyError
        For an unknown metric name.
    """
    judge = judge or default_judge()
    if not isinstance(sample, Sample):
        sample = sample_from_dict(sample, 0, fields)
    return {m.name: m.score(sample, judge) for m in build_metrics(metrics)}
