"""AnswerCorrectness (RAGAS): factual F1 against the reference plus semantic similarity."""
from __future__ import annotations

from rag_eval.metrics.core.base import Family, Measured, Metric, NotApplicable
from rag_eval.metrics.judgements.statement_classification import statement_classification
from rag_eval.metrics.judges.base import Judge, similarity as embedding_similarity
from rag_eval.metrics.rag.factual_correctness import classify, f_beta
from rag_eval.metrics.core.samples import Sample


def answer_correctness_score(tp: int, fp: int, fn: int, similarity: float,
                             weights: tuple[float, float] = (0.75, 0.25)) -> float:
    """``w0 * F1(tp, fp, fn) + w1 * similarity`` with the similarity clipped to [0, 1].

    RAGAS example: TP 2, FP 1, FN 1, cosine 0.9 → 0.725.

    Raises
    ------
    ValueError
        If the weights are negative or do not sum to 1.
    """
    if min(weights) < 0 or abs(sum(weights) - 1) > 1e-9:
        raise ValueError(f"weights must be >= 0 and sum to 1, got {weights}")
    return weights[0] * f_beta(tp, fp, fn) + weights[1] * min(1.0, max(0.0, similarity))


class AnswerCorrectness(Metric):
    """Correctness of ``response`` against ``reference``, [0, 1], higher is better (RAGAS
    ``answer_correctness``: 0.75 x statement F1 + 0.25 x embedding similarity).

    The statement classification is shared with FactualCorrectness (one judgement); the
    similarity needs one embeddings request with the LLM judge. A response or reference
    without statements is ``not_applicable`` (RAGAS collections returns 1.0 when either
    list is empty).
    """

    name = "answer_correctness"
    family = Family.RAGAS
    required_fields = ("user_input", "response", "reference")
    judgements = (statement_classification,)

    async def measure(self, sample: Sample, judge: Judge) -> Measured | NotApplicable:
        counts = await classify(sample, judge)
        if isinstance(counts, NotApplicable):
            return counts
        similarity = await embedding_similarity(judge, sample.given("response"), sample.given("reference"))
        value = answer_correctness_score(counts["tp"], counts["fp"], counts["fn"], similarity)
        return Measured(value, f"F1 {f_beta(counts['tp'], counts['fp'], counts['fn']):.2f} (TP {counts['tp']}, "
                               f"FP {counts['fp']}, FN {counts['fn']}), similarity {similarity:.2f}",
                        {**counts, "similarity": round(similarity, 4)})
