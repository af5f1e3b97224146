"""What every LLM judgement's prompt shares: the system message, keyed schemas and strict validation.

The prompts themselves live with their judgements (``rag_eval.metrics.judgements``). Every
judgement keys its items by id (``S1``, ``C1``, ``R1``...) and the schema requires
exactly those keys, so a provider that honours ``json_schema`` cannot drop or
add a verdict; the reply's pydantic model (:class:`Reply`, :func:`keyed`) enforces the same
for ``json_object`` endpoints (:func:`parse_reply`). Prompts are our own wording of the
judgements that RAGAS 0.4.3, dingo 2.5 and Azure AI Evaluation describe.
"""
from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, get_args, get_origin

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, ValidationError, ValidationInfo, create_model, field_validator
from pydantic_core import PydanticCustomError

SYSTEM = ("You are a careful, impartial evaluator of retrieval-augmented generation. Judge only from the text "
          "you are given, never from outside knowledge. Write every reason and every question in the language of "
          "the input. Answer with one JSON object that follows the requested schema and nothing else.")


class OutputError(ValueError):
    """The judge's reply is not valid JSON of the requested shape (the message says why)."""


class Reply(BaseModel):
    """Base of the models of the judge's replies: strict (``"1"``, ``1.0`` or ``true`` is no 0/1
    verdict; RAGAS's ContextPrecision counts a verdict of 2 as it comes), fields the schema does not ask for ignored."""

    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)

    @field_validator("*", mode="before")
    @classmethod
    def _integers_are_integers(cls, value: Any, info: ValidationInfo) -> Any:
        assert info.field_name is not None  # a validator of fields ("*") is always called for one
        choices = _choices(cls.model_fields[info.field_name].annotation)
        if choices and all(type(c) is int for c in choices) and type(value) is not int:
            raise PydanticCustomError("literal_error", "not an integer")  # Literal[0, 1] alone takes True and 1.0
        return value


class _Keyed(Reply):
    model_config = ConfigDict(extra="forbid")

    def __getitem__(self, key: str) -> Any:
        return getattr(self, key)


@functools.cache  # one model per set of keys and item
def keyed(keys: tuple[str, ...], item: Any) -> type[Reply]:
    """The model of an object with exactly ``keys`` (``reply["S1"]``), each an ``item`` (a
    :class:`Reply` model or a ``Literal``): the reply :func:`keyed_schema` describes."""
    fields: dict[str, Any] = dict.fromkeys(keys, (item, ...))
    return create_model("Keyed", __base__=_Keyed, **fields)


@functools.cache
def sections(*named: tuple[str, Any]) -> type[Reply]:
    """The model of an object with these ``(name, model)`` parts, e.g. two keyed replies."""
    fields: dict[str, Any] = {name: (model, ...) for name, model in named}
    return create_model("Sections", __base__=Reply, **fields)


def _not_blank(text: str) -> str:
    if not text.strip():
        raise PydanticCustomError("blank", "blank")
    return text


#: A string with something besides white space in it.
NonEmptyText = Annotated[str, AfterValidator(_not_blank)]
#: The reason of a verdict, whatever the judge wrote there (as text).
Reason = Annotated[str, BeforeValidator(str)]


def _choices(annotation: Any) -> tuple[Any, ...]:
    return get_args(annotation) if get_origin(annotation) is Literal else ()


def _expected(annotation: Any, metadata: list[Any]) -> str:
    """What a field of a reply model takes, in words: ``one of [0, 1]``, ``an integer from 1 to 5``..."""
    if get_origin(annotation) is Annotated:
        annotation, *more = get_args(annotation)
        metadata = [*metadata, *more]
    choices = _choices(annotation)
    if len(choices) > 3 and all(type(c) is int for c in choices) and \
            list(choices) == list(range(choices[0], choices[0] + len(choices))):
        return f"an integer from {choices[0]} to {choices[-1]}"
    if choices:
        return f"one of {list(choices)}"
    bounds = {type(m).__name__: m for m in metadata}
    if "Ge" in bounds and "Le" in bounds:
        return f"a number from {bounds['Ge'].ge:g} to {bounds['Le'].le:g}"
    if annotation is str:
        blank = any(getattr(m, "func", None) is _not_blank for m in metadata)
        return "a non-empty string" if blank else "a string"
    if get_origin(annotation) is list:
        return "a list"
    return f"a {getattr(annotation, '__name__', annotation)}"


def _problem(model: type[BaseModel], error: Mapping[str, Any]) -> str:
    """One validation error of ``model``: ``missing S2``, ``unexpected key S5``, ``S1.verdict must be
    one of [0, 1], got 2``, ``the reply must be an object with S1, S2, got [1]``."""
    where = ".".join(map(str, error["loc"]))
    if error["type"] == "missing":
        return f"missing {where}"
    if error["type"] == "extra_forbidden":
        return f"unexpected key {where}"
    annotation: Any = model
    metadata: list[Any] = []
    for part in error["loc"]:  # the type the error is about, through nested models and lists
        if isinstance(part, int):
            annotation, metadata = get_args(annotation)[0], []
        else:
            field = annotation.model_fields[part]
            annotation, metadata = field.annotation, field.metadata
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return f"{where or 'the reply'} must be an object with {', '.join(annotation.model_fields)}, " \
               f"got {error['input']!r}"
    return f"{where} must be {_expected(annotation, metadata)}, got {error['input']!r}"


def parse_reply(model: type[Reply], data: Any) -> Reply:
    """``data`` (the reply's JSON) as ``model``.

    Raises
    ------
    OutputError
        Saying, for each problem, which key or field and what it takes (``missing S2``,
        ``S1.verdict must be one of [0, 1], got '1'``).
    """
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise OutputError("; ".join(dict.fromkeys(_problem(model, e) for e in exc.errors()))) from None


@dataclass(frozen=True)
class Request:
    """One judgement to ask: its kind, prompt text and schema, the model of its reply and
    what the judgement keeps of a valid reply (``read``, a JSON-able dict: it is cached)."""

    kind: str
    prompt: str
    schema: dict[str, Any]
    reply: type[Reply]
    read: Callable[[Any], dict[str, Any]]

    def validate(self, data: Any) -> dict[str, Any]:
        """What is kept of the reply ``data`` (:func:`parse_reply`, then ``read``).

        Raises
        ------
        OutputError
            When ``data`` is not a valid reply (the judge re-asks once with the message).
        """
        return self.read(parse_reply(self.reply, data))


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
