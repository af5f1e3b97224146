"""``statement_support``: one verdict per statement, 1 when the contexts support it.

Used by Faithfulness, GroundednessPro and NoiseSensitivity (RAGAS ``faithfulness``'s NLI
step).
"""
from __future__ import annotations

import asyncio
from typing import Literal

from pydantic import Field

from rag_eval.metrics.judgements.base import REASON, Judgement, Model, item_schema
from rag_eval.metrics.judges.base import Judge, Verdict, expect_count
from rag_eval.metrics.judges.prompts import Reason, Reply, Request, ids, keyed, keyed_schema, numbered


class Statements(Model):
    """Statements (``rag_eval.metrics.text.statements``) and the contexts judging them."""

    statements: list[str]
    contexts: list[str]


class Verdicts(Model):
    """One :class:`~rag_eval.metrics.judges.base.Verdict` per judged item, in order."""

    verdicts: list[Verdict]


class SupportItem(Reply):
    """The reply for one statement id."""

    reason: Reason = REASON
    verdict: Literal[0, 1] = Field(description="1 = inferable from the contexts")


def request(statements: list[str], contexts: list[str], examples: str = "") -> Request:
    """Faithfulness: one verdict per response statement against all contexts, after ``examples``
    (an aligned judge's labelled examples, ``rag_eval.metrics.judges.examples.Examples.prefix``)."""
    keys = ids("S", len(statements))
    prompt = (f"{examples}Contexts:\n{numbered('C', contexts)}\n\nStatements:\n{numbered('S', statements)}\n\n"
              "For every statement id, give verdict 1 if the statement can be directly inferred from the contexts, "
              "and 0 if it cannot (not stated there, or contradicted). Give the reason first.")
    schema = keyed_schema(keys, item_schema(SupportItem))
    return Request("statement_support", prompt, schema, keyed(tuple(keys), SupportItem),
                   lambda reply: {"verdicts": [reply[k].verdict for k in keys], "reasons": [reply[k].reason for k in keys]})


class StatementSupport(Judgement[Statements, Verdicts]):
    """Is each statement supported by the contexts? (see the module docstring)."""

    kind = "statement_support"
    Input, Output = Statements, Verdicts

    async def llm(self, judge, inputs: Statements) -> Verdicts:
        """One request judging every statement against the contexts (one per batch of
        contexts past the size budget; a statement is supported by any batch). An aligned judge's
        examples (``judge.examples``) come first in each prompt, their version in its cache key."""
        examples = getattr(judge, "examples", None)
        aligned = {"examples": examples.version} if examples else {}
        answers = await asyncio.gather(*(
            judge.ask_request(self.version, request(inputs.statements, batch, examples.prefix if examples else ""),
                              {"statements": inputs.statements, "contexts": batch, **aligned})
            for _, batch in judge.batches(inputs.contexts)))
        verdicts = []
        for i in range(len(inputs.statements)):
            best = max(answers, key=lambda a: a["verdicts"][i])
            verdicts.append(Verdict(best["verdicts"][i], best["reasons"][i]))
        return self.verdict(verdicts=verdicts)

    async def offline(self, judge, inputs: Statements) -> Verdicts:
        """The offline judge's relation-level support (``OfflineJudge.support``)."""
        return self.verdict(verdicts=await judge.support(inputs.statements, inputs.contexts))

    def offline_texts(self, judge, inputs: Statements) -> list[str]:
        """What ``OfflineJudge.support`` embeds (``support_texts``)."""
        return judge.support_texts(inputs.statements, inputs.contexts)


statement_support = StatementSupport()


async def support_verdicts(judge: Judge, statements: list[str], contexts: list[str]) -> list[Verdict]:
    """The verdicts of ``statement_support``, one per statement (a judge answering another
    number of them is a ``JudgeError``, ``expect_count``)."""
    judged = await judge.ask(statement_support, Statements(statements=statements, contexts=contexts))
    return expect_count(judged.verdicts, len(statements), "verdicts")
