"""The dry run: requests and tokens an evaluation would send, and their price, before anything is sent."""
from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rag_eval.metrics.core.base import Metric
from rag_eval.metrics.judges.base import Judge
from rag_eval.metrics.core.samples import Sample

COUNTERS = ("chat_requests", "embedding_requests", "prompt_tokens", "completion_tokens")


@dataclass
class CostEstimate:
    """What scoring would send, per metric, after the judgement cache.

    ``metrics[name]`` holds ``chat_requests``, ``embedding_requests`` and estimated
    ``prompt_tokens`` and ``completion_tokens`` (``rag_eval.metrics.judges.plan`` says how tokens
    are estimated); a request shared by two metrics counts once, under the first.
    ``over_budget`` lists the (row, metric) pairs the per-row budget refuses (their
    requests are not counted: the run will not send them), each with ``row`` (counted
    from 1), ``sample_id``, ``metric`` and ``reason``.
    """

    rows: int
    metrics: dict[str, dict[str, int]]
    over_budget: list[dict[str, Any]] = field(default_factory=list)

    @property
    def total(self) -> dict[str, int]:
        """The counters summed over the metrics."""
        return {c: sum(m[c] for m in self.metrics.values()) for c in COUNTERS}

    def cost(self, prompt_price: float, completion_price: float | None = None) -> float:
        """Price of the estimated tokens, given prices per million prompt and completion
        tokens (``completion_price`` defaults to ``prompt_price``), in their currency."""
        total = self.total
        completion_price = prompt_price if completion_price is None else completion_price
        return (total["prompt_tokens"] * prompt_price + total["completion_tokens"] * completion_price) / 1e6


def estimate_cost(samples: list[Sample], metrics: Iterable[Metric], judge: Judge,
                  judges: Mapping[str, Judge] | None = None) -> CostEstimate:
    """The requests and tokens that scoring ``samples`` with ``metrics`` would send.

    Runs each metric's own code with the judge in planning mode (``Judge.plan``): the
    cache is read, nothing is sent or written. The offline judge sends nothing.

    Parameters
    ----------
    samples : list of Sample
    metrics : iterable of Metric
    judge : Judge
    judges : mapping, optional
        ``{metric_name: judge}`` for metrics judged with other options (a per-metric model,
        temperature or strictness: ``LLMJudge.with_options``).

    Returns
    -------
    CostEstimate
    """
    built = list(metrics)
    pairs = [(m, s) for m in built for s in samples]
    judge_of = {m.name: (judges or {}).get(m.name, judge) for m in built}

    async def plan_all() -> list[Any]:
        return list(await asyncio.gather(*(judge_of[m.name].plan(m, s) for m, s in pairs)))

    estimate = CostEstimate(len(samples), {m.name: dict.fromkeys(COUNTERS, 0) for m in built})
    seen: set[str] = set()
    for (metric, sample), plan in zip(pairs, judge.run(plan_all())):
        budget = judge_of[metric.name].budget
        problem = budget.problem(plan, metric.name) if budget is not None else None
        if problem:
            estimate.over_budget.append({"row": sample.row, "sample_id": sample.id, "metric": metric.name,
                                         "reason": problem})
            continue
        counters = estimate.metrics[metric.name]
        for request in plan.requests:
            if request.key in seen:
                continue
            seen.add(request.key)
            counters["chat_requests" if request.chat else "embedding_requests"] += 1
            counters["prompt_tokens"] += request.prompt_tokens
            counters["completion_tokens"] += request.completion_tokens
    return estimate
