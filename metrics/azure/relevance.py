"""Relevance (Azure AI Evaluation): does the response address the query?"""
from __future__ import annotations

import re

from rag_eval.metrics.azure.likert import LikertMetric
from rag_eval.metrics.core.base import Measured, NotApplicable
from rag_eval.metrics.judgements.likert_relevance import likert_relevance
from rag_eval.metrics.judges.base import Judge
from rag_eval.metrics.core.samples import Sample


class Relevance(LikertMetric):
    """Relevance of ``response`` to ``user_input``, 1-5 Likert, higher is better, threshold 3
    (Azure ``relevance``). An empty response scores 1."""

    name = "relevance"
    required_fields = ("user_input", "response")
    judgements = (likert_relevance,)

    def precheck(self, sample: Sample, judge: Judge) -> Measured | NotApplicable | None:
        if not re.search(r"[^\W_]", sample.given("response")):
            return Measured(1.0, "empty response: it answers nothing", {"score": 1})
        return None
