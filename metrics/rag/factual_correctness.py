"""FactualCorrectness (RAGAS): statement-level precision, recall or F1 of the response against the reference."""
from __future__ import annotations

from typing import Literal

from rag_eval.metrics.core.base import Family, Measured, Metric, NotApplicable
from rag_eval.metrics.core.base import Options as MetricOptions
from rag_eval.metrics.judgements.statement_classification import statement_classification
from rag_eval.metrics.judges.base import Judge, expect_count
from rag_eval.metrics.core.samples import Sample
from rag_eval.metrics.text import statements


def f_beta(tp: int, fp: int, fn: int, beta: float = 1.0) -> float:
    """F-beta of statement counts, in [0, 1]; 0.0 when nothing is true positive.

    ``tp=2, fp=1, fn=1`` gives 0.6667 (RAGAS's 0.67 is rounded). No epsilon.

    Raises
    ------
    ValueError
        For negative counts or ``beta <= 0``.
    """
    if min(tp, fp, fn) < 0 or beta <= 0:
        raise ValueError(f"counts must be >= 0 and beta > 0, got tp={tp}, fp={fp}, fn={fn}, beta={beta}")
    if tp == 0:
        return 0.0
    precision, recall = tp / (tp + fp), tp / (tp + fn)
    return (1 + beta ** 2) * precision * recall / (beta ** 2 * precision + recall)


async def classify(sample: Sample, judge: Judge) -> dict | NotApplicable:
    """TP/FP/FN of the response's statements against the reference's (one judgement,
    shared by AnswerCorrectness and FactualCorrectness)."""
    # With the question, a bare span ("85 million dollars") is read as its answer ("Q: … A: …").
    answer = statements(sample.given("response"), sample.user_input)
    reference = statements(sample.given("reference"), sample.user_input)
    if not answer:
        return NotApplicable("no_factual_statements: the response makes no checkable statement")
    if not reference:
        return NotApplicable("the reference has no statement to compare with")
    judged = await judge.ask(statement_classification, statement_classification.Input(
        response_statements=answer, reference_statements=reference, response=sample.given("response"),
        reference=sample.given("reference")))
    supported, covered = judged.supported, judged.covered
    expect_count(supported, len(answer), "response verdicts")
    expect_count(covered, len(reference), "reference verdicts")
    tp = sum(supported)
    return {"tp": tp, "fp": len(answer) - tp, "fn": len(reference) - sum(covered),
            "response_statements": [{"statement": s, "supported": v} for s, v in zip(answer, supported)],
            "reference_statements": [{"statement": s, "covered": v} for s, v in zip(reference, covered)]}


class FactualCorrectness(Metric):
    """Factual overlap of ``response`` and ``reference``, [0, 1], higher is better (RAGAS
    ``factual_correctness``; not rounded to 2 decimals).

    Parameters
    ----------
    threshold : float, optional
    mode : {"f1", "precision", "recall"}, default "f1"
        precision = TP/(TP+FP) (response statements the reference supports), recall =
        TP/(TP+FN) (reference statements the response covers), or their F1.

    Raises
    ------
    ValueError
        For an unknown mode.
    """

    class Options(MetricOptions):
        """``mode``: which of precision, recall or their F1 is the value."""

        mode: Literal["f1", "precision", "recall"] = "f1"

    options: Options

    name = "factual_correctness"
    family = Family.RAGAS
    required_fields = ("response", "reference")
    judgements = (statement_classification,)

    async def measure(self, sample: Sample, judge: Judge) -> Measured | NotApplicable:
        counts = await classify(sample, judge)
        if isinstance(counts, NotApplicable):
            return counts
        tp, fp, fn = counts["tp"], counts["fp"], counts["fn"]
        value = {"f1": f_beta(tp, fp, fn), "precision": tp / (tp + fp) if tp else 0.0,
                 "recall": tp / (tp + fn) if tp else 0.0}[self.options.mode]
        return Measured(value, f"{self.options.mode} {value:.2f} (TP {tp}, FP {fp}, FN {fn})", counts)
