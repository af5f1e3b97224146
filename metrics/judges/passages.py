"""The passages of contexts that the offline judge compares a statement with, and what its rules read of them.

A passage is a sentence of a context (read across its line breaks, :func:`sentences_of`), a sentence
joined with the next one or two when they continue its subject with a pronoun, and, for short answers,
every two adjacent sentences (:func:`spans`). A claim's names and numbers must meet in one passage: two
facts from unrelated sentences do not make a relation. :func:`passage_index` lists the passages with
their tokens, numbers and neighbourhoods for the claim rules (``rag_eval.metrics.judges.claim_rules``).
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from rag_eval.metrics.judges.claim_rules import claims_universally, neighbours, number_slots
from rag_eval.metrics.text import content_tokens, join_lines, memo, quantities, split_sentences

# A sentence with a pronoun, or opening with one of these, continues the previous sentence's subject.
_ANAPHOR = re.compile(r"^(?:this|these|those|both|the (?:group|band|company|film|game|song|album|city|team|show|"
                      r"series))\b|\b(?:he|she|it|they|him|his|her|its|their|them)\b|^(?:该|此|这|其)|[他她它]",
                      re.IGNORECASE)


@memo  # a context's sentences are read once per metric
def continues_subject(sentence: str) -> bool:
    """Does ``sentence`` continue the previous sentence's subject (:data:`_ANAPHOR`)?"""
    return _ANAPHOR.search(sentence) is not None


@memo  # a context's passages are built once per metric
def sentences_of(context: str) -> tuple[str, ...]:
    """The sentences of ``context`` read across its line breaks (``rag_eval.metrics.text.join_lines``): a
    statement that one chunk supports is supported however the chunk breaks its lines (a name in one
    paragraph, its date in the next); only sentence punctuation ends a passage's sentence."""
    return tuple(split_sentences(join_lines(context)))


def spans(contexts: Sequence[str], windows: bool = False) -> dict[str, str]:
    """Each passage of the contexts (see the module's notes; with ``windows`` every two adjacent
    sentences too) with its neighbourhood: the passage and the sentence before and after it in its
    context (the short window of relation-level evidence)."""
    found: dict[str, str] = {}
    for sentences in map(sentences_of, contexts):
        for i, sentence in enumerate(sentences):
            found.setdefault(sentence, " ".join(sentences[max(i - 1, 0): i + 2]))
        for i in range(len(sentences) - 1):
            span = [sentences[i]]
            for following in sentences[i + 1: i + 3]:
                if not (windows and len(span) == 1) and not continues_subject(following):
                    break
                span.append(following)
                found.setdefault(" ".join(span), " ".join(sentences[max(i - 1, 0): i + len(span) + 1]))
    return found


def passage_index(contexts: Sequence[str], windows: bool = False) -> dict[str, Any]:
    """The passages of the contexts (:func:`spans`) with their tokens, numbers and lower-cased text,
    and the contexts' sentences with the claim rules' indexes of them (their vectors: the judge's
    ``cosines``, for the passages a rule reads)."""
    found = spans(contexts, windows)
    units = list(found)
    sentences = [s for c in contexts for s in sentences_of(c)]
    slots: dict[tuple[str, str], set[str]] = {}
    for pair, number in (slot for s in sentences for slot in number_slots(s)):
        slots.setdefault(pair, set()).add(number)
    tokens = [content_tokens(u) for u in units]
    joined = "\n".join(contexts)
    return {"units": units, "all_text": list(contexts), "sentence_tokens": [content_tokens(s) for s in sentences], "tokens": tokens, "lower": [u.lower() for u in units],
            "spans": found,
            "quantities": [quantities(u) for u in units],
            "all_lower": joined.lower(), "all_quantities": quantities(joined),
            "all_tokens": set().union(*tokens),
            "sentences": sentences,
            "number_slots": slots,
            "neighbours": neighbours(sentences),
            # per passage, what the checks of ``StatementSupport._judge_passage`` read of its neighbourhood
            "near": [content_tokens(found[u]) for u in units],
            "universal": [claims_universally(found[u]) for u in units]}
