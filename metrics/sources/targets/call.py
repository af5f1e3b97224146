"""Calling a RAG system's parts: bounded concurrency, a deadline per call, retries, a cache.

:func:`call_part` calls one part (``rag_eval.metrics.sources.targets.config.Part``) on many inputs:

* at most ``concurrency`` calls in flight (a thread pool);
* every call has a deadline of ``timeout`` seconds (a call past it is abandoned and
  counts as a transient failure);
* transient failures — the deadline, a connection error, HTTP 429 or 5xx, the OpenAI
  client's connection, timeout, rate-limit and server errors, a callable's
  ``TimeoutError``/``ConnectionError`` — are tried again up to ``max_attempts`` times
  with exponential backoff and jitter (tenacity); anything else fails the row at once;
* a row that still fails gets an :class:`Outcome` with ``error`` (the cause, secrets
  redacted), never an exception: no row is lost, no run fails;
* secrets are redacted from causes *and* answers (a retriever's passage, a response, an
  id), before anything is cached or returned: the value of every ``${VAR}`` the part's
  settings reference (headers, URL, request and prompt templates), each setting holding
  one as expanded, the chat model's key, and each of those URL-quoted and JSON-escaped;
* answers are cached (``rag_eval.metrics.judges.cache.JudgementCache``) under the part's version
  hash and the exact inputs, so a re-run of an unchanged part calls nothing; failures
  are not cached (the next run tries them again).

Secrets (``${VAR}`` in the settings, the chat model's key) are read from the environment at
call time and never stored, logged or returned.
"""
from __future__ import annotations

import importlib
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request
from urllib.parse import quote, quote_plus
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import tenacity

from rag_eval.metrics.core.extras import MissingExtra
from rag_eval.metrics.judges.cache import JudgementCache, cache_key
from rag_eval.metrics.sources.targets.config import ENV_REFERENCE, CallSettings, Part, expand_env
from rag_eval.metrics.sources.targets.config_file import TargetConfigError

_API_OPTIONS = ("temperature", "top_p", "max_tokens", "seed", "frequency_penalty", "presence_penalty")


class TransientError(Exception):
    """A failure worth another attempt (deadline, connection, HTTP 429/5xx)."""


class OutputError(ValueError):
    """A part answered, but not in a shape the pipeline can use."""


@dataclass
class Outcome:
    """One input's result: ``value`` (the normalised answer) or ``error`` (why not).

    ``calls``: attempts sent this run (0 when cached); ``cached``: answered from the
    cache; ``latency``: seconds of the call that produced the answer (kept with cached
    answers); ``prompt_tokens``/``completion_tokens``: what a chat model reported.
    """

    value: dict[str, Any] | None = None
    error: str | None = None
    calls: int = 0
    cached: bool = False
    latency: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0


def _deadline(fn: Callable[[], Any], timeout: float) -> Any:
    """``fn()`` in its own thread; :class:`TransientError` if it takes over ``timeout`` s."""
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller below
            box["error"] = exc

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise TransientError(f"no answer within {timeout:g} s (timeout)")
    if isinstance(box.get("error"), TimeoutError):  # the call's own socket timeout, a hair before ours
        raise TransientError(f"no answer within {timeout:g} s (timeout)") from box["error"]
    if "error" in box:
        raise box["error"]
    return box["value"]


def _is_transient(exc: BaseException) -> bool:
    import openai

    return isinstance(exc, (TransientError, TimeoutError, ConnectionError, urllib.error.URLError,
                            openai.APIConnectionError, openai.RateLimitError, openai.InternalServerError)) \
        and not isinstance(exc, urllib.error.HTTPError)


def _walk(data: Any, path: str) -> Any:
    """The value at a dotted ``path`` (``hits.*.text``: ``*`` maps the rest over a list)."""
    head, _, rest = path.partition(".")
    if head == "*":
        if not isinstance(data, list):
            raise OutputError(f"expected a list at '*' of {path!r}, got {type(data).__name__}")
        return [_walk(item, rest) if rest else item for item in data]
    if isinstance(data, list) and head.isdigit():
        data = data[int(head)] if int(head) < len(data) else None
    elif isinstance(data, dict):
        data = data.get(head)
    else:
        data = None
    if data is None:
        raise OutputError(f"the reply has no {head!r} (path {path!r})")
    return _walk(data, rest) if rest else data


