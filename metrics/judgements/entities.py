"""``entities``: the named entities of a text (ContextEntityRecall).

People, places, organisations, works, events, dates and numbers. Offline: runs of
capitalised words and numbers of English text; nothing for Chinese, Japanese or Korean
text, which needs a word segmenter or an LLM (``entities`` is then ``None``).
"""
from __future__ import annotations

from rag_eval.metrics.judgements.base import Judgement, Model
from rag_eval.metrics.judges.prompts import NonEmptyText, Reply, Request
from rag_eval.metrics.text import has_cjk, names, numbers


class Text(Model):
    """The text to read."""

    text: str


class Entities(Model):
    """The entities found, or ``None`` when this judge cannot extract them from this text."""

    entities: list[str] | None


class EntitiesReply(Reply):
    """The reply: the entities, each written as in the text."""

    entities: list[NonEmptyText]


def request(text: str) -> Request:
    """ContextEntityRecall: the named entities of a text."""
    prompt = (f"Text:\n{text}\n\nList the distinct named entities in the text (people, places, organisations, "
              "works, events, dates, numbers with their units), each written as in the text.")
    schema = {"type": "object", "properties": {"entities": {"type": "array", "items": {"type": "string"}}},
              "required": ["entities"], "additionalProperties": False}
    return Request("entities", prompt, schema, EntitiesReply, lambda reply: {"entities": list(reply.entities)})


class EntityExtraction(Judgement[Text, Entities]):
    """The named entities of a text (see the module docstring)."""

    kind = "entities"
    Input, Output = Text, Entities

    async def llm(self, judge, inputs: Text) -> Entities:
        """One request."""
        answer = await judge.ask_request(self.version, request(inputs.text), {"text": inputs.text})
        return self.verdict(entities=answer["entities"])

    async def offline(self, judge, inputs: Text) -> Entities:
        """Names (runs of capitalised words) and numbers of English text; ``None`` for CJK text."""
        if has_cjk(inputs.text):
            return self.verdict(entities=None)
        return self.verdict(entities=sorted(names(inputs.text) | numbers(inputs.text)))


entities = EntityExtraction()
