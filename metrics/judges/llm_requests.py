"""How the LLM judge's requests are answered (the base of ``rag_eval.metrics.judges.llm.LLMJudge``).

Every judgement's request (``rag_eval.metrics.judgements``) is answered from the cache, from an
identical request in flight, or from the endpoint; answers are requested as JSON (``json_schema``, or
``json_object`` for endpoints without it), parsed tolerantly, validated strictly and re-asked once
with the validation error; after that the sample is a ``judge_error``. Every judgement is cached by
content and endpoint, and asked once by all processes sharing the cache
(``rag_eval.metrics.judges.cache``). Embeddings are cached per text, the missing ones asked in one
request; they fall back to the offline encoder on an endpoint without them.
"""
from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rag_eval.metrics.judges import prompts
from rag_eval.metrics.judges.base import Judge, JudgeError
from rag_eval.metrics.judges.cache import JudgementCache, Key, Sink, cache_key
from rag_eval.metrics.judges.config import OPENAI_URL, LLMConfig
from rag_eval.metrics.judges.endpoint import public_url
from rag_eval.metrics.judges.plan import MESSAGE_TOKENS, Planned, current_plan, estimate_tokens, reply_tokens
from rag_eval.metrics.judges.transport import Transport
from rag_eval.metrics.judges.usage import Usage, current_usage

if TYPE_CHECKING:
    from rag_eval.metrics.judges.offline import OfflineJudge


@dataclass
class _Shared:
    """What a judge shares with its per-metric twins besides the transport and the cache:
    the requests in flight (by cache key), the answers bought since the version's scoring
    began (a later hit on one is shared within the run, not paid by an earlier run) and the
    embeddings fallback."""

    inflight: dict[Key, asyncio.Future] = field(default_factory=dict)
    bought: set[Key] = field(default_factory=set)
    #: Why the offline encoder embeds instead of the endpoint (``None``: it does not).
    fallback: str | None = None
    encoder: OfflineJudge | None = None


#: Words of a 400 reply saying that the endpoint does not serve embeddings at all.
_UNSUPPORTED = ("not supported", "unsupported", "does not support", "not available")


def no_embeddings(error: BaseException | None) -> bool:
    """Whether an embeddings request's HTTP ``error`` says the endpoint has no embeddings: 404, 405
    or 501, or a 400 whose message says embeddings are not supported (``invalid_request_error``,
    "embeddings not supported"); any other 400 (a text too long...) is the request's own error."""
    status = getattr(error, "status_code", None)
    if status in (404, 405, 501):
        return True
    message = str(getattr(error, "message", "") or "").lower()
    return status == 400 and "embedding" in message and any(words in message for words in _UNSUPPORTED)