def _fill(template: Any, values: dict[str, Any]) -> Any:
    """A JSON template with ``"{name}"`` replaced: a whole-string placeholder keeps the value's type."""
    if isinstance(template, dict):
        return {k: _fill(v, values) for k, v in template.items()}
    if isinstance(template, list):
        return [_fill(v, values) for v in template]
    if isinstance(template, str):
        inner = template[1:-1]
        if template.startswith("{") and template.endswith("}") and inner in values:
            return values[inner]
        try:
            return template.format_map(values)
        except KeyError as exc:
            raise TargetConfigError(f"template {template!r} names {exc.args[0]!r}, which is neither an input "
                                    "(user_input, retrieved_contexts, contexts) nor a parameter") from None
    return template


def _import(part: Part) -> Callable[..., Any]:
    module, _, function = part.spec["callable"].partition(":")
    if part.base and part.base not in sys.path:
        sys.path.insert(0, part.base)
    try:
        return getattr(importlib.import_module(module), function)
    except (ImportError, AttributeError) as exc:
        raise TargetConfigError(f"[{part.role}.{part.name}] callable {part.spec['callable']!r} cannot be "
                                f"imported: {exc}") from None


def _contexts(reply: Any) -> dict[str, Any]:
    """Retriever output as ``retrieved_contexts`` (list of str) and, when the items carry ids,
    ``retrieved_documents`` (``[{"document_id", "relevance_score"}]``, unscored items by rank)."""
    if isinstance(reply, dict) and "retrieved_contexts" in reply:
        return {"retrieved_contexts": list(reply["retrieved_contexts"]),
                "retrieved_documents": reply.get("retrieved_documents")}
    if not isinstance(reply, list):
        raise OutputError(f"a retriever returns a list of passages, got {type(reply).__name__}")
    texts, documents = [], []
    for rank, item in enumerate(reply):
        if isinstance(item, str):
            texts.append(item)
            continue
        if not isinstance(item, dict):
            raise OutputError(f"passage {rank} is {type(item).__name__}, expected a string or an object")
        text = next((item[k] for k in ("text", "content", "page_content") if k in item), None)
        if not isinstance(text, str):
            raise OutputError(f"passage {rank} has no text (keys text, content or page_content)")
        texts.append(text)
        doc_id = item.get("document_id", item.get("id"))
        if doc_id is not None:
            score = item.get("relevance_score", item.get("score"))
            documents.append({"document_id": str(doc_id),
                              "relevance_score": float(score) if score is not None else float(len(reply) - rank)})
    return {"retrieved_contexts": texts, "retrieved_documents": documents if len(documents) == len(texts) and
            documents else None}


def _response(reply: Any) -> dict[str, Any]:
    if isinstance(reply, dict):
        text, usage = reply.get("response"), reply.get("usage") or {}
    else:
        text, usage = reply, {}
    if not isinstance(text, str):
        raise OutputError(f"a generator returns a string (or {{'response': ...}}), got {type(text).__name__}")
    return {"response": text, "usage": {k: int(usage.get(k, 0)) for k in ("prompt_tokens", "completion_tokens")}}


