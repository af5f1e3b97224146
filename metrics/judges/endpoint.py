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

import asyncio
import json
import socket
import ssl
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit
from rag_eval.metrics.errors import SettingsError, UserError

if TYPE_CHECKING:
    import openai


_UNKNOWN_MODEL = ("does not exist", "not found", "not exist", "unknown model", "no such model", "invalid model")


class EndpointError(UserError, ConnectionError):
    """The judge endpoint cannot be used: refused connection, unknown host, no answer,
    a refused key (401/403) or an unknown model. The run stops before spending (a ``UserError``:
    the URL, the key, the model or the network are the user's to fix)."""


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
        raise SettingsError(
            f"{name} {public_url(url)} carries credentials (user info or a query string); pass the API key in "
            "the environment instead — OPENAI_API_KEY (EMBEDDING_API_KEY for a separate embeddings endpoint) — "
            "and give the URL without them")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SettingsError(f"{name} {url!r} is not an http(s) URL")


def connection_cause(exc: BaseException) -> str | None:
    """What a connection failure was: ``connection refused``, ``unknown host``, ``TLS
    error``, ``connection reset``..., read from the exception's causes; ``None`` for a
    plain timeout. (The aiohttp transport reports a refused connection as a timeout.)"""
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
    if isinstance(exc, TimeoutError):  # the standard library's (the check's first request)
        return None
    import openai  # imported when a request is made: its import is slow
    if isinstance(exc, openai.APITimeoutError):
        return None
    return f"connection failed ({exc.__cause__ or exc})"


def never_sent(exc: BaseException) -> bool:
    """Whether a failed request never reached the endpoint: its connection was not opened (refused, an
    unknown host, a failed TLS handshake: an aiohttp ``ClientConnectorError`` or its cause), read from the
    exception's causes. A timeout or a reset connection may have reached it: ``False``."""
    seen: BaseException | None = exc
    for _ in range(20):  # a chain of causes, never a cycle
        if seen is None:
            return False
        if isinstance(seen, (ConnectionRefusedError, socket.gaierror)) or \
                isinstance(getattr(seen, "os_error", None), OSError):  # aiohttp's ClientConnectorError
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _error_text(body: Any, message: str | None) -> str:
    """The provider's error message in an error reply's ``body`` (``{"error": {"message"}}``), else ``message``."""
    body = body if isinstance(body, dict) else {}
    error = body.get("error", body) if isinstance(body.get("error", body), dict) else {}
    return str(error.get("message") or message or "")


def _get_model(url: str, api_key: str, timeout: float) -> tuple[int, str]:
    """``GET url`` (``.../models/{model}``) with the standard library: its HTTP status and,
    for an error, the provider's message. Connection failures raise (``OSError``)."""
    import urllib.error
    import urllib.request

    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {api_key}", "Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            return reply.status, ""
    except urllib.error.HTTPError as exc:
        with exc:
            text = exc.read().decode("utf-8", "replace")
        try:
            return exc.code, _error_text(json.loads(text), text)
        except ValueError:
            return exc.code, text
    except urllib.error.URLError as exc:  # refused, unknown host, TLS: the cause is its reason
        raise exc.reason if isinstance(exc.reason, OSError) else exc from None


async def check_endpoint(connect: Callable[[], openai.AsyncOpenAI], model: str | None, base_url: str | None,
                         api_key: str, timeout: float, redact=lambda text: text) -> dict[str, Any]:
    """Check reachability, the key and the model name with at most three cheap requests
    (``model`` ``None``: reachability and the key only, with ``GET /models``).

    The first, ``GET /models/{model}``, is sent with the standard library: when it settles
    the check (the model answers, or the key or the connection is refused), the ``openai``
    client (``connect()`` makes it; slow to import) is not needed, so a run the
    judgement cache answers in full never imports it. Otherwise the check goes on with it.

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
    where = public_url(base_url) or "https://api.openai.com/v1"
    report: dict[str, Any] = {"base_url": where, "model": model, "status": "ok", "requests": 0, "by": None,
                              "note": None}
    listed: list[str] | None = None

    def refused(status: int, text: str) -> EndpointError:
        return EndpointError(f"the judge endpoint {where} refused the API key (HTTP {status}: {redact(text)}); "
                             "check OPENAI_API_KEY")

    def unreachable(exc: BaseException) -> EndpointError:
        cause = connection_cause(exc) or f"no answer within {timeout:g} s (--timeout)"
        return EndpointError(f"the judge endpoint {where} cannot be reached: {redact(cause)}; check --base-url / "
                             "OPENAI_BASE_URL")

    first = None
    if model is not None:
        report["requests"] += 1
        try:
            first = await asyncio.to_thread(_get_model, f"{(base_url or where).rstrip('/')}/models/{model}", api_key,
                                            timeout)
        except OSError as exc:
            raise unreachable(exc) from None
        if 200 <= first[0] < 300:
            report["by"] = "GET /models/{model}"
            return report
        if first[0] == 401:
            raise refused(*first)
        if first[0] == 403:  # a proxy may refuse the standard library's requests only: the client asks again
            first = None
        else:
            report["note"] = f"GET /models/{{model}}: HTTP {first[0]}"
    import openai  # imported when a request is made: its import is slow
    client = connect()

    def fail(exc: BaseException) -> EndpointError:
        if isinstance(exc, openai.APIStatusError):
            if exc.status_code in (401, 403):
                return refused(exc.status_code, _error_text(exc.body, exc.message))
            offered = f"; it offers: {', '.join(sorted(listed)[:20])}" if listed else ""
            return EndpointError(f"the judge endpoint {where} does not know the model {model!r} (HTTP "
                                 f"{exc.status_code}: {redact(_error_text(exc.body, exc.message))}){offered}; "
                                 "check --model / OPENAI_MODEL")
        return unreachable(exc)

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
    if first is None:
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
    message = _error_text(reply.body, reply.message).lower()
    if reply.status_code in (405, 501):  # a web server that is not an OpenAI-compatible endpoint (wrong port)
        raise EndpointError(f"the judge endpoint {where} does not serve chat completions (HTTP {reply.status_code} "
                            "on every OpenAI route); is --base-url / OPENAI_BASE_URL an OpenAI-compatible "
                            "endpoint, with its /v1?")
    if reply.status_code == 404 or (reply.status_code == 400 and "model" in message
                                    and any(marker in message for marker in _UNKNOWN_MODEL)):
        raise fail(reply)
    report["status"] = "inconclusive"
    return report
