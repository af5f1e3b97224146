"""The row's claim matrix: RAGChecker's four checks, asked once per row and shared by every metric.

RAGChecker (``ragchecker/evaluator.py``, ``check_claims``) computes all its metrics from four sets of
entailment verdicts, each a claim against a premise; here they are judgements the other metrics ask too:

====================  =====================  ===================  ============================================
RAGChecker            claims                 premises             judgement (requests with an LLM judge)
====================  =====================  ===================  ============================================
``retrieved2answer``  the reference's (G)    each chunk alone     ``context_support_matrix(G, chunks)`` (1)
``retrieved2response`` the response's (A)    each chunk alone     ``context_support_matrix(A, chunks)`` (1)
``answer2response``   the response's (A)     the reference        ``statement_classification`` ``supported``
``response2answer``   the reference's (G)    the response         ``statement_classification`` ``covered`` (1)
====================  =====================  ===================  ============================================

Together they are one (|G| + |A|) × (N + 2) matrix per row. A metric asks only the checks it needs
(:attr:`ClaimMetric.checks`), always with the same inputs, so the judge answers each once per row —
the LLM judge from its cache or the identical request in flight, the offline judge from its
``support`` memo: all eleven diagnostics cost 3 chat requests per row (1 with nothing retrieved, when
no matrix is asked), whatever the number of chunks (one more per batch of chunks past
``max_prompt_chars``), and none beside ``noise_sensitivity_*``, ``factual_correctness`` and
``answer_correctness``, which ask the same checks.

Where we differ from RAGChecker, and why:

* **Claims** are the text's sentences (``rag_eval.metrics.judges.base.statements``: deterministic segmentation,
  evasive sentences dropped, a short answer read with its question, "Q: … A: 85"), not claims an LLM
  extracts: a judge's mood never changes a denominator (RAGAS's is what its LLM extracted), and no extraction request
  is sent. A sentence stating two facts is one claim, entailed only when both are.
* **Verdicts** are binary (supported or not). RAGChecker's checker answers Entailment, Neutral or
  Contradiction, and every metric counts Entailment only (``to_bool``), so the values are the same.
* The chunk checks do not see the question (RAGChecker passes it to its checker).
"""
from __future__ import annotations

import asyncio
from abc import abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import BaseModel

from rag_eval.metrics.core.base import Family, Measured, Metric, NotApplicable, nothing_retrieved
from rag_eval.metrics.judgements.base import Judgement
from rag_eval.metrics.judgements.context_support_matrix import context_support_matrix
from rag_eval.metrics.judgements.statement_classification import statement_classification
from rag_eval.metrics.judges.base import Judge, JudgeError, expect_count
from rag_eval.metrics.text import statements
from rag_eval.metrics.core.samples import Sample

#: The reference's claims against each retrieved chunk alone (RAGChecker's ``retrieved2answer``).
REFERENCE_IN_CHUNKS = "reference_in_chunks"
#: The response's claims against each retrieved chunk alone (``retrieved2response``).
RESPONSE_IN_CHUNKS = "response_in_chunks"
#: The response's claims against the reference and the reference's against the response
#: (``answer2response`` and ``response2answer``, one judgement).
CORRECTNESS = "correctness"
CHECKS = (REFERENCE_IN_CHUNKS, RESPONSE_IN_CHUNKS, CORRECTNESS)
_JUDGEMENT: dict[str, Judgement] = {REFERENCE_IN_CHUNKS: context_support_matrix, RESPONSE_IN_CHUNKS: context_support_matrix,
              CORRECTNESS: statement_classification}
NO_RESPONSE_CLAIM = "no_factual_statements: the response makes no checkable claim"
NO_REFERENCE_CLAIM = "the reference has no claim to check against"
#: Characters of a chunk shown where a chunk is listed (details, the diagnosis).
CHUNK_CHARS = 160


def claims_of(sample: Sample) -> tuple[list[str], list[str]]:
    """The response's and the reference's claims (``[]`` for a field the sample lacks), read as
    every metric asking these checks reads them: with the question."""
    def of(text: str | None) -> list[str]:
        return statements(text, sample.user_input) if text is not None else []

    return of(sample.response), of(sample.reference)


