"""The LLM judge: any OpenAI-compatible endpoint (OpenAI, DeepSeek, vLLM, Ollama...).

Requests go through the official ``openai`` client (``AsyncOpenAI``, aiohttp transport)
under one concurrency limit shared by every row and metric, with retries (exponential
backoff with jitter, honouring ``Retry-After``) on 429, 5xx, connection errors and
timeouts. Answers are requested as JSON (``json_schema``, or ``json_object`` for
endpoints without it), parsed tolerantly, validated strictly and re-asked once with
the validation error; after that the sample is a ``judge_error``. Every judgement is
cached by content and endpoint, and asked once by all processes sharing the cache
(``metrics.judges.cache``). Before its first request the judge checks
the endpoint (``metrics.judges.endpoint``); before a row is judged, its planned requests
are held against the per-row budget (``metrics.judges.plan``).

Requests per sample for the five core metrics (strictness 3, no faults): Faithfulness
1, AnswerRelevancy 1 chat + 1 embeddings, ContextRelevancy 2 (the dual judge),
ContextRecall and ContextPrecision 1 shared: 5 chat + 1 embeddings, whatever the
number of contexts, unless a request would exceed ``max_prompt_chars``. RAGAS 0.4.3
spends N + 6 chat + 2 embeddings.
"""
from __future__ import annotations

import asyncio
import copy
import email.utils
import functools
import json
import os
import re
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field, fields, replace
from datetime import datetime, timezone
from typing import Any, TypeVar

import numpy as np
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from metrics.judges import prompts
from metrics.judges.base import AnswerRelevanceJudgement, Judge, JudgeError, Usage, Verdict, current_usage
from metrics.judges.cache import JudgementCache, Key, cache_key
from metrics.judges.endpoint import check_base_url, check_endpoint, connection_cause, public_url
from metrics.judges.plan import (MESSAGE_TOKENS, Budget, Plan, Planned, current_plan, estimate_tokens, record,
                                 reply_tokens)

T = TypeVar("T")
_OPENAI = "https://api.openai.com/v1"  # the openai client's default base URL
_MAX_RETRY_AFTER = 120.0  # seconds; a longer Retry-After is not waited in full
_KEY_PATTERN = re.compile(r"\b(sk|key|ak)-[A-Za-z0-9_\-*]{6,}")


@dataclass
class LLMConfig:
    """Settings of the LLM judge. ``api_key`` and ``embedding_api_key`` are never logged.

    ``from_env`` reads ``OPENAI_API_KEY``, ``OPENAI_BASE_URL``, ``OPENAI_MODEL``,
    ``EMBEDDING_MODEL``, ``EMBEDDING_BASE_URL`` and ``EMBEDDING_API_KEY`` (the embedding
    ones default to the chat ones).

    ``cache_path`` is the judgement cache (``None``: none); its answers are keyed by the
    endpoint as well as the model, unless ``cache_across_endpoints`` lets any endpoint's
    answer for the same model and inputs be reused.
    """

    model: str = "gpt-4o-mini"
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    embedding_model: str = "text-embedding-3-small"
    embedding_base_url: str | None = None
    embedding_api_key: str | None = field(default=None, repr=False)
    temperature: float = 0.0
    seed: int | None = 7
    #: Which repeated judgement this is (``rag-eval gate --repeats K`` asks repeats 0 .. K-1): the
    #: request's ``seed`` is ``seed + repeat``, and the cache key carries it from repeat 1 on (so
    #: repeat 0 is the ordinary judgement and its cached answers stay valid).
    repeat: int = 0
    strictness: int = 3
    response_format: str = "json_schema"
    concurrency: int = 16
    timeout: float = 60.0
    max_attempts: int = 5
    max_retry_wait: float = 60.0
    max_prompt_chars: int = 60_000
    #: Ceiling of ``max_tokens`` when a reply cut at the token limit is asked again.
    max_output_tokens: int = 16_384
    #: Per-row budget of each metric (``metrics.judges.plan.Budget``); 0 or ``None``: no limit.
    max_row_requests: int | None = 50
    max_row_tokens: int | None = 200_000
    cache_path: str | None = ".rag_eval_cache/judgements.sqlite"
    cache_across_endpoints: bool = False

    def __post_init__(self) -> None:
        check_base_url(self.base_url, "base_url")
        check_base_url(self.embedding_base_url, "embedding_base_url")
        for name in ("max_row_requests", "max_row_tokens"):
            if (getattr(self, name) or 0) < 0:
                raise ValueError(f"{name} must be 0 (no limit) or more, got {getattr(self, name)}")

    @classmethod
    def from_env(cls, **overrides: Any) -> LLMConfig:
        """Configuration from the environment, then ``overrides`` (``None`` values ignored)."""
        env = {"api_key": os.environ.get("OPENAI_API_KEY"), "base_url": os.environ.get("OPENAI_BASE_URL"),
               "model": os.environ.get("OPENAI_MODEL"), "embedding_model": os.environ.get("EMBEDDING_MODEL"),
               "embedding_base_url": os.environ.get("EMBEDDING_BASE_URL"),
               "embedding_api_key": os.environ.get("EMBEDDING_API_KEY")}
        values = {k: v for k, v in {**env, **overrides}.items() if v not in (None, "")}
        return cls(**values)

    @property
    def budget(self) -> Budget:
        """The per-row budget of each metric."""
        return Budget(self.max_row_requests, self.max_row_tokens)

    @property
    def configured(self) -> bool:
        """True when an endpoint or a key is set: the pipeline then uses the LLM judge."""
        return bool(self.base_url or self.api_key)


