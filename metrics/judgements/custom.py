"""``custom_<name>``: the judgement of a custom metric defined in a config file (``rag_eval.metrics.core.custom``).

One judgement per definition, of one of four kinds (RAGAS ``AspectCritic``, rubric scores,
``@discrete_metric`` and ``@numeric_metric``; Azure's prompt-based evaluators):

* ``aspect_critic``: does the text meet the definition? ``verdict`` 0 or 1;
* ``rubric``: which of the five described levels fits? ``score`` 1..5;
* ``discrete``: which of the allowed labels fits? ``label``, one of them;
* ``numeric``: a number in the definition's range, ``value``.

Each reply carries its ``reason`` first. The prompt is the fields the definition reads
under their headings, then the user's own wording (any language), then one line saying
what to reply; the reply schema is strict (an ``enum`` of the labels, of 0/1, of 1..5), and
the validator refuses the same things for ``json_object`` endpoints: a label outside the
set, ``"1"``, ``true``, 2.5 on the rubric, a number outside the range. Refused output is
re-asked once with the problem, then the row is a ``judge_error`` (``rag_eval.metrics.judges.llm``).

The version is a digest of what is asked (kind, fields, headings, wording, levels,
labels, range), so editing the definition re-asks and the cache keeps no stale verdict.
The offline judge has no rule for a definition it has never seen: it raises
:class:`NeedsEndpoint`, which the metric reports as ``not_applicable`` (never a made-up
score).
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Field, create_model

from rag_eval.metrics.judgements.base import REASON, Judgement, Model, item_schema
from rag_eval.metrics.judges.prompts import Reason, Reply, Request, numbered

#: The fields a custom metric may read, with their default headings in the prompt.
HEADINGS = {"user_input": "Question", "response": "Response", "retrieved_contexts": "Contexts",
            "reference": "Reference"}


class NeedsEndpoint(Exception):
    """The offline judge cannot decide a custom judgement (it needs an LLM endpoint)."""


class CustomTexts(Model):
    """The texts a custom judgement may read, by their field names."""

    user_input: str | None = None
    response: str | None = None
    retrieved_contexts: list[str] | None = None
    reference: str | None = None


class CustomVerdict(Model):
    """The verdict: ``answer`` as the judge gave it (0/1, 1..5, a label or a number) and its reason."""

    answer: int | float | str
    reason: str


#: The reply field of each kind.
ANSWER = {"aspect_critic": "verdict", "rubric": "score", "discrete": "label", "numeric": "value"}


class CustomJudgement(Judgement[CustomTexts, CustomVerdict]):
    """The judgement of one custom definition (see the module docstring).

    Parameters
    ----------
    name : str
        The metric's name; the request kind is ``custom_<name>``.
    kind : {"aspect_critic", "rubric", "discrete", "numeric"}
    fields : tuple of str
        Fields shown to the judge, in order (keys of :data:`HEADINGS`).
    prompt : str
        The user's wording: the definition, the question or the instruction.
    headings : dict, optional
        ``{field: heading}`` replacing the English headings (a prompt in Chinese...).
    levels : dict, optional
        ``{1: description, ..., 5: description}`` (rubric).
    labels : tuple of str, optional
        The allowed labels (discrete).
    bounds : (float, float), optional
        The range of the value (numeric).
    """

    Input, Output = CustomTexts, CustomVerdict
    needs_endpoint = True  # no offline rule: :meth:`offline` raises NeedsEndpoint

    def __init__(self, name: str, kind: Literal["aspect_critic", "rubric", "discrete", "numeric"],
                 fields: tuple[str, ...], prompt: str, headings: Mapping[Any, str] | None = None,
                 levels: dict[int, str] | None = None, labels: tuple[str, ...] = (),
                 bounds: tuple[float, float] | None = None) -> None:
        self.kind = f"custom_{name}"
        self.requests = (self.kind,)
        self.shape, self.fields, self.prompt = kind, tuple(fields), prompt
        self.headings = {**HEADINGS, **(headings or {})}
        self.levels, self.labels, self.bounds = dict(levels or {}), tuple(labels), bounds
        asked = {"kind": kind, "fields": self.fields, "prompt": prompt, "headings": [self.headings[f] for f in fields],
                 "levels": {str(k): v for k, v in sorted(self.levels.items())}, "labels": self.labels,
                 "bounds": bounds}
        self.version = hashlib.sha256(json.dumps(asked, ensure_ascii=False, sort_keys=True).encode()).hexdigest()[:12]
        low, high = bounds or (None, None)
        answer = {"aspect_critic": (Literal[0, 1], ...), "rubric": (Literal[1, 2, 3, 4, 5], ...),
                  "discrete": (Literal[self.labels], ...) if self.labels else (str, ...),
                  "numeric": (Annotated[float, Field(ge=low, le=high, allow_inf_nan=False)], ...)}[kind]
        #: The model of the reply: its reason and its answer, in the allowed set.
        parts: dict[str, Any] = {"reason": (Reason, REASON), ANSWER[kind]: answer}
        self.reply = create_model("Reply", __base__=Reply, **parts)
        self.schema = item_schema(self.reply)
        if bounds is not None:
            self.schema["properties"]["value"].update(minimum=bounds[0], maximum=bounds[1])

    def reply_line(self) -> str:
        """What to reply, after the user's wording (the schema says it too)."""
        if self.shape == "aspect_critic":
            return "Reply verdict 1 if the text meets this criterion, 0 if it does not; give the reason first."
        if self.shape == "rubric":
            levels = "\n".join(f"{level}: {self.levels[level]}" for level in sorted(self.levels))
            return f"Levels:\n{levels}\n\nReply the score (1-5) of the level that fits best; give the reason first."
        if self.shape == "discrete":
            return f"Reply exactly one label of: {', '.join(self.labels)}; give the reason first."
        if self.bounds is None:
            return "Reply the value, a number; give the reason first."
        low, high = self.bounds
        return f"Reply the value, a number from {low:g} to {high:g}; give the reason first."

    def request(self, texts: CustomTexts) -> Request:
        """The fields under their headings, the user's wording, the reply line; validated strictly."""
        parts = []
        for name in self.fields:
            value = getattr(texts, name)
            shown = numbered("C", value) if name == "retrieved_contexts" else value
            parts.append(f"{self.headings[name]}:\n{shown}")
        prompt = "\n\n".join([*parts, self.prompt.strip(), self.reply_line()])
        return Request(self.kind, prompt, self.schema, self.reply, self.reply.model_dump)

    async def llm(self, judge, inputs: CustomTexts) -> CustomVerdict:
        """One request, cached under the fields it reads."""
        shown = {name: getattr(inputs, name) for name in self.fields}
        answer = await judge.ask_request(self.version, self.request(inputs), shown)
        return self.verdict(answer=answer[ANSWER[self.shape]], reason=answer["reason"])

    async def offline(self, judge, inputs: CustomTexts) -> CustomVerdict:
        """No rule: a custom definition needs an LLM endpoint (:class:`NeedsEndpoint`)."""
        raise NeedsEndpoint(f"{self.kind[len('custom_'):]} is a custom {self.shape} metric: it needs an LLM judge "
                            "endpoint (set OPENAI_BASE_URL or pass --base-url); the offline judge has no rule for it")
