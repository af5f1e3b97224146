"""``question_critic``: is a generated question answerable from its contexts, and does it stand alone?

The critic step of RAGAS's test set generation (its question and answer filters) as one
request: the question, its reference answer and the source chunks in, two verdicts in
{0, 1} and a reason out. ``rag-eval testset`` keeps a question only when both verdicts are
1. No offline rule (it needs an LLM endpoint).
"""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from rag_eval.metrics.judgements.base import REASON, Judgement, Model, item_schema
from rag_eval.metrics.judges.base import JudgeError
from rag_eval.metrics.judges.prompts import Reason, Reply, Request, numbered


class Candidate(Model):
    """A generated question, its reference answer and the chunks it was written from."""

    user_input: str
    reference: str
    contexts: list[str]


class Critique(Model):
    """``answerable``: the contexts answer the question as the reference does; ``standalone``:
    the question is understood without the contexts; ``reason``: why."""

    answerable: bool
    standalone: bool
    reason: str

    @property
    def kept(self) -> bool:
        """Both verdicts hold."""
        return self.answerable and self.standalone


class CritiqueReply(Reply):
    """The reply: the reason first, then the two verdicts."""

    reason: Reason = REASON
    answerable: Literal[0, 1] = Field(description="1 = the passages fully answer the question as the answer does")
    standalone: Literal[0, 1] = Field(description="1 = the question is clear without seeing the passages")


def request(candidate: Candidate) -> Request:
    """The two verdicts on one question."""
    prompt = (f"Passages:\n{numbered('C', candidate.contexts)}\n\nQuestion:\n{candidate.user_input}\n\nAnswer:\n"
              f"{candidate.reference}\n\nCheck this test question. answerable = 1 if the passages alone fully "
              "support the answer and the answer answers the question, else 0. standalone = 1 if a user who has "
              "not seen the passages understands the question (it does not refer to \"the passage\", \"the text\" "
              "or \"the above\" and names what it is about), else 0. Give the reason first.")
    return Request("question_critic", prompt, item_schema(CritiqueReply), CritiqueReply,
                   lambda reply: {"answerable": bool(reply.answerable), "standalone": bool(reply.standalone),
                                  "reason": reply.reason})


class QuestionCritic(Judgement[Candidate, Critique]):
    """Answerable and standalone verdicts on a generated question (see the module docstring)."""

    kind = "question_critic"
    Input, Output = Candidate, Critique

    async def llm(self, judge, inputs: Candidate) -> Critique:
        """One request."""
        answer = await judge.ask_request(self.version, request(inputs), inputs.model_dump())
        return self.verdict(**answer)

    async def offline(self, judge, inputs: Candidate) -> Critique:
        """None: raises :class:`JudgeError` (the critic needs an LLM endpoint)."""
        raise JudgeError("question_critic needs an LLM endpoint (set OPENAI_BASE_URL or OPENAI_API_KEY)")


question_critic = QuestionCritic()
