"""``likert_relevance``: does the response address the query? (Azure ``relevance``, 1-5)."""
from __future__ import annotations

from rag_eval.metrics.judgements.answer_questions import QuestionAndResponse, answer_questions
from rag_eval.metrics.judgements.likert import Likert, LikertScore, LikertTexts


class LikertRelevance(Likert):
    """Azure's relevance rubric; offline from the question-response cosine."""

    criterion = "relevance"
    rubric = ("Score how well the response addresses the query: 1 = irrelevant; 2 = touches the topic but misses the "
              "question; 3 = partly answers; 4 = answers with minor gaps; 5 = fully and directly answers.")
    fields = ("query", "response")

    async def offline(self, judge, inputs: LikertTexts) -> LikertScore:
        """1 for an evasive response or a span of another kind than the question asks for
        ("Delhi" for "How many …?"); else 1 plus the ``Rules.relevance_bands`` (0.1, 0.25,
        0.4, 0.55) the question-response cosine reaches."""
        judgement = await answer_questions.offline(judge, QuestionAndResponse(
            user_input=inputs.given("query"), response=inputs.given("response")))
        if all(judgement.noncommittal):
            return self.verdict(score=1, reason="the response is evasive")
        if judgement.off_question:
            return self.verdict(score=1, reason=f"off the question: it asks for {judgement.off_question}")
        cosine = judgement.similarities[0]
        score = 1 + sum(cosine >= cut for cut in judge.rules.relevance_bands)
        return self.verdict(score=score, reason=f"question-response similarity {cosine:.2f}")


likert_relevance = LikertRelevance()
