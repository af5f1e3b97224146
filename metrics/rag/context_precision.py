"""ContextPrecision with reference: average precision of useful contexts over ranks."""
from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from pydantic import BaseModel

from rag_eval.metrics.core.base import Family, Measured, Metric, NotApplicable, nothing_retrieved
from rag_eval.metrics.judgements.base import Judgement
from rag_eval.metrics.judgements.context_usefulness import AnswerAndContexts, context_usefulness
from rag_eval.metrics.judges.base import Judge, expect_count
from rag_eval.metrics.core.samples import Sample


def average_precision(verdicts: Sequence[int]) -> float:
    """Average precision of binary relevance verdicts in rank order, with no epsilon.

    ``AP = Σ_k precision@k · v_k / Σ_k v_k`` with ``precision@k = Σ_{j≤k} v_j / k``.

    Parameters
    ----------
    verdicts : sequence of {0, 1}
        One verdict per retrieved context, in rank order.

    Returns
    -------
    float in [0, 1]
        Higher is better. Exactly 1.0 when every relevant context precedes every
        irrelevant one (RAGAS returns 0.9999999999, fault 4); 0.0 when none is relevant
        or the list is empty. Examples: [1, 0, 1] gives 0.8333; [0, 1] gives 0.5.

    Raises
    ------
    ValueError
        If a verdict is not 0 or 1 (RAGAS collections accepts 2 and returns 1.67).

    References
    ----------
    RAGAS 0.4.3 ``context_precision``; regression cases BR-06, BR-07.
    """
    if any(v not in (0, 1) for v in verdicts):
        raise ValueError(f"verdicts must be 0 or 1, got {list(verdicts)}")
    hits, total = 0, 0.0
    for rank, verdict in enumerate(verdicts, start=1):
        if verdict:
            hits += 1
            total += hits / rank
    return total / hits if hits else 0.0


class ContextPrecision(Metric):
    """Ranking quality of ``retrieved_contexts`` judged against ``reference``, on [0, 1].

    Higher is better. One usefulness verdict per context, in rank order, then
    :func:`average_precision`. An empty context list scores 0.0.
    """

    name = "context_precision"
    family = Family.CORE
    required_fields = ("user_input", "retrieved_contexts", "reference")
    #: The answer the contexts are judged useful for.
    answer_field: ClassVar[str] = "reference"
    judgements = (context_usefulness,)

    def asks(self, sample: Sample) -> list[tuple[Judgement, BaseModel]]:
        """The usefulness of the contexts, when one was retrieved."""
        return [] if nothing_retrieved(sample.given("retrieved_contexts")) else \
            [(context_usefulness, self._usefulness(sample))]

    async def measure(self, sample: Sample, judge: Judge) -> Measured | NotApplicable:
        contexts = sample.given("retrieved_contexts")
        if nothing_retrieved(contexts):
            return Measured(0.0, "no context retrieved", {"contexts": []})
        judged = await judge.ask(context_usefulness, self._usefulness(sample))
        verdicts = expect_count(judged.verdicts, len(contexts), "verdicts")
        value = average_precision([v.verdict for v in verdicts])
        items = [{"rank": i + 1, "useful": v.verdict, "reason": v.reason} for i, v in enumerate(verdicts)]
        useful = sum(v.verdict for v in verdicts)
        return Measured(value, f"{useful}/{len(contexts)} contexts useful for the {self.answer_field}; "
                        f"average precision {value:.2f}", {"contexts": items})

    def _usefulness(self, sample: Sample) -> AnswerAndContexts:
        """The ``context_usefulness`` input of ``sample``: its contexts for its :attr:`answer_field`."""
        return context_usefulness.Input(user_input=sample.question(),
                                        answer=getattr(sample, self.answer_field),
                                        contexts=sample.given("retrieved_contexts"))
