"""``entities``: the named entities of a text (ContextEntityRecall).

People, places, organisations, works, events, dates and numbers. Offline: runs of
capitalised words and numbers of English text; nothing for Chinese, Japanese or Korean
text, which needs a word segmenter or an LLM (``entities`` is then ``None``).
"""
from __future__ import annotations

from metrics.judgements.base import Judgement, Model
from metrics.judges.prompts import OutputError, Request
from metrics.text import has_cjk, names, numbers


class Text(Model):
    """The text to read."""

    text: str


class Entities(Model):
    """The entities found, or ``None`` when this judge cannot extract them from this text."""

    entities: list[str] | None


def request(text: str) -> Request:
    """ContextEntityRecall: the named entities of a text."""
    prompt = (f"Text:\n{text}\n\nList the distinct named entities in the text (people, places, organisations, "
              "works, events, dates, numbers with their units), each written as in the text.")
    schema = {"type": "object", "properties": {"entities": {"type": "array", "items": {"type": "string"}}},
              "required": ["entities"], "additionalProperties": False}

    def validate(data):
        found = data.get("entities") if isinstance(data, dict) else None
        if not isinstance(found, list) or not all(isinstance(e, str) and e.strip() for e in found):
            raise OutputError("'entities' must be a list of non-empty strings")
        return {"entities": found}

    return Request("entities", prompt, schema, validate)


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
