"""The Python API for users who do not run Dagster: ``evaluate`` and ``score_sample``."""
from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from rag_eval.metrics.reports.aggregate import summarize
from rag_eval.metrics.core.base import Metric
from rag_eval.metrics.core.conversation import is_conversation
from rag_eval.metrics.judges.base import Judge
from rag_eval.metrics.core.registry import Registry, build_metrics, describe_judge
from rag_eval.metrics.core.results import MetricResult
from rag_eval.metrics.core.samples import Sample, load_samples, sample_from_dict
from rag_eval.metrics.core.usable import unavailable
from rag_eval.metrics.core.scoring import EvaluationResult, default_judge, results_frame, score_all
from rag_eval.metrics.core.spark import evaluate_spark, is_spark_data
from rag_eval.metrics.core.strong import judge_cascade
from rag_eval.metrics.stats.cascade_estimates import add_cascade_estimates
from rag_eval.metrics.errors import InputError

__all__ = ["EvaluationResult", "default_judge", "evaluate", "results_frame", "score_sample"]


def evaluate(samples: str | Path | pd.DataFrame | Iterable[Mapping[str, Any]] | list[Sample],
             metrics: Iterable[str | Metric] | None = None, judge: Judge | None = None,
             fields: Mapping[str, str] | None = None, thresholds: Mapping[str, float] | None = None,
             task_name: str = "rag_eval", scale: int = 1,
             progress: Callable[[int], None] | None = None, labels: str | Path | None = None,
             registry: Registry | None = None, strong_judge: Judge | None = None,
             strong_budget: float | int | None = None, strong_sampling: str = "active",
             seed: int = 0) -> EvaluationResult:
    """Evaluate a RAG dataset with the given metrics and judge.

    Parameters
    ----------
    samples : path, DataFrame, iterable of dicts, list of Sample, or Spark data
        A ``.jsonl``/``.json``/``.csv``/``.parquet`` file or in-memory rows with RAGAS
        field names or their aliases, or conversations (a sample per assistant turn,
        ``rag_eval.metrics.core.samples.record_samples``); a pyspark DataFrame or RDD of dicts is scored on
        Spark (``rag_eval.metrics.core.spark.evaluate_spark``) with the same results.
    metrics : iterable of str or Metric, optional
        Defaults to the five core metrics.
    judge : Judge, optional
        Defaults to :func:`default_judge` (LLM judge if configured in the environment,
        else the offline judge).
    fields : mapping, optional
        ``{canonical_name: column}`` for columns under other names (dingo's ``fields``).
    thresholds : mapping, optional
        ``{metric_name: threshold}``.
    task_name, scale
        Passed to :func:`rag_eval.metrics.reports.aggregate.summarize`.
    progress : callable, optional
        Called with 1 after each (sample, metric) pair.
    labels : path, optional
        Human labels of these rows (a CSV, JSONL or Label Studio file, ``rag_eval.metrics.sources.labels``): each
        labelled metric of the summary gets its prediction-powered estimate beside the raw mean
        (``rag_eval.metrics.stats.estimates.add_estimates``); a label line that cannot be used raises.
    registry : Registry, optional
        The metrics names name: default the built-in ones; with a custom metrics file and the
        installed plugins' metrics, ``rag_eval.metrics.build_registry(path)``.
    strong_judge : Judge, optional
        With ``strong_budget``, a judge cascade (docs/explanation/cascade.md): ``judge`` (the
        cheap one) scores every row; per metric, a seeded sample of the rows, drawn from the
        cheap judge's scores (``rag_eval.metrics.core.strong``: rows it failed on always), is
        scored by ``strong_judge``; the summary gives the estimate of ``strong_judge``'s mean over
        all rows with its 95 % interval beside the raw mean
        (``rag_eval.metrics.stats.cascade_estimates.add_cascade_estimates``). ``progress`` counts
        the strong judge's pairs too.
    strong_budget : float or int, optional
        The strong sample's expected size per metric: a ``float`` share of the rows in [0, 1]
        (``0.1``), or an ``int`` number of rows (``100``) up to the rows.
    strong_sampling : {"active", "uniform"}
        ``"active"`` favours the rows whose cheap score is least sure (with a floor, so every row
        can be drawn); ``"uniform"`` draws every row alike.
    seed : int
        The draw's seed: with the same seed a larger budget's sample contains the smaller one's,
        so (with the LLM judge's cache) raising the budget sends requests for the added rows only.

    Returns
    -------
    EvaluationResult
        ``results`` has one row per (sample, metric), every row with a status and a
        reason; nothing is dropped. A selected metric that no sample can feed (a field
        absent from every sample) is named in a ``UserWarning`` and reports ``input_error``.
        With a cascade, ``results`` also has the strong columns (:func:`results_frame`) and the
        summary a ``cascade`` block per metric and under ``summary["cascade"]``.

    Raises
    ------
    FileNotFoundError, ValueError, KeyError
        For a missing file, an unsupported format or field mapping, no sample, no or an
        unknown metric, a label line that cannot be used (naming its line and field); before
        anything is scored: only one of ``strong_judge`` and ``strong_budget``, a cascade on
        Spark data, a bad budget or sampling, two rows with one id (naming the later line), a
        metric the cheap judge has no rule for (``rag_eval.metrics.core.strong.refuse_unscorable``), a
        cascade on conversations (``rag_eval.metrics.core.strong.check_cascade``).
    """
    cascade = strong_judge is not None or strong_budget is not None
    if cascade and (strong_judge is None or strong_budget is None):
        raise ValueError("a judge cascade needs both strong_judge and strong_budget")
    if is_spark_data(samples):
        if cascade:
            raise ValueError("a judge cascade is not offered on Spark data: evaluate the rows locally")
        return evaluate_spark(samples, metrics, judge, dict(fields or {}), dict(thresholds or {}), task_name, scale,
                              registry=registry)
    judge = judge or default_judge()
    loaded = samples if isinstance(samples, list) and all(isinstance(s, Sample) for s in samples) \
        else load_samples(samples, fields)
    if not loaded:
        raise InputError("no samples to evaluate")
    built = build_metrics(metrics, thresholds, registry=registry)
    for metric, why in unavailable(loaded, {m.name: m.required_fields for m in built}).items():
        warnings.warn(f"{metric} cannot run: {why}; its results are input_error", stacklevel=2)
    strong, full_runs = None, None
    if strong_judge is not None and strong_budget is not None:
        frame, strong, full_runs = judge_cascade(loaded, built, judge, strong_judge, strong_budget, strong_sampling,
                                                 seed, progress=progress)
    else:
        frame = results_frame(score_all(loaded, built, judge, progress))
    summary = summarize(frame, task_name, describe_judge(judge, registry), scale, registry=registry)
    if labels is not None:
        from rag_eval.metrics.stats.estimates import add_estimates
        from rag_eval.metrics.sources.labels import read_records, validate

        found, problems, _ = validate(read_records(labels), [(s.row, s.id) for s in loaded], registry=registry)
        if problems:
            raise problems[0]
        add_estimates(summary, frame, pd.DataFrame(found, columns=["line", "id", "metric", "label"]), registry)
    if strong is not None:
        add_cascade_estimates(summary, frame, strong, {"sampling": strong_sampling, "budget": strong_budget,
                                                       "seed": seed}, registry, full_runs)
    return EvaluationResult(frame, summary, loaded)


def score_sample(sample: Sample | Mapping[str, Any], metrics: Iterable[str | Metric] | None = None,
                 judge: Judge | None = None, fields: Mapping[str, str] | None = None,
                 registry: Registry | None = None) -> dict[str, MetricResult]:
    """Score one sample with ``metrics`` of ``registry`` (default the built-in ones); returns
    ``{metric_name: MetricResult}``.

    Raises
    ------
    UnknownNameError
        For an unknown metric name.
    InputError
        For a conversation (``rag_eval.metrics.core.conversation.is_conversation``): a sample per turn,
        which :func:`evaluate` scores.
    """
    if not isinstance(sample, Sample) and is_conversation(sample):
        raise InputError("score_sample scores one sample and this record is a conversation (a sample per assistant "
                         "turn): evaluate([record]) scores its turns")
    judge = judge or default_judge()
    if not isinstance(sample, Sample):
        sample = sample_from_dict(sample, 0, fields)
    return {m.name: m.score(sample, judge) for m in build_metrics(metrics, registry=registry)}
