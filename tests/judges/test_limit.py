"""rag_eval.metrics.judges.limit: the adaptive concurrency limit, step by step (values by hand)."""
import asyncio

import pytest

from rag_eval.metrics.judges.limit import AdaptiveLimit


class TooMany(Exception):
    status_code = 429


async def _request(limit: AdaptiveLimit, outcome: Exception | None = None, hold: asyncio.Event | None = None):
    async with limit.slot():
        if hold is not None:
            await hold.wait()
        if outcome is not None:
            raise outcome


def test_a_burst_of_429s_halves_once_and_successes_raise_it_back_one_at_a_time():
    async def scenario():
        limit = AdaptiveLimit(8)
        release = asyncio.Event()
        burst = [asyncio.create_task(_request(limit, TooMany(), release)) for _ in range(8)]
        await asyncio.sleep(0)
        assert limit.in_flight == 8
        release.set()
        for task in burst:
            with pytest.raises(TooMany):
                await task
        # Eight 429s of requests sent together: one halving, not eight.
        assert (limit.limit, limit.halvings, limit.in_flight) == (4, 1, 0)
        with pytest.raises(TooMany):
            await _request(limit, TooMany())  # sent after the halving: halves again
        assert limit.limit == 2
        for _ in range(2):  # `limit` successes in a row allow one more
            await _request(limit)
        assert limit.limit == 3
        for _ in range(3 + 4 + 5 + 6 + 7):
            await _request(limit)
        assert limit.limit == 8  # never above the configured concurrency
        with pytest.raises(ValueError):
            await _request(limit, ValueError("a failure that is not a 429"))
        assert limit.limit == 8

    asyncio.run(scenario())


def test_no_more_than_the_limit_in_flight_and_never_below_one():
    async def scenario():
        limit = AdaptiveLimit(1)
        with pytest.raises(TooMany):
            await _request(limit, TooMany())
        assert limit.limit == 1
        limit = AdaptiveLimit(2)
        release = asyncio.Event()
        tasks = [asyncio.create_task(_request(limit, hold=release)) for _ in range(5)]
        await asyncio.sleep(0)
        assert limit.in_flight == 2
        release.set()
        await asyncio.gather(*tasks)
        assert limit.in_flight == 0

    asyncio.run(scenario())
