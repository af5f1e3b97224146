"""What judging costs: the counters of one (sample, metric) pair and the record being filled."""
from __future__ import annotations

from contextvars import ContextVar
from dataclasses import asdict, dataclass


@dataclass
class Usage:
    """What judging one (sample, metric) pair cost: requests sent, tokens, and the judgements answered
    without a request, apart by who paid for them: ``cache_hits`` were found in the cache, paid for by
    earlier runs; ``shared_hits`` another request of this run paid for (an identical request in flight,
    a key another process of the run claimed, an answer put since the version's scoring began)."""

    chat_requests: int = 0
    embedding_requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_hits: int = 0
    shared_hits: int = 0

    def as_dict(self) -> dict[str, int]:
        """The counters as a plain dict."""
        return asdict(self)


#: The usage record of the (sample, metric) being scored; set by ``Metric.ascore``.
current_usage: ContextVar[Usage | None] = ContextVar("current_usage", default=None)
