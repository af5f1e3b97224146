"""GroundednessPro (Azure AI Evaluation), computed with our own judge: a binary grounded label."""
from __future__ import annotations

from rag_eval.metrics.core.base import Family, Measured, Metric, NotApplicable, nothing_retrieved
from rag_eval.metrics.judgements.statement_support import statement_support, support_verdicts
from rag_eval.metrics.judges.base import Judge
from rag_eval.metrics.core.samples import Sample
from rag_eval.metrics.text import statements as split_statements


class GroundednessPro(Metric):
    """1 when every statement of ``response`` is supported by ``retrieved_contexts``, else 0
    ([0, 1], binary); higher is better, threshold 1 (Azure ``groundedness_pro_label``, which its hosted
    service sets only for a perfect 5). Uses the same judgement as Faithfulness, so it costs
    no request of its own; the reason lists the unsupported statements. An empty context
    list scores 0 ("nothing retrieved"); no checkable statement is ``not_applicable``.
    """

    name = "groundedness_pro"
    family = Family.AZURE
    required_fields = ("response", "retrieved_contexts")
    default_threshold = 1.0
    judgements = (statement_support,)

    async def measure(self, sample: Sample, judge: Judge) -> Measured | NotApplicable:
        statements = split_statements(sample.given("response"), sample.user_input)
        if not statements:
            return NotApplicable("no_factual_statements: the response makes no checkable statement")
        if nothing_retrieved(sample.given("retrieved_contexts")):
            return Measured(0.0, "nothing retrieved", {"label": False})
        verdicts = await support_verdicts(judge, statements, sample.given("retrieved_contexts"))
        unsupported = [s for s, v in zip(statements, verdicts) if not v.verdict]
        if unsupported:
            return Measured(0.0, f"not grounded: {len(unsupported)} unsupported statement(s): "
                                 + "; ".join(unsupported[:3]), {"label": False, "unsupported": unsupported})
        return Measured(1.0, f"grounded: all {len(statements)} statements are supported", {"label": True})
