"""Prompts, JSON schemas and strict validation of the LLM judge's answers.

Every judgement keys its items by id (``S1``, ``C1``, ``R1``...) and the schema
requires exactly those keys, so a provider that honours ``json_schema`` cannot drop or
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


#: Bumped whenever the wording or the schema of a kind changes (part of the cache key).
PROMPT_VERSIONS = {"statement_support": "1", "answer_questions": "1", "context_relevance_a": "1",
                   "context_relevance_b": "1", "reference_attribution": "1", "context_support_matrix": "1",
                   "entities": "1", "whole_context_relevance_a": "1", "whole_context_relevance_b": "1",
                   "statement_classification": "1", "likert_groundedness": "1", "likert_relevance": "1",
                   "likert_retrieval": "1", "likert_response_completeness": "1"}


def numbered(prefix: str, texts: list[str]) -> str:
    """``[S1] first\\n[S2] second`` ..."""
    return "\n".join(f"[{prefix}{i}] {text}" for i, text in enumerate(texts, start=1))


def ids(prefix: str, count: int) -> list[str]:
    """``["S1", ..., "S<count>"]``."""
    return [f"{prefix}{i}" for i in range(1, count + 1)]


def keyed_schema(keys: list[str], item: dict[str, Any]) -> dict[str, Any]:
    """An object with exactly ``keys``, each an instance of ``item``."""
    return {"type": "object", "properties": {k: item for k in keys}, "required": list(keys),
            "additionalProperties": False}


def _item(**fields: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": fields, "required": list(fields), "additionalProperties": False}


_REASON = {"type": "string", "description": "one short sentence"}


def _binary(description: str) -> dict[str, Any]:
    return {"type": "integer", "enum": [0, 1], "description": description}


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
    <key>", ``question`` → "What does <key> ask?".
    """
    answer = {}
    for name, sub in schema["properties"].items():
        kind = sub.get("type")
        if kind == "object" or "properties" in sub:
            answer[name] = example_answer(sub, decide, name)
        elif kind == "string":
            answer[name] = {"reason": f"scripted reason for {parent}" if parent else "scripted reason",
                            "question": f"What does {parent} ask?"}.get(name, f"scripted {name}")
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


def _reasons(data: dict[str, Any], keys: list[str]) -> dict[str, str]:
    return {k: str(data[k].get("reason", "")) if isinstance(data.get(k), dict) else "" for k in keys}


def statement_support(statements: list[str], contexts: list[str]) -> Request:
    """Faithfulness: one verdict per response statement against all contexts."""
    keys = ids("S", len(statements))
    prompt = (f"Contexts:\n{numbered('C', contexts)}\n\nStatements:\n{numbered('S', statements)}\n\n"
              "For every statement id, give verdict 1 if the statement can be directly inferred from the contexts, "
              "and 0 if it cannot (not stated there, or contradicted). Give the reason first.")
    schema = keyed_schema(keys, _item(reason=_REASON, verdict=_binary("1 = inferable from the contexts")))

    def validate(data: Any) -> dict[str, Any]:
        return {"verdicts": [check_keyed(data, keys, "verdict", (0, 1))[k] for k in keys],
                "reasons": list(_reasons(data, keys).values())}

    return Request("statement_support", prompt, schema, validate)


def answer_questions(response: str, strictness: int) -> Request:
    """AnswerRelevancy: ``strictness`` questions the response answers, with a noncommittal flag."""
    keys = ids("Q", strictness)
    prompt = (f"Response:\n{response}\n\nWrite {strictness} different questions that this response answers, as a "
              "user would ask them, in the language of the response (keys Q1..). For each, set noncommittal to 1 if "
              "the response is evasive, vague or declines to answer (for example \"I don't know\" or \"it depends\"), "
              "else 0.")
    schema = keyed_schema(keys, _item(question={"type": "string"},
                                      noncommittal=_binary("1 = the response is evasive or vague")))

    def validate(data: Any) -> dict[str, Any]:
        flags = check_keyed(data, keys, "noncommittal", (0, 1))
        questions = [data[k].get("question") for k in keys]
        empty = [k for k, q in zip(keys, questions) if not isinstance(q, str) or not q.strip()]
        if empty:
            raise OutputError(f"empty question for {', '.join(empty)}")
        return {"questions": questions, "noncommittal": [flags[k] for k in keys]}

    return Request("answer_questions", prompt, schema, validate)


_RELEVANCE_PROMPTS = {
    "context_relevance_a": ("Question:\n{question}\n\nContexts:\n{contexts}\n\nRate how relevant each context is to "
                            "answering the question: 0 = no relevant information, 1 = partially relevant, 2 = contains "
                            "information that answers the question."),
    "context_relevance_b": ("Below are passages a search system returned for a user's question. For each passage, "
                            "decide how much it helps to answer the question: 2 if it gives the answer or its key "
                            "facts, 1 if it is on topic but only partly useful, 0 if it is unrelated or useless.\n\n"
                            "User question: {question}\n\nPassages:\n{contexts}"),
}


