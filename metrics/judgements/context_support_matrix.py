"""``context_support_matrix``: per statement, one 0/1 per context: does that context alone support it? (NoiseSensitivity).

One LLM request for every (statement, context) pair (RAGAS: 2 per context; one per batch of contexts
past ``max_prompt_chars``); offline, one statement-support call per context. RAGChecker's claim ×
chunk checks (``rag_eval.metrics.diagnostics.claims``).
"""
from __future__ import annotations

import asyncio
from typing import Literal

from rag_eval.metrics.judgements.base import Judgement, Model
from rag_eval.metrics.judgements.statement_support import Statements
from rag_eval.metrics.judges.prompts import Request, ids, keyed, numbered


class SupportMatrix(Model):
    """``matrix[i][k]``: 1 when context k alone supports statement i."""

    matrix: list[list[Literal[0, 1]]]


def request(statements: list[str], contexts: list[str]) -> Request:
    """NoiseSensitivity: for each context on its own, which statements it supports."""
    statement_keys, context_keys = ids("S", len(statements)), ids("C", len(contexts))
    prompt = (f"Contexts:\n{numbered('C', contexts)}\n\nStatements:\n{numbered('S', statements)}\n\nFor each "
              "context on its own, and each statement, give 1 if that context alone supports the statement (states "
              "it or directly implies it), else 0.")
    cell = {"type": "integer", "enum": [0, 1]}
    row = {"type": "object", "properties": dict.fromkeys(statement_keys, cell), "required": statement_keys,
           "additionalProperties": False}
    schema = {"type": "object", "properties": dict.fromkeys(context_keys, row), "required": context_keys,
              "additionalProperties": False}

    column = keyed(tuple(statement_keys), Literal[0, 1])  # one context: its verdict on each statement
    return Request("context_support_matrix", prompt, schema, keyed(tuple(context_keys), column),
                   lambda reply: {"matrix": [[getattr(reply[c], s) for c in context_keys] for s in statement_keys]})


class ContextSupportMatrix(Judgement[Statements, SupportMatrix]):
    """Which context alone supports which statement? (see the module docstring)."""

    kind = "context_support_matrix"
    Input, Output = Statements, SupportMatrix

    async def llm(self, judge, inputs: Statements) -> SupportMatrix:
        """One request for every (statement, context) pair; one per batch of contexts past the size
        budget (``LLMJudge.batches``), their columns side by side."""
        answers = await asyncio.gather(*(
            judge.ask_request(self.version, request(inputs.statements, batch),
                              {"statements": inputs.statements, "contexts": batch})
            for _, batch in judge.batches(inputs.contexts)))
        return self.verdict(matrix=[[cell for answer in answers for cell in answer["matrix"][i]]
                                    for i in range(len(inputs.statements))])

    async def offline(self, judge, inputs: Statements) -> SupportMatrix:
        """One ``OfflineJudge.support`` call per context."""
        columns = [await judge.support(inputs.statements, [context]) for context in inputs.contexts]
        return self.verdict(matrix=[[column[i].verdict for column in columns] for i in range(len(inputs.statements))])

    def offline_texts(self, judge, inputs: Statements) -> list[str]:
        """What those calls embed (``support_texts`` of each context)."""
        return [text for context in inputs.contexts for text in judge.support_texts(inputs.statements, [context])]


context_support_matrix = ContextSupportMatrix()
