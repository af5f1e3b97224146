"""NoiseSensitivity (RAGAS), both modes: how often the response states wrong claims that
relevant (or irrelevant) retrieved contexts led it to."""
from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from metrics.base import Family, Measured, Metric, NotApplicable, nothing_retrieved
from metrics.judgements.context_support_matrix import context_support_matrix
from metrics.judgements.statement_support import statement_support, support_verdicts
from metrics.judges.base import Judge, JudgeError, expect_count
from metrics.results import Direction
from metrics.samples import Sample
from metrics.text import statements


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


class NoiseSensitivity(Metric):
    """NoiseSensitivity in one mode, [0, 1], lower is better (RAGAS ``noise_sensitivity``).

    Statements of the response and of the reference come from deterministic segmentation;
    one judgement gives the support of every statement by every context on its own, one
    more the correctness of each response statement against the reference (RAGAS: 2N + 3
    requests). A response or reference without statements is ``not_applicable`` (RAGAS
    returns NaN or crashes), as is an empty context list (nothing retrieved to be
    sensitive to).
    """

    family = Family.RAGAS
    required_fields = ("user_input", "response", "retrieved_contexts", "reference")
    direction = Direction.LOWER
    judgements = (context_support_matrix, statement_support)
    mode: ClassVar[str]

    async def measure(self, sample: Sample, judge: Judge) -> Measured | NotApplicable:
        answer, reference = statements(sample.response), statements(sample.reference)
        if not answer:
            return NotApplicable("no_factual_statements: the response makes no checkable statement")
        if not reference:
            return NotApplicable("the reference has no statement to tell relevant contexts from noise")
        contexts = sample.retrieved_contexts
        if nothing_retrieved(contexts):
            return NotApplicable("no context retrieved: nothing to be sensitive to")
        matrix = expect_count((await judge.ask(context_support_matrix, context_support_matrix.Input(
            statements=reference + answer, contexts=contexts))).matrix, len(reference + answer), "rows")
        correct = await support_verdicts(judge, answer, [sample.reference])
        try:
            value = noise_sensitivity_score(matrix[:len(reference)], matrix[len(reference):],
                                            [v.verdict for v in correct], self.mode)
        except ValueError as exc:
            raise JudgeError(str(exc)) from exc
        relevant = [any(row[k] for row in matrix[:len(reference)]) for k in range(len(contexts))]
        details = {"relevant_contexts": relevant, "response_statements": [
            {"statement": s, "correct": c.verdict, "supported_by_contexts": row}
            for s, c, row in zip(answer, correct, matrix[len(reference):])]}
        return Measured(value, f"{value:.2f} of the response statements are wrong claims supported by "
                               f"{self.mode} contexts", details)


class NoiseSensitivityRelevant(NoiseSensitivity):
    """NoiseSensitivity, ``relevant`` mode (RAGAS's default): the share of wrong claims supported by relevant
    contexts, [0, 1], lower is better."""

    name = "noise_sensitivity_relevant"
    mode = "relevant"


class NoiseSensitivityIrrelevant(NoiseSensitivity):
    """NoiseSensitivity, ``irrelevant`` mode: the share of wrong claims supported only by irrelevant contexts,
    [0, 1], lower is better."""

    name = "noise_sensitivity_irrelevant"
    mode = "irrelevant"
