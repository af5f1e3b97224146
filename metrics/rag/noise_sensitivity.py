"""NoiseSensitivity (RAGAS), both modes: how often the response states wrong claims that
relevant (or irrelevant) retrieved contexts led it to."""
from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rag_eval.metrics.core.base import Family, Measured, NotApplicable, nothing_retrieved
from rag_eval.metrics.diagnostics.claims import CHECKS, ClaimChecks, ClaimMetric
from rag_eval.metrics.judges.base import Judge, JudgeError
from rag_eval.metrics.core.results import Direction
from rag_eval.metrics.core.samples import Sample


def noise_sensitivity_score(reference_support: Sequence[Sequence[int]], response_support: Sequence[Sequence[int]],
                            correct: Sequence[int], mode: str) -> float:
    """Share of response statements that are incorrect yet supported by a relevant
    (``mode="relevant"``) or only by an irrelevant (``mode="irrelevant"``) context.

    Parameters
    ----------
    reference_support : |G| x N of {0, 1}
        Whether context k supports reference statement i; a context is relevant when it
        supports at least one reference statement.
    response_support : |A| x N of {0, 1}
        Whether context k supports response statement j.
    correct : |A| of {0, 1}
        Whether the reference supports response statement j.
    mode : {"relevant", "irrelevant"}

    Returns
    -------
    float in [0, 1]
        Lower is better. RAGAS worked example (A1-A4): relevant 0.5, irrelevant 0.25.

    Raises
    ------
    ValueError
        For an empty statement list, rows of unequal length (RAGAS crashes on both) or
        an unknown mode.
    """
    if mode not in ("relevant", "irrelevant"):
        raise ValueError(f"mode must be 'relevant' or 'irrelevant', got {mode!r}")
    if not reference_support or not response_support or len(correct) != len(response_support):
        raise ValueError("need reference statements, response statements and one correctness verdict each")
    width = len(reference_support[0])
    if any(len(row) != width for row in [*reference_support, *response_support]):
        raise ValueError("every statement needs one verdict per context")
    relevant = [any(row[k] for row in reference_support) for k in range(width)]
    by_relevant = [any(relevant[k] and row[k] for k in range(width)) for row in response_support]
    if mode == "relevant":
        hits = [r and not c for r, c in zip(by_relevant, correct)]
    else:
        by_irrelevant = [any(not relevant[k] and row[k] for k in range(width)) and not r
                         for row, r in zip(response_support, by_relevant)]
        hits = [i and not c for i, c in zip(by_irrelevant, correct)]
    return sum(hits) / len(hits)


class NoiseSensitivity(ClaimMetric):
    """NoiseSensitivity in one mode, [0, 1], lower is better (RAGAS ``noise_sensitivity``, which took
    RAGChecker's ``noise_sensitivity_in_relevant`` / ``_in_irrelevant``: the same formula).

    Read from the row's claim matrix (``rag_eval.metrics.diagnostics.claims``: the reference's and the response's
    claims against each chunk alone, and the response's against the reference), the checks RAGChecker's
    diagnostics ask too: 3 requests per row with an LLM judge, shared by both modes, the diagnostics,
    factual_correctness and answer_correctness (RAGAS: 2N + 3). A response or reference without claims
    is ``not_applicable`` (RAGAS returns NaN or crashes, RAGChecker 0), as is an empty context list
    (nothing retrieved to be sensitive to). Also selected by ``--metrics diagnostics`` (generator).
    """

    family = Family.RAGAS
    also_in = (Family.DIAGNOSTICS,)
    version = "2"
    required_fields = ("user_input", "response", "retrieved_contexts", "reference")
    direction = Direction.LOWER
    checks = CHECKS
    group = "generator"
    leads = True
    mode: ClassVar[str]

    async def measure(self, sample: Sample, judge: Judge) -> Measured | NotApplicable:
        if nothing_retrieved(sample.given("retrieved_contexts")):
            return NotApplicable("no context retrieved: nothing to be sensitive to")
        return await super().measure(sample, judge)

    def assess(self, checked: ClaimChecks) -> Measured:
        try:
            value = noise_sensitivity_score(checked.verdicts("reference_in_chunks").astype(int).tolist(),
                                            checked.verdicts("response_in_chunks").astype(int).tolist(),
                                            checked.verdicts("response_correct").astype(int).tolist(), self.mode)
        except ValueError as exc:
            raise JudgeError(str(exc)) from exc
        relevant, support = checked.relevant, checked.verdicts("response_in_chunks")
        by_relevant = (support & relevant).any(axis=1)
        by = by_relevant if self.mode == "relevant" else (support & ~relevant).any(axis=1) & ~by_relevant
        details = {"relevant_contexts": [bool(r) for r in relevant], "response_statements": [
            {"statement": s, "correct": int(c), "supported_by_contexts": [int(v) for v in row]}
            for s, c, row in zip(checked.response_claims, checked.verdicts("response_correct"), support)],
            "failed": [s for s, wrong in zip(checked.response_claims, by & ~checked.verdicts("response_correct"))
                       if wrong]}
        return Measured(value, f"{value:.2f} of the response statements are wrong claims supported by "
                               f"{self.mode} contexts", details)


class NoiseSensitivityRelevant(NoiseSensitivity):
    """NoiseSensitivity, ``relevant`` mode (RAGAS's default): the share of wrong claims supported by relevant
    contexts, [0, 1], lower is better."""

    name = "noise_sensitivity_relevant"
    mode = "relevant"
    problem = "the response repeats wrong claims found in relevant chunks"
    advice = "the generator is misled by what stands beside the answer in relevant chunks"


class NoiseSensitivityIrrelevant(NoiseSensitivity):
    """NoiseSensitivity, ``irrelevant`` mode: the share of wrong claims supported only by irrelevant contexts,
    [0, 1], lower is better."""

    name = "noise_sensitivity_irrelevant"
    mode = "irrelevant"
    problem = "the response takes wrong claims from irrelevant chunks"
    advice = "the generator is distracted by noise: retrieve fewer or better-ranked chunks, or filter them"
