"""RAGChecker's retriever metrics: claim recall and context precision, from the reference's claims
checked against each retrieved chunk."""
from __future__ import annotations

from rag_eval.metrics.core.base import Measured
from rag_eval.metrics.diagnostics.claims import REFERENCE_IN_CHUNKS, ClaimChecks, ClaimMetric, chunk_label, mean


class ClaimRecall(ClaimMetric):
    """Claim recall, [0, 1], higher is better (RAGChecker ``claim_recall``): the share of the reference's
    claims some retrieved chunk supports on its own, ``mean(np.max(retrieved2answer, axis=1))``; 0 when
    nothing was retrieved.

    Differs from RAGChecker: a reference without claims is ``not_applicable`` (RAGChecker: 0). Unlike
    ``context_recall`` (a claim attributed to all the contexts together), one chunk must support the claim.
    """

    name = "claim_recall"
    group = "retriever"
    leads = True
    problem = "the retrieved chunks miss claims the reference needs"
    advice = "fix retrieval first (the generator cannot use what was not retrieved)"
    required_fields = ("user_input", "retrieved_contexts", "reference")
    checks = (REFERENCE_IN_CHUNKS,)
    needs = ("reference",)

    def assess(self, checked: ClaimChecks) -> Measured:
        recalled = checked.recalled
        claims = [{"claim": c, "in_chunks": [k + 1 for k, v in enumerate(row) if v]}
                  for c, row in zip(checked.reference_claims, checked.verdicts("reference_in_chunks"))]
        return Measured(mean(recalled), f"{int(recalled.sum())}/{len(recalled)} reference claims in a retrieved chunk",
                        {"claims": claims, "failed": [c for c, v in zip(checked.reference_claims, recalled) if not v]})


class RetrieverContextPrecision(ClaimMetric):
    """Context precision, [0, 1], higher is better (RAGChecker's retriever ``context_precision``): the share
    of the retrieved chunks that support at least one claim of the reference,
    ``mean(np.max(retrieved2answer, axis=0))``; 0 when nothing was retrieved.

    Not ``context_precision`` (RAGAS: the average precision of useful contexts over ranks): this one
    ignores the order. Differs from RAGChecker: a reference without claims is ``not_applicable`` (RAGChecker: 0).
    """

    name = "retriever_context_precision"
    group = "retriever"
    problem = "retrieved chunks hold none of the reference's claims (noise)"
    advice = "retrieve fewer chunks or rank the relevant ones higher"
    required_fields = ("user_input", "retrieved_contexts", "reference")
    checks = (REFERENCE_IN_CHUNKS,)
    needs = ("reference",)

    def assess(self, checked: ClaimChecks) -> Measured:
        if not checked.chunks:
            return Measured(0.0, "no context retrieved", {"chunks": [], "failed": []})
        relevant = checked.relevant
        return Measured(mean(relevant), f"{int(relevant.sum())}/{len(relevant)} retrieved chunks hold a reference claim",
                        {"chunks": [{"rank": k + 1, "relevant": int(v)} for k, v in enumerate(relevant)],
                         "failed": [chunk_label(k, c) for k, (c, v) in enumerate(zip(checked.chunks, relevant))
                                    if not v]})