def _count(tokens: Any) -> int:
    """A token count from a usage block; anything but a non-negative int counts 0."""
    return tokens if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens >= 0 else 0


def _retryable(exc: BaseException) -> bool:
    import openai  # imported when a request is made: 1-4 s
    if isinstance(exc, openai.APIStatusError):
        hinted = _retry_after(exc)
        if hinted is not None and hinted > _MAX_RETRY_AFTER:
            return False  # the provider asks for a longer pause than a run can wait: fail now
        return exc.status_code == 429 or exc.status_code >= 500
    return isinstance(exc, openai.APIConnectionError)  # includes APITimeoutError


def _retry_after(exc: BaseException | None) -> float | None:
    response = getattr(exc, "response", None)
    if response is None:
        return None
    headers = response.headers
    try:
        if headers.get("retry-after-ms"):
            return float(headers["retry-after-ms"]) / 1000
        if headers.get("retry-after"):
            return float(headers["retry-after"])
    except ValueError:
        try:  # an HTTP date
            moment = email.utils.parsedate_to_datetime(headers["retry-after"])
            return max(0.0, (moment - datetime.now(timezone.utc)).total_seconds())
        except (TypeError, ValueError):
            return None
    return None


def _judge_from_environment(public: dict[str, Any]) -> LLMJudge:
    return LLMJudge(LLMConfig(**public, api_key=os.environ.get("OPENAI_API_KEY"),
                              embedding_api_key=os.environ.get("EMBEDDING_API_KEY")))


