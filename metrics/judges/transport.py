"""The LLM judge's transport: its event loop, HTTP clients, concurrency limit, retries and redaction.

Requests go through the official ``openai`` client (``AsyncOpenAI``, aiohttp transport)
on one private event loop, under one concurrency limit shared by every row and metric
(halved on a 429, raised again on successes: ``rag_eval.metrics.judges.limit``),
with retries (exponential backoff with jitter, honouring ``Retry-After``) on 429, 5xx,
connection errors and timeouts. Before the first request to an endpoint it is checked
(``rag_eval.metrics.judges.endpoint``). API keys never leave this module: every error message is
redacted (:meth:`Transport.redact`).
"""
from __future__ import annotations

import asyncio
import email.utils
import re
import threading
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, TypeVar

from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from rag_eval.metrics.judges import prompts
from rag_eval.metrics.judges.base import JudgeError
from rag_eval.metrics.judges.config import LLMConfig
from rag_eval.metrics.judges.endpoint import check_endpoint, connection_cause, never_sent, public_url
from rag_eval.metrics.judges.limit import AdaptiveLimit
from rag_eval.metrics.judges.usage import Usage, current_usage

if TYPE_CHECKING:
    import openai

T = TypeVar("T")
_MAX_RETRY_AFTER = 120.0  # seconds; a longer Retry-After is not waited in full
_KEY_PATTERN = re.compile(r"\b(sk|key|ak)-[A-Za-z0-9_\-*]{6,}")


def _count(tokens: Any) -> int:
    """A token count from a usage block; anything but a non-negative int counts 0."""
    return tokens if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens >= 0 else 0


def _retryable(exc: BaseException) -> bool:
    import openai  # imported when a request is made: its import is slow
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


@dataclass(frozen=True)
class Clients:
    """A transport's HTTP clients (chat, embeddings) and its concurrency limit, made together on first use."""

    chat_client: openai.AsyncOpenAI
    embeddings_client: openai.AsyncOpenAI
    limit: AdaptiveLimit