def _invoke(part: Part, inputs: dict[str, Any], timeout: float, secrets: list[str]) -> dict[str, Any]:
    """One call of ``part`` on ``inputs``: its normalised answer."""
    values = {**part.parameters, **inputs,
              "contexts": "\n\n".join(f"[{i + 1}] {c}" for i, c in enumerate(inputs.get("retrieved_contexts") or []))}
    if part.kind == "callable":
        fn = _import(part)
        args = [inputs["user_input"]] + ([inputs["retrieved_contexts"]] if part.role == "generator" else [])
        reply = _deadline(lambda: fn(*args, **part.parameters), timeout)
    elif part.kind == "http":
        headers = {k: expand_env(str(v)) for k, v in (part.spec.get("headers") or {}).items()}
        body = _fill(part.spec.get("request") or {"user_input": "{user_input}"}, values)
        request = urllib.request.Request(expand_env(part.spec["url"]), data=json.dumps(body).encode(), method="POST",
                                         headers={"content-type": "application/json", **headers})

        def post() -> Any:
            try:
                with urllib.request.urlopen(request, timeout=timeout) as answer:
                    return json.loads(answer.read())
            except urllib.error.HTTPError as exc:
                if exc.code == 429 or exc.code >= 500:
                    raise TransientError(f"HTTP {exc.code} from the {part.role}") from None
                text = _redact(exc.read().decode("utf-8", "replace"), secrets)[:200]  # no cut secret left
                raise OutputError(f"HTTP {exc.code} from the {part.role}: {text}") from None
            except json.JSONDecodeError as exc:
                raise OutputError(f"the {part.role}'s reply is not JSON: {exc}") from None

        data = _deadline(post, timeout)
        if part.role == "retriever":
            texts = _walk(data, part.spec["contexts"])
            ids = _walk(data, part.spec["ids"]) if part.spec.get("ids") else None
            scores = _walk(data, part.spec["scores"]) if part.spec.get("scores") else None
            reply = [{"text": t, **({"id": ids[i]} if ids else {}), **({"score": scores[i]} if scores else {})}
                     for i, t in enumerate(texts if isinstance(texts, list) else [texts])]
        else:
            reply = {"response": _walk(data, part.spec["response"])}
    else:
        import openai

        key = os.environ.get(part.spec.get("api_key_env", "OPENAI_API_KEY")) or "no-key"
        base_url = expand_env(part.spec["base_url"]) if part.spec.get("base_url") else None
        client = openai.OpenAI(api_key=key, base_url=base_url, timeout=timeout, max_retries=0)
        options = {k: v for k, v in part.parameters.items() if k in _API_OPTIONS}
        messages: list[Any] = [{"role": "user", "content": _fill(part.spec["prompt"], values)}]
        if part.spec.get("system"):
            messages.insert(0, {"role": "system", "content": _fill(part.spec["system"], values)})
        try:
            completion = _deadline(lambda: client.chat.completions.create(model=part.spec["model"], messages=messages,
                                                                         **options), timeout)
        finally:
            client.close()
        usage = completion.usage
        reply = {"response": completion.choices[0].message.content or "",
                 "usage": {"prompt_tokens": usage.prompt_tokens if usage else 0,
                           "completion_tokens": usage.completion_tokens if usage else 0}}
    if part.role == "retriever":
        return _contexts(reply)
    if part.role == "generator":
        return _response(reply)
    if not isinstance(reply, dict):
        raise OutputError(f"a system returns {{'retrieved_contexts': [...], 'response': ...}}, got "
                          f"{type(reply).__name__}")
    return {**_contexts({"retrieved_contexts": reply.get("retrieved_contexts", []),
                         "retrieved_documents": reply.get("retrieved_documents")}), **_response(reply)}


def _strings(data: Any) -> list[str]:
    if isinstance(data, dict):
        return [s for v in data.values() for s in _strings(v)]
    if isinstance(data, list):
        return [s for v in data for s in _strings(v)]
    return [data] if isinstance(data, str) else []


