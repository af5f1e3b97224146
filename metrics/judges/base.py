"""The judge interface shared by the offline heuristic judge and the LLM judge.

A judge returns *per-item verdicts* (one per statement, one per context); it never
returns a metric's score. The metrics in ``rag_eval.metrics.rag`` turn verdicts into scores,
so a judge's own arithmetic can never leak into a result (dingo's faithfulness trusts the score its LLM computes).
"""
from __future__ import annotations

import asyncio
import copy
import functools
from abc import ABC, abstractmethod
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np


class JudgeError(RuntimeError):
    """The judge failed after its retries, or its output stayed invalid.

    Metrics turn it into a ``judge_error`` result for that sample; the run goes on.
    """


@dataclass
class Verdict:
    """A decision on one item (statement or context).

    ``verdict`` is 1 (supported / useful) or 0; ``reason`` explains it; ``evidence``
    holds the judge's supporting numbers (similarities, overlaps), if any; ``probability``
    is the judge's probability of support in [0, 1] when it grades (the offline judge's
    learned verifier, ``rag_eval.metrics.judges.verifier``), else ``None``.
    """

    verdict: int
    reason: str
    evidence: dict[str, Any] = field(default_factory=dict)
    probability: float | None = None

    def __post_init__(self) -> None:
        if self.verdict not in (0, 1):
            raise JudgeError(f"verdict must be 0 or 1, got {self.verdict!r}")
        if self.probability is not None and not 0.0 <= self.probability <= 1.0:
            raise JudgeError(f"probability must be in [0, 1], got {self.probability!r}")

    @property
    def support(self) -> float:
        """The graded decision: :attr:`probability` when the judge gives one, else the verdict."""
        return float(self.verdict) if self.probability is None else self.probability


def expect_count(items: list, expected: int, what: str) -> list:
    """Return ``items`` if there is exactly one per judged item, else raise :class:`JudgeError`.

    A judge that drops or adds verdicts fails the sample; verdicts are never
    zip-truncated (regression case BR-21; RAGAS scores over whatever verdicts the judge returned).
    """
    if len(items) != expected:
        raise JudgeError(f"{len(items)} {what} for {expected} items")
    return items


T = TypeVar("T")
I = TypeVar("I", bound="BaseModel")
O = TypeVar("O", bound="BaseModel")

if TYPE_CHECKING:
    from pydantic import BaseModel

    from rag_eval.metrics.judgements.base import Judgement


class Judge(ABC):
    """Interface of a judge: it asks a judgement (:meth:`ask`) and embeds text
    (:meth:`embeddings`); it decides verdicts, never scores.

    What is judged, and how each judge decides it, lives with the judgement
    (``rag_eval.metrics.judgements``: its LLM request and its offline rule). Both methods are
    coroutines, so an LLM judge can score many samples and metrics at once under one
    concurrency limit; :meth:`run` drives them from synchronous code.
    """

    #: Label written with every result, e.g. ``offline-heuristic`` or ``openai:gpt-4o-mini``.
    name: str = "judge"

    def describe(self) -> dict[str, Any]:
        """Configuration recorded with every result and in the summary (no secrets)."""
        return {"judge": self.name}

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine of this judge to completion from synchronous code."""
        return asyncio.run(coroutine)

    def forget(self) -> None:
        """Let go of what this judge remembers in the process to save work (results never depend
        on it): called when a version's scoring is done, so its later steps have the memory.
        Nothing here; the offline judge empties its memos."""

    #: Rows a judge prepares at once (:meth:`prefetch`); ``None``: it prepares nothing ahead.
    prefetch_rows: int | None = None

    def prefetch(self, asked: list[tuple[Judgement, Any]]) -> None:
        """Called before a window of :attr:`prefetch_rows` rows is judged, with the judgements
        their metrics will ask and the inputs (``rag_eval.metrics.core.base.asked``): the judge may prepare them
        at once (the offline judge encodes their texts). Results never depend on it. Nothing here."""

    @property
    def concurrency_limit(self) -> int | None:
        """Requests in flight at most across all workers (``None``: no limit, e.g. offline)."""
        return None
    #: What one (row, metric) may send (``rag_eval.metrics.judges.plan.Budget``); ``None``: nothing is sent.
    budget: Any = None

    async def admit(self, metric: Any, sample: Any) -> Any:
        """Called by ``Metric.ascore`` before ``metric`` measures ``sample``: raises
        :class:`JudgeError` to refuse the row (the LLM judge: over its per-row budget);
        may return the metric's outcome when admitting it measured it already (the LLM
        judge, every judgement cached), else ``None``. The offline judge admits everything."""
        return None

    async def plan(self, metric: Any, sample: Any) -> Any:
        """The requests scoring ``sample`` with ``metric`` would send, after the cache,
        sending nothing (``rag_eval.metrics.judges.plan.Plan``). The offline judge sends none."""
        from rag_eval.metrics.judges.plan import Plan

        return Plan()

    def recipe(self, share: float = 1.0) -> Callable[[], Judge]:
        """A picklable factory of an equivalent judge, for worker processes (Spark tasks);
        ``share`` is the fraction of the concurrency limit each worker may use. By
        default the judge itself is shipped."""
        return functools.partial(copy.deepcopy, self)

    @abstractmethod
    async def ask(self, judgement: Judgement[I, O], inputs: I) -> O:
        """The verdict of ``judgement`` (``rag_eval.metrics.judgements``) on ``inputs`` (its ``Input`` model).

        Raises
        ------
        JudgeError
            When no valid verdict can be had (after retries and a re-ask, for the LLM judge).
        """

    @abstractmethod
    async def embeddings(self, texts: list[str]) -> np.ndarray:
        """Unit vectors of ``texts``, shape ``(len(texts), d)``.

        Raises
        ------
        JudgeError
            When the texts cannot be embedded.
        """


async def similarity(judge: Judge, first: str, second: str) -> float:
    """Cosine similarity in [-1, 1] of the two texts' embeddings by ``judge`` (one
    embeddings request with the LLM judge, none when cached)."""
    vectors = await judge.embeddings([first, second])
    return float(np.clip(vectors[0] @ vectors[1], -1.0, 1.0))