class Transport:
    """Connections of one LLM judge and of its per-metric twins (``LLMJudge.with_options``).

    Parameters
    ----------
    config : LLMConfig
        Its endpoints, keys, timeout, concurrency, attempts and waits are used; the model
        and sampling settings come with each call (a twin's may differ).

    The clients and the concurrency limit (:class:`~rag_eval.metrics.judges.limit.AdaptiveLimit`: a
    429 halves it) are created on the transport's loop, on first use; the
    endpoint check runs once per chat model (and once for a separate embeddings endpoint).
    """

    def __init__(self, config: LLMConfig) -> None:
        self.config = config
        self.clients: Clients | None = None
        #: Called with a request's kind as it is about to be sent (its slot taken): raises ``JudgeError``
        #: to send nothing (the LLM judge's: no request whose answer could be written nowhere).
        self.refuse: Callable[[str], None] | None = None
        #: Endpoint checks in progress or done, by chat model (or "embeddings endpoint").
        self.checks: dict[str, asyncio.Future] = {}
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="llm-judge-loop", daemon=True)
        self.thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the transport's own event loop (one loop for its whole life,
        so connections and the concurrency limit are shared by every call)."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    def close(self) -> None:
        """Close the HTTP connections, stop the event loop and release it (its selector and pipe)."""
        async def close_clients() -> None:
            if self.clients is not None:
                await self.clients.chat_client.close()
                await self.clients.embeddings_client.close()
            self.clients = None

        if self.loop.is_running():
            self.run(close_clients())
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join()
        if not self.loop.is_closed():
            self.loop.close()

    # ----------------------------------------------------------------- redaction
    def redact(self, text: str) -> str:
        """``text`` without the configured keys nor anything shaped like a key (``sk-…``)."""
        for secret in (self.config.api_key, self.config.embedding_api_key):
            if secret:
                text = text.replace(secret, "[redacted]")
        return _KEY_PATTERN.sub("[redacted]", text)

    def scrub(self, value: Any) -> Any:
        """``value`` with the configured keys redacted from every string, recursively (not
        :meth:`redact`'s pattern: a reason may rightly say "key-performance")."""
        if isinstance(value, str):
            for secret in (self.config.api_key, self.config.embedding_api_key):
                if secret:
                    value = value.replace(secret, "[redacted]")
            return value
        if isinstance(value, list):
            return [self.scrub(v) for v in value]
        if isinstance(value, dict):
            return {k: self.scrub(v) for k, v in value.items()}
        return value

    # ----------------------------------------------------------------- connections
    def _connect(self) -> Clients:
        # Created on the transport's loop, on first use.
        import openai  # imported when a request is made: its import is slow
        if self.clients is None:
            cfg = self.config
            key = cfg.api_key or "not-needed"

            def client(base_url: str | None, api_key: str) -> openai.AsyncOpenAI:
                return openai.AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=cfg.timeout,
                                          http_client=openai.DefaultAioHttpClient(timeout=cfg.timeout))

            self.clients = Clients(client(cfg.base_url, key),
                                   client(cfg.embedding_base_url or cfg.base_url, cfg.embedding_api_key or key),
                                   AdaptiveLimit(cfg.concurrency))
        return self.clients

    def check_report(self, model: str) -> dict[str, Any] | None:
        """The report of ``model``'s endpoint check, once it passed (else ``None``)."""
        check = self.checks.get(model)
        if check is None or not check.done() or check.cancelled() or check.exception() is not None:
            return None
        return check.result()

    async def checked(self, model: str, kind: str = "chat") -> dict[str, Any]:
        """The endpoint check of the chat ``model``; for an embeddings request to a separate
        embeddings endpoint (another URL or key), that endpoint's reachability and key (an
        endpoint without the embedding model falls back to the offline encoder instead)."""
        cfg, checks = self.config, self.checks
        separate = kind == "embedding" and ((cfg.embedding_base_url or cfg.base_url) != cfg.base_url
                                            or (cfg.embedding_api_key or cfg.api_key) != cfg.api_key)
        name = "embeddings endpoint" if separate else model
        if name not in checks:
            def connect() -> openai.AsyncOpenAI:  # only when the check's first request does not settle it
                clients = self._connect()
                return clients.embeddings_client if separate else clients.chat_client

            checked_model, url, key = (None, cfg.embedding_base_url or cfg.base_url, cfg.embedding_api_key) \
                if separate else (model, cfg.base_url, None)
            checks[name] = asyncio.ensure_future(check_endpoint(connect, checked_model, url, key or cfg.api_key
                                                                or "not-needed", cfg.timeout, self.redact))
        return await asyncio.shield(checks[name])

    # ----------------------------------------------------------------- requests
    def _wait(self, state: Any) -> float:
        backoff = wait_exponential_jitter(initial=0.5, max=self.config.max_retry_wait)(state)
        hinted = _retry_after(state.outcome.exception() if state.outcome else None)
        return max(backoff, hinted) if hinted is not None else backoff

    async def send(self, kind: str, model: str, call: Callable[[], Awaitable[T]]) -> T:
        """Send one request (``call``) with retries under the shared limit, after ``model``'s
        endpoint check; count every attempt the endpoint received in the current usage (not one whose
        connection could not be opened: ``rag_eval.metrics.judges.endpoint.never_sent``). Failures are a
        :class:`JudgeError` naming the cause, redacted."""
        import openai  # imported when a request is made: its import is slow
        await self.checked(model, kind)
        limit = self._connect().limit
        usage = current_usage.get() or Usage()
        attempts = 0
        try:
            async for attempt in AsyncRetrying(stop=stop_after_attempt(self.config.max_attempts), wait=self._wait,
                                               retry=retry_if_exception(_retryable), reraise=True):
                with attempt:
                    async with limit.slot():
                        if self.refuse is not None:
                            self.refuse(kind)
                        attempts += 1
                        counted = "embedding_requests" if kind == "embedding" else "chat_requests"
                        setattr(usage, counted, getattr(usage, counted) + 1)
                        try:
                            return await call()
                        except openai.APIConnectionError as exc:
                            if never_sent(exc):  # refused: not a request the endpoint received
                                setattr(usage, counted, getattr(usage, counted) - 1)
                            raise
        except openai.APIConnectionError as exc:  # includes APITimeoutError
            cause = connection_cause(exc)
            if cause is None:
                raise JudgeError(f"{kind}: timeout after {attempts} attempts of {self.config.timeout:g} s") from exc
            where = public_url(self.config.base_url) or "api.openai.com"
            raise JudgeError(f"{kind}: {self.redact(cause)} at {where} after {attempts} attempts") from exc
        except openai.APIStatusError as exc:
            if exc.status_code == 400:
                message = self.redact(str(exc))
                code = "context_too_long" if "context" in message.lower() and "length" in message.lower() \
                    else "bad_request"
                raise JudgeError(f"{kind}: {code}: {message}") from exc
            hinted = _retry_after(exc)
            budget = f" (Retry-After {hinted:.0f} s is over the {_MAX_RETRY_AFTER:.0f} s budget)" \
                if hinted is not None and hinted > _MAX_RETRY_AFTER else ""
            raise JudgeError(f"{kind}: request failed after {attempts} attempts ({type(exc).__name__} "
                             f"{exc.status_code}){budget}: {self.redact(str(exc))}") from exc
        except openai.APIError as exc:
            status = getattr(exc, "status_code", None)
            raise JudgeError(f"{kind}: request failed after {attempts} attempts "
                             f"({type(exc).__name__}{f' {status}' if status else ''}): {self.redact(str(exc))}") from exc
        raise JudgeError(f"{kind}: no attempt was made")  # pragma: no cover - stop_after_attempt(>=1)

    async def chat(self, config: LLMConfig, request: prompts.Request, messages: list[dict[str, str]]) -> str:
        """The text of one chat completion for ``request`` with ``config``'s model and sampling;
        a reply cut at the token limit is asked again with a larger ``max_tokens`` (twice at
        most, up to ``max_output_tokens``). Token usage goes to the current usage."""
        cfg = config
        if cfg.response_format == "json_schema":
            response_format = {"type": "json_schema",
                               "json_schema": {"name": request.kind, "schema": request.schema, "strict": True}}
        else:
            response_format = {"type": "json_object"}
        extra = {"seed": cfg.seed + cfg.repeat} if cfg.seed is not None else {}
        limits: list[int | None] = [None]  # the provider's default first, then larger explicit budgets
        while True:
            limit = {"max_tokens": limits[-1]} if limits[-1] else {}
            completion = await self.send(request.kind, cfg.model, lambda: self._connect().chat_client.chat.completions.create(  # type: ignore[call-overload]  # plain dicts
                model=cfg.model, messages=messages, temperature=cfg.temperature, response_format=response_format,
                **extra, **limit))  # noqa: B023 - called within this iteration
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

    async def embed(self, model: str, chat_model: str, texts: list[str]) -> Any:
        """One embeddings request for ``texts`` (after ``chat_model``'s endpoint check)."""
        return await self.send("embedding", chat_model, lambda: self._connect().embeddings_client.embeddings.create(
            model=model, input=texts))
