"""What a cached answer of each kind must look like: the one check of a value read from the
judgement cache (``rag_eval.metrics.judges.cache.JudgementCache``: a value failing it is a miss,
asked again and overwritten) and of a spilled answer folded into it (``rag_eval.metrics.judges.spill``:
a line failing it is skipped and named).

A judgement keeps what its request's ``read`` made of a valid reply (``rag_eval.metrics.judges.prompts.Request``),
always a JSON object: :data:`FIELDS` gives, for each kind (or prefix of kinds), the fields it has
and what each holds. An embedding is a non-empty list of numbers. No value holds a number that is
not finite (``1e999`` reads as infinity). A kind not listed (a newer judgement) must be an object.
"""
from __future__ import annotations

import math
from typing import Any

def _ints(allowed: range):
    return lambda v: isinstance(v, list) and all(type(i) is int and i in allowed for i in v)


#: What each field of a kept judgement holds: a check of the value and its description (the values a
#: valid reply allows: verdicts and flags 0 or 1, relevance ratings 0 to 2, Likert scores 1 to 5).
_HOLDS = {
    "text": (lambda v: isinstance(v, str), "a string"),
    "score": (lambda v: type(v) is int and 1 <= v <= 5, "an integer from 1 to 5"),
    "rating": (lambda v: type(v) is int and 0 <= v <= 2, "an integer from 0 to 2"),
    "flag": (lambda v: isinstance(v, bool), "true or false"),
    "object": (lambda v: isinstance(v, dict), "an object"),
    "number": (lambda v: type(v) in (int, float), "a number"),
    "texts": (lambda v: isinstance(v, list) and all(isinstance(i, str) for i in v), "a list of strings"),
    "flags": (_ints(range(2)), "a list of 0s and 1s"),
    "ratings": (_ints(range(3)), "a list of integers from 0 to 2"),
    "rows": (lambda v: isinstance(v, list) and all(_ints(range(2))(i) for i in v), "a list of lists of 0s and 1s"),
}
#: The fields of a kept judgement, by kind; a key ending in ``_`` or ``.`` names the kinds it begins.
FIELDS: dict[str, dict[str, str]] = {
    "statement_support": {"verdicts": "flags", "reasons": "texts"},
    "context_relevance_": {"ratings": "ratings"},
    "whole_context_relevance_": {"rating": "rating"},
    "reference_attribution": {"attributed": "flags", "attribution_reasons": "texts", "useful": "flags",
                              "usefulness_reasons": "texts"},
    "context_support_matrix": {"matrix": "rows"},
    "statement_classification": {"supported": "flags", "covered": "flags"},
    "answer_questions": {"questions": "texts", "noncommittal": "flags"},
    "entities": {"entities": "texts"},
    "question_generation": {"user_input": "text", "reference": "text"},
    "question_critic": {"answerable": "flag", "standalone": "flag", "reason": "text"},
    "likert_": {"score": "score", "reason": "text"},
    "custom_": {"reason": "text"},
    "target.": {"value": "object", "latency": "number"},
}
#: Fields of one kind that hold one item per statement (or per question): their lengths are equal.
PAIRED = (("verdicts", "reasons"), ("attributed", "attribution_reasons"), ("useful", "usefulness_reasons"),
          ("questions", "noncommittal"))
#: Nesting a kept answer never reaches (a matrix is two lists deep inside its object).
DEPTH = 8


def _finite(value: Any, depth: int = 0) -> bool:
    """No number that is not finite, and no nesting deeper than :data:`DEPTH` (checked without recursing past it)."""
    if depth > DEPTH:
        return False
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(v, depth + 1) for v in value.values())
    if isinstance(value, list):
        return all(_finite(v, depth + 1) for v in value)
    return True


def _fields(kind: str) -> dict[str, str]:
    if kind in FIELDS:
        return FIELDS[kind]
    return next((fields for name, fields in FIELDS.items() if name[-1] in "_." and kind.startswith(name)), {})


def kept_problem(kind: str, value: Any) -> str | None:
    """Why ``value`` (decoded JSON) is not an answer of ``kind`` as the judge keeps it (see the
    module's notes), e.g. ``"not an object with verdicts, reasons"`` or ``"verdicts: not a list of
    integers"``; ``None`` when it is one. Never raises."""
    if not _finite(value):
        return f"a number that is not finite, or nested deeper than {DEPTH} levels"
    if kind == "embedding":
        if isinstance(value, list) and value and all(type(i) in (int, float) for i in value):
            return None
        return "not a non-empty list of numbers"
    fields = _fields(kind)
    if not isinstance(value, dict) or not set(fields) <= set(value):
        return f"not an object with {', '.join(fields)}" if fields else "not an object"
    for name, holds in fields.items():
        check, described = _HOLDS[holds]
        if not check(value[name]):
            return f"{name}: not {described}"
    for first, second in PAIRED:
        if first in fields and second in fields and len(value[first]) != len(value[second]):
            return f"{first} and {second}: not of the same length"
    return None
