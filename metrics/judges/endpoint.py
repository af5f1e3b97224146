"""The LLM judge's endpoint: URLs without credentials, named connection failures, and
the check made before the first judgement is paid for.

:func:`check_endpoint` spends at most three cheap requests, stopping at the first that
settles the question: ``GET /models/{model}`` (OpenAI, Ollama, LiteLLM), ``GET /models``
(vLLM and others without the single-model route; the model must be listed), and, only
when neither shows the model (deployment aliases, endpoints without a model list), a
chat request of one output token. A refused connection, an unknown host, a timeout,
401/403 or an unknown model raise :class:`EndpointError`; rate limits and server errors
do not (the run's own retries deal with them).
"""
from __future__ import annotations

import socket
import ssl
from typing import Any
from urllib.parse import urlsplit, urlunsplit


_UNKNOWN_MODEL = ("does not exist", "not found", "not exist", "unknown model", "no such model", "invalid model")


class EndpointError(ConnectionError):
    """The judge endpoint cannot be used: refused connection, unknown host, no answer,
    a refused key (401/403) or an unknown model. The run stops before spending."""


def public_url(url: str | None) -> str | None:
    """``url`` without user info, query string or fragment (which may carry credentials)."""
    if not url:
        return url
    parts = urlsplit(url)
    host = (parts.hostname or "") + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def check_base_url(url: str | None, name: str = "base_url") -> None:
    """Refuse a URL that carries credentials (user info or a query string).

    Raises
    ------
    ValueError
        Naming the URL without its credentials and saying how to pass the key instead:
        such a URL would be stored in run configuration, logs and caches.
    """
    if not url:
        return
    parts = urlsplit(url)
    if parts.username or parts.password or parts.query or parts.fragment:
        raise ValueError(
            f"{name} {public_url(url)} carries credentials (user info or a query string); pass the API key in "
            "the environment instead — OPENAI_API_KEY (EMBEDDING_API_KEY for a separate embeddings endpoint) — "
            "and give the URL without them")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{name} {url!r} is not an http(s) URL")


def connection_cause(exc: BaseException) -> str | None:
    """What a connection failure was: ``connection refused``, ``unknown host``, ``TLS
    error``, ``connection reset``..., read from the exception's causes; ``None`` for a
    plain timeout. (The aiohttp transport reports a refused connection as a timeout.)"""
    import openai  # imported when a request is made: 1-4 s
    seen: BaseException | None = exc
    for _ in range(20):  # a chain of causes, never a cycle
        if seen is None:
            break
        if isinstance(seen, ConnectionRefusedError):
            return "connection refused"
        if isinstance(seen, socket.gaierror):
            return f"unknown host ({seen.strerror or seen})"
        if isinstance(seen, ssl.SSLError):
            return f"TLS error ({seen.reason or seen})"
        if isinstance(seen, ConnectionResetError):
            return "connection reset"
        os_error = getattr(seen, "os_error", None)  # aiohttp's ClientConnectorError
        if isinstance(os_error, OSError) and os_error is not seen:
            seen = os_error
            continue
        seen = seen.__cause__ or seen.__context__
    if isinstance(exc, openai.APITimeoutError):
        return None
    return f"connection failed ({exc.__cause__ or exc})"


def _error_text(exc: openai.APIStatusError) -> str:
    body = exc.body if isinstance(exc.body, dict) else {}
    error = body.get("error", body) if isinstance(body.get("error", body), dict) else {}
    return str(error.get("message") or exc.message or "")


async def check_endpoint(client: openai.AsyncOpenAI, model: str | None, base_url: str | None, timeout: float,
                         redact=lambda text: text) -> dict[str, Any]:
    """Check reachability, the key and the model name with at most three cheap requests
    (``model`` ``None``: reachability and the key only, with ``GET /models``).

    Returns
    -------
    dict
        ``{"base_url", "model", "status": "ok" | "inconclusive", "requests", "by", "note"}``;
        ``by`` names the request that settled it.

    Raises
    ------
    EndpointError
        Refused connection, unknown host, no answer within ``timeout``, 401/403, an
        unknown model, or a server that answers no OpenAI route (405/501 on chat: a wrong port); the message names the cause and the URL without credentials.
    """
    import openai  # imported when a request is made: 1-4 s
    where = public_url(base_url) or "https://api.openai.com/v1"
    report: dict[str, Any] = {"base_url": where, "model": model, "status": "ok", "requests": 0, "by": None,
                              "note": None}
    listed: list[str] | None = None

    def fail(exc: BaseException) -> EndpointError:
        if isinstance(exc, openai.APIStatusError):
            if exc.status_code in (401, 403):
                return EndpointError(f"the judge endpoint {where} refused the API key (HTTP {exc.status_code}: "
                                     f"{redact(_error_text(exc))}); check OPENAI_API_KEY")
            offered = f"; it offers: {', '.join(sorted(listed)[:20])}" if listed else ""
            return EndpointError(f"the judge endpoint {where} does not know the model {model!r} (HTTP "
                                 f"{exc.status_code}: {redact(_error_text(exc))}){offered}; check --model / "
                                 "OPENAI_MODEL")
        cause = connection_cause(exc) or f"no answer within {timeout:g} s (--timeout)"
        return EndpointError(f"the judge endpoint {where} cannot be reached: {redact(cause)}; check --base-url / "
                             "OPENAI_BASE_URL")

    async def attempt(name: str, call) -> Any:
        report["requests"] += 1
        try:
            return await call()
        except openai.APIConnectionError as exc:  # refused, unknown host, TLS, timeout
            raise fail(exc) from None
        except openai.APIStatusError as exc:
            if exc.status_code in (401, 403):
                raise fail(exc) from None
            report["note"] = f"{name}: HTTP {exc.status_code}"
            return exc

    if model is None:
        await attempt("GET /models", lambda: client.models.list())
        report["by"] = "GET /models"
        return report
    found = await attempt("GET /models/{model}", lambda: client.models.retrieve(model))
    if not isinstance(found, openai.APIStatusError):
        report["by"] = "GET /models/{model}"
        return report
    page = await attempt("GET /models", lambda: client.models.list())
    if not isinstance(page, openai.APIStatusError):
        listed = [getattr(item, "id", "") for item in getattr(page, "data", None) or []]
        if model in listed:
            report["by"] = "GET /models"
            return report
    reply = await attempt("chat", lambda: client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "Reply with OK."}], max_tokens=1))
    if not isinstance(reply, openai.APIStatusError):
        report["by"] = "chat"
        return report
    message = _error_text(reply).lower()
    if reply.status_code in (405, 501):  # a web server that is not an OpenAI-compatible endpoint (wrong port)
        raise EndpointError(f"the judge endpoint {where} does not serve chat completions (HTTP {reply.status_code} "
                            "on every OpenAI route); is --base-url / OPENAI_BASE_URL an OpenAI-compatible "
                            "endpoint, with its /v1?")
    if reply.status_code == 404 or (reply.status_code == 400 and "model" in message
                                    and any(marker in message for marker in _UNKNOWN_MODEL)):
        raise fail(reply)
    report["status"] = "inconclusive"
    return report
