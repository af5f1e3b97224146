"""``answer_questions``: what the response answers, compared with the question (AnswerRelevancy).

The LLM judge writes ``strictness`` questions the response answers, with a noncommittal
flag each, and embeds them with the question (RAGAS ``answer_relevancy``); offline, the
response itself is compared with the question.
"""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from rag_eval.metrics.core.conversation import asked
from rag_eval.metrics.judgements.base import Judgement, Model, item_schema
from rag_eval.metrics.judges.prompts import NonEmptyText, Reply, Request, ids, keyed, keyed_schema
from rag_eval.metrics.text import answer_kind_missed, is_bare_span, is_noncommittal, qa_statement, restates, split_sentences


class QuestionAndResponse(Model):
    """The user's question and the response."""

    user_input: str
    response: str


class AnswerRelevance(Model):
    """``similarities``: cosines in [-1, 1] between the question and each generated question
    (offline: the response itself); ``noncommittal``: one flag per generation; ``questions``:
    the generated questions (empty offline); ``off_question``: offline, the kind of answer the
    question asks for that a bare-span response is not ("a number"), else empty."""

    similarities: list[float]
    noncommittal: list[bool]
    questions: list[str] = []
    off_question: str = ""


class QuestionItem(Reply):
    """The reply for one question id."""

    question: NonEmptyText
    noncommittal: Literal[0, 1] = Field(description="1 = the response is evasive or vague")


def request(response: str, strictness: int) -> Request:
    """AnswerRelevancy: ``strictness`` questions the response answers, with a noncommittal flag."""
    keys = ids("Q", strictness)
    prompt = (f"Response:\n{response}\n\nWrite {strictness} different questions that this response answers, as a "
              "user would ask them, in the language of the response (keys Q1..). For each, set noncommittal to 1 if "
              "the response is evasive, vague or declines to answer (for example \"I don't know\" or \"it depends\"), "
              "else 0.")
    schema = keyed_schema(keys, item_schema(QuestionItem))
    return Request("answer_questions", prompt, schema, keyed(tuple(keys), QuestionItem),
                   lambda reply: {"questions": [reply[k].question for k in keys],
                                  "noncommittal": [reply[k].noncommittal for k in keys]})


class AnswerQuestions(Judgement[QuestionAndResponse, AnswerRelevance]):
    """How closely what the response answers matches the question (see the module docstring)."""

    kind = "answer_questions"
    Input, Output = QuestionAndResponse, AnswerRelevance

    async def llm(self, judge, inputs: QuestionAndResponse) -> AnswerRelevance:
        """``strictness`` questions in one request, embedded with the question in one request."""
        strictness = judge.config.strictness
        answer = await judge.ask_request(self.version, request(inputs.response, strictness),
                                         {"response": inputs.response, "strictness": strictness})
        vectors = await judge.embeddings([inputs.user_input, *answer["questions"]])
        similarities = [float(vectors[0] @ v) for v in vectors[1:]]
        return self.verdict(similarities=similarities, noncommittal=[bool(f) for f in answer["noncommittal"]],
                            questions=answer["questions"])

    async def offline(self, judge, inputs: QuestionAndResponse) -> AnswerRelevance:
        """Cosine of question and response; noncommittal when every sentence is evasive
        (``is_noncommittal``: refusals, "not provided", "无法回答") or only restates the
        question (``restates``). A bare span ("85", "Delhi") is read with its question
        (``"Q: … A: 85"``), as the LLM judge reads it: a span that answers is relevant, a span of
        another type than the question asks for ("Delhi" for "How many …?", "Paris." for "What is the
        boiling point of ethanol?", "1865年" for "谁…？") is off the question
        (``rag_eval.metrics.text.answer_kind_missed``). A follow-up completed by its conversation's
        earlier turns (``rag_eval.metrics.core.conversation.resolved``) is embedded completed; its form
        is read from its own words (``asked``)."""
        user_input, response = asked(inputs.user_input), inputs.response  # a follow-up's own words: its form
        sentences = [response.strip()] if is_bare_span(response) else split_sentences(response)
        evasive = not sentences or all(is_noncommittal(s) or restates(user_input, s) for s in sentences)
        vectors = judge.embed(self.offline_texts(judge, inputs))
        return self.verdict(similarities=[float(vectors[0] @ vectors[1])], noncommittal=[evasive],
                            off_question=answer_kind_missed(user_input, inputs.response) or "")

    def offline_texts(self, judge, inputs: QuestionAndResponse) -> list[str]:
        """The question and the response (a bare span read with its question: ``"Q: … A: 85"``)."""
        response = inputs.response
        return [inputs.user_input, qa_statement(inputs.user_input, response) if is_bare_span(response) else response]


answer_questions = AnswerQuestions()