class LLMJudge(Judge):
    """Judge backed by an OpenAI-compatible chat (and embeddings) endpoint.

    Parameters
    ----------
    config : LLMConfig, optional
        Defaults to ``LLMConfig.from_env()``.

    Notes
    -----
    Scores never come from the model's arithmetic: the model returns per-item verdicts
    and ratings, validated to {0, 1} and {0, 1, 2}, and the metrics compute the scores.
    An endpoint without embeddings makes AnswerRelevancy fall back to the offline
    encoder; ``describe()`` then says so under ``embedding_fallback``.
    """

    def __init__(self, config: LLMConfig | None = None) -> None:
        self.config = config or LLMConfig.from_env()
        self.name = f"llm:{self.config.model}"
        cfg = self.config
        # The longest a live claimant may take: a request and its re-ask, each with all its attempts.
        lease = 2 * cfg.max_attempts * (cfg.timeout + cfg.max_retry_wait) + 60
        self.cache = JudgementCache(cfg.cache_path, lease=lease, across_endpoints=cfg.cache_across_endpoints) \
            if cfg.cache_path else None
        self._shared: dict[str, Any] = {"fallback": None, "inflight": {}, "checks": {}}
        self._loop = asyncio.new_event_loop()
        threading.Thread(target=self._loop.run_forever, name="llm-judge-loop", daemon=True).start()

    def __repr__(self) -> str:
        return f"LLMJudge(model={self.config.model!r}, base_url={public_url(self.config.base_url)!r})"

    def with_options(self, **options: Any) -> LLMJudge:
        """A judge with other ``model``, ``temperature``, ``strictness``, ``seed`` or ``repeat`` that shares this
        one's loop, connections, concurrency limit and cache (per-metric configuration)."""
        allowed = {"model", "temperature", "strictness", "seed", "repeat"}
        unknown = set(options) - allowed
        if unknown:
            raise ValueError(f"per-metric options are {sorted(allowed)}, not {sorted(unknown)}")
        twin = copy.copy(self)
        twin.config = replace(self.config, **{k: v for k, v in options.items() if v is not None})
        twin.name = f"llm:{twin.config.model}"
        return twin

    @property
    def budget(self) -> Budget:
        """What judging one row may send, per metric (``LLMConfig.max_row_*``)."""
        return self.config.budget

    async def admit(self, metric: Any, sample: Any) -> None:
        """Refuse a row whose judgements, after the cache, would pass the per-row budget
        (a :class:`JudgeError` naming the requests and tokens); nothing is sent for it."""
        budget = self.budget
        if current_plan.get() is not None or not (budget.max_requests or budget.max_tokens):
            return
        problem = budget.problem(await record(metric.measure(sample, self)), metric.name)
        if problem:
            raise JudgeError(problem)

    async def plan(self, metric: Any, sample: Any) -> Plan:
        """The requests ``metric.ascore(sample)`` would send after the cache, with
        estimated tokens (``metrics.judges.plan``); nothing is sent."""
        return await record(metric.ascore(sample, self))

    @property
    def concurrency_limit(self) -> int:
        """Requests in flight at most, across all workers."""
        return self.config.concurrency

    def recipe(self, share: float = 1.0) -> Callable[[], LLMJudge]:
        """A factory of an equivalent judge for a worker, with ``share`` of the concurrency
        limit; it carries no API key: the worker reads it from its own environment."""
        public = {f.name: getattr(self.config, f.name) for f in fields(self.config) if "api_key" not in f.name}
        public["concurrency"] = max(1, int(self.config.concurrency * share))
        return functools.partial(_judge_from_environment, public)

    def describe(self) -> dict[str, Any]:
        """Model, endpoints (without credentials), sampling and transport settings."""
        public = {f.name: getattr(self.config, f.name) for f in fields(self.config) if "api_key" not in f.name}
        public["base_url"] = public_url(self.config.base_url)
        public["embedding_base_url"] = public_url(self.config.embedding_base_url)
        check = self._shared["checks"].get(self.config.model)
        done = check is not None and check.done() and not check.cancelled() and check.exception() is None
        return {"judge": self.name, **public, "prompt_versions": prompts.PROMPT_VERSIONS,
                "embedding_fallback": self._shared["fallback"], "endpoint_check": check.result() if done else None}

    def check_endpoint(self) -> dict[str, Any]:
        """Check, once per model, that the endpoint answers, takes the key and knows the
        model (:func:`metrics.judges.endpoint.check_endpoint`); the first request to the
        endpoint waits for it anyway. Returns the check's report.

        Raises
        ------
        EndpointError
            Refused connection, unknown host, no answer, 401/403 or an unknown model.
        """
        return self.run(self._checked())

    async def _checked(self, kind: str = "chat") -> dict[str, Any]:
        """The endpoint check of the chat model; for an embeddings request to a separate
        embeddings endpoint (another URL or key), that endpoint's reachability and key (an
        endpoint without the embedding model falls back to the offline encoder instead)."""
        cfg, checks = self.config, self._shared["checks"]
        separate = kind == "embedding" and ((cfg.embedding_base_url or cfg.base_url) != cfg.base_url
                                            or (cfg.embedding_api_key or cfg.api_key) != cfg.api_key)
        name = "embeddings endpoint" if separate else cfg.model
        if name not in checks:
            client, model, url = ("embeddings", None, cfg.embedding_base_url or cfg.base_url) if separate \
                else ("chat", cfg.model, cfg.base_url)
            checks[name] = asyncio.ensure_future(check_endpoint(self._clients()[client], model, url, cfg.timeout,
                                                                self._redact))
        return await asyncio.shield(checks[name])

    def close(self) -> None:
        """Close the HTTP connections and stop the judge's event loop."""
        async def close_clients() -> None:
            for name in ("chat", "embeddings"):
                if name in self._shared:
                    await self._shared.pop(name).close()

        if self._loop.is_running():
            self.run(close_clients())
            self._loop.call_soon_threadsafe(self._loop.stop)

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the judge's own event loop (one loop for its whole life,
        so connections and the concurrency limit are shared by every call)."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    # ----------------------------------------------------------------- transport
    def _redact(self, text: str) -> str:
        for secret in (self.config.api_key, self.config.embedding_api_key):
            if secret:
                text = text.replace(secret, "[redacted]")
        return _KEY_PATTERN.sub("[redacted]", text)

    def _scrub(self, value: Any) -> Any:
        """``value`` with the configured keys redacted from every string, recursively (not
        :meth:`_redact`'s pattern: a reason may rightly say "key-performance")."""
        if isinstance(value, str):
            for secret in (self.config.api_key, self.config.embedding_api_key):
                if secret:
                    value = value.replace(secret, "[redacted]")
            return value
        if isinstance(value, list):
            return [self._scrub(v) for v in value]
        if isinstance(value, dict):
            return {k: self._scrub(v) for k, v in value.items()}
        return value

    def _clients(self) -> dict[str, Any]:
        # Created on the judge's loop, on first use.
        import openai  # imported when a request is made: 1-4 s
        if "chat" not in self._shared:
            cfg = self.config
            key = cfg.api_key or "not-needed"

            def client(base_url: str | None, api_key: str) -> openai.AsyncOpenAI:
                return openai.AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=cfg.timeout,
                                          http_client=openai.DefaultAioHttpClient(timeout=cfg.timeout))

            self._shared["chat"] = client(cfg.base_url, key)
            self._shared["embeddings"] = client(cfg.embedding_base_url or cfg.base_url, cfg.embedding_api_key or key)
            self._shared["semaphore"] = asyncio.Semaphore(cfg.concurrency)
        return self._shared

    def _wait(self, state: Any) -> float:
        backoff = wait_exponential_jitter(initial=0.5, max=self.config.max_retry_wait)(state)
        hinted = _retry_after(state.outcome.exception() if state.outcome else None)
        return max(backoff, hinted) if hinted is not None else backoff

    async def _send(self, kind: str, call) -> Any:
        """Send one request with retries under the shared limit; count every attempt."""
        import openai  # imported when a request is made: 1-4 s
        await self._checked(kind)
        usage = current_usage.get() or Usage()
        semaphore = self._clients()["semaphore"]
        attempts = 0
        try:
            async for attempt in AsyncRetrying(stop=stop_after_attempt(self.config.max_attempts), wait=self._wait,
                                               retry=retry_if_exception(_retryable), reraise=True):
                with attempt:
                    attempts += 1
                    if kind == "embedding":
                        usage.embedding_requests += 1
                    else:
                        usage.chat_requests += 1
                    async with semaphore:
                        return await call()
        except openai.APIConnectionError as exc:  # includes APITimeoutError
            cause = connection_cause(exc)
            if cause is None:
                raise JudgeError(f"{kind}: timeout after {attempts} attempts of {self.config.timeout:g} s") from exc
            where = public_url(self.config.base_url) or "api.openai.com"
            raise JudgeError(f"{kind}: {self._redact(cause)} at {where} after {attempts} attempts") from exc
        except openai.APIStatusError as exc:
            if exc.status_code == 400:
                message = self._redact(str(exc))
                code = "context_too_long" if "context" in message.lower() and "length" in message.lower() \
                    else "bad_request"
                raise JudgeError(f"{kind}: {code}: {message}") from exc
            hinted = _retry_after(exc)
            budget = f" (Retry-After {hinted:.0f} s is over the {_MAX_RETRY_AFTER:.0f} s budget)" \
                if hinted is not None and hinted > _MAX_RETRY_AFTER else ""
            raise JudgeError(f"{kind}: request failed after {attempts} attempts ({type(exc).__name__} "
                             f"{exc.status_code}){budget}: {self._redact(str(exc))}") from exc
        except openai.APIError as exc:
            status = getattr(exc, "status_code", None)
            raise JudgeError(f"{kind}: request failed after {attempts} attempts "
                             f"({type(exc).__name__}{f' {status}' if status else ''}): {self._redact(str(exc))}") from exc
        raise JudgeError(f"{kind}: no attempt was made")  # pragma: no cover - stop_after_attempt(>=1)

    async def _chat(self, request: prompts.Request, messages: list[dict[str, str]]) -> str:
        cfg = self.config
        if cfg.response_format == "json_schema":
            response_format = {"type": "json_schema",
                               "json_schema": {"name": request.kind, "schema": request.schema, "strict": True}}
        else:
            response_format = {"type": "json_object"}
        extra = {"seed": cfg.seed + cfg.repeat} if cfg.seed is not None else {}
        limits: list[int | None] = [None]  # the provider's default first, then larger explicit budgets
        while True:
            limit = {"max_tokens": limits[-1]} if limits[-1] else {}
            completion = await self._send(request.kind, lambda: self._clients()["chat"].chat.completions.create(
                model=cfg.model, messages=messages, temperature=cfg.temperature, response_format=response_format,
                **extra, **limit))
            used = _count(completion.usage.completion_tokens) if completion.usage is not None else 0
            usage = current_usage.get()
            if usage is not None and completion.usage is not None:
                usage.prompt_tokens += _count(completion.usage.prompt_tokens)
                usage.completion_tokens += used
            choice = completion.choices[0] if completion.choices else None
            if choice is None:
                raise JudgeError(f"{request.kind}: the reply holds no choice")
            if choice.finish_reason != "length":
                break
            larger = min(cfg.max_output_tokens, max(2 * used, 2 * (limits[-1] or 0), 1024))
            if len(limits) == 3 or larger <= max(used, limits[-1] or 0):
                tried = ", ".join("the provider's default" if n is None else str(n) for n in limits)
                raise JudgeError(f"{request.kind}: finish_reason length: the reply was cut at the token limit "
                                 f"{len(limits)} times (max_tokens {tried}; the last reply had {used} tokens)")
            limits.append(larger)
        content = choice.message.content
        if content is not None and not isinstance(content, str):
            raise prompts.OutputError(f"the reply's content is a {type(content).__name__}, not text")
        return content or ""

    # ------------------------------------------------------------ structured asks
    async def _ask(self, request: prompts.Request, inputs: dict[str, Any]) -> dict[str, Any]:
        """Ask one judgement: from the cache, from an identical request in flight, or
        from the endpoint (re-asked once with the validation error)."""
        cfg = self.config
        key = cache_key(public_url(cfg.base_url or _OPENAI), kind=request.kind, model=cfg.model,
                        prompt_version=prompts.PROMPT_VERSIONS[request.kind], temperature=cfg.temperature,
                        seed=cfg.seed, response_format=cfg.response_format, inputs=inputs,
                        **({"repeat": cfg.repeat} if cfg.repeat else {}))
        usage = current_usage.get() or Usage()
        cached = self.cache.get(key) if self.cache is not None else None
        if cached is not None:
            usage.cache_hits += 1
            return cached
        plan = current_plan.get()
        if plan is not None:  # record what would be sent; answer with a stand-in
            answer = prompts.example_answer(request.schema)
            prompt = estimate_tokens(self._system(request)) + estimate_tokens(request.prompt) + 2 * MESSAGE_TOKENS
            if cfg.response_format == "json_schema":
                prompt += estimate_tokens(json.dumps(request.schema))
            plan.add(Planned(request.kind, key, prompt, reply_tokens(answer)))
            return request.validate(answer)
        inflight = self._shared["inflight"]
        if key in inflight:
            usage.cache_hits += 1
            return await asyncio.shield(inflight[key])
        task = asyncio.ensure_future(self._guarded(self._ask_claimed(request, key), request.kind))
        inflight[key] = task
        try:
            return await task
        finally:
            inflight.pop(key, None)

    async def _claim(self, keys: list[Key]) -> tuple[dict[Key, Any], set[Key]]:
        """Claim ``keys`` in the cache, waiting while other processes ask for any of them:
        the values they stored (``found``) and the keys this judge must now ask (``owned``)."""
        found: dict[Key, Any] = {}
        owned: set[Key] = set()
        pause = 0.02
        while True:
            owned |= self.cache.claim(k for k in keys if k not in found and k not in owned)
            for key in keys:
                if key not in owned and key not in found and (value := self.cache.get(key)) is not None:
                    found[key] = value
            if all(k in found or k in owned for k in keys):
                return found, owned
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.5)

    async def _ask_claimed(self, request: prompts.Request, key: Key) -> dict[str, Any]:
        """The judgement from the endpoint, or from another process asking for it right now."""
        if self.cache is None:
            return await self._ask_endpoint(request, key)
        found, owned = await self._claim([key])
        if key in found:
            (current_usage.get() or Usage()).cache_hits += 1
            return found[key]
        try:
            return await self._ask_endpoint(request, key)
        finally:
            self.cache.release(owned)  # a no-op once the answer is stored

    async def _guarded(self, coroutine, kind: str):
        """Any failure of a judgement becomes a ``JudgeError`` with secrets redacted: an
        odd reply (a number where text belongs, a short embeddings list...) fails that
        sample, never the run."""
        try:
            return await coroutine
        except JudgeError as exc:
            raise JudgeError(self._redact(str(exc))) from None
        except (ValueError, TypeError, KeyError, AttributeError, IndexError) as exc:
            raise JudgeError(f"{kind}: unexpected reply ({type(exc).__name__}): {self._redact(str(exc))}") from None

    def _system(self, request: prompts.Request) -> str:
        if self.config.response_format == "json_schema":
            return prompts.SYSTEM
        return f"{prompts.SYSTEM}\nJSON schema of the answer:\n{json.dumps(request.schema, ensure_ascii=False)}"

    async def _ask_endpoint(self, request: prompts.Request, key: Key) -> dict[str, Any]:
        messages = [{"role": "system", "content": self._system(request)}, {"role": "user", "content": request.prompt}]
        for attempt in range(2):
            content = ""
            try:
                content = await self._chat(request, messages)
                value = request.validate(prompts.extract_json(content))
            except prompts.OutputError as exc:
                if attempt:
                    raise JudgeError(f"{request.kind}: invalid judge output after one re-ask: {exc}") from exc
                messages += [{"role": "assistant", "content": content},
                             {"role": "user", "content": f"That answer is invalid: {exc}. Reply again with only the "
                                                         "corrected JSON object."}]
                continue
            value = self._scrub(value)  # a key echoed in a reason is never stored
            if self.cache is not None:
                self.cache.put(key, request.kind, value)
            return value
        raise AssertionError("unreachable")  # pragma: no cover

    def _batches(self, contexts: list[str]) -> list[tuple[int, list[str]]]:
        """Contexts split into runs that fit ``max_prompt_chars`` (offset, contexts)."""
        batches: list[tuple[int, list[str]]] = []
        size = 0
        for index, context in enumerate(contexts):
            if not batches or size + len(context) > self.config.max_prompt_chars and batches[-1][1]:
                batches.append((index, []))
                size = 0
            batches[-1][1].append(context)
            size += len(context)
        return batches or [(0, [])]

    # ------------------------------------------------------------- judgements
    async def support(self, statements: list[str], contexts: list[str]) -> list[Verdict]:
        """One request judging every statement against the contexts (one per batch of
        contexts past the size budget; a statement is supported by any batch)."""
        answers = await asyncio.gather(*(
            self._ask(prompts.statement_support(statements, batch), {"statements": statements, "contexts": batch})
            for _, batch in self._batches(contexts)))
        verdicts = []
        for i in range(len(statements)):
            best = max(answers, key=lambda a: a["verdicts"][i])
            verdicts.append(Verdict(best["verdicts"][i], best["reasons"][i]))
        return verdicts

    async def answer_relevance(self, user_input: str, response: str) -> AnswerRelevanceJudgement:
        """``strictness`` questions in one request, embedded with the question in one request."""
        strictness = self.config.strictness
        answer = await self._ask(prompts.answer_questions(response, strictness),
                                 {"response": response, "strictness": strictness})
        vectors = await self._embed([user_input, *answer["questions"]])
        similarities = [float(vectors[0] @ v) for v in vectors[1:]]
        return AnswerRelevanceJudgement(similarities, [bool(f) for f in answer["noncommittal"]], answer["questions"])

    async def rate_context_relevance(self, user_input: str, contexts: list[str]) -> list[tuple[int, int]]:
        """Both judges, one request each (per batch), concurrently."""
        ratings: list[tuple[int, int]] = []
        for _, batch in self._batches(contexts):
            first, second = await asyncio.gather(*(
                self._ask(prompts.context_relevance(kind, user_input, batch),
                          {"user_input": user_input, "contexts": batch})
                for kind in ("context_relevance_a", "context_relevance_b")))
            ratings += list(zip(first["ratings"], second["ratings"]))
        return ratings

    async def _reference(self, user_input: str, statements: list[str], contexts: list[str]) -> dict[str, list]:
        answers = await asyncio.gather(*(
            self._ask(prompts.reference_attribution(user_input, statements, batch),
                      {"user_input": user_input, "statements": statements, "contexts": batch})
            for _, batch in self._batches(contexts)))
        attributed, reasons = [], []
        for i in range(len(statements)):
            best = max(answers, key=lambda a: a["attributed"][i])
            attributed.append(best["attributed"][i])
            reasons.append(best["attribution_reasons"][i])
        return {"attributed": attributed, "attribution_reasons": reasons,
                "useful": [u for a in answers for u in a["useful"]],
                "usefulness_reasons": [r for a in answers for r in a["usefulness_reasons"]]}

    async def attribute_reference(self, user_input: str, reference: str, statements: list[str],
                                  contexts: list[str]) -> list[Verdict]:
        """Shares one request with :meth:`context_usefulness` (same inputs, same cache key)."""
        answer = await self._reference(user_input, statements, contexts)
        return [Verdict(v, r) for v, r in zip(answer["attributed"], answer["attribution_reasons"])]

    async def context_usefulness(self, user_input: str, reference: str, contexts: list[str]) -> list[Verdict]:
        """Shares one request with :meth:`attribute_reference`."""
        answer = await self._reference(user_input, self.statements(reference, user_input) or [reference], contexts)
        return [Verdict(v, r) for v, r in zip(answer["useful"], answer["usefulness_reasons"])]

    # ------------------------------------------------------------- embeddings
    async def _embed(self, texts: list[str]) -> np.ndarray:
        """Unit vectors of ``texts`` (see :meth:`_embed_unguarded`); any failure is a ``JudgeError``."""
        return await self._guarded(self._embed_unguarded(texts), "embedding")

    async def _embed_unguarded(self, texts: list[str]) -> np.ndarray:
        """Unit vectors of ``texts``: cached ones from the cache, the rest in one request;
        the offline encoder when the endpoint has no embeddings (404, 405 or 501)."""
        if self._shared["fallback"]:
            return await self._offline_embed(texts)
        model = self.config.embedding_model
        endpoint = public_url(self.config.embedding_base_url or self.config.base_url or _OPENAI)
        key_of = {t: cache_key(endpoint, kind="embedding", model=model, text=t) for t in texts}
        keys = [key_of[t] for t in texts]
        found = {k: self.cache.get(k) for k in keys} if self.cache is not None else {}
        missing = list(dict.fromkeys(t for t, k in zip(texts, keys) if found.get(k) is None))
        plan = current_plan.get()
        if plan is not None:
            if missing:
                plan.add(Planned("embedding", cache_key(endpoint, kind="embedding", model=model, texts=missing),
                                             sum(estimate_tokens(t) for t in missing)))
            (current_usage.get() or Usage()).cache_hits += len(texts) - len(missing)
            return np.ones((len(texts), 1))
        owned: set[Key] = set()
        if missing and self.cache is not None:
            claimed, owned = await self._claim([key_of[t] for t in missing])
            found.update(claimed)
            missing = [t for t in missing if key_of[t] not in claimed]
        usage = current_usage.get() or Usage()
        usage.cache_hits += len(texts) - len(missing)
        try:
            if missing:
                await self._embed_missing(missing, key_of, found)
        finally:
            if self.cache is not None:
                self.cache.release(owned)
        if self._shared["fallback"]:
            return await self._offline_embed(texts)
        try:
            vectors = np.array([found[k] for k in keys], dtype=np.float64)
        except ValueError as exc:
            raise JudgeError(f"embedding: vectors of different lengths ({exc})") from None
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        if not np.all(np.isfinite(vectors)) or not np.all(norms > 0):
            raise JudgeError("embedding: a zero or non-finite vector came back")
        return vectors / norms

    async def _embed_missing(self, missing: list[str], key_of: dict[str, Key], found: dict[Key, Any]) -> None:
        """One embeddings request for ``missing``; vectors into ``found`` and the cache."""
        model = self.config.embedding_model
        try:
            reply = await self._send("embedding", lambda: self._clients()["embeddings"].embeddings.create(
                model=model, input=missing))
        except JudgeError as exc:
            if getattr(exc.__cause__, "status_code", None) not in (404, 405, 501):
                raise
            self._shared["fallback"] = f"the endpoint has no embeddings ({exc}); offline encoder used"
            return
        if len(reply.data) != len(missing):
            raise JudgeError(f"embedding: {len(reply.data)} vectors for {len(missing)} texts")
        for text, item in zip(missing, reply.data):
            vector = list(map(float, item.embedding))
            found[key_of[text]] = vector
            if self.cache is not None:
                self.cache.put(key_of[text], "embedding", vector)

    async def _offline_embed(self, texts: list[str]) -> np.ndarray:
        from metrics.judges.offline import OfflineJudge

        encoder = self._shared.setdefault("offline", OfflineJudge())
        return encoder.embed(texts).astype(np.float64)

    # ------------------------------------------------ judgements of the wider metric set
    async def support_matrix(self, statements: list[str], contexts: list[str]) -> list[list[int]]:
        """One request for every (statement, context) pair (RAGAS: 2 per context)."""
        answer = await self._ask(prompts.context_support_matrix(statements, contexts),
                                 {"statements": statements, "contexts": contexts})
        return answer["matrix"]

    async def classify_statements(self, response_statements: list[str], reference_statements: list[str],
                                  response: str, reference: str) -> tuple[list[int], list[int]]:
        """One request classifying both statement lists (shared by AnswerCorrectness and
        FactualCorrectness through the cache)."""
        answer = await self._ask(prompts.statement_classification(response_statements, reference_statements),
                                 {"response": response_statements, "reference": reference_statements})
        return answer["supported"], answer["covered"]

    async def entities(self, text: str) -> list[str] | None:
        """One request."""
        return (await self._ask(prompts.entities(text), {"text": text}))["entities"]

    async def rate_contexts_as_whole(self, user_input: str, contexts: list[str]) -> tuple[int, int]:
        """Two requests, concurrently."""
        first, second = await asyncio.gather(*(
            self._ask(prompts.whole_context_relevance(kind, user_input, contexts),
                      {"user_input": user_input, "contexts": contexts})
            for kind in ("whole_context_relevance_a", "whole_context_relevance_b")))
        return first["rating"], second["rating"]

    async def similarity(self, first: str, second: str) -> float:
        """One embeddings request for both texts (none when cached)."""
        vectors = await self._embed([first, second])
        return float(np.clip(vectors[0] @ vectors[1], -1.0, 1.0))

    async def likert(self, criterion: str, texts: dict[str, Any]) -> tuple[int, str]:
        """One request; a score outside 1..5 is invalid output, never accepted."""
        answer = await self._ask(prompts.likert(criterion, texts), texts)
        return answer["score"], answer["reason"]