def planned(sample: Sample, needs: Iterable[str]) -> dict[str, tuple[Judgement, BaseModel]]:
    """The judgements (with their inputs) the checks ``needs`` ask of ``sample``: a chunk check
    only when there are claims and a chunk was retrieved, the correctness check only when both texts
    have claims (otherwise their verdicts are known without asking: see :func:`check_claims`)."""
    response, reference = claims_of(sample)
    chunks = list(sample.retrieved_contexts or [])
    retrieved = bool(chunks) and not nothing_retrieved(chunks)
    asked: dict[str, tuple[Judgement, BaseModel]] = {}
    for check, claims in ((REFERENCE_IN_CHUNKS, reference), (RESPONSE_IN_CHUNKS, response)):
        if check in needs and claims and retrieved:
            asked[check] = (context_support_matrix, context_support_matrix.Input(statements=claims, contexts=chunks))
    if CORRECTNESS in needs and response and reference:
        asked[CORRECTNESS] = (statement_classification, statement_classification.Input(
            response_statements=response, reference_statements=reference, response=sample.given("response"),
            reference=sample.given("reference")))
    return asked


@dataclass(frozen=True)
class ClaimChecks:
    """One row's claim matrix. Boolean arrays; ``None`` for a check the metric did not ask.

    Attributes
    ----------
    response_claims, reference_claims : list of str
        A and G, in text order.
    chunks : list of str
        The retrieved contexts, in rank order (N).
    reference_in_chunks : |G| × N
        Chunk k alone supports reference claim i (``retrieved2answer``); all False when nothing was
        retrieved.
    response_in_chunks : |A| × N
        Chunk k alone supports response claim j (``retrieved2response``).
    response_correct : |A|
        The reference supports response claim j (``answer2response``).
    reference_covered : |G|
        The response states reference claim i (``response2answer``); all False for a response
        without claims.
    """

    response_claims: list[str]
    reference_claims: list[str]
    chunks: list[str]
    reference_in_chunks: np.ndarray | None = None
    response_in_chunks: np.ndarray | None = None
    response_correct: np.ndarray | None = None
    reference_covered: np.ndarray | None = None

    def verdicts(self, name: Literal["reference_in_chunks", "response_in_chunks", "response_correct",
                                     "reference_covered"]) -> np.ndarray:
        """The array ``name``, which a metric reads only when its ``checks`` ask for it.

        Raises
        ------
        LookupError
            When the check was not asked (a bug of the metric; ``Metric.ascore`` makes it that
            row's ``judge_error``).
        """
        flags = {"reference_in_chunks": self.reference_in_chunks, "response_in_chunks": self.response_in_chunks,
                 "response_correct": self.response_correct, "reference_covered": self.reference_covered}[name]
        if flags is None:
            raise LookupError(f"{name} was not checked: a metric reading it lists its check in checks")
        return flags

    @property
    def recalled(self) -> np.ndarray:
        """Per reference claim: some chunk supports it (``np.max(retrieved2answer, axis=1)``)."""
        return np.asarray(self.verdicts("reference_in_chunks").any(axis=1))

    @property
    def relevant(self) -> np.ndarray:
        """Per chunk: it supports some reference claim (``np.max(retrieved2answer, axis=0)``)."""
        return np.asarray(self.verdicts("reference_in_chunks").any(axis=0))

    @property
    def faithful(self) -> np.ndarray:
        """Per response claim: some chunk supports it (``np.max(retrieved2response, axis=1)``)."""
        return np.asarray(self.verdicts("response_in_chunks").any(axis=1))


def _matrix(answer: Any, claims: list[str], chunks: list[str]) -> np.ndarray:
    rows = expect_count(answer.matrix, len(claims), "matrix rows")
    if any(len(row) != len(chunks) for row in rows):
        raise JudgeError(f"context_support_matrix: a row without one verdict per chunk ({len(chunks)})")
    return np.array(rows, dtype=bool).reshape(len(claims), len(chunks))


