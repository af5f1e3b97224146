"""The LLM judge: any OpenAI-compatible endpoint (OpenAI, DeepSeek, vLLM, Ollama...).

Its jobs live in four modules: the settings (``rag_eval.metrics.judges.config.LLMConfig``),
the transport (``rag_eval.metrics.judges.transport``: client, concurrency, retries, Retry-After,
redaction), the requests (``rag_eval.metrics.judges.llm_requests``: each answered from the cache,
from an identical request in flight, or from the endpoint, validated and re-asked once; embeddings,
with the offline encoder on an endpoint without them) and, here, the judge: its per-metric twins,
its description and life cycle. Before a row is judged, its planned requests are held against the
per-row budget (``rag_eval.metrics.judges.plan``). Long context lists are split into batches that fit
``max_prompt_chars``.

Requests per sample for the five core metrics (strictness 3, no faults): Faithfulness
1, AnswerRelevancy 1 chat + 1 embeddings, ContextRelevancy 2 (the dual judge),
ContextRecall and ContextPrecision 1 shared: 5 chat + 1 embeddings, whatever the
number of contexts, unless a request would exceed ``max_prompt_chars``. RAGAS 0.4.3
spends N + 6 chat + 2 embeddings.
"""
from __future__ import annotations

import asyncio
import copy
import functools
import os
from collections.abc import Callable, Coroutine
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

from rag_eval.metrics.judges.base import JudgeError
from rag_eval.metrics.judges.config import PER_METRIC, LLMConfig
from rag_eval.metrics.judges.endpoint import public_url
from rag_eval.metrics.judges.llm_requests import LLMRequests
from rag_eval.metrics.judges.plan import Budget, Plan, current_plan, record
from rag_eval.metrics.judges.usage import Usage, current_usage
from rag_eval.metrics.errors import SettingsError

if TYPE_CHECKING:
    from rag_eval.metrics.judges.cache import Sink
    from rag_eval.metrics.judges.examples import Examples

__all__ = ["LLMConfig", "LLMJudge"]
T = TypeVar("T")


def _judge_from_environment(public: dict[str, Any], examples: Examples | None = None) -> LLMJudge:
    return LLMJudge(LLMConfig(**public, api_key=os.environ.get("OPENAI_API_KEY"),
                              embedding_api_key=os.environ.get("EMBEDDING_API_KEY")), examples)


