"""``whole_context_relevance``: two ratings in {0, 1, 2} of all contexts together (NVIDIA ContextRelevance).

Two differently worded LLM judges (RAGAS ``nv_context_relevance``); offline, the dual
judge of ``context_relevance`` over the contexts joined, each rating one lower when
under ``Rules.focus_floor`` of the sentences are on the question (a focused context
ranks above the same one padded with unrelated sentences).
"""
from __future__ import annotations

import asyncio

from rag_eval.metrics.judgements.base import Judgement, Model
from rag_eval.metrics.judgements.context_relevance import QuestionAndContexts, Rating, context_relevance
from rag_eval.metrics.judges.prompts import Reply, Request


class WholeContextRatings(Model):
    """The two judges' ratings of all contexts together."""

    ratings: tuple[Rating, Rating]


class RatingReply(Reply):
    """The reply: one rating of all the contexts."""

    rating: Rating


WORDINGS = {
    "whole_context_relevance_a": "Rate how relevant the context is to answering the question: 0 = no relevant "
                                 "information, 1 = partially relevant, 2 = contains what answers the question.",
    "whole_context_relevance_b": "Does this retrieved text help to answer the user's question? Give 2 if it holds "
                                 "the answer, 1 if it helps only in part, 0 if it does not help at all.",
}


def request(wording: str, question: str, contexts: list[str]) -> Request:
    """One of two differently worded judges, one rating of all contexts."""
    prompt = f"Question:\n{question}\n\nContext:\n{chr(10).join(contexts)}\n\n{WORDINGS[wording]}"
    schema = {"type": "object", "properties": {"rating": {"type": "integer", "enum": [0, 1, 2]}},
              "required": ["rating"], "additionalProperties": False}
    return Request(wording, prompt, schema, RatingReply, RatingReply.model_dump)


class WholeContextRelevance(Judgement[QuestionAndContexts, WholeContextRatings]):
    """How relevant are all the contexts together, by two judges? (see the module docstring)."""

    kind = "whole_context_relevance"
    requests = tuple(WORDINGS)
    Input, Output = QuestionAndContexts, WholeContextRatings

    async def llm(self, judge, inputs: QuestionAndContexts) -> WholeContextRatings:
        """Two requests, concurrently."""
        first, second = await asyncio.gather(*(
            judge.ask_request(self.version, request(wording, inputs.user_input, inputs.contexts),
                              {"user_input": inputs.user_input, "contexts": inputs.contexts})
            for wording in self.requests))
        return self.verdict(ratings=(first["rating"], second["rating"]))

    async def offline(self, judge, inputs: QuestionAndContexts) -> WholeContextRatings:
        """The dual judge over the joined contexts, lowered for unfocused contexts."""
        joined = QuestionAndContexts(user_input=inputs.user_input, contexts=["\n".join(inputs.contexts)])
        [pair] = (await context_relevance.offline(judge, joined)).ratings
        if judge.focus(inputs.user_input, inputs.contexts) < judge.rules.focus_floor:
            return self.verdict(ratings=(max(pair[0] - 1, 0), max(pair[1] - 1, 0)))
        return self.verdict(ratings=pair)


whole_context_relevance = WholeContextRelevance()
