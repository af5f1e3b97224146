"""``context_relevance``: two independent ratings in {0, 1, 2} per context (the dual judge of ContextRelevancy).

The dingo RAG guide's dual judge: two differently worded prompts rate each context; the
0/1/2 rubric of NVIDIA's ContextRelevance in RAGAS 0.4.3, applied per chunk. Offline, a
semantic judge (cosine) and a lexical one (token overlap) rate each context.
"""
from __future__ import annotations

import asyncio
from typing import Literal

from rag_eval.metrics.judgements.base import Judgement, Model, item_schema
from rag_eval.metrics.judges.prompts import Reply, Request, ids, keyed, keyed_schema, numbered
from rag_eval.metrics.text import content_tokens

Rating = Literal[0, 1, 2]


class QuestionAndContexts(Model):
    """The user's question and the retrieved contexts, in rank order."""

    user_input: str
    contexts: list[str]


class ContextRatings(Model):
    """Per context, the ratings of the two judges."""

    ratings: list[tuple[Rating, Rating]]


class RatingItem(Reply):
    """The reply for one context id."""

    rating: Rating


PROMPTS = {
    "context_relevance_a": ("Question:\n{question}\n\nContexts:\n{contexts}\n\nRate how relevant each context is to "
                            "answering the question: 0 = no relevant information, 1 = partially relevant, 2 = contains "
                            "information that answers the question."),
    "context_relevance_b": ("Below are passages a search system returned for a user's question. For each passage, "
                            "decide how much it helps to answer the question: 2 if it gives the answer or its key "
                            "facts, 1 if it is on topic but only partly useful, 0 if it is unrelated or useless.\n\n"
                            "User question: {question}\n\nPassages:\n{contexts}"),
}


def request(wording: str, question: str, contexts: list[str]) -> Request:
    """One of the two differently worded judges (``context_relevance_a`` or ``_b``), a rating 0/1/2 per context."""
    keys = ids("C", len(contexts))
    prompt = PROMPTS[wording].format(question=question, contexts=numbered("C", contexts))
    schema = keyed_schema(keys, item_schema(RatingItem))
    return Request(wording, prompt, schema, keyed(tuple(keys), RatingItem),
                   lambda reply: {"ratings": [reply[k].rating for k in keys]})


def rate(value: float, cuts: tuple[float, float]) -> int:
    """2 at or past the second cut, 1 at or past the first, else 0."""
    return 2 if value >= cuts[1] else 1 if value >= cuts[0] else 0


class ContextRelevance(Judgement[QuestionAndContexts, ContextRatings]):
    """How relevant is each context to the question, by two judges? (see the module docstring)."""

    kind = "context_relevance"
    requests = ("context_relevance_a", "context_relevance_b")
    Input, Output = QuestionAndContexts, ContextRatings

    async def llm(self, judge, inputs: QuestionAndContexts) -> ContextRatings:
        """Both judges, one request each (per batch), concurrently."""
        ratings: list[tuple[int, int]] = []
        for _, batch in judge.batches(inputs.contexts):
            first, second = await asyncio.gather(*(
                judge.ask_request(self.version, request(wording, inputs.user_input, batch),
                                  {"user_input": inputs.user_input, "contexts": batch})
                for wording in self.requests))
            ratings += list(zip(first["ratings"], second["ratings"]))
        return self.verdict(ratings=ratings)

    async def offline(self, judge, inputs: QuestionAndContexts) -> ContextRatings:
        """Semantic judge: max cosine of the question with the context or its sentences
        (cuts ``Rules.relevance_cuts``). Lexical judge: share of the question's content
        tokens present in the context (cuts ``Rules.overlap_cuts``)."""
        question_tokens = content_tokens(inputs.user_input)
        ratings = []
        for context in inputs.contexts:
            units = judge.units([context])
            if not units:
                ratings.append((0, 0))
                continue
            # The passages in order until one reaches the top rating (the rest cannot change it).
            cosines = []
            for i in range(len(units)):
                cosines.append(judge.cosines(units, inputs.user_input, [i])[i])
                if cosines[-1] >= judge.rules.relevance_cuts[1]:
                    break
            cosine = float(max(cosines))
            overlap = len(question_tokens & content_tokens(context)) / len(question_tokens) if question_tokens else cosine
            ratings.append((rate(cosine, judge.rules.relevance_cuts), rate(overlap, judge.rules.overlap_cuts)))
        return self.verdict(ratings=ratings)

    def offline_texts(self, judge, inputs: QuestionAndContexts) -> list[str]:
        """The question and each context's passages (most rows read them all, one by one)."""
        return [inputs.user_input, *(unit for context in inputs.contexts for unit in judge.units([context]))]


context_relevance = ContextRelevance()
