"""``likert_retrieval``: are the retrieved chunks relevant and well ranked? (Azure ``retrieval``, 1-5)."""
from __future__ import annotations

from rag_eval.metrics.judgements.context_relevance import QuestionAndContexts, context_relevance
from rag_eval.metrics.judgements.likert import Likert, LikertScore, LikertTexts


class LikertRetrieval(Likert):
    """Azure's retrieval rubric; offline from which contexts the dual judge finds relevant and how high the first ranks."""

    criterion = "retrieval"
    rubric = ("Score the retrieved context chunks, in their order, for the query: 1 = irrelevant; 2 = partly "
              "relevant, the best chunks missing or at the bottom; 3 = relevant but the most pertinent chunks at the "
              "bottom; 4 = fully addresses the query, the best chunk in the middle; 5 = fully addresses the query, "
              "the best chunks at the top. Do not judge factual correctness.")
    fields = ("query", "context")

    async def offline(self, judge, inputs: LikertTexts) -> LikertScore:
        """5 (or 4 when under half are relevant) when the first context is relevant, 3 when the
        first relevant one is in the top half, else 2; 1 when none is; one lower when under
        ``Rules.focus_floor`` of the contexts' sentences are on the question."""
        contexts = inputs.given("contexts")
        rated = await context_relevance.offline(judge, QuestionAndContexts(user_input=inputs.given("query"),
                                                                           contexts=contexts))
        relevant = [sum(pair) / 2 >= 1 for pair in rated.ratings]
        if not any(relevant):
            return self.verdict(score=1, reason="no retrieved context is relevant")
        first, share = relevant.index(True) + 1, sum(relevant) / len(relevant)
        score = (5 if share >= 0.5 else 4) if first == 1 else 3 if first <= (len(contexts) + 1) // 2 else 2
        focus = judge.focus(inputs.query, contexts)
        if focus < judge.rules.focus_floor:
            return self.verdict(score=score - 1, reason=f"{sum(relevant)}/{len(relevant)} contexts relevant, the first "
                                                        f"at rank {first}; only {focus:.0%} of their sentences are on "
                                                        "the question")
        return self.verdict(score=score, reason=f"{sum(relevant)}/{len(relevant)} contexts relevant, the first at "
                                                f"rank {first}")


likert_retrieval = LikertRetrieval()
