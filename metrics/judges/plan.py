"""What judging would send, worked out before anything is sent: the per-row budget and the dry run.

While a :class:`Plan` is the current one (:data:`current_plan`), the LLM judge answers
every judgement that is not in its cache with a stand-in reply
(:func:`rag_eval.metrics.judges.prompts.example_answer`) and records the request it would have
sent, with estimated tokens, instead of sending it. The metric's own code runs
unchanged, so the plan has the same requests, batches and cache look-ups as the run.

Token figures are estimates: one token per 4 bytes of UTF-8 (English text is about 4
characters a token; Chinese about 1 character a token) for the prompt, the schema and
the reply, plus ``REASON_TOKENS`` for each written reason or question of the reply.
"""
from __future__ import annotations

import json
import math
from collections.abc import Coroutine, Hashable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from rag_eval.metrics.judges.usage import Usage, current_usage

#: Tokens of one reason or question the judge writes (one short sentence).
REASON_TOKENS = 20
#: Tokens of the chat format around each message.
MESSAGE_TOKENS = 4


def estimate_tokens(text: str) -> int:
    """Estimated tokens of ``text``: ceil(UTF-8 bytes / 4)."""
    return math.ceil(len(text.encode("utf-8")) / 4)


def reply_tokens(answer: Any) -> int:
    """Estimated tokens of a reply shaped like ``answer``, each string a written sentence."""
    strings = 0

    def count(value: Any) -> None:
        nonlocal strings
        if isinstance(value, str):
            strings += 1
        elif isinstance(value, dict):
            for item in value.values():
                count(item)
        elif isinstance(value, list):
            for item in value:
                count(item)

    count(answer)
    return estimate_tokens(json.dumps(answer, ensure_ascii=False)) + REASON_TOKENS * strings


@dataclass
class Planned:
    """One request a run would send: ``kind`` of judgement (or ``embedding``), the cache
    ``key`` that de-duplicates it, and estimated tokens."""

    kind: str
    key: Hashable
    prompt_tokens: int
    completion_tokens: int = 0

    @property
    def chat(self) -> bool:
        return self.kind != "embedding"


@dataclass
class Plan:
    """The requests one (row, metric) would send, after the cache, each once (the run
    sends identical requests once too)."""

    planned: dict[Hashable, Planned] = field(default_factory=dict)
    #: What the recorded coroutine returned, and the cache hits it counted.
    outcome: Any = None
    usage: Usage = field(default_factory=Usage)

    def add(self, request: Planned) -> None:
        """Record ``request`` unless an identical one (same key) is already planned."""
        self.planned.setdefault(request.key, request)

    @property
    def requests(self) -> list[Planned]:
        return list(self.planned.values())

    @property
    def tokens(self) -> int:
        return sum(r.prompt_tokens + r.completion_tokens for r in self.requests)


@dataclass(frozen=True)
class Budget:
    """Per-row budget of one metric: requests and estimated tokens (prompt + reply) that
    judging one row may send; ``None`` or 0 is no limit.

    Bounds the pathological row: at the documented limits (200 contexts of 99,000
    characters) the five core metrics would send 801 chat requests and about 20 M prompt
    tokens; a typical row sends 1-2 requests of a few thousand tokens per metric.
    """

    max_requests: int | None = 50
    max_tokens: int | None = 200_000

    def problem(self, plan: Plan, metric: str) -> str | None:
        """Why ``plan`` is over the budget, or ``None``."""
        over = []
        if self.max_requests and len(plan.requests) > self.max_requests:
            over.append(f"{len(plan.requests)} requests > {self.max_requests} (--max-row-requests)")
        if self.max_tokens and plan.tokens > self.max_tokens:
            over.append(f"~{plan.tokens:,} tokens > {self.max_tokens:,} (--max-row-tokens)")
        if not over:
            return None
        return (f"over the per-row budget: {metric} on this row would send {' and '.join(over)}; nothing was sent "
                "(raise the limit, 0 for none, or shorten the row's contexts)")


#: The plan being recorded, or ``None`` when requests are really sent.
current_plan: ContextVar[Plan | None] = ContextVar("current_plan", default=None)


async def record(coroutine: Coroutine[Any, Any, Any]) -> Plan:
    """Run ``coroutine`` (a metric's ``measure`` or ``ascore``) as a plan: what it would
    send is recorded, nothing is sent, and its usage counts nowhere (it is kept in the
    plan's ``usage``, beside what the coroutine returned, ``outcome``: a plan without
    requests ran on cached judgements only, so its outcome is the real one)."""
    plan = Plan()
    plan_token, usage_token = current_plan.set(plan), current_usage.set(plan.usage)
    try:
        plan.outcome = await coroutine
    finally:
        current_usage.reset(usage_token)
        current_plan.reset(plan_token)
    return plan
