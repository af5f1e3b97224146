"""NVIDIA ContextRelevance (RAGAS ``nv_context_relevance``): the contexts as a whole, dual judge."""
from __future__ import annotations

from rag_eval.metrics.core.base import Family, Measured, Metric, NotApplicable, nothing_retrieved
from rag_eval.metrics.judgements.whole_context_relevance import whole_context_relevance
from rag_eval.metrics.judges.base import Judge, JudgeError
from rag_eval.metrics.core.samples import Sample


def nv_context_relevance_score(first: int, second: int) -> float:
    """``(r1/2 + r2/2) / 2`` for two ratings in {0, 1, 2}; (2, 1) gives 0.75.

    Raises
    ------
    ValueError
        If a rating is outside {0, 1, 2} (RAGAS legacy parses "10" as 0.5, fault 6).
    """
    if first not in (0, 1, 2) or second not in (0, 1, 2):
        raise ValueError(f"ratings must be in {{0, 1, 2}}, got {first!r}, {second!r}")
    return (first / 2 + second / 2) / 2


class NVContextRelevance(Metric):
    """Relevance of all retrieved contexts together to the question, [0, 1] in steps of
    0.25, higher is better (RAGAS ``nv_context_relevance``; ContextRelevancy rates each
    context instead). Two differently worded judges rate 0/1/2; an empty or blank context
    list scores 0.0 with the reason "nothing retrieved".
    """

    name = "nv_context_relevance"
    family = Family.RAGAS
    required_fields = ("user_input", "retrieved_contexts")
    judgements = (whole_context_relevance,)

    async def measure(self, sample: Sample, judge: Judge) -> Measured | NotApplicable:
        if nothing_retrieved(sample.given("retrieved_contexts")):
            return Measured(0.0, "nothing retrieved", {"ratings": []})
        first, second = (await judge.ask(whole_context_relevance, whole_context_relevance.Input(
            user_input=sample.question(), contexts=sample.given("retrieved_contexts")))).ratings
        try:
            value = nv_context_relevance_score(first, second)
        except ValueError as exc:
            raise JudgeError(str(exc)) from exc
        return Measured(value, f"judges rated the contexts {first} and {second} of 2", {"ratings": [first, second]})
