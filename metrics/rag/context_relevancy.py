"""ContextRelevancy: the share of retrieved contexts relevant to the question (dual judge)."""
from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from rag_eval.metrics.core.base import Family, Measured, Metric, NotApplicable, nothing_retrieved
from rag_eval.metrics.judgements.base import Judgement
from rag_eval.metrics.judgements.context_relevance import QuestionAndContexts, context_relevance
from rag_eval.metrics.judges.base import Judge, JudgeError, expect_count
from rag_eval.metrics.core.samples import Sample


def context_relevancy_score(ratings: Sequence[tuple[int, int]]) -> float:
    """Relevant contexts over contexts; relevant when the two judges' mean rating is ≥ 1.

    Parameters
    ----------
    ratings : sequence of (int, int)
        Per context, the ratings in {0, 1, 2} of two differently worded judges.

    Returns
    -------
    float in [0, 1]
        Higher is better; 0.0 for no context (nothing relevant was retrieved).

    Raises
    ------
    ValueError
        If a rating is outside {0, 1, 2}.

    References
    ----------
    dingo RAG evaluation guide (dual judge per context); the 0/1/2 rubric of NVIDIA's
    ContextRelevance in RAGAS 0.4.3, applied per chunk instead of to the whole set.
    """
    for pair in ratings:
        if len(pair) != 2 or any(r not in (0, 1, 2) for r in pair):
            raise ValueError(f"ratings must be pairs in {{0, 1, 2}}, got {pair!r}")
    if not ratings:
        return 0.0
    return sum(1 for a, b in ratings if (a + b) / 2 >= 1) / len(ratings)


class ContextRelevancy(Metric):
    """Relevance of ``retrieved_contexts`` to ``user_input``, on [0, 1], higher is better.

    An empty context list scores 0.0 with that reason.
    """

    name = "context_relevancy"
    family = Family.CORE
    required_fields = ("user_input", "retrieved_contexts")
    judgements = (context_relevance,)

    def asks(self, sample: Sample) -> list[tuple[Judgement, BaseModel]]:
        """The relevance of the contexts, when one was retrieved."""
        return [] if nothing_retrieved(sample.given("retrieved_contexts")) else \
            [(context_relevance, _relevance(sample))]

    async def measure(self, sample: Sample, judge: Judge) -> Measured | NotApplicable:
        contexts = sample.given("retrieved_contexts")
        if nothing_retrieved(contexts):
            return Measured(0.0, "no context retrieved", {"contexts": []})
        judged = await judge.ask(context_relevance, _relevance(sample))
        ratings = expect_count(judged.ratings, len(contexts), "ratings")
        try:
            value = context_relevancy_score(ratings)
        except ValueError as exc:
            raise JudgeError(str(exc)) from exc
        relevant = round(value * len(contexts))
        items = [{"rank": i + 1, "ratings": list(r), "relevant": sum(r) / 2 >= 1} for i, r in enumerate(ratings)]
        return Measured(value, f"{relevant}/{len(contexts)} contexts relevant to the question", {"contexts": items})


def _relevance(sample: Sample) -> QuestionAndContexts:
    """The ``context_relevance`` input of ``sample``."""
    return context_relevance.Input(user_input=sample.question(), contexts=sample.given("retrieved_contexts"))
