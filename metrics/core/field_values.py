"""What one field's value must be: a record's value for a field of ``rag_eval.metrics.core.samples``
checked and normalised (:func:`normalise`), within the bounds that keep one sample's cost finite
(:data:`MAX_CHARS`, :data:`MAX_CONTEXTS`, :data:`MAX_DOCUMENTS`; longer input is malformed, not truncated).
"""
from __future__ import annotations

import json
import math
import numbers
import re
from typing import Any

import pandas as pd

_WORD = re.compile(r"[^\W_]")


def is_null(value: Any) -> bool:
    """Whether ``value`` is null: None, NaN (pandas' missing cell) and ``pd.NA`` are; lists never are."""
    if value is None or value is pd.NA:
        return True
    return isinstance(value, float) and math.isnan(value)


def _as_list(value: Any) -> Any:
    """Arrays from Parquet and JSON-encoded lists from CSV become Python lists."""
    if hasattr(value, "tolist") and not isinstance(value, str):
        value = value.tolist()
        return [v.tolist() if hasattr(v, "tolist") else v for v in value] if isinstance(value, list) else value
    if isinstance(value, str) and value.lstrip().startswith("["):
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            return value
        return parsed if isinstance(parsed, list) else value
    return value


def _text_or_list(value: Any) -> Any:
    """:func:`_as_list`, but a string that reads as a JSON list of other things than strings
    (``"[1]"``, a citation marker) stays the string it is."""
    found = _as_list(value)
    if isinstance(value, str) and isinstance(found, list) and not all(isinstance(v, str) for v in found):
        return value
    return found


#: Characters one text may hold.
MAX_CHARS = 100_000
#: Retrieved contexts one sample may hold.
MAX_CONTEXTS = 200


def _text_problem(text: str) -> str | None:
    if len(text) > MAX_CHARS:
        return f"longer than {MAX_CHARS} characters ({len(text)})"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "contains invalid Unicode (a lone surrogate)"
    return None


_DOCUMENT_FIELDS = {"retrieval_ground_truth": ("query_relevance_label", "an integer label"),
                    "retrieved_documents": ("relevance_score", "a number")}
#: Documents one ``retrieval_ground_truth`` or ``retrieved_documents`` may hold.
MAX_DOCUMENTS = 10_000


def _number(value: Any, whole: bool) -> int | float | None:
    """``value`` as an ``int`` (``whole``: an integer within ±2**53) or a finite ``float``; ``None``
    when it is neither (a boolean never is)."""
    if isinstance(value, bool):
        return None
    if whole:
        return int(value) if isinstance(value, numbers.Integral) and -(2**53) <= int(value) <= 2**53 else None
    try:  # an integer too large for a float is not a score
        return float(value) if isinstance(value, numbers.Real) and math.isfinite(value) else None
    except OverflowError:
        return None


def _documents(name: str, value: Any) -> tuple[Any, str | None]:
    """Validate a list of ``{"document_id", <label or score>}`` records."""
    key, kind = _DOCUMENT_FIELDS[name]
    value = _as_list(value)
    if not isinstance(value, list):
        return None, f"expected a list of objects, got {type(value).__name__}"
    if len(value) > MAX_DOCUMENTS:
        return None, f"more than {MAX_DOCUMENTS} documents ({len(value)})"
    documents = []
    for i, item in enumerate(value):
        if not isinstance(item, dict) or "document_id" not in item or is_null(item.get("document_id")):
            return None, f"item {i} has no document_id"
        number = _number(item.get(key), whole=name == "retrieval_ground_truth")
        if number is None:
            return None, f"item {i}: {key} must be {kind}, got {item.get(key)!r}"
        documents.append({"document_id": str(item["document_id"]), key: number})
    return documents, None


def normalise(name: str, value: Any) -> tuple[Any, str | None]:
    """``(value, problem)`` of the value a record gives the field ``name`` (one of
    ``rag_eval.metrics.core.samples.FIELDS``): the value as a sample holds it (a list from Parquet,
    a JSON list from CSV, a single context wrapped in a list, a list of references joined) and
    ``None``, or ``None`` and why it cannot be used (a wrong type, past a bound, no letter or
    digit in a question or reference). Never raises."""
    if name in _DOCUMENT_FIELDS:
        return _documents(name, value)
    if name == "retrieved_contexts":
        value = _text_or_list(value)
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list):
            return None, f"expected a list of strings, got {type(value).__name__}"
        bad = [i for i, item in enumerate(value) if not isinstance(item, str)]
        if bad:
            return None, f"item {bad[0]} is {type(value[bad[0]]).__name__}, expected a string"
        if len(value) > MAX_CONTEXTS:
            return None, f"more than {MAX_CONTEXTS} contexts ({len(value)})"
        problems = [f"item {i} {p}" for i, p in enumerate(map(_text_problem, value)) if p]
        return (None, problems[0]) if problems else (value, None)
    if name == "reference":
        value = _text_or_list(value)
        if isinstance(value, list):
            if not all(isinstance(item, str) for item in value):
                return None, "expected a string or a list of strings"
            value = "\n".join(value)
    if not isinstance(value, str):
        return None, f"expected a string, got {type(value).__name__}"
    if name in ("user_input", "reference") and not _WORD.search(value):
        return None, "empty: no letter or digit"
    problem = _text_problem(value)
    return (None, problem) if problem else (value, None)
