"""Metric evaluation on Apache Spark, with the same results as the local path.

The metric code of this package runs unchanged inside Spark tasks: each partition of
the samples builds its own judge from the driver's judge *recipe* (an offline judge
loads its encoder once per task; an LLM judge gets its share of the global concurrency
limit and reads its API key from the executor's environment, never from the task),
scores its samples with :func:`rag_eval.metrics.core.scoring.score_all`, and sends back the results.
The driver orders them as the local path does and builds the same summary.

Judgement cache: the LLM judge's SQLite cache (``cache_path``) is opened by every task.
With ``local[N]`` and on a single host that is one shared file, so a row already judged
is not judged again, also after a task is retried; on a cluster, point ``cache_path`` at
storage every executor shares, or each executor keeps its own cache (then a row is
judged at most once per executor). A retried task's results replace the failed
attempt's: Spark keeps only one successful attempt per partition, so no row is counted
twice.

``pyspark`` is imported only by the functions that need it.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from rag_eval.metrics.reports.aggregate import summarize
from rag_eval.metrics.core.base import Metric
from rag_eval.metrics.judges.base import Judge
from rag_eval.metrics.core.registry import Registry, build_metrics, describe_judge
from rag_eval.metrics.core.results import MetricResult
from rag_eval.metrics.core.samples import Sample, sample_from_dict
from rag_eval.metrics.core.scoring import EvaluationResult, default_judge, results_frame, score_all


def is_spark_data(data: Any) -> bool:
    """True for a ``pyspark`` DataFrame or RDD (checked without importing pyspark)."""
    module = type(data).__module__
    return module.startswith("pyspark.") and type(data).__name__ in ("DataFrame", "RDD")


def _score_partition(items: Iterable[tuple[int, Any]], metrics: list[Metric], recipe: Callable[[], Judge],
                     fields: dict[str, str] | None) -> Iterator[MetricResult]:
    samples = [item if isinstance(item, Sample) else sample_from_dict(item, row, fields) for row, item in items]
    if not samples:
        return iter(())
    judge = recipe()
    try:
        return iter(score_all(samples, metrics, judge))
    finally:
        close = getattr(judge, "close", None)
        if close:
            close()


def _slices(wanted: int, judge: Judge) -> int:
    """Tasks to run: never more than the judge's concurrency limit, so that each task's
    share of it (at least one request) keeps the total within the limit."""
    limit = judge.concurrency_limit
    return max(1, min(wanted, limit)) if limit else max(1, wanted)


def _ordered(results: list[MetricResult], metrics: list[Metric]) -> list[MetricResult]:
    """Metric by metric, rows ascending: the local path's order."""
    position = {metric.name: i for i, metric in enumerate(metrics)}
    return sorted(results, key=lambda r: (position[r.metric], r.row))


def score_on_spark(spark, samples: Sequence[Sample], metrics: list[Metric], judge: Judge,
                   parallelism: int | None = None) -> list[MetricResult]:
    """Score driver-side ``samples`` on ``spark`` (a SparkSession) in ``parallelism`` tasks.

    Returns the same list, in the same order, as ``rag_eval.metrics.core.scoring.score_all``.
    """
    context = spark.sparkContext
    slices = _slices(parallelism or context.defaultParallelism, judge)
    recipe = judge.recipe(share=1 / slices)
    rdd = context.parallelize([(s.row, s) for s in samples], slices)
    for metric in metrics:
        metric.fit(samples)  # on the driver, over every sample: the tasks get the settled metric
    results = rdd.mapPartitions(functools.partial(_score_partition, metrics=metrics, recipe=recipe,
                                                  fields=None)).collect()
    return _ordered(results, metrics)


def evaluate_spark(data, metrics: Iterable[str | Metric] | None = None, judge: Judge | None = None,
                   fields: dict[str, str] | None = None, thresholds: dict[str, float] | None = None,
                   task_name: str = "rag_eval", scale: int = 1, parallelism: int | None = None,
                   registry: Registry | None = None):
    """``rag_eval.metrics.evaluate.evaluate`` for a Spark DataFrame or an RDD of dicts.

    Rows are numbered in the data's order (``zipWithIndex``), scored in Spark tasks and
    summarised on the driver; the result equals the local path's for the same rows and
    judge. ``EvaluationResult.samples`` is empty: the samples stay on the executors. Names name
    metrics of ``registry`` (default the built-in ones).

    Raises
    ------
    TypeError
        If ``data`` is not a pyspark DataFrame or RDD.
    """
    if not is_spark_data(data):
        raise TypeError(f"expected a pyspark DataFrame or RDD, got {type(data).__name__}")
    rdd = data.rdd.map(lambda row: row.asDict(recursive=True)) if type(data).__name__ == "DataFrame" else data
    judge = judge or default_judge()
    built = build_metrics(metrics, thresholds, registry=registry)
    slices = _slices(parallelism or rdd.getNumPartitions(), judge)
    indexed = rdd.zipWithIndex().map(lambda pair: (pair[1], pair[0]))
    if slices != rdd.getNumPartitions():
        indexed = indexed.repartition(slices)
    recipe = judge.recipe(share=1 / slices)
    results = indexed.mapPartitions(functools.partial(_score_partition, metrics=built, recipe=recipe,
                                                      fields=fields)).collect()
    frame = results_frame(_ordered(results, built))
    return EvaluationResult(frame, summarize(frame, task_name, describe_judge(judge, registry), scale,
                                             registry=registry), [])
