"""``question_generation``: a test question and its reference answer written from one or two chunks.

Three kinds, as RAGAS's ``TestsetGenerator`` query synthesizers name them (RAGAS 0.2+
``SingleHopSpecificQuerySynthesizer``, ``MultiHopSpecificQuerySynthesizer``,
``MultiHopAbstractQuerySynthesizer``; Azure's simulator writes single-passage questions
only): ``single_hop`` (one specific fact of one chunk), ``multi_hop`` (two facts of two
related chunks, both needed) and ``abstract`` (a why/how or comparison question over the
ideas of the chunks rather than one fact). One request, one question; the reply is
checked strictly: a question and an answer, both non-empty, and for documents in Chinese,
Japanese or Korean a question in that script (re-asked once with the problem, then the
seed is dropped with its cause). No offline rule: generating needs an LLM; offline,
``rag-eval testset`` writes the inverse-cloze set instead (``rag_eval.metrics.sources.testset.inverse_cloze``).
"""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from rag_eval.metrics.judgements.base import Judgement, Model, item_schema
from rag_eval.metrics.judges.base import JudgeError
from rag_eval.metrics.judges.prompts import NonEmptyText, OutputError, Reply, Request, numbered
from rag_eval.metrics.text import has_cjk

Kind = Literal["single_hop", "multi_hop", "abstract"]

INSTRUCTIONS = {
    "single_hop": "Write one specific question that a user of these documents could ask and that the passage answers "
                  "with a fact it states (a name, number, step, condition or definition).",
    "multi_hop": "Write one question that needs a fact of passage C1 and a fact of passage C2 together: neither "
                 "passage alone answers it. Name both facts in the answer.",
    "abstract": "Write one broad question about the ideas of the passages (why, how, what is the difference, what "
                "should one consider) that the passages answer together, not a look-up of a single fact.",
}


class Seed(Model):
    """What a question is written from: its ``kind``, the chunk texts (``contexts``, one
    or two) and the ``language`` to write in (``Chinese``, ``Japanese``, ``Korean``: the question
    must be in that script; or ``the language of the passages``)."""

    kind: Kind
    contexts: list[str]
    language: str


class GeneratedQuestion(Model):
    """The question (``user_input``) and its reference answer (``reference``)."""

    user_input: str
    reference: str


class QuestionReply(Reply):
    """The reply: the question, then its answer."""

    question: NonEmptyText = Field(description="the question, standalone, as a user would ask it")
    answer: NonEmptyText = Field(description="the reference answer, from the passages only")


def request(seed: Seed) -> Request:
    """One question of ``seed.kind`` over the numbered passages, in ``seed.language``."""
    prompt = (f"Passages:\n{numbered('C', seed.contexts)}\n\n{INSTRUCTIONS[seed.kind]} The question must stand on its "
              "own: someone who has not seen the passages understands it, so it never says \"the passage\", \"the "
              "text\", \"the document\" or \"according to\". The answer is complete and follows from the passages "
              f"only. Write the question and the answer in {seed.language}.")
    cjk = seed.language in ("Chinese", "Japanese", "Korean")  # the passages' script (not one name in it)

    def read(reply: QuestionReply) -> dict[str, str]:
        if cjk and not has_cjk(reply.question):
            raise OutputError(f"the question must be written in {seed.language}, the language of the passages")
        return {"user_input": reply.question.strip(), "reference": reply.answer.strip()}

    return Request("question_generation", prompt, item_schema(QuestionReply), QuestionReply, read)


class QuestionGeneration(Judgement[Seed, GeneratedQuestion]):
    """A test question with its reference answer (see the module docstring)."""

    kind = "question_generation"
    Input, Output = Seed, GeneratedQuestion

    async def llm(self, judge, inputs: Seed) -> GeneratedQuestion:
        """One request."""
        answer = await judge.ask_request(self.version, request(inputs), inputs.model_dump())
        return self.verdict(**answer)

    async def offline(self, judge, inputs: Seed) -> GeneratedQuestion:
        """None: raises :class:`JudgeError` (writing questions needs an LLM endpoint)."""
        raise JudgeError("question_generation needs an LLM endpoint (set OPENAI_BASE_URL or OPENAI_API_KEY); "
                         "offline, use the inverse-cloze test set")


question_generation = QuestionGeneration()
