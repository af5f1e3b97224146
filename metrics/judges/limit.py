"""The LLM judge's concurrency limit, which adapts to a provider's rate limit.

A provider that allows fewer requests in flight than the judge's ``concurrency`` answers
the excess with 429. Retrying each of them at the same concurrency meets the same wall
again, and rows end as ``judge_error`` after their attempts (measured: docs/how-to/llm-judge.md). So the limit follows
TCP's additive-increase / multiplicative-decrease rule (Chiu & Jain 1989; the adaptive
concurrency limits of Netflix's ``concurrency-limits`` and Envoy work the same way): a 429
halves the requests allowed in flight (not below 1), once per burst — a 429 of a request
sent before the last halving does not halve again —, and every ``limit`` successes in a row
allow one more, up to the configured ``concurrency``.
"""
from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


def rate_limited(exc: BaseException | None) -> bool:
    """True for a provider's 429 (an ``openai.RateLimitError`` or any error with that status)."""
    return getattr(exc, "status_code", None) == 429


class AdaptiveLimit:
    """At most :attr:`limit` requests in flight, between 1 and ``ceiling`` (see the module).

    Parameters
    ----------
    ceiling : int
        The configured concurrency (>= 1); the limit starts there.

    Use ``async with limit.slot():`` around one request; created on the loop that uses it.
    """

    def __init__(self, ceiling: int) -> None:
        self.ceiling = ceiling
        self.limit = ceiling
        self.in_flight = 0
        self.halvings = 0
        self._successes = 0
        self._changed = asyncio.Condition()

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Wait for a free slot, hold it for the request, then adjust the limit by its outcome."""
        async with self._changed:
            try:
                await self._changed.wait_for(lambda: self.in_flight < self.limit)
            except asyncio.CancelledError:  # a wake-up it may have been given passes to the next waiter
                self._changed.notify(1)
                raise
            self.in_flight += 1
            sent_at = self.halvings
        outcome: BaseException | None = None
        try:
            yield
        except BaseException as exc:
            outcome = exc
            raise
        finally:
            async with self._changed:
                self.in_flight -= 1
                if rate_limited(outcome):
                    if sent_at == self.halvings and self.limit > 1:
                        self.limit = max(1, self.limit // 2)
                        self.halvings += 1
                    self._successes = 0
                elif outcome is None:
                    self._successes += 1
                    if self._successes >= self.limit and self.limit < self.ceiling:
                        self.limit += 1
                        self._successes = 0
                # As many waiters as there are free slots: waking all of them (thousands when every
                # pair of a version waits) cost a measurable share of a run's CPU, each going back to sleep.
                self._changed.notify(max(0, self.limit - self.in_flight))