async def check_claims(sample: Sample, judge: Judge, needs: Iterable[str]) -> ClaimChecks:
    """The checks ``needs`` (of :data:`CHECKS`) of ``sample``, asked of ``judge`` at once.

    Verdicts known without asking are not asked: nothing retrieved supports no claim; a response
    without claims states no reference claim.

    Raises
    ------
    JudgeError
        When the judge fails, or answers another number of verdicts than claims and chunks.
    """
    needs = set(needs)
    response, reference = claims_of(sample)
    chunks = list(sample.retrieved_contexts or [])
    asked = planned(sample, needs)
    answers = dict(zip(asked, await asyncio.gather(*(judge.ask(j, i) for j, i in asked.values()))))
    found: dict[str, np.ndarray | None] = {}
    for check, claims in ((REFERENCE_IN_CHUNKS, reference), (RESPONSE_IN_CHUNKS, response)):
        if check in needs:
            found[check] = _matrix(answers[check], claims, chunks) if check in answers \
                else np.zeros((len(claims), len(chunks)), dtype=bool)
    if CORRECTNESS in answers:
        judged = answers[CORRECTNESS]
        found["response_correct"] = np.array(expect_count(judged.supported, len(response), "response verdicts"),
                                             dtype=bool)
        found["reference_covered"] = np.array(expect_count(judged.covered, len(reference), "reference verdicts"),
                                              dtype=bool)
    elif CORRECTNESS in needs and reference:  # a response without claims states none of the reference's
        found["response_correct"], found["reference_covered"] = np.zeros(0, bool), np.zeros(len(reference), bool)
    return ClaimChecks(response, reference, chunks, **found)


def mean(flags: np.ndarray) -> float:
    """The share of True in a non-empty boolean array, as a float."""
    return float(np.mean(flags))


def chunk_label(k: int, chunk: str) -> str:
    """A chunk as the details and the diagnosis list it: ``C2: <its first characters>``."""
    text = " ".join(chunk.split())
    return f"C{k + 1}: {text if len(text) <= CHUNK_CHARS else text[:CHUNK_CHARS - 1] + '…'}"


class Diagnostic:
    """What a diagnosis says of a metric (``rag_eval.metrics.reports.diagnosis``), declared on the metric.

    Attributes
    ----------
    group : {"overall", "retriever", "generator"}
        RAGChecker's group of the metric.
    problem : str
        What a failing row shows, in plain words, whatever the threshold ("the retrieved chunks miss
        claims the reference needs").
    advice : str
        What to fix first when this is the version's largest problem.
    leads : bool
        Whether it may be the version's reading: the retriever's claim recall and the generator's
        utilization, noise sensitivities and hallucination. Context precision (top-k retrieval is
        mostly noise by design; what noise costs shows in noise sensitivity), faithfulness (hallucination
        plus self-knowledge) and self-knowledge (a correct claim from memory is no error) are reported,
        never the lead; nor are the overall figures (they say how good, not where).
    """

    group: ClassVar[str]
    problem: ClassVar[str]
    advice: ClassVar[str] = ""
    leads: ClassVar[bool] = False


class ClaimMetric(Diagnostic, Metric):
    """A RAGChecker metric over the row's claim matrix (:func:`check_claims`), [0, 1].

    A subclass declares the checks it asks (``checks``), the claim lists it cannot do without
    (``needs``: a row without them is ``not_applicable``, where RAGChecker returns 0), and
    implements :meth:`assess`.
    """

    family = Family.DIAGNOSTICS
    #: The checks (:data:`CHECKS`) the metric reads.
    checks: ClassVar[tuple[str, ...]]
    #: The claim lists that must not be empty: ``response``, ``reference``.
    needs: ClassVar[tuple[str, ...]] = ("response", "reference")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "checks" in cls.__dict__:
            cls.judgements = tuple(dict.fromkeys(_JUDGEMENT[c] for c in cls.checks))

    def asks(self, sample: Sample) -> list[tuple[Judgement, BaseModel]]:
        """The judgements of its checks on ``sample`` (:func:`planned`)."""
        return list(planned(sample, self.checks).values())

    async def measure(self, sample: Sample, judge: Judge) -> Measured | NotApplicable:
        response, reference = claims_of(sample)
        if "response" in self.needs and not response:
            return NotApplicable(NO_RESPONSE_CLAIM)
        if "reference" in self.needs and not reference:
            return NotApplicable(NO_REFERENCE_CLAIM)
        return self.assess(await check_claims(sample, judge, self.checks))

    @abstractmethod
    def assess(self, checked: ClaimChecks) -> Measured | NotApplicable:
        """The metric's value on one row's checks, with its reason and details (``claims``: every
        claim with its verdicts; ``failed``: what counts against the metric)."""
