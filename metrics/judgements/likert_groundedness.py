"""``likert_groundedness``: is the response grounded in the context? (Azure ``groundedness``, 1-5)."""
from __future__ import annotations

from rag_eval.metrics.judgements.likert import Likert, LikertScore, LikertTexts
from rag_eval.metrics.text import statements


class LikertGroundedness(Likert):
    """Azure's groundedness rubric; offline ``1 + 4 x`` the mean support of the response statements."""

    criterion = "groundedness"
    rubric = ("Score how well the response is grounded in the context: 1 = unrelated to the context; 2 = tries to "
              "answer but includes unsupported or wrong information; 3 = accurate but vague; 4 = correct but "
              "incomplete; 5 = fully grounded and complete.")
    fields = ("query", "context", "response")

    async def offline(self, judge, inputs: LikertTexts) -> LikertScore:
        """``1 + 4 x`` the mean support (``Verdict.support``: the verifier's probability) of the
        response's statements, rounded to the rubric's integer."""
        claims = statements(inputs.given("response"), inputs.query)
        verdicts = await judge.support(claims, inputs.contexts) if claims and inputs.contexts else []
        share = sum(v.support for v in verdicts) / len(claims) if claims else 0.0
        return self.verdict(score=1 + round(4 * share),
                            reason=f"{sum(v.verdict for v in verdicts)}/{len(claims)} response statements supported")


likert_groundedness = LikertGroundedness()
