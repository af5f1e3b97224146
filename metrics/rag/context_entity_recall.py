"""ContextEntityRecall (RAGAS): the share of the reference's entities found in the contexts."""
from __future__ import annotations

import re
import unicodedata

from rag_eval.metrics.core.base import Family, Measured, Metric, NotApplicable
from rag_eval.metrics.judgements.entities import entities as entity_extraction
from rag_eval.metrics.judges.base import Judge
from rag_eval.metrics.core.samples import Sample
from rag_eval.metrics.text import has_cjk


def normalise_entity(text: str) -> str:
    """Case-folded, NFKC, punctuation removed, whitespace collapsed: ``"U.S.  Steel,"`` → ``"us steel"``."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = re.sub(r"[.'’]", "", text)  # abbreviations and possessives: "U.S." -> "us"
    text = "".join(" " if unicodedata.category(ch).startswith("P") else ch for ch in text)
    return re.sub(r"\s+", " ", text).strip()


def entity_found(entity: str, normalised_context: str) -> bool:
    """Whether a normalised entity occurs in normalised context text (as whole words, or as
    a substring for Chinese, Japanese or Korean text, which has no spaces)."""
    if not entity:
        return False
    if has_cjk(entity):
        return entity in normalised_context
    return re.search(rf"(?<!\w){re.escape(entity)}(?!\w)", normalised_context) is not None


class ContextEntityRecall(Metric):
    """Share of the reference's distinct entities present in the retrieved contexts, [0, 1],
    higher is better (RAGAS ``context_entity_recall``).

    Entities come from the reference only (one judgement); each is looked up in the
    contexts after normalisation of case, spacing and punctuation, so "paris" matches
    "Paris," (RAGAS compares exact strings of a second extraction: "paris" misses "Paris").
    No epsilon: all found is exactly 1.0. A reference without entities is
    ``not_applicable`` (RAGAS: 0.0); an empty context list scores 0.0.
    """

    name = "context_entity_recall"
    family = Family.RAGAS
    required_fields = ("retrieved_contexts", "reference")
    judgements = (entity_extraction,)

    async def measure(self, sample: Sample, judge: Judge) -> Measured | NotApplicable:
        asked = entity_extraction.Input(text=sample.given("reference"))
        extracted = (await judge.ask(entity_extraction, asked)).entities
        if extracted is None:
            return NotApplicable(f"{judge.name} cannot extract entities from this text (Chinese, Japanese or "
                                 "Korean needs an LLM judge)")
        entities = sorted({normalise_entity(e) for e in extracted} - {""})
        if not entities:
            return NotApplicable("the reference names no entity")
        context = normalise_entity("\n".join(sample.given("retrieved_contexts")))
        found = [e for e in entities if entity_found(e, context)]
        details = {"entities": entities, "found": found}
        return Measured(len(found) / len(entities), f"{len(found)}/{len(entities)} reference entities in the contexts",
                        details)
