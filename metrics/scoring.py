"""Scoring, shared by the local path (``metrics.evaluate``) and Spark tasks (``metrics.spark``):
every (metric, sample) pair under the judge's limits, the per-row results frame, and the
judge used when none is given."""
from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from metrics.aggregate import USAGE_COLUMNS
from metrics.base import Metric
from metrics.formats import azure_rows, fields_frame, ragas_table
from metrics.judges.base import Judge
from metrics.judges.llm import LLMConfig, LLMJudge
from metrics.judges.offline import OfflineJudge
from metrics.results import MetricResult
from metrics.samples import Sample

RESULT_COLUMNS = ["sample_id", "row", "metric", "status", "value", "passed", "threshold", "direction",
                  "reason", "details", "judge", *USAGE_COLUMNS]


@dataclass
class EvaluationResult:
    """What :func:`evaluate` returns: per-row results, the summary and the samples."""

    results: pd.DataFrame
    summary: dict[str, Any]
    samples: list[Sample]

    def azure_rows(self) -> list[dict[str, Any]]:
        """Per-row results of the Azure metrics in Azure AI Evaluation's keys (``metrics.formats``)."""
        return azure_rows(self.results)

    def ragas_table(self) -> pd.DataFrame:
        """One row per sample, one column per metric, as RAGAS's ``to_pandas()``."""
        return ragas_table(self.results, fields_frame(self.samples) if self.samples else None)


def default_judge() -> Judge:
    """The judge used when none is given: the LLM judge when ``OPENAI_API_KEY`` or
    ``OPENAI_BASE_URL`` is set (``LLMConfig.from_env``), else the offline heuristic judge
    (no key, no network)."""
    config = LLMConfig.from_env()
    return LLMJudge(config) if config.configured else OfflineJudge()


def results_frame(results: Iterable[MetricResult]) -> pd.DataFrame:
    """Per-row results as a DataFrame with :data:`RESULT_COLUMNS`.

    ``details`` is serialised to a JSON string so the frame writes to Parquet as is.
    """
    records = []
    for result in results:
        record = result.to_record()
        record["details"] = json.dumps(record["details"], ensure_ascii=False, default=str)
        usage = record.pop("usage") or {}
        record.update({column: int(usage.get(column, 0)) for column in USAGE_COLUMNS})
        records.append(record)
    frame = pd.DataFrame(records, columns=RESULT_COLUMNS)
    frame["value"] = frame["value"].astype("float64")
    frame["passed"] = frame["passed"].astype("boolean")
    return frame


def score_all(samples: list[Sample], metrics: list[Metric], judge: Judge,
              progress: Callable[[int], None] | None = None) -> list[MetricResult]:
    """Score every (metric, sample) pair concurrently under the judge's limits.

    Results come back metric by metric, samples in input order; ``progress(1)`` is
    called as each pair finishes. Nothing is lost to one failing pair: its result
    carries ``judge_error`` or ``input_error``.
    """
    async def one(metric: Metric, sample: Sample) -> MetricResult:
        result = await metric.ascore(sample, judge)
        if progress:
            progress(1)
        return result

    async def everything() -> list[MetricResult]:
        return list(await asyncio.gather(*(one(m, s) for m in metrics for s in samples)))

    for metric in metrics:
        metric.fit(samples)

    return judge.run(everything())


def score_metric(samples: list[Sample], metric: Metric, judge: Judge,
                 progress: Callable[[int], None] | None = None) -> list[MetricResult]:
    """Score every sample with one metric (see :func:`score_all`)."""
    return score_all(samples, [metric], judge, progress)
