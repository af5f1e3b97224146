"""``reference_attribution``: one verdict per reference statement, 1 when the contexts state it (ContextRecall).

With the LLM judge it is one request together with ``context_usefulness`` (same inputs,
same cache key), as RAGAS's ``context_recall`` and ``context_precision`` read the same
reference; offline, the offline judge's statement support.
"""
from __future__ import annotations

import asyncio
from typing import Any, Literal

from pydantic import Field

from rag_eval.metrics.judgements.base import REASON, Judgement, Model, item_schema
from rag_eval.metrics.judgements.statement_support import Verdicts
from rag_eval.metrics.judges.base import Verdict
from rag_eval.metrics.judges.prompts import Reason, Reply, Request, ids, keyed, keyed_schema, numbered, sections


class ReferenceStatements(Model):
    """The question, the reference's statements and the retrieved contexts."""

    user_input: str
    statements: list[str]
    contexts: list[str]


class AttributedItem(Reply):
    """The reply for one reference statement id."""

    reason: Reason = REASON
    attributed: Literal[0, 1] = Field(description="attributable")


class UsefulItem(Reply):
    """The reply for one context id."""

    reason: Reason = REASON
    useful: Literal[0, 1] = Field(description="useful")


def request(question: str, statements: list[str], contexts: list[str]) -> Request:
    """ContextRecall and ContextPrecision in one request: attribution of each reference
    statement to the contexts, and usefulness of each context for the reference."""
    statement_keys, context_keys = ids("R", len(statements)), ids("C", len(contexts))
    prompt = (f"Question:\n{question}\n\nAnswer, as numbered statements:\n{numbered('R', statements)}\n\n"
              f"Contexts, in retrieval order:\n{numbered('C', contexts)}\n\nTwo tasks. (1) For each answer "
              "statement, attributed = 1 if it is stated in or directly implied by the contexts, else 0. (2) For "
              "each context, useful = 1 if it was useful in arriving at this answer to the question, else 0.")
    schema = {"type": "object", "required": ["statements", "contexts"], "additionalProperties": False,
              "properties": {"statements": keyed_schema(statement_keys, item_schema(AttributedItem)),
                             "contexts": keyed_schema(context_keys, item_schema(UsefulItem))}}
    reply = sections(("statements", keyed(tuple(statement_keys), AttributedItem)),
                     ("contexts", keyed(tuple(context_keys), UsefulItem)))

    def read(reply) -> dict[str, list[Any]]:
        statements, used = [reply.statements[k] for k in statement_keys], [reply.contexts[k] for k in context_keys]
        return {"attributed": [s.attributed for s in statements], "attribution_reasons": [s.reason for s in statements],
                "useful": [c.useful for c in used], "usefulness_reasons": [c.reason for c in used]}

    return Request("reference_attribution", prompt, schema, reply, read)


async def ask_llm(judge, version: str, user_input: str, statements: list[str],
                  contexts: list[str]) -> dict[str, list[Any]]:
    """The shared request (at ``version``), per batch of contexts: a statement is attributed by any batch."""
    answers = await asyncio.gather(*(
        judge.ask_request(version, request(user_input, statements, batch),
                          {"user_input": user_input, "statements": statements, "contexts": batch})
        for _, batch in judge.batches(contexts)))
    attributed, why = [], []
    for i in range(len(statements)):
        best = max(answers, key=lambda a: a["attributed"][i])
        attributed.append(best["attributed"][i])
        why.append(best["attribution_reasons"][i])
    return {"attributed": attributed, "attribution_reasons": why,
            "useful": [u for a in answers for u in a["useful"]],
            "usefulness_reasons": [r for a in answers for r in a["usefulness_reasons"]]}


class ReferenceAttribution(Judgement[ReferenceStatements, Verdicts]):
    """Is each reference statement attributable to the contexts? (see the module docstring)."""

    kind = "reference_attribution"
    Input, Output = ReferenceStatements, Verdicts

    async def llm(self, judge, inputs: ReferenceStatements) -> Verdicts:
        """Shares one request with ``context_usefulness``."""
        answer = await ask_llm(judge, self.version, inputs.user_input, inputs.statements, inputs.contexts)
        return self.verdict(verdicts=[Verdict(v, r) for v, r in zip(answer["attributed"],
                                                                    answer["attribution_reasons"])])

    async def offline(self, judge, inputs: ReferenceStatements) -> Verdicts:
        """The offline judge's statement support (``OfflineJudge.support``)."""
        return self.verdict(verdicts=await judge.support(inputs.statements, inputs.contexts))

    def offline_texts(self, judge, inputs: ReferenceStatements) -> list[str]:
        """What ``OfflineJudge.support`` embeds (``support_texts``)."""
        return judge.support_texts(inputs.statements, inputs.contexts)


reference_attribution = ReferenceAttribution()
