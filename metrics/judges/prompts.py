"""What every LLM judgement's prompt shares: the system message, keyed schemas and strict validation.

The prompts themselves live with their judgements (``metrics.judgements``). Every
judgement keys its items by id (``S1``, ``C1``, ``R1``...) and the schema requires
exactly those keys, so a provider that honours ``json_schema`` cannot drop or
add a verdict; the validator enforces the same for ``json_object`` endpoints. Prompts
are our own wording of the judgements that RAGAS 0.4.3, dingo 2.5 and Azure AI
Evaluation describe (see ``shared/docs/metric-spec.md``).
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

SYSTEM = ("You are a careful, impartial evaluator of retrieval-augmented generation. Judge only from the text "
          "you are given, never from outside knowledge. Write every reason and every question in the language of "
          "the input. Answer with one JSON object that follows the requested schema and nothing else.")


class OutputError(ValueError):
    """The judge's reply is not valid JSON of the requested shape (the message says why)."""


@dataclass(frozen=True)
class Request:
    """One judgement to ask: its kind, prompt text, schema and validator."""

    kind: str
    prompt: str
    schema: dict[str, Any]
    validate: Callable[[Any], dict[str, Any]]


def numbered(prefix: str, texts: list[str]) -> str:
    """``[S1] first\\n[S2] second`` ..."""
    return "\n".join(f"[{prefix}{i}] {text}" for i, text in enumerate(texts, start=1))


def ids(prefix: str, count: int) -> list[str]:
    """``["S1", ..., "S<count>"]``."""
    return [f"{prefix}{i}" for i in range(1, count + 1)]


def keyed_schema(keys: list[str], item: dict[str, Any]) -> dict[str, Any]:
    """An object with exactly ``keys``, each an instance of ``item``."""
    return {"type": "object", "properties": dict.fromkeys(keys, item), "required": list(keys),
            "additionalProperties": False}


def example_answer(schema: dict[str, Any], decide: Callable[[str, str | None], Any] =
                   lambda field, key: int(field != "noncommittal"), parent: str | None = None) -> Any:
    """A valid instance of any of the judge's schemas, built recursively from the schema
    (the dry run's stand-in for a reply, and the test server's scripted replies).

    ``decide(field, key)`` picks every integer (and list) value: ``field`` is the property
    being filled and ``key`` the property of the object holding it, e.g.
    ``("verdict", "S2")`` for a keyed statement verdict, ``("covered", "R1")`` for
    statement classification, ``("S3", "C1")`` for cell (statement S3, context C1) of the
    context support matrix, ``("rating", None)`` / ``("score", None)`` for top-level
    ratings and Likert scores; by default every value is 1 and ``noncommittal`` 0. For an
    array field (``("entities", None)``) a list returned by ``decide`` is used as is,
    anything else gives ``[]``. Strings are filled in: ``reason`` → "scripted reason for
    <key>", ``question`` → "What does <key> ask?"; a string with an ``enum`` takes ``decide``'s
    value when it is one of them, else the first; a number with ``minimum`` and ``maximum``
    is ``decide``'s value brought into that range.
    """
    answer = {}
    for name, sub in schema["properties"].items():
        kind = sub.get("type")
        if kind == "object" or "properties" in sub:
            answer[name] = example_answer(sub, decide, name)
        elif kind == "string" and "enum" in sub:
            value = decide(name, parent)
            answer[name] = value if value in sub["enum"] else sub["enum"][0]
        elif kind == "string":
            answer[name] = {"reason": f"scripted reason for {parent}" if parent else "scripted reason",
                            "question": f"What does {parent} ask?"}.get(name, f"scripted {name}")
        elif kind == "number" and "minimum" in sub:
            answer[name] = min(max(decide(name, parent), sub["minimum"]), sub["maximum"])
        elif kind == "array":
            value = decide(name, parent)
            answer[name] = value if isinstance(value, list) else []
        else:
            answer[name] = decide(name, parent)
    return answer


def extract_json(text: str) -> Any:
    """The first JSON object in ``text``, tolerating code fences and prose around it.

    Raises
    ------
    OutputError
        When no JSON object can be decoded (regression case BR-10).
    """
    text = (text or "").strip()
    fenced = re.search(r"```(?:json)?\s*(.*?)```", text, re.DOTALL)
    candidates = [fenced.group(1)] if fenced else []
    candidates.append(text)
    decoder = json.JSONDecoder()
    for candidate in candidates:
        for match in re.finditer(r"\{", candidate):
            try:
                value, _ = decoder.raw_decode(candidate[match.start():])
            except json.JSONDecodeError:
                continue
            if isinstance(value, dict):
                return value
    raise OutputError("the reply holds no JSON object")


def check_keyed(data: Any, keys: list[str], field: str, allowed: tuple[int, ...], where: str = "") -> dict[str, int]:
    """``{key: value of field}`` after checking one item per key and values in ``allowed``.

    Raises
    ------
    OutputError
        For a missing or extra key, a non-object item, or a value that is not one of
        ``allowed`` (strings such as ``"1"`` and booleans are refused, metric-spec fault 2).
    """
    if not isinstance(data, dict):
        raise OutputError(f"{where or 'the reply'} must be an object keyed by {', '.join(keys)}")
    problems = [f"missing {k}" for k in keys if k not in data]
    problems += [f"unexpected key {k}" for k in data if k not in keys]
    values: dict[str, int] = {}
    for key in keys:
        item = data.get(key)
        if key not in data:
            continue
        value = item.get(field) if isinstance(item, dict) else None
        if type(value) is not int or value not in allowed:
            problems.append(f"{key}.{field} must be one of {list(allowed)}, got {value!r}")
        else:
            values[key] = value
    if problems:
        raise OutputError(f"{where + ': ' if where else ''}{'; '.join(problems)}")
    return values


def reasons(data: dict[str, Any], keys: list[str]) -> dict[str, str]:
    """``{key: reason}`` of a keyed reply (an item without a reason gives "")."""
    return {k: str(data[k].get("reason", "")) if isinstance(data.get(k), dict) else "" for k in keys}
