"""``likert_response_completeness``: how much of the ground truth the response contains (Azure ``response_completeness``, 1-5)."""
from __future__ import annotations

from rag_eval.metrics.judgements.likert import Likert, LikertScore, LikertTexts
from rag_eval.metrics.text import statements


class LikertResponseCompleteness(Likert):
    """Azure's completeness rubric; offline ``1 + 4 x`` the share of reference statements covered."""

    criterion = "response_completeness"
    rubric = ("Score how much of the ground truth's necessary information the response contains: 1 = none; 2 = a "
              "small part; 3 = about half; 4 = most; 5 = all.")
    fields = ("ground_truth", "response")

    async def offline(self, judge, inputs: LikertTexts) -> LikertScore:
        """``1 + 4 x`` the share of the ground truth's statements the response covers."""
        claims = statements(inputs.given("ground_truth"))
        evidence = [inputs.response]
        verdicts = await judge.support(claims, evidence) if claims and evidence else []
        share = sum(v.verdict for v in verdicts) / len(claims) if claims else 0.0
        return self.verdict(score=1 + round(4 * share),
                            reason=f"{sum(v.verdict for v in verdicts)}/{len(claims)} reference statements covered")


likert_response_completeness = LikertResponseCompleteness()
