"""``statement_classification``: true positives, false positives, false negatives of statements (AnswerCorrectness, FactualCorrectness).

Per response statement, 1 when the reference supports it (else a false positive); per
reference statement, 1 when the response covers it (else a false negative). One LLM
request, shared by both metrics through the cache; offline, two statement-support calls.
"""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from rag_eval.metrics.judgements.base import REASON, Judgement, Model, item_schema
from rag_eval.metrics.judges.prompts import Reason, Reply, Request, ids, keyed, keyed_schema, numbered, sections
from rag_eval.metrics.text import is_bare_span, qa_statement, split_qa


class StatementLists(Model):
    """The statements of the response and of the reference, with both texts."""

    response_statements: list[str]
    reference_statements: list[str]
    response: str
    reference: str


class Classification(Model):
    """``supported``: one 0/1 per response statement; ``covered``: one 0/1 per reference statement."""

    supported: list[Literal[0, 1]]
    covered: list[Literal[0, 1]]


class SupportedItem(Reply):
    """The reply for one response statement id."""

    reason: Reason = REASON
    supported: Literal[0, 1] = Field(description="1/0")


class CoveredItem(Reply):
    """The reply for one reference statement id."""

    reason: Reason = REASON
    covered: Literal[0, 1] = Field(description="1/0")


def request(response_statements: list[str], reference_statements: list[str]) -> Request:
    """AnswerCorrectness and FactualCorrectness: true positives, false positives, false negatives."""
    response_keys, reference_keys = ids("S", len(response_statements)), ids("R", len(reference_statements))
    prompt = (f"Response statements:\n{numbered('S', response_statements)}\n\nReference statements:\n"
              f"{numbered('R', reference_statements)}\n\n(1) For each response statement, supported = 1 if the "
              "reference statements support it, else 0. (2) For each reference statement, covered = 1 if the "
              "response statements state it or directly imply it, else 0.")
    schema = {"type": "object", "required": ["response", "reference"], "additionalProperties": False,
              "properties": {"response": keyed_schema(response_keys, item_schema(SupportedItem)),
                             "reference": keyed_schema(reference_keys, item_schema(CoveredItem))}}
    reply = sections(("response", keyed(tuple(response_keys), SupportedItem)),
                     ("reference", keyed(tuple(reference_keys), CoveredItem)))
    return Request("statement_classification", prompt, schema, reply,
                   lambda reply: {"supported": [reply.response[k].supported for k in response_keys],
                                  "covered": [reply.reference[k].covered for k in reference_keys]})


class StatementClassification(Judgement[StatementLists, Classification]):
    """Which response statements the reference supports, which reference statements the response covers."""

    kind = "statement_classification"
    version = "2"  # 2: offline, the rules' verdicts again (1 took the verifier's, at its threshold)
    Input, Output = StatementLists, Classification

    async def llm(self, judge, inputs: StatementLists) -> Classification:
        """One request classifying both statement lists."""
        answer = await judge.ask_request(
            self.version, request(inputs.response_statements, inputs.reference_statements),
            {"response": inputs.response_statements, "reference": inputs.reference_statements})
        return self.verdict(supported=answer["supported"], covered=answer["covered"])

    async def offline(self, judge, inputs: StatementLists) -> Classification:
        """Two ``OfflineJudge.support`` calls: response statements against the reference,
        reference statements against the response; a bare span ("85 million dollars") is
        evidence as the answer it is, ``"Q: <question> A: <span>"`` (an empty question when
        there is none), not as a passage. Each verdict is the offline rules' own (``rule_verdict``),
        not the learned verifier's: its threshold was set for statements against retrieved contexts,
        and against a reference answer it ranked answers below token F1 (``bench/long_answers_bench.py``,
        ``docs/explanation/judges.md``)."""
        def evidence(text: str, statements: list[str]) -> list[str]:
            if not is_bare_span(text):
                return [text]
            return [statements[0] if len(statements) == 1 and split_qa(statements[0]) else qa_statement("", text)]

        tp = await judge.support(inputs.response_statements, evidence(inputs.reference, inputs.reference_statements))
        covered = await judge.support(inputs.reference_statements, evidence(inputs.response, inputs.response_statements))
        return self.verdict(supported=[v.evidence.get("rule_verdict", v.verdict) for v in tp],
                            covered=[v.evidence.get("rule_verdict", v.verdict) for v in covered])


statement_classification = StatementClassification()
