"""Scoring, shared by the local path (``rag_eval.metrics.evaluate``) and Spark tasks (``rag_eval.metrics.core.spark``):
every (metric, sample) pair under the judge's limits, the per-row results frame, and the
judge used when none is given."""
from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, is_dataclass
from typing import Any

import pandas as pd

from rag_eval.metrics.reports.aggregate import USAGE_COLUMNS
from rag_eval.metrics.core.base import Metric, asked
from rag_eval.metrics.core.collector import collector
from rag_eval.metrics.reports.conversations import conversation_frame
from rag_eval.metrics.reports.formats import azure_rows, fields_frame, ragas_table
from rag_eval.metrics.judges.base import Judge
from rag_eval.metrics.judges.cache import Sink
from rag_eval.metrics.judges.llm import LLMConfig, LLMJudge
from rag_eval.metrics.judges.offline import OfflineJudge
from rag_eval.metrics.core.results import MetricResult
from rag_eval.metrics.core.samples import Sample

RESULT_COLUMNS = ["sample_id", "row", "conversation_id", "turn", "metric", "status", "value", "passed", "threshold",
                  "direction", "reason", "details", "judge", *USAGE_COLUMNS]
#: The columns of a conversation's turn in a results frame (``Sample.conversation_id``, ``Sample.turn``),
#: with their dtypes: NA on the rows of single-turn samples.
TURN_DTYPES = {"conversation_id": "string", "turn": "Int64"}


@dataclass
class EvaluationResult:
    """What :func:`evaluate` returns: per-row results, the summary and the samples."""

    results: pd.DataFrame
    summary: dict[str, Any]
    samples: list[Sample]

    def azure_rows(self) -> list[dict[str, Any]]:
        """Per-row results of the Azure metrics in Azure AI Evaluation's keys (``rag_eval.metrics.reports.formats``)."""
        return azure_rows(self.results)

    def ragas_table(self) -> pd.DataFrame:
        """One row per sample, one column per metric, as RAGAS's ``to_pandas()``."""
        return ragas_table(self.results, fields_frame(self.samples) if self.samples else None)

    def conversations(self) -> pd.DataFrame:
        """One row per (conversation, metric) of a file of conversations: the mean over its turns, as Azure AI
        Evaluation reports a conversation, and its worst turn (``rag_eval.metrics.reports.conversations``);
        empty when no row is a conversation's turn."""
        return conversation_frame(self.results)


def default_judge(sink: Sink | None = None) -> Judge:
    """The judge used when none is given: the LLM judge when ``OPENAI_API_KEY`` or
    ``OPENAI_BASE_URL`` is set (``LLMConfig.from_env``), its cache spilling to ``sink`` when given
    (``rag_eval.metrics.judges.cache.JudgementCache``), else the offline heuristic judge
    (no key, no network)."""
    config = LLMConfig.from_env()
    return LLMJudge(config, sink=sink) if config.configured else OfflineJudge()


def results_frame(results: Iterable[MetricResult]) -> pd.DataFrame:
    """Per-row results as a DataFrame with :data:`RESULT_COLUMNS`: one row per (sample, metric), a
    conversation's turn with its ``conversation_id`` (string) and ``turn`` (Int64, from 1), NA for a
    single-turn sample (:data:`TURN_DTYPES`).

    ``details`` is serialised to a JSON string so the frame writes to Parquet as is.

    A judge cascade (``evaluate(..., strong_judge=, strong_budget=)``) keeps these columns, the
    cheap judge's, on every row and adds, per (row, metric), ``inclusion_probability`` (the
    chance the row was drawn for the strong judge; NaN for a row outside the cascade: cheap
    status ``not_applicable``, ``input_error`` or ``target_error``) and the strong judge's result
    as ``strong_status``, ``strong_value``, ``strong_passed``, ``strong_reason``,
    ``strong_details``, ``strong_judge`` and ``strong_`` + the usage columns, empty (NA) on the
    rows not drawn (``rag_eval.metrics.core.strong.STRONG_COLUMNS``): ``frame["strong_value"] -
    frame["value"]`` compares the two judges on the drawn rows.
    """
    records = []
    for result in results:  # MetricResult.to_record's values, without its deep copy of every result's details
        usage = result.usage or {}
        records.append({"sample_id": result.sample_id, "row": result.row, "conversation_id": result.conversation_id,
                        "turn": result.turn, "metric": result.metric,
                        "status": result.status.value, "value": result.value, "passed": result.passed,
                        "threshold": result.threshold, "direction": result.direction.value, "reason": result.reason,
                        "details": json.dumps(result.details, ensure_ascii=False, default=_plain),
                        "judge": result.judge, **{column: int(usage.get(column, 0)) for column in USAGE_COLUMNS}})
    frame = pd.DataFrame(records, columns=RESULT_COLUMNS)
    frame["value"] = frame["value"].astype("float64")
    frame["passed"] = frame["passed"].astype("boolean")
    return with_turns(frame)