def context_relevance(judge: str, question: str, contexts: list[str]) -> Request:
    """ContextRelevancy: one of the two differently worded judges, a rating 0/1/2 per context."""
    keys = ids("C", len(contexts))
    prompt = _RELEVANCE_PROMPTS[judge].format(question=question, contexts=numbered("C", contexts))
    schema = keyed_schema(keys, _item(rating={"type": "integer", "enum": [0, 1, 2]}))

    def validate(data: Any) -> dict[str, Any]:
        ratings = check_keyed(data, keys, "rating", (0, 1, 2))
        return {"ratings": [ratings[k] for k in keys]}

    return Request(judge, prompt, schema, validate)


def reference_attribution(question: str, statements: list[str], contexts: list[str]) -> Request:
    """ContextRecall and ContextPrecision in one request: attribution of each reference
    statement to the contexts, and usefulness of each context for the reference."""
    statement_keys, context_keys = ids("R", len(statements)), ids("C", len(contexts))
    prompt = (f"Question:\n{question}\n\nAnswer, as numbered statements:\n{numbered('R', statements)}\n\n"
              f"Contexts, in retrieval order:\n{numbered('C', contexts)}\n\nTwo tasks. (1) For each answer "
              "statement, attributed = 1 if it is stated in or directly implied by the contexts, else 0. (2) For "
              "each context, useful = 1 if it was useful in arriving at this answer to the question, else 0.")
    schema = {"type": "object", "required": ["statements", "contexts"], "additionalProperties": False,
              "properties": {
                  "statements": keyed_schema(statement_keys, _item(reason=_REASON, attributed=_binary("attributable"))),
                  "contexts": keyed_schema(context_keys, _item(reason=_REASON, useful=_binary("useful")))}}

    def validate(data: Any) -> dict[str, Any]:
        if not isinstance(data, dict):
            raise OutputError("the reply must be an object with 'statements' and 'contexts'")
        attributed = check_keyed(data.get("statements"), statement_keys, "attributed", (0, 1), "statements")
        useful = check_keyed(data.get("contexts"), context_keys, "useful", (0, 1), "contexts")
        return {"attributed": [attributed[k] for k in statement_keys],
                "attribution_reasons": list(_reasons(data["statements"], statement_keys).values()),
                "useful": [useful[k] for k in context_keys],
                "usefulness_reasons": list(_reasons(data["contexts"], context_keys).values())}

    return Request("reference_attribution", prompt, schema, validate)


def context_support_matrix(statements: list[str], contexts: list[str]) -> Request:
    """NoiseSensitivity: for each context on its own, which statements it supports."""
    statement_keys, context_keys = ids("S", len(statements)), ids("C", len(contexts))
    prompt = (f"Contexts:\n{numbered('C', contexts)}\n\nStatements:\n{numbered('S', statements)}\n\nFor each "
              "context on its own, and each statement, give 1 if that context alone supports the statement (states "
              "it or directly implies it), else 0.")
    cell = {"type": "integer", "enum": [0, 1]}
    row = {"type": "object", "properties": {k: cell for k in statement_keys}, "required": statement_keys,
           "additionalProperties": False}
    schema = {"type": "object", "properties": {k: row for k in context_keys}, "required": context_keys,
              "additionalProperties": False}

    def validate(data: Any) -> dict[str, Any]:
        if not isinstance(data, dict) or sorted(data) != sorted(context_keys):
            raise OutputError(f"the reply must be an object keyed by {', '.join(context_keys)}")
        columns = []
        for key in context_keys:
            values = data[key] if isinstance(data[key], dict) else None
            if values is None or sorted(values) != sorted(statement_keys) or \
                    any(type(values[s]) is not int or values[s] not in (0, 1) for s in statement_keys):
                raise OutputError(f"{key} must map each of {', '.join(statement_keys)} to 0 or 1")
            columns.append([values[s] for s in statement_keys])
        return {"matrix": [[column[i] for column in columns] for i in range(len(statements))]}

    return Request("context_support_matrix", prompt, schema, validate)


def entities(text: str) -> Request:
    """ContextEntityRecall: the named entities of a text."""
    prompt = (f"Text:\n{text}\n\nList the distinct named entities in the text (people, places, organisations, "
              "works, events, dates, numbers with their units), each written as in the text.")
    schema = {"type": "object", "properties": {"entities": {"type": "array", "items": {"type": "string"}}},
              "required": ["entities"], "additionalProperties": False}

    def validate(data: Any) -> dict[str, Any]:
        found = data.get("entities") if isinstance(data, dict) else None
        if not isinstance(found, list) or not all(isinstance(e, str) and e.strip() for e in found):
            raise OutputError("'entities' must be a list of non-empty strings")
        return {"entities": found}

    return Request("entities", prompt, schema, validate)


