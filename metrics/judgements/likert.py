"""The shared shape of Azure AI Evaluation's 1-5 Likert judgements: texts in, a score and its reason out.

Each criterion is its own module (``likert_groundedness``, ``likert_relevance``,
``likert_retrieval``, ``likert_response_completeness``) with its rubric, the texts it
reads and its offline rule; this module holds what they share: the input and verdict
models and the LLM request (a score outside 1..5 is invalid output, re-asked once, never
accepted; Azure AI Evaluation accepts 7 and 2.5 from its LLM).
"""
from __future__ import annotations

from typing import ClassVar, Literal, overload

from rag_eval.metrics.judgements.base import REASON, Judgement, Model, item_schema
from rag_eval.metrics.judges.prompts import Reason, Reply, Request, numbered


class LikertTexts(Model):
    """The texts a criterion may read (Azure's names): query, response, contexts, ground truth."""

    query: str | None = None
    response: str | None = None
    contexts: list[str] | None = None
    ground_truth: str | None = None

    @overload
    def given(self, name: Literal["query", "response", "ground_truth"]) -> str: ...
    @overload
    def given(self, name: Literal["contexts"]) -> list[str]: ...

    def given(self, name: str) -> str | list[str]:
        """The text ``name``, which a criterion reads when it lists it in its ``fields`` (the
        Azure metric asking for it requires the sample field it comes from).

        Raises
        ------
        LookupError
            When it is ``None`` (a bug of the caller: that row's ``judge_error``).
        """
        value = getattr(self, name)
        if value is None:
            raise LookupError(f"the {name} is missing: a Likert criterion reading it lists it in its fields")
        return value


class LikertScore(Model):
    """A 1-5 score and its reason."""

    score: Literal[1, 2, 3, 4, 5]
    reason: str


class ScoreReply(Reply):
    """The reply: the reason first, then the score."""

    reason: Reason = REASON
    score: Literal[1, 2, 3, 4, 5]


class Likert(Judgement[LikertTexts, LikertScore]):
    """A 1-5 Likert judgement of one Azure criterion (subclasses give ``criterion``,
    ``rubric``, ``fields`` and the offline rule)."""

    criterion: ClassVar[str]
    rubric: ClassVar[str]
    #: The texts shown to the LLM, in order (``context`` is the numbered contexts).
    fields: ClassVar[tuple[str, ...]]
    Input, Output = LikertTexts, LikertScore

    def __init_subclass__(cls, **kwargs) -> None:
        if "criterion" in cls.__dict__:
            cls.kind = f"likert_{cls.criterion}"
        super().__init_subclass__(**kwargs)

    def request(self, texts: LikertTexts) -> Request:
        """The rubric over the criterion's texts; scored 1..5 (nothing else is accepted)."""
        parts = []
        for name in self.fields:
            if name == "context":
                parts.append(f"Context:\n{numbered('C', texts.given('contexts'))}")
            elif getattr(texts, name) is not None:
                parts.append(f"{name.replace('_', ' ').capitalize()}:\n{getattr(texts, name)}")
        prompt = "\n\n".join(parts) + f"\n\n{self.rubric} Give the reason first."
        return Request(self.kind, prompt, item_schema(ScoreReply), ScoreReply, ScoreReply.model_dump)

    async def llm(self, judge, inputs: LikertTexts) -> LikertScore:
        """One request."""
        answer = await judge.ask_request(self.version, self.request(inputs), inputs.model_dump())
        return self.verdict(score=answer["score"], reason=answer["reason"])
