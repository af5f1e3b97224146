"""Groundedness (Azure AI Evaluation): is the response grounded in the retrieved context?"""
from __future__ import annotations

from rag_eval.metrics.azure.likert import LikertMetric
from rag_eval.metrics.core.base import Measured, NotApplicable, nothing_retrieved
from rag_eval.metrics.judgements.likert_groundedness import likert_groundedness
from rag_eval.metrics.judges.base import Judge
from rag_eval.metrics.core.samples import Sample
from rag_eval.metrics.text import statements


class Groundedness(LikertMetric):
    """Groundedness of ``response`` in ``retrieved_contexts``, 1-5 Likert, higher is better,
    threshold 3 (Azure ``groundedness``; the query is used when present).

    Never judges the response against itself (Azure does when the context is missing or
    empty: its prompt then holds the response in place of a context): a missing context field is ``input_error``; an empty
    context list scores 1 with the reason "nothing retrieved". A response with no
    checkable statement is ``not_applicable``.
    """

    name = "groundedness"
    required_fields = ("response", "retrieved_contexts")
    judgements = (likert_groundedness,)

    def precheck(self, sample: Sample, judge: Judge) -> Measured | NotApplicable | None:
        if not statements(sample.given("response"), sample.user_input):
            return NotApplicable("no_factual_statements: the response makes no checkable statement")
        if nothing_retrieved(sample.given("retrieved_contexts")):
            return Measured(1.0, "nothing retrieved", {"score": 1})
        return None