def _secrets(part: Part) -> list[str]:
    """What a call of ``part`` must never write, longest first: the value of every ``${VAR}``
    anywhere in its settings, every setting holding one as expanded (``Bearer tok-…``), the
    chat model's key; each also URL-quoted and JSON-escaped (how a server echoes them)."""
    texts = [t for t in _strings(part.spec) if ENV_REFERENCE.search(t)]
    plain = [os.environ.get(name, "") for t in texts for name in ENV_REFERENCE.findall(t)]
    plain += [ENV_REFERENCE.sub(lambda m: os.environ.get(m[1], ""), t) for t in texts]
    if part.kind == "openai":
        plain.append(os.environ.get(part.spec.get("api_key_env", "OPENAI_API_KEY"), ""))
    forms = (lambda v: v, lambda v: quote(v, safe=""), quote_plus, lambda v: json.dumps(v)[1:-1],
             lambda v: json.dumps(v, ensure_ascii=False)[1:-1])
    encoded = {form(value) for value in plain for form in forms}
    # A value under 4 characters (a port, "on") is no credential, and replacing it would garble
    # every text it occurs in: left alone.
    return sorted((s for s in encoded if len(s) >= 4), key=len, reverse=True)


def _redact(message: str, secrets: list[str]) -> str:
    for secret in secrets:
        message = message.replace(secret, "[redacted]")
    return message


def _scrub(value: Any, secrets: list[str]) -> Any:
    """``value`` (an answer: dicts, lists, strings) with every secret redacted from its strings."""
    if isinstance(value, dict):
        return {k: _scrub(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v, secrets) for v in value]
    return _redact(value, secrets) if isinstance(value, str) else value


def call_part(part: Part, inputs: list[dict[str, Any]], settings: CallSettings,
              cache: JudgementCache | None = None,
              wait: tenacity.wait.wait_base | None = None) -> list[Outcome]:
    """Call ``part`` once per input (``{"user_input": ...}``, plus ``retrieved_contexts``
    for a generator), in input order.

    Returns one :class:`Outcome` per input; a failure is the row's ``error``
    (``"timeout: no answer within 2 s after 3 attempts"``), never an exception.
    ``wait`` overrides the backoff (tests). Raises nothing but
    :class:`~rag_eval.metrics.sources.targets.config_file.TargetConfigError` for a part that cannot be called
    at all (a callable that does not import), before any call, and
    :class:`~rag_eval.metrics.core.extras.MissingExtra` when the part needs an extra that is not installed.
    """
    if part.kind == "callable":
        _import(part)
    secrets = _secrets(part)
    wait = wait or tenacity.wait_exponential_jitter(initial=0.5, max=10)

    def one(item: dict[str, Any]) -> Outcome:
        key = cache_key(None, role=part.role, part=part.version_hash, inputs=item)
        stored = cache.get(key) if cache is not None else None
        if stored is not None:  # scrubbed again: an answer cached by an older version may hold a secret
            return Outcome(_scrub(stored["value"], secrets), None, 0, True, stored["latency"],
                           **(stored["value"].get("usage") or {}))
        outcome = Outcome()

        def attempt() -> dict[str, Any]:
            outcome.calls += 1
            return _invoke(part, item, settings.timeout, secrets)

        started = time.perf_counter()
        try:
            value = tenacity.Retrying(stop=tenacity.stop_after_attempt(settings.max_attempts), wait=wait,
                                      retry=tenacity.retry_if_exception(_is_transient), reraise=True)(attempt)
        except (TargetConfigError, MissingExtra):  # the part cannot be called at all: stop, naming why
            raise
        except Exception as exc:  # noqa: BLE001 - the row's target_error, with its cause
            kind = "timeout" if isinstance(exc, TransientError) and "timeout" in str(exc) else type(exc).__name__
            tries = f" after {outcome.calls} attempts" if outcome.calls > 1 else ""
            outcome.error = _redact(f"{kind}: {exc}{tries}", secrets)
            return outcome
        outcome.value, outcome.latency = _scrub(value, secrets), time.perf_counter() - started
        usage = value.get("usage") or {}
        outcome.prompt_tokens = usage.get("prompt_tokens", 0)
        outcome.completion_tokens = usage.get("completion_tokens", 0)
        if cache is not None:
            cache.put(key, f"target.{part.role}", {"value": outcome.value, "latency": outcome.latency})
        return outcome

    with ThreadPoolExecutor(max_workers=max(1, settings.concurrency)) as pool:
        return list(pool.map(one, inputs))