def whole_context_relevance(judge: str, question: str, contexts: list[str]) -> Request:
    """NVIDIA ContextRelevance: one of two differently worded judges, one rating of all contexts."""
    wording = {
        "whole_context_relevance_a": "Rate how relevant the context is to answering the question: 0 = no relevant "
                                     "information, 1 = partially relevant, 2 = contains what answers the question.",
        "whole_context_relevance_b": "Does this retrieved text help to answer the user's question? Give 2 if it holds "
                                     "the answer, 1 if it helps only in part, 0 if it does not help at all.",
    }[judge]
    prompt = f"Question:\n{question}\n\nContext:\n{chr(10).join(contexts)}\n\n{wording}"
    schema = {"type": "object", "properties": {"rating": {"type": "integer", "enum": [0, 1, 2]}},
              "required": ["rating"], "additionalProperties": False}

    def validate(data: Any) -> dict[str, Any]:
        rating = data.get("rating") if isinstance(data, dict) else None
        if type(rating) is not int or rating not in (0, 1, 2):
            raise OutputError(f"rating must be one of [0, 1, 2], got {rating!r}")
        return {"rating": rating}

    return Request(judge, prompt, schema, validate)


def statement_classification(response_statements: list[str], reference_statements: list[str]) -> Request:
    """AnswerCorrectness and FactualCorrectness: true positives, false positives, false negatives."""
    response_keys, reference_keys = ids("S", len(response_statements)), ids("R", len(reference_statements))
    prompt = (f"Response statements:\n{numbered('S', response_statements)}\n\nReference statements:\n"
              f"{numbered('R', reference_statements)}\n\n(1) For each response statement, supported = 1 if the "
              "reference statements support it, else 0. (2) For each reference statement, covered = 1 if the "
              "response statements state it or directly imply it, else 0.")
    schema = {"type": "object", "required": ["response", "reference"], "additionalProperties": False,
              "properties": {"response": keyed_schema(response_keys, _item(reason=_REASON, supported=_binary("1/0"))),
                             "reference": keyed_schema(reference_keys, _item(reason=_REASON, covered=_binary("1/0")))}}

    def validate(data: Any) -> dict[str, Any]:
        if not isinstance(data, dict):
            raise OutputError("the reply must be an object with 'response' and 'reference'")
        supported = check_keyed(data.get("response"), response_keys, "supported", (0, 1), "response")
        covered = check_keyed(data.get("reference"), reference_keys, "covered", (0, 1), "reference")
        return {"supported": [supported[k] for k in response_keys], "covered": [covered[k] for k in reference_keys]}

    return Request("statement_classification", prompt, schema, validate)


_LIKERT_RUBRICS = {
    "groundedness": ("Score how well the response is grounded in the context: 1 = unrelated to the context; 2 = "
                     "tries to answer but includes unsupported or wrong information; 3 = accurate but vague; 4 = "
                     "correct but incomplete; 5 = fully grounded and complete.", ("query", "context", "response")),
    "relevance": ("Score how well the response addresses the query: 1 = irrelevant; 2 = touches the topic but misses "
                  "the question; 3 = partly answers; 4 = answers with minor gaps; 5 = fully and directly answers.",
                  ("query", "response")),
    "retrieval": ("Score the retrieved context chunks, in their order, for the query: 1 = irrelevant; 2 = partly "
                  "relevant, the best chunks missing or at the bottom; 3 = relevant but the most pertinent chunks at "
                  "the bottom; 4 = fully addresses the query, the best chunk in the middle; 5 = fully addresses the "
                  "query, the best chunks at the top. Do not judge factual correctness.", ("query", "context")),
    "response_completeness": ("Score how much of the ground truth's necessary information the response contains: "
                              "1 = none; 2 = a small part; 3 = about half; 4 = most; 5 = all.",
                              ("ground_truth", "response")),
}


def likert(criterion: str, texts: dict[str, Any]) -> Request:
    """Azure AI Evaluation's Likert judges, scored 1..5 (nothing else is accepted)."""
    rubric, fields = _LIKERT_RUBRICS[criterion]
    parts = []
    for name in fields:
        if name == "context":
            parts.append(f"Context:\n{numbered('C', texts['contexts'])}")
        elif texts.get(name) is not None:
            parts.append(f"{name.replace('_', ' ').capitalize()}:\n{texts[name]}")
    prompt = "\n\n".join(parts) + f"\n\n{rubric} Give the reason first."
    schema = {"type": "object", "properties": {"reason": _REASON, "score": {"type": "integer", "enum": [1, 2, 3, 4, 5]}},
              "required": ["reason", "score"], "additionalProperties": False}

    def validate(data: Any) -> dict[str, Any]:
        score = data.get("score") if isinstance(data, dict) else None
        if type(score) is not int or not 1 <= score <= 5:
            raise OutputError(f"score must be an integer from 1 to 5, got {score!r}")
        return {"score": score, "reason": str(data.get("reason", ""))}

    return Request(f"likert_{criterion}", prompt, schema, validate)
