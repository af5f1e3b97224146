"""RAGChecker's overall metrics: claim precision, recall and F1 of the response against the reference."""
from __future__ import annotations

import numpy as np

from rag_eval.metrics.core.base import Measured
from rag_eval.metrics.diagnostics.claims import CORRECTNESS, ClaimChecks, ClaimMetric, mean


def _claims(claims: list[str], verdicts: np.ndarray, key: str) -> list[dict]:
    return [{"claim": c, key: int(v)} for c, v in zip(claims, verdicts)]


class OverallPrecision(ClaimMetric):
    """Claim precision, [0, 1], higher is better (RAGChecker ``precision``): the share of the response's
    claims the reference supports, ``mean(answer2response)``.

    Differs from RAGChecker: a response or reference without claims is ``not_applicable`` (RAGChecker: 0).
    """

    name = "overall_precision"
    group = "overall"
    problem = "the response makes claims the reference does not support"
    required_fields = ("user_input", "response", "reference")
    checks = (CORRECTNESS,)

    def assess(self, checked: ClaimChecks) -> Measured:
        correct = checked.verdicts("response_correct")
        return Measured(mean(correct), f"{int(correct.sum())}/{len(correct)} response claims supported by the "
                                       "reference",
                        {"claims": _claims(checked.response_claims, correct, "correct"),
                         "failed": [c for c, v in zip(checked.response_claims, correct) if not v]})


class OverallRecall(ClaimMetric):
    """Claim recall, [0, 1], higher is better (RAGChecker ``recall``): the share of the reference's claims
    the response states, ``mean(response2answer)``; 0 for a response without claims (a refusal states none).

    Differs from RAGChecker: a reference without claims is ``not_applicable`` (RAGChecker: 0).
    """

    name = "overall_recall"
    group = "overall"
    problem = "the response misses claims of the reference"
    required_fields = ("user_input", "response", "reference")
    checks = (CORRECTNESS,)
    needs = ("reference",)

    def assess(self, checked: ClaimChecks) -> Measured:
        covered = checked.verdicts("reference_covered")
        return Measured(mean(covered), f"{int(covered.sum())}/{len(covered)} reference claims stated by the response",
                        {"claims": _claims(checked.reference_claims, covered, "stated"),
                         "failed": [c for c, v in zip(checked.reference_claims, covered) if not v]})


def f1(precision: float, recall: float) -> float:
    """``2PR / (P + R)``, 0 unless both are positive (RAGChecker ``evaluate_f1``). ``f1(0.5, 2/3)`` = 4/7."""
    return 2 * precision * recall / (precision + recall) if precision > 0 and recall > 0 else 0.0


class OverallF1(ClaimMetric):
    """Claim F1, [0, 1], higher is better (RAGChecker ``f1``): :func:`f1` of the overall precision and
    recall; 0 for a response without claims (its recall is 0, as RAGChecker's precision is).

    Differs from RAGChecker: a reference without claims is ``not_applicable`` (RAGChecker: 0).
    """

    name = "overall_f1"
    group = "overall"
    problem = "the response and the reference share few claims"
    required_fields = ("user_input", "response", "reference")
    checks = (CORRECTNESS,)
    needs = ("reference",)

    def assess(self, checked: ClaimChecks) -> Measured:
        correct, covered = checked.verdicts("response_correct"), checked.verdicts("reference_covered")
        precision = mean(correct) if len(correct) else 0.0
        recall = mean(covered)
        failed = [f"unsupported: {c}" for c, v in zip(checked.response_claims, correct) if not v] + \
            [f"missed: {c}" for c, v in zip(checked.reference_claims, covered) if not v]
        return Measured(f1(precision, recall), f"precision {precision:.2f}, recall {recall:.2f}",
                        {"precision": precision, "recall": recall, "failed": failed})
