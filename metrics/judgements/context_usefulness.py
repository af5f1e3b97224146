"""``context_usefulness``: one verdict per context, 1 when it is useful to arrive at an answer (ContextPrecision).

The answer is the reference (ContextPrecision) or the response (ContextUtilization). With
the LLM judge this is the ``reference_attribution`` request (one request for both, same
version); offline, a context is useful when it supports a statement of the answer.
"""
from __future__ import annotations

from rag_eval.metrics.core.conversation import split
from rag_eval.metrics.judgements.base import Judgement, Model
from rag_eval.metrics.judgements.reference_attribution import ask_llm, reference_attribution
from rag_eval.metrics.judgements.statement_support import Verdicts
from rag_eval.metrics.judges.base import Verdict
from rag_eval.metrics.text import statements


class AnswerAndContexts(Model):
    """The question, the answer the contexts should lead to, and the contexts in rank order."""

    user_input: str
    answer: str
    contexts: list[str]


class ContextUsefulness(Judgement[AnswerAndContexts, Verdicts]):
    """Was each context useful to arrive at the answer? (see the module docstring)."""

    kind = "context_usefulness"
    version = reference_attribution.version
    requests = reference_attribution.requests
    Input, Output = AnswerAndContexts, Verdicts

    async def llm(self, judge, inputs: AnswerAndContexts) -> Verdicts:
        """Shares one request with ``reference_attribution``."""
        answer = await ask_llm(judge, self.version, inputs.user_input, _claims(inputs), inputs.contexts)
        return self.verdict(verdicts=[Verdict(v, r) for v, r in zip(answer["useful"], answer["usefulness_reasons"])])

    async def offline(self, judge, inputs: AnswerAndContexts) -> Verdicts:
        """A context is useful when it supports at least one statement of the answer."""
        claims = _claims(inputs)
        verdicts = []
        for context in inputs.contexts:
            supported = [v for v in await judge.support(claims, [context]) if v.verdict]
            if supported:
                verdicts.append(Verdict(1, f"supports {len(supported)}/{len(claims)} reference statements",
                                        {"supported": len(supported)}))
            else:
                verdicts.append(Verdict(0, f"supports none of the {len(claims)} reference statements",
                                        {"supported": 0}))
        return self.verdict(verdicts=verdicts)

    def offline_texts(self, judge, inputs: AnswerAndContexts) -> list[str]:
        """What ``OfflineJudge.support`` embeds for the answer's statements against each context."""
        claims = _claims(inputs)
        return [text for context in inputs.contexts for text in judge.support_texts(claims, [context])]


def _claims(inputs: AnswerAndContexts) -> list[str]:
    """The answer's statements a context may support (the whole answer when it has none), split with the
    question alone (a conversation's earlier turns, ``rag_eval.metrics.core.conversation.with_history``, left out)."""
    return statements(inputs.answer, split(inputs.user_input)[0]) or [inputs.answer]


context_usefulness = ContextUsefulness()