def with_turns(results: pd.DataFrame) -> pd.DataFrame:
    """Per-row ``results`` with the :data:`TURN_DTYPES` columns so typed; added, NA, when missing (results
    stored before conversations were read), so every reader finds them."""
    missing = {c: pd.Series(pd.NA, index=results.index, dtype=d) for c, d in TURN_DTYPES.items() if c not in results}
    return results.assign(**missing).astype(TURN_DTYPES)


def _plain(value: Any) -> Any:
    """What ``json`` cannot write in a result's details: a dataclass as its fields (as
    ``dataclasses.asdict`` makes it), anything else as its text."""
    return asdict(value) if is_dataclass(value) and not isinstance(value, type) else str(value)


#: Rows judged at a time (every selected metric of a row in the same chunk, so requests
#: metrics share are sent once): memory stays flat as a version grows.
CHUNK_ROWS = 2000
#: One metric to score: the metric, its samples (the same rows, in the same order, for every
#: metric of a call) and the judge it is judged with (twins of one judge: ``LLMJudge.with_options``).
Task = tuple[Metric, Sequence[Sample], Judge]


def score_chunks(tasks: Sequence[Task], progress: Callable[[Metric], None] | None = None,
                 rows: int = CHUNK_ROWS) -> Iterator[list[list[MetricResult]]]:
    """Score every (metric, sample) pair of ``tasks`` concurrently under the judge's limits,
    ``rows`` rows at a time: yields, per chunk of rows, one result list per task (samples in
    input order). ``progress(metric)`` is called as each pair finishes. Nothing is lost to
    one failing pair: its result carries ``judge_error`` or ``input_error``.

    Raises
    ------
    ValueError
        If ``tasks`` is empty.
    """
    if not tasks:
        raise ValueError("no metric to score")

    def prepare(part: list[Task], start: int) -> None:
        # The judge prepares rows start… of the chunk at once (``Judge.prefetch``). A row a metric
        # cannot measure is reported by the metric itself, so what fails here only loses the gain.
        window = [(metric, samples[start:start + prefetch_rows]) for metric, samples, _ in part]
        try:
            judge.prefetch(asked(window))
        except Exception:  # noqa: BLE001
            pass

    async def one(metric: Metric, sample: Sample, judge: Judge, ahead: Callable[[], None] | None) -> MetricResult:
        if ahead:
            ahead()
        result = await metric.ascore(sample, judge)
        if progress:
            progress(metric)
        return result

    async def chunk(part: list[Task]) -> list[list[MetricResult]]:
        # Row by row, every metric of a row next to each other: what they share of the row
        # (its statements, sentences, vectors, judgements in flight) is asked again at once,
        # so the offline judge's memos need hold a few rows only, not a whole chunk.
        pairs = [(k, i) for i in range(max(len(samples) for _, samples, _ in part))
                 for k, (_, samples, _) in enumerate(part) if i < len(samples)]
        # The first pair of every window of ``judge.prefetch_rows`` rows has the judge prepare the window.
        starts = {i: n for n, (_, i) in reversed(list(enumerate(pairs)))
                  if prefetch_rows and i % prefetch_rows == 0}
        results = await asyncio.gather(*(one(part[k][0], part[k][1][i], part[k][2],
                                             functools.partial(prepare, part, i) if starts.get(i) == n else None)
                                         for n, (k, i) in enumerate(pairs)))
        per_task: list[list[MetricResult]] = [[] for _ in part]
        for (k, _), result in zip(pairs, results):
            per_task[k].append(result)
        return per_task

    for metric, samples, _ in tasks:
        metric.fit(samples)
    judge = tasks[0][2]
    prefetch_rows = judge.prefetch_rows or 0  # 0: the judge prepares nothing ahead
    for start in range(0, max(len(samples) for _, samples, _ in tasks), rows):
        part = [(m, samples[start:start + rows], j) for m, samples, j in tasks]
        # The objects alive before the chunk (the process's modules, a Dagster run's machinery)
        # are left out of the collections its many short-lived objects trigger: they were
        # traversed again by each, a quarter of a 1,000-row LLM run's CPU (``gc.freeze``).
        with collector(freeze=True):
            results = judge.run(chunk(part))
        yield results


def score_all(samples: list[Sample], metrics: list[Metric], judge: Judge,
              progress: Callable[[int], None] | None = None) -> list[MetricResult]:
    """Score every (metric, sample) pair concurrently under the judge's limits
    (:func:`score_chunks`).

    Results come back metric by metric, samples in input order; ``progress(1)`` is
    called as each pair finishes. Nothing is lost to one failing pair: its result
    carries ``judge_error`` or ``input_error``.
    """
    per_metric: list[list[MetricResult]] = [[] for _ in metrics]
    for part in score_chunks([(m, samples, judge) for m in metrics], progress and (lambda _: progress(1))):
        for results, more in zip(per_metric, part):
            results += more
    return [r for results in per_metric for r in results]
