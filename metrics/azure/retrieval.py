"""Retrieval (Azure AI Evaluation): are the retrieved chunks relevant and well ranked?"""
from __future__ import annotations

from rag_eval.metrics.azure.likert import LikertMetric
from rag_eval.metrics.core.base import Measured, NotApplicable, nothing_retrieved
from rag_eval.metrics.judgements.likert_retrieval import likert_retrieval
from rag_eval.metrics.judges.base import Judge
from rag_eval.metrics.core.samples import Sample


class Retrieval(LikertMetric):
    """Relevance and ranking of ``retrieved_contexts`` for ``user_input``, 1-5 Likert, higher
    is better, threshold 3 (Azure ``retrieval``). An empty context list scores 1 with the
    reason "nothing retrieved" (Azure sends it to the judge)."""

    name = "retrieval"
    required_fields = ("user_input", "retrieved_contexts")
    judgements = (likert_retrieval,)

    def precheck(self, sample: Sample, judge: Judge) -> Measured | NotApplicable | None:
        if nothing_retrieved(sample.given("retrieved_contexts")):
            return Measured(1.0, "nothing retrieved", {"score": 1})
        return None
