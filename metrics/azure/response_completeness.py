"""ResponseCompleteness (Azure AI Evaluation): how much of the ground truth the response contains."""
from __future__ import annotations

from rag_eval.metrics.azure.likert import LikertMetric
from rag_eval.metrics.core.base import Measured, NotApplicable
from rag_eval.metrics.judgements.likert_response_completeness import likert_response_completeness
from rag_eval.metrics.judges.base import Judge
from rag_eval.metrics.core.samples import Sample
from rag_eval.metrics.text import statements


class ResponseCompleteness(LikertMetric):
    """Completeness of ``response`` with respect to ``reference`` (Azure's ground_truth), 1-5
    Likert, higher is better, threshold 3 (Azure ``response_completeness``). A reference
    without statements is ``not_applicable``."""

    name = "response_completeness"
    required_fields = ("response", "reference")
    judgements = (likert_response_completeness,)

    def precheck(self, sample: Sample, judge: Judge) -> Measured | NotApplicable | None:
        if not statements(sample.given("reference")):
            return NotApplicable("the reference has no statement to look for")
        return None
