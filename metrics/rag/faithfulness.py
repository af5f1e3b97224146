"""Faithfulness: the share of the response's statements that the contexts support."""
from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from rag_eval.metrics.core.base import Family, Measured, Metric, NotApplicable, nothing_retrieved
from rag_eval.metrics.judgements.base import Judgement
from rag_eval.metrics.judgements.statement_support import Statements, statement_support, support_verdicts
from rag_eval.metrics.judges.base import Judge
from rag_eval.metrics.core.samples import Sample
from rag_eval.metrics.text import statements as split_statements


def faithfulness_score(supports: Sequence[float]) -> float | None:
    """Mean support of the statements judged: the share supported, for 0/1 verdicts.

    Parameters
    ----------
    supports : sequence of float in [0, 1]
        One per statement: the verdict (1 when the contexts support it, an LLM judge's), or a
        judge's probability of support (the offline verifier's, ``Verdict.support``).

    Returns
    -------
    float in [0, 1] or None
        Higher is better; ``None`` when there is no statement (nothing to judge).

    Raises
    ------
    ValueError
        If a value is outside [0, 1].

    References
    ----------
    Es et al., "RAGAS: Automated Evaluation of Retrieval Augmented Generation", 2023;
    RAGAS 0.4.3 ``faithfulness``. Example: ``[1, 0, 1, 1]`` gives 0.75; graded ``[0.9, 0.2]`` 0.55.
    """
    if any(not 0 <= v <= 1 for v in supports):
        raise ValueError(f"supports must be in [0, 1], got {list(supports)}")
    return sum(supports) / len(supports) if supports else None


class Faithfulness(Metric):
    """Faithfulness of ``response`` to ``retrieved_contexts``, on [0, 1], higher is better.

    Statements come from deterministic segmentation of the response (evasive sentences
    are not statements); the judge gives one verdict per statement. A response with no
    checkable statement is ``not_applicable`` (RAGAS returns NaN); with statements but
    no retrieved context it scores 0.0 (regression case BR-04).
    """

    name = "faithfulness"
    family = Family.CORE
    required_fields = ("user_input", "response", "retrieved_contexts")
    judgements = (statement_support,)

    def asks(self, sample: Sample) -> list[tuple[Judgement, BaseModel]]:
        """The support of the response's statements, when it has some and a context was retrieved."""
        statements = split_statements(sample.given("response"), sample.given("user_input"))
        if not statements or nothing_retrieved(sample.given("retrieved_contexts")):
            return []
        return [(statement_support, Statements(statements=statements, contexts=sample.given("retrieved_contexts")))]

    async def measure(self, sample: Sample, judge: Judge) -> Measured | NotApplicable:
        statements = split_statements(sample.given("response"), sample.given("user_input"))
        if not statements:
            return NotApplicable("no_factual_statements: the response makes no checkable statement")
        if nothing_retrieved(sample.given("retrieved_contexts")):
            return Measured(0.0, f"no context retrieved: none of the {len(statements)} statements is supported",
                            {"statements": [{"statement": s, "verdict": 0} for s in statements]})
        verdicts = await support_verdicts(judge, statements, sample.given("retrieved_contexts"))
        items = [{"statement": s, "verdict": v.verdict, "support": v.support, "reason": v.reason, **v.evidence}
                 for s, v in zip(statements, verdicts)]
        supported = sum(v.verdict for v in verdicts)
        value = faithfulness_score([v.support for v in verdicts])
        assert value is not None  # there are statements, and a verdict for each
        return Measured(value,
                        f"{supported}/{len(statements)} statements supported by the contexts", {"statements": items})
