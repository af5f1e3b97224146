"""ContextRecall: the share of the reference's statements attributable to the contexts."""
from __future__ import annotations

from pydantic import BaseModel

from rag_eval.metrics.core.base import Family, Measured, Metric, NotApplicable, nothing_retrieved
from rag_eval.metrics.judgements.base import Judgement
from rag_eval.metrics.judgements.reference_attribution import ReferenceStatements, reference_attribution
from rag_eval.metrics.judges.base import Judge, expect_count
from rag_eval.metrics.rag.faithfulness import faithfulness_score
from rag_eval.metrics.core.samples import Sample
from rag_eval.metrics.text import statements as split_statements


class ContextRecall(Metric):
    """Recall of ``reference`` in ``retrieved_contexts``, on [0, 1], higher is better.

    The reference is split deterministically into statements (so the denominator never
    depends on the judge, as RAGAS's does) and each gets one attribution verdict.
    Score = attributed / statements (RAGAS ``context_recall``; example [1, 1, 0] gives
    2/3). A reference without statements is ``not_applicable``; an empty context list
    scores 0.0 (regression case BR-04). Unlike dingo 2.5, the reference is read, never
    the response (fault 9).
    """

    name = "context_recall"
    family = Family.CORE
    required_fields = ("user_input", "retrieved_contexts", "reference")
    judgements = (reference_attribution,)

    def asks(self, sample: Sample) -> list[tuple[Judgement, BaseModel]]:
        """The attribution of the reference's statements, when it has some and a context was retrieved."""
        statements = split_statements(sample.given("reference"), sample.given("user_input"))
        if not statements or nothing_retrieved(sample.given("retrieved_contexts")):
            return []
        return [(reference_attribution, _attribution(sample, statements))]

    async def measure(self, sample: Sample, judge: Judge) -> Measured | NotApplicable:
        statements = split_statements(sample.given("reference"), sample.given("user_input"))
        if not statements:
            return NotApplicable("the reference has no statement to attribute")
        if nothing_retrieved(sample.given("retrieved_contexts")):
            return Measured(0.0, f"no context retrieved: none of the {len(statements)} reference statements "
                            "is attributable", {"statements": [{"statement": s, "attributed": 0} for s in statements]})
        judged = await judge.ask(reference_attribution, _attribution(sample, statements))
        verdicts = expect_count(judged.verdicts, len(statements), "verdicts")
        items = [{"statement": s, "attributed": v.verdict, "support": v.support, "reason": v.reason}
                 for s, v in zip(statements, verdicts)]
        attributed = sum(v.verdict for v in verdicts)
        value = faithfulness_score([v.support for v in verdicts])
        assert value is not None  # there are statements, and a verdict for each
        return Measured(value,
                        f"{attributed}/{len(statements)} reference statements attributable to the contexts",
                        {"statements": items})


def _attribution(sample: Sample, statements: list[str]) -> ReferenceStatements:
    """The ``reference_attribution`` input of the reference's ``statements``."""
    return reference_attribution.Input(user_input=sample.question(), statements=statements,
                                       contexts=sample.given("retrieved_contexts"))