class LLMRequests(Judge):
    """The requests of an LLM judge (see the module's notes): its cache, its transport and what it
    shares with its per-metric twins.

    Parameters
    ----------
    config : LLMConfig
        The endpoint, model, sampling and transport settings.
    read_only_cache : bool
        Only read the cache (a dry run's: ``JudgementCache(read_only=True)``); none when its file does not
        exist: nothing is created or changed.
    sink : Sink, optional
        Where the answers the cache's file refuses go (``JudgementCache``'s ``sink``: a command's spill files).
    """

    def __init__(self, config: LLMConfig, read_only_cache: bool = False, sink: Sink | None = None) -> None:
        self.config = config
        cfg = self.config
        # The longest a live claimant may take: a request and its re-ask, each with all its attempts.
        lease = 2 * cfg.max_attempts * (cfg.timeout + cfg.max_retry_wait) + 60
        path = cfg.cache_path
        self.cache = JudgementCache(path, lease=lease, across_endpoints=cfg.cache_across_endpoints,
                                    read_only=read_only_cache, sink=sink) \
            if path and (not read_only_cache or Path(path).is_file()) else None
        self.transport = Transport(cfg)
        self.transport.refuse = self._may_buy
        self._shared = _Shared()

    async def ask_request(self, version: str, request: prompts.Request, inputs: dict[str, Any]) -> dict[str, Any]:
        """Ask one request of a judgement at its ``version``: its validated reply, cached under
        ``inputs``, from the cache, from an identical request in flight, or from the endpoint
        (re-asked once with the validation error)."""
        cfg = self.config
        key = cache_key(public_url(cfg.base_url or OPENAI_URL), kind=request.kind, model=cfg.model,
                        prompt_version=version, temperature=cfg.temperature,
                        seed=cfg.seed, response_format=cfg.response_format, inputs=inputs,
                        **({"repeat": cfg.repeat} if cfg.repeat else {}))
        cached = self.cache.get(key) if self.cache is not None else None
        if cached is not None:
            self._reused([key])
            return cached
        plan = current_plan.get()
        if plan is not None:  # record what would be sent; answer with a stand-in
            answer = prompts.example_answer(request.schema)
            prompt = estimate_tokens(self._system(request)) + estimate_tokens(request.prompt) + 2 * MESSAGE_TOKENS
            if cfg.response_format == "json_schema":
                prompt += estimate_tokens(json.dumps(request.schema))
            plan.add(Planned(request.kind, key, prompt, reply_tokens(answer)))
            return request.validate(answer)
        inflight = self._shared.inflight
        if key in inflight:
            self._reused([], shared=1)
            return await asyncio.shield(inflight[key])
        task = asyncio.ensure_future(self._guarded(self._ask_claimed(request, key), request.kind))
        inflight[key] = task
        try:
            return await task
        finally:
            inflight.pop(key, None)

    @staticmethod
    async def _claim(cache: JudgementCache, keys: list[Key]) -> tuple[dict[Key, Any], set[Key]]:
        """Claim ``keys`` in ``cache`` (the judge's), waiting while other processes ask for any of them:
        the values they stored (``found``) and the keys this judge must now ask (``owned``)."""
        found: dict[Key, Any] = {}
        owned: set[Key] = set()
        pause = 0.02
        while True:
            owned |= cache.claim(k for k in keys if k not in found and k not in owned)
            for key in keys:
                if key not in owned and key not in found and (value := cache.get(key)) is not None:
                    found[key] = value
            if all(k in found or k in owned for k in keys):
                return found, owned
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.5)

    async def _ask_claimed(self, request: prompts.Request, key: Key) -> dict[str, Any]:
        """The judgement from the endpoint, or from another process asking for it right now."""
        if self.cache is None:
            return await self._ask_endpoint(request, key)
        found, owned = await self._claim(self.cache, [key])
        if key in found:
            self._reused([], shared=1)
            return found[key]
        try:
            return await self._ask_endpoint(request, key)
        finally:
            self.cache.release(owned)  # a no-op once the answer is stored

    def _reused(self, found: list[Key], shared: int = 0) -> None:
        """Count judgements answered without a request in the current usage: those of ``found`` (keys
        answered by the cache) bought since the version's scoring began as ``shared_hits``, the others as
        ``cache_hits`` (paid by earlier runs); ``shared`` more as ``shared_hits`` (another request of this
        run paid for them: in flight, claimed by another process, a repeated text)."""
        usage = current_usage.get() or Usage()
        bought = sum(key in self._shared.bought for key in found)
        usage.cache_hits += len(found) - bought
        usage.shared_hits += bought + shared

    async def _guarded(self, coroutine, kind: str):
        """Any failure of a judgement becomes a ``JudgeError`` with secrets redacted: an
        odd reply (a number where text belongs, a short embeddings list...) fails that
        sample, never the run."""
        try:
            return await coroutine
        except JudgeError as exc:
            raise JudgeError(self.transport.redact(str(exc))) from None
        except (ValueError, TypeError, KeyError, AttributeError, IndexError) as exc:
            raise JudgeError(f"{kind}: unexpected reply ({type(exc).__name__}): {self.transport.redact(str(exc))}") from None

    def _system(self, request: prompts.Request) -> str:
        if self.config.response_format == "json_schema":
            return prompts.SYSTEM
        return f"{prompts.SYSTEM}\nJSON schema of the answer:\n{json.dumps(request.schema, ensure_ascii=False)}"

    def _may_buy(self, kind: str) -> None:
        """Refuse a request whose answer could be written nowhere (``JudgementCache.nowhere``), as the
        transport is about to send it (``Transport.refuse``): that judgement is a ``JudgeError`` saying
        so, nothing is sent."""
        if self.cache is not None and self.cache.nowhere:
            raise JudgeError(f"{kind}: not sent: the judgement cache {self.cache.path}: {self.cache.nowhere}; "
                             "nothing more is bought that could not be kept")

    async def _ask_endpoint(self, request: prompts.Request, key: Key) -> dict[str, Any]:
        messages = [{"role": "system", "content": self._system(request)}, {"role": "user", "content": request.prompt}]
        for attempt in range(2):
            content = ""
            try:
                content = await self.transport.chat(self.config, request, messages)
                value = request.validate(prompts.extract_json(content))
            except prompts.OutputError as exc:
                if attempt:
                    raise JudgeError(f"{request.kind}: invalid judge output after one re-ask: {exc}") from exc
                messages += [{"role": "assistant", "content": content},
                             {"role": "user", "content": f"That answer is invalid: {exc}. Reply again with only the "
                                                         "corrected JSON object."}]
                continue
            value = self.transport.scrub(value)  # a key echoed in a reason is never stored
            self._shared.bought.add(key)
            if self.cache is not None:
                self.cache.put(key, request.kind, value)
            return value
        raise AssertionError("unreachable")  # pragma: no cover

    # ------------------------------------------------------------- embeddings
    async def embeddings(self, texts: list[str]) -> np.ndarray:
        """Unit vectors of ``texts`` (see :meth:`_embed_unguarded`); any failure is a ``JudgeError``."""
        return await self._guarded(self._embed_unguarded(texts), "embedding")

    async def _embed_unguarded(self, texts: list[str]) -> np.ndarray:
        """Unit vectors of ``texts``: cached ones from the cache, the rest in one request;
        the offline encoder when the endpoint has no embeddings (:func:`no_embeddings`)."""
        if self._shared.fallback:
            return await self._offline_embed(texts)
        model = self.config.embedding_model
        endpoint = public_url(self.config.embedding_base_url or self.config.base_url or OPENAI_URL)
        key_of = {t: cache_key(endpoint, kind="embedding", model=model, text=t) for t in texts}
        keys = [key_of[t] for t in texts]
        found = {k: self.cache.get(k) for k in keys} if self.cache is not None else {}
        cached = [k for k in keys if found.get(k) is not None]
        missing = list(dict.fromkeys(t for t, k in zip(texts, keys) if found.get(k) is None))
        plan = current_plan.get()
        if plan is not None and missing:  # every vector cached: the real ones, below
            plan.add(Planned("embedding", cache_key(endpoint, kind="embedding", model=model, texts=missing),
                             sum(estimate_tokens(t) for t in missing)))
            self._reused(cached, shared=len(texts) - len(cached) - len(missing))
            return np.ones((len(texts), 1))
        owned: set[Key] = set()
        if missing and self.cache is not None:
            claimed, owned = await self._claim(self.cache, [key_of[t] for t in missing])
            found.update(claimed)
            missing = [t for t in missing if key_of[t] not in claimed]
        self._reused(cached, shared=len(texts) - len(cached) - len(missing))
        try:
            if missing:
                await self._embed_missing(missing, key_of, found)
        finally:
            if self.cache is not None:
                self.cache.release(owned)
        if self._shared.fallback:
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
            reply = await self.transport.embed(model, self.config.model, missing)
        except JudgeError as exc:
            if not no_embeddings(exc.__cause__):
                raise
            self._shared.fallback = f"the endpoint has no embeddings ({exc}); offline encoder used"
            return
        if len(reply.data) != len(missing):
            raise JudgeError(f"embedding: {len(reply.data)} vectors for {len(missing)} texts")
        for text, item in zip(missing, reply.data):
            vector = list(map(float, item.embedding))
            found[key_of[text]] = vector
            self._shared.bought.add(key_of[text])
            if self.cache is not None:
                self.cache.put(key_of[text], "embedding", vector)

    async def _offline_embed(self, texts: list[str]) -> np.ndarray:
        from rag_eval.metrics.judges.offline import OfflineJudge

        if self._shared.encoder is None:
            self._shared.encoder = OfflineJudge()
        return self._shared.encoder.embed(texts).astype(np.float64)
