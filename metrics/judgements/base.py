"""What a judgement is: typed input and verdict, the LLM prompt and schema, a version and the offline rule.

A judgement is one module of this package (RAGAS keeps a metric's prompt and typed I/O
beside it, ``ragas/metrics/collections/<metric>/util.py``). Each module defines a
:class:`Judgement` subclass and one instance of it, which metrics list in their
``judgements`` and hand to :meth:`rag_eval.metrics.judges.base.Judge.ask`:

* ``Input`` and ``Output``: pydantic models of what is judged and of the verdict;
* ``version``: bumped whenever the prompt, the schema or the offline rule changes (part of
  the LLM cache key and of the metric assets' code version);
* :meth:`Judgement.llm`: the request(s) sent to an OpenAI-compatible judge, with prompts
  and JSON schemas derived from the reply-item models (:func:`item_schema`);
* :meth:`Judgement.offline`: the rule the offline judge applies to its evidence.

A judge never computes a metric's score: it returns the verdict, the metric does the
arithmetic (dingo's faithfulness trusts the score its LLM computes).
"""
from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rag_eval.metrics.judges.base import JudgeError

if TYPE_CHECKING:
    from rag_eval.metrics.judges.llm import LLMJudge
    from rag_eval.metrics.judges.offline import OfflineJudge

I = TypeVar("I", bound=BaseModel)
O = TypeVar("O", bound=BaseModel)


class Model(BaseModel):
    """Base of judgement inputs and verdicts: frozen, strict (``"5"`` or ``2.5`` is no Likert score),
    no unknown fields."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, arbitrary_types_allowed=True)


#: The reason field of a reply item: "one short sentence" (``prompts.Reason``: a reply without one is kept).
REASON = Field("", description="one short sentence")


@functools.cache  # built once per model, not once per request (pydantic's schema is slow)
def item_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The strict JSON schema of one reply item, derived from its pydantic model: every field
    required, no other field, each as ``type`` / ``enum`` / ``items`` / ``description``
    (one shared dict per model: callers embed it, never change it)."""
    properties = {}
    for name, prop in model.model_json_schema()["properties"].items():
        properties[name] = {key: prop[key] for key in ("type", "enum", "items", "description") if key in prop}
        if "items" in properties[name]:
            properties[name]["items"] = {k: v for k, v in prop["items"].items() if k != "title"}
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


class Judgement(ABC, Generic[I, O]):
    """One kind of judgement (see the module docstring).

    Attributes
    ----------
    kind : str
        Its name (``statement_support``...), as metrics, caches and summaries spell it.
    version : str
        Bumped whenever its prompt, schema or offline rule changes.
    requests : tuple of str
        The request kinds its LLM side sends (``context_relevance`` sends two differently
        worded ones); each is cached under ``version``. Defaults to ``(kind,)``.
    Input, Output : pydantic models
        What is judged and the verdict.
    needs_endpoint : bool
        Whether the offline judge has no rule for it (a custom definition): only an LLM judge decides it.
    """

    kind: str
    version: str = "1"
    requests: tuple[str, ...] = ()
    needs_endpoint: bool = False
    Input: ClassVar[type[BaseModel]]
    Output: ClassVar[type[BaseModel]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "kind" in cls.__dict__ and not cls.__dict__.get("requests"):
            cls.requests = (cls.kind,)

    def __repr__(self) -> str:
        return f"<judgement {self.kind} v{self.version}>"

    @property
    def tag(self) -> str:
        """``kind:version``, as the metric assets' code version lists it."""
        return f"{self.kind}:{self.version}"

    def verdict(self, **values: Any) -> O:
        """The ``Output`` model of ``values``; a value of the wrong type or range (e.g. a
        scripted or LLM rating of 3 on a 0-2 scale) is a :class:`JudgeError`."""
        try:
            return cast(O, self.Output(**values))
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}, got {e['input']!r}" for e in exc.errors())
            raise JudgeError(f"{self.kind}: invalid verdict: {problems}") from None

    @abstractmethod
    async def llm(self, judge: LLMJudge, inputs: I) -> O:
        """The verdict from an OpenAI-compatible judge (``LLMJudge.ask_request``, its
        batches of contexts and embeddings)."""

    @abstractmethod
    async def offline(self, judge: OfflineJudge, inputs: I) -> O:
        """The verdict of the offline judge's rule over its evidence (embeddings, passages)."""

    def offline_texts(self, judge: OfflineJudge, inputs: I) -> list[str]:
        """The texts :meth:`offline` will embed for ``inputs``, as far as known before it runs
        (``OfflineJudge.prefetch`` encodes a window of rows' at once); none by default."""
        return []
