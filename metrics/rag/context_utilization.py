"""ContextUtilization (RAGAS): context precision without a reference, judged against the response."""
from __future__ import annotations

from metrics.base import Measured, Metric, NotApplicable
from metrics.judges.base import Judge, expect_count
from metrics.rag.context_precision import average_precision
from metrics.samples import Sample


class ContextUtilization(Metric):
    """Average precision of the contexts that were useful for the *response*, [0, 1], higher
    is better (RAGAS ``context_utilization`` / ``llm_context_precision_without_reference``).

    One usefulness verdict per context, in rank order; no epsilon (a perfect ranking is
    exactly 1.0). An empty context list scores 0.0; a response with no checkable
    statement (a refusal) is ``not_applicable``.
    """

    name = "context_utilization"
    family = "ragas"
    required_fields = ("user_input", "response", "retrieved_contexts")
    judgements = ("reference_attribution",)

    async def measure(self, sample: Sample, judge: Judge) -> Measured | NotApplicable:
        if not judge.statements(sample.response):
            return NotApplicable("no_factual_statements: the response uses no context")
        contexts = sample.retrieved_contexts
        if not contexts:
            return Measured(0.0, "no context retrieved", {"contexts": []})
        verdicts = expect_count(await judge.context_usefulness(sample.user_input, sample.response, contexts),
                                len(contexts), "verdicts")
        value = average_precision([v.verdict for v in verdicts])
        items = [{"rank": i + 1, "useful": v.verdict, "reason": v.reason} for i, v in enumerate(verdicts)]
        return Measured(value, f"{sum(v.verdict for v in verdicts)}/{len(contexts)} contexts useful for the "
                               f"response; average precision {value:.2f}", {"contexts": items})
