"""ContextUtilization (RAGAS): context precision without a reference, judged against the response."""
from __future__ import annotations

from rag_eval.metrics.core.base import Family, Measured, NotApplicable
from rag_eval.metrics.judges.base import Judge
from rag_eval.metrics.rag.context_precision import ContextPrecision
from rag_eval.metrics.core.samples import Sample
from rag_eval.metrics.text import statements


class ContextUtilization(ContextPrecision):
    """Average precision of the contexts that were useful for the *response*, [0, 1], higher
    is better (RAGAS ``context_utilization`` / ``llm_context_precision_without_reference``).

    ContextPrecision with the response in place of the reference: one usefulness verdict
    per context, in rank order; no epsilon (a perfect ranking is exactly 1.0). An empty
    context list scores 0.0; a response with no checkable statement (a refusal) is
    ``not_applicable``.
    """

    name = "context_utilization"
    family = Family.RAGAS
    required_fields = ("user_input", "response", "retrieved_contexts")
    answer_field = "response"

    async def measure(self, sample: Sample, judge: Judge) -> Measured | NotApplicable:
        if not statements(sample.given("response"), sample.given("user_input")):
            return NotApplicable("no_factual_statements: the response uses no context")
        return await super().measure(sample, judge)
