"""``language_match``: does the response answer in the writing system of the question?

A plugin metric of rag-eval-pipeline (``rag_eval.metrics.core.base.Metric`` documents the contract; the
entry point in ``pyproject.toml`` registers it). A Chinese question answered in English,
or an English one in Chinese, is a failure users report first and that no judgement of
support or relevance flags. No judge is asked: the script of a text is the Unicode script
(the first word of the character's Unicode name: LATIN, CJK, CYRILLIC, HANGUL...) that most
of its letters belong to; Japanese kana count as CJK, since Japanese mixes them with kanji.
"""
from __future__ import annotations

import unicodedata
from collections import Counter

from rag_eval.metrics.core.base import Family, Measured, Metric, NotApplicable
from rag_eval.metrics.judges.base import Judge
from rag_eval.metrics.core.samples import Sample

#: Scripts written together in one language, counted as one.
SAME = {"HIRAGANA": "CJK", "KATAKANA": "CJK", "HALFWIDTH": "CJK", "FULLWIDTH": "LATIN"}


def script(text: str) -> str | None:
    """The script most letters of ``text`` belong to (ties: the first in the text), ``None``
    without a letter: ``script("营业时间 9am") == "CJK"``."""
    counts: Counter[str] = Counter()
    for char in text:
        if unicodedata.category(char).startswith("L"):
            name = unicodedata.name(char, "UNKNOWN").split()[0]
            counts[SAME.get(name, name)] += 1
    return counts.most_common(1)[0][0] if counts else None


class LanguageMatch(Metric):
    """1 when the response is written in the script of ``user_input``, else 0, on [0, 1], higher
    is better, threshold 0.5; ``not_applicable`` when either has no letter (``"42"``). Fields:
    ``user_input``, ``response``. No judgement (the judge is not asked)."""

    name = "language_match"
    required_fields = ("user_input", "response")
    family = Family.PLUGIN
    judgements = ()

    async def measure(self, sample: Sample, judge: Judge) -> Measured | NotApplicable:
        asked, answered = script(sample.user_input), script(sample.response)
        if asked is None or answered is None:
            return NotApplicable(f"no letter in the {'question' if asked is None else 'response'}: no script to compare")
        details = {"question_script": asked, "response_script": answered}
        if asked == answered:
            return Measured(1.0, f"both written in {asked} script", details)
        return Measured(0.0, f"question in {asked} script, response in {answered}", details)