class LLMJudge(LLMRequests):
    """Judge backed by an OpenAI-compatible chat (and embeddings) endpoint.

    Parameters
    ----------
    config : LLMConfig, optional
        Defaults to ``LLMConfig.from_env()``.
    examples : Examples, optional
        Labelled examples put before every ``statement_support`` prompt (a variant ``rag-eval align``
        writes, ``rag_eval.metrics.judges.examples``): they name the judge (``llm:<model>+aligned-<hash>``)
        and enter those judgements' cache keys; without them the prompts and keys are the default judge's.
    read_only_cache : bool
        Only read the cache (a dry run's: ``JudgementCache(read_only=True)``); none when its file does not
        exist: nothing is created or changed.
    sink : Sink, optional
        Where the answers the cache's file refuses go (``rag_eval.metrics.judges.cache.JudgementCache``'s
        ``sink``: ``rag-eval`` gives the command's spill files, ``rag_eval.metrics.judges.spill.SpillSink``);
        without one they are kept in memory until the file takes them.

    Notes
    -----
    Scores never come from the model's arithmetic: the model returns per-item verdicts
    and ratings, validated to {0, 1} and {0, 1, 2}, and the metrics compute the scores.
    An endpoint without embeddings makes AnswerRelevancy fall back to the offline
    encoder; ``describe()`` then says so under ``embedding_fallback``.
    """

    def __init__(self, config: LLMConfig | None = None, examples: Examples | None = None,
                 read_only_cache: bool = False, sink: Sink | None = None) -> None:
        super().__init__(config or LLMConfig.from_env(), read_only_cache, sink)
        self.examples = examples
        self.name = self._name()

    def __repr__(self) -> str:
        return f"LLMJudge(model={self.config.model!r}, base_url={public_url(self.config.base_url)!r})"

    def with_options(self, **options: Any) -> LLMJudge:
        """A judge with other ``model``, ``temperature``, ``strictness``, ``seed`` or ``repeat`` that
        shares this one's loop, connections, concurrency limit and cache (per-metric configuration).

        Raises
        ------
        ValueError
            For another option, or a value outside its domain (``LLMConfig``: ``strictness=0``).
        """
        allowed = {*PER_METRIC, "seed", "repeat"}
        unknown = set(options) - allowed
        if unknown:
            raise SettingsError(f"per-metric options are {sorted(allowed)}, not {sorted(unknown)}")
        twin = copy.copy(self)
        twin.config = replace(self.config, **{k: v for k, v in options.items() if v is not None})
        twin.name = twin._name()
        return twin

    def with_examples(self, examples: Examples | None) -> LLMJudge:
        """A judge putting ``examples`` before its ``statement_support`` prompts (``None``: none) that
        shares this one's loop, connections, concurrency limit and cache."""
        twin = copy.copy(self)
        twin.examples = examples
        twin.name = twin._name()
        return twin

    def _name(self) -> str:
        return f"llm:{self.config.model}" + (f"+{self.examples.label}" if self.examples else "")

    @property
    def budget(self) -> Budget:
        """What judging one row may send, per metric (``LLMConfig.max_row_*``)."""
        return self.config.budget

    async def admit(self, metric: Any, sample: Any) -> Any:
        """Refuse a row whose judgements, after the cache, would pass the per-row budget
        (a :class:`JudgeError` naming the requests and tokens); nothing is sent for it.
        When every judgement of the row is cached, planning it was measuring it: the
        metric's outcome is returned (and its cache hits counted), so it is not measured twice."""
        budget = self.budget
        if current_plan.get() is not None or not (budget.max_requests or budget.max_tokens):
            return None
        plan = await record(metric.measure(sample, self))
        problem = budget.problem(plan, metric.name)
        if problem:
            raise JudgeError(problem)
        if plan.requests:
            return None
        usage = current_usage.get() or Usage()
        usage.cache_hits += plan.usage.cache_hits
        usage.shared_hits += plan.usage.shared_hits
        return plan.outcome

    async def plan(self, metric: Any, sample: Any) -> Plan:
        """The requests ``metric.ascore(sample)`` would send after the cache, with
        estimated tokens (``rag_eval.metrics.judges.plan``); nothing is sent."""
        return await record(metric.ascore(sample, self))

    @property
    def concurrency_limit(self) -> int:
        """Requests in flight at most, across all workers."""
        return self.config.concurrency

    def recipe(self, share: float = 1.0) -> Callable[[], LLMJudge]:
        """A factory of an equivalent judge for a worker, with ``share`` of the concurrency
        limit; it carries no API key: the worker reads it from its own environment."""
        public = self.config.public()
        public["concurrency"] = max(1, int(self.config.concurrency * share))
        return functools.partial(_judge_from_environment, public, self.examples)

    def describe(self) -> dict[str, Any]:
        """Model, endpoints (without credentials), sampling and transport settings (the prompts'
        versions are the registry's to add: ``rag_eval.metrics.core.registry.describe_judge``)."""
        public = self.config.public()
        public["base_url"] = public_url(self.config.base_url)
        public["embedding_base_url"] = public_url(self.config.embedding_base_url)
        return {"judge": self.name, **public, **({"examples": self.examples.label} if self.examples else {}),
                "embedding_fallback": self._shared.fallback,
                "endpoint_check": self.transport.check_report(self.config.model)}

    def check_endpoint(self, wait: bool = True) -> dict[str, Any] | None:
        """Check, once per model, that the endpoint answers, takes the key and knows the
        model (:func:`rag_eval.metrics.judges.endpoint.check_endpoint`); the first request to the
        endpoint waits for it anyway. Returns the check's report; with ``wait=False`` it
        only starts the check on the judge's loop and returns ``None`` (the next call waits
        for that check: ``rag-eval run`` opens its Dagster instance meanwhile).

        Raises
        ------
        EndpointError
            Refused connection, unknown host, no answer, 401/403 or an unknown model.
        """
        if not wait:
            asyncio.run_coroutine_threadsafe(self.transport.checked(self.config.model), self.transport.loop)
            return None
        return self.run(self.transport.checked(self.config.model))

    def forget(self) -> None:
        """The version's scoring is done: the answers the cache kept in memory (its file was full
        or read-only) are written if the file takes them now; those bought so far count as paid by
        earlier runs from now on."""
        self._shared.bought.clear()
        if self.cache is not None:
            self.cache.flush()

    def close(self) -> None:
        """Close the HTTP connections, stop the judge's event loop and close its cache."""
        self.transport.close()
        if self.cache is not None:
            self.cache.close()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the judge's own event loop (one loop for its whole life,
        so connections and the concurrency limit are shared by every call)."""
        return self.transport.run(coroutine)

    async def ask(self, judgement, inputs):
        """The judgement's LLM side (``Judgement.llm``): its requests through :meth:`ask_request`."""
        return await judgement.llm(self, inputs)

    def batches(self, contexts: list[str]) -> list[tuple[int, list[str]]]:
        """Contexts split into runs that fit ``max_prompt_chars`` (offset, contexts)."""
        batches: list[tuple[int, list[str]]] = []
        size = 0
        for index, context in enumerate(contexts):
            if not batches or (size + len(context) > self.config.max_prompt_chars and batches[-1][1]):
                batches.append((index, []))
                size = 0
            batches[-1][1].append(context)
            size += len(context)
        return batches or [(0, [])]

