"""RAGChecker's generator metrics: context utilization, hallucination, self-knowledge and faithfulness
(noise sensitivity is RAGAS's ``rag_eval.metrics.rag.noise_sensitivity``, the same formula)."""
from __future__ import annotations

from typing import Any

import numpy as np

from rag_eval.metrics.core.base import Measured, NotApplicable
from rag_eval.metrics.diagnostics.claims import (CORRECTNESS, REFERENCE_IN_CHUNKS, RESPONSE_IN_CHUNKS, ClaimChecks,
                                        ClaimMetric, mean)
from rag_eval.metrics.core.results import Direction

ALL_FIELDS = ("user_input", "response", "retrieved_contexts", "reference")


def response_claims(checked: ClaimChecks) -> list[dict]:
    """Each response claim with the chunks supporting it and, when checked, whether the reference does."""
    items: list[dict[str, Any]] = [{"claim": c, "in_chunks": [k + 1 for k, v in enumerate(row) if v]}
             for c, row in zip(checked.response_claims, checked.verdicts("response_in_chunks"))]
    if checked.response_correct is not None:
        for item, correct in zip(items, checked.response_correct):
            item["correct"] = int(correct)
    return items


def _share(checked: ClaimChecks, flags: np.ndarray, what: str) -> Measured:
    """A share of the response's claims (``flags``), with the claims flagged as failed."""
    return Measured(mean(flags), f"{int(flags.sum())}/{len(flags)} response claims {what}",
                    {"claims": response_claims(checked),
                     "failed": [c for c, v in zip(checked.response_claims, flags) if v]})


class GeneratorContextUtilization(ClaimMetric):
    """Context utilization, [0, 1], higher is better (RAGChecker's generator ``context_utilization``): of
    the reference's claims some retrieved chunk supports, the share the response states,
    ``sum(claim_recalled & response2answer) / sum(claim_recalled)``.

    Not RAGAS's ``context_utilization`` (the ranking of contexts useful for the response). Differs from
    RAGChecker: when no reference claim is in the chunks (nothing retrieved, or nothing the reference
    needs) the row is ``not_applicable``, not 0: retrieval failed, and the generator is not charged
    with it (``claim_recall`` is); so is a reference without claims.
    """

    name = "generator_context_utilization"
    group = "generator"
    leads = True
    problem = "the response leaves out claims the retrieved chunks hold"
    advice = "make the generator use the retrieved context (prompt, context order or length)"
    required_fields = ALL_FIELDS
    checks = (REFERENCE_IN_CHUNKS, CORRECTNESS)
    needs = ("reference",)

    def assess(self, checked: ClaimChecks) -> Measured | NotApplicable:
        recalled = checked.recalled
        if not recalled.any():
            return NotApplicable("no reference claim is in the retrieved chunks: nothing to utilize "
                                 "(a retrieval problem, see claim_recall)")
        used = recalled & checked.verdicts("reference_covered")
        claims = [{"claim": c, "in_chunks": [k + 1 for k, v in enumerate(row) if v], "stated": int(s)}
                  for c, row, s in zip(checked.reference_claims, checked.verdicts("reference_in_chunks"),
                                       checked.verdicts("reference_covered"))]
        return Measured(float(used.sum() / recalled.sum()),
                        f"{int(used.sum())}/{int(recalled.sum())} reference claims found in the chunks are stated "
                        "by the response",
                        {"claims": claims, "failed": [c for c, r, u in zip(checked.reference_claims, recalled, used)
                                                      if r and not u]})


class Hallucination(ClaimMetric):
    """Hallucination, [0, 1], lower is better (RAGChecker ``hallucination``): the share of the response's
    claims that no retrieved chunk supports and the reference does not support either,
    ``mean(~np.max(retrieved2response, axis=1) & ~answer2response)``.

    Differs from RAGChecker: with nothing retrieved every claim is unsupported by the chunks and the
    formula is applied (RAGChecker returns 0, as if nothing were made up); a response or reference
    without claims is ``not_applicable`` (RAGChecker: 0).
    """

    name = "hallucination"
    group = "generator"
    leads = True
    direction = Direction.LOWER
    problem = "the response makes wrong claims that no retrieved chunk supports"
    advice = "the generator makes things up: ground it in the context (prompt, model)"
    required_fields = ALL_FIELDS
    checks = (RESPONSE_IN_CHUNKS, CORRECTNESS)

    def assess(self, checked: ClaimChecks) -> Measured:
        return _share(checked, ~checked.faithful & ~checked.verdicts("response_correct"), "wrong and in no chunk")


class SelfKnowledge(ClaimMetric):
    """Self-knowledge, [0, 1], lower is better (RAGChecker ``self_knowledge``; lower when the answers
    should come from the context): the share of the response's claims no retrieved chunk supports but
    the reference does, ``mean(~np.max(retrieved2response, axis=1) & answer2response)``: correct claims
    from the model's own knowledge.

    Differs from RAGChecker as :class:`Hallucination` does.
    """

    name = "self_knowledge"
    group = "generator"
    direction = Direction.LOWER
    problem = "the response makes correct claims that no retrieved chunk supports (from the model's own knowledge)"
    required_fields = ALL_FIELDS
    checks = (RESPONSE_IN_CHUNKS, CORRECTNESS)

    def assess(self, checked: ClaimChecks) -> Measured:
        return _share(checked, ~checked.faithful & checked.verdicts("response_correct"), "correct but in no chunk")


class GeneratorFaithfulness(ClaimMetric):
    """Faithfulness, [0, 1], higher is better (RAGChecker's generator ``faithfulness``): the share of the
    response's claims some retrieved chunk supports on its own, ``mean(np.max(retrieved2response,
    axis=1))``; 0 when nothing was retrieved.

    Not the core ``faithfulness`` (RAGAS: a claim supported by all the contexts together): here one chunk
    must support it. Differs from RAGChecker: a response without claims is ``not_applicable`` (RAGChecker: 0).
    """

    name = "generator_faithfulness"
    group = "generator"
    problem = "the response makes claims that no retrieved chunk supports"
    required_fields = ("user_input", "response", "retrieved_contexts")
    checks = (RESPONSE_IN_CHUNKS,)
    needs = ("response",)

    def assess(self, checked: ClaimChecks) -> Measured:
        faithful = checked.faithful
        return Measured(mean(faithful), f"{int(faithful.sum())}/{len(faithful)} response claims in a retrieved chunk",
                        {"claims": response_claims(checked),
                         "failed": [c for c, v in zip(checked.response_claims, faithful) if not v]})
