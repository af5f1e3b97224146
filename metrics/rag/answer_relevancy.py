"""AnswerRelevancy (RAGAS ResponseRelevancy): does the response address the question?"""
from __future__ import annotations

import re
from collections.abc import Sequence

from pydantic import BaseModel

from rag_eval.metrics.core.base import Family, Measured, Metric, NotApplicable
from rag_eval.metrics.judgements.answer_questions import QuestionAndResponse, answer_questions
from rag_eval.metrics.judgements.base import Judgement
from rag_eval.metrics.judges.base import Judge
from rag_eval.metrics.core.samples import Sample


def answer_relevancy_score(similarities: Sequence[float], noncommittal: Sequence[bool]) -> float:
    """Mean cosine, clipped to [0, 1], zeroed when the response is noncommittal.

    Parameters
    ----------
    similarities : sequence of float in [-1, 1]
        Cosine between the question and each generated question (one per generation).
    noncommittal : sequence of bool
        One flag per generation. The response counts as noncommittal when more than
        half of the generations say so (RAGAS zeroes only when *all* do, fault 7).

    Returns
    -------
    float in [0, 1]
        Higher is better. Example: cosines (1, .6, .8) give 0.8; flags (1, 1, 1) give 0.

    Raises
    ------
    ValueError
        If ``similarities`` is empty.

    References
    ----------
    RAGAS 0.4.3 ``answer_relevancy``; dingo ``LLMRAGAnswerRelevancy``.
    """
    if not similarities:
        raise ValueError("no similarity to average")
    if sum(bool(f) for f in noncommittal) * 2 > len(noncommittal):
        return 0.0
    mean = sum(similarities) / len(similarities)
    return min(1.0, max(0.0, mean))


class AnswerRelevancy(Metric):
    """Relevance of ``response`` to ``user_input``, on [0, 1], higher is better.

    With the LLM judge: ``strictness`` questions generated from the response, compared
    with the question by embedding cosine. With the offline judge: the cosine between
    question and response, and a short answer naming something of another type than the question
    asks for scores 0.0, off the question, whatever its cosine: the question's type from its
    wh-word or head noun (a quantity: "How many …?", "What is the boiling point of …?", "多少"; a
    date: "When …?"; a name: "Who …?", "谁"; a place: "Where …?", "哪里"), the answer's from its form
    (a quantity or a date needs a number, a numeral or a month: "Marie Curie." and "Paris." are no
    boiling point; a name needs a capitalised or CJK word and no digit; a place a word that is not a
    number or a month), English and Chinese (``rag_eval.metrics.text.answer_kind_missed``). An empty response
    scores 0.0 (it answers nothing).
    """

    name = "answer_relevancy"
    family = Family.CORE
    required_fields = ("user_input", "response")
    judgements = (answer_questions,)

    def asks(self, sample: Sample) -> list[tuple[Judgement, BaseModel]]:
        """The questions the response answers, unless it is empty."""
        return [(answer_questions, _questions(sample))] if _says_something(sample.given("response")) else []

    async def measure(self, sample: Sample, judge: Judge) -> Measured | NotApplicable:
        if not _says_something(sample.given("response")):
            return Measured(0.0, "empty response: it answers nothing", {"noncommittal": [True]})
        judgement = await judge.ask(answer_questions, _questions(sample))
        details = {"similarities": [round(s, 4) for s in judgement.similarities],
                   "noncommittal": judgement.noncommittal, "questions": judgement.questions}
        if judgement.off_question:
            return Measured(0.0, f"off the question: it asks for {judgement.off_question}, the answer is not one",
                            {**details, "off_question": judgement.off_question})
        value = answer_relevancy_score(judgement.similarities, judgement.noncommittal)
        if value == 0.0 and any(judgement.noncommittal):
            return Measured(value, "the response is noncommittal or evasive", details)
        return Measured(value, f"mean similarity to the question {value:.2f}", details)


def _says_something(response: str) -> bool:
    """Does ``response`` hold a letter or a digit?"""
    return re.search(r"[^\W_]", response) is not None


def _questions(sample: Sample) -> QuestionAndResponse:
    """The ``answer_questions`` input of ``sample``."""
    return answer_questions.Input(user_input=sample.question(), response=sample.given("response"))
