"""The shared shape of Azure AI Evaluation's 1-5 Likert evaluators."""
from __future__ import annotations

from rag_eval.metrics.core.base import Family, Measured, Metric, NotApplicable
from rag_eval.metrics.judgements.likert import LikertTexts
from rag_eval.metrics.judges.base import Judge
from rag_eval.metrics.core.samples import Sample


class LikertMetric(Metric):
    """A 1-5 Likert judgement, higher is better, default threshold 3 (Azure's).

    A score outside 1..5 from the judge is a ``judge_error``, never accepted (Azure
    accepts 7 and 2.5 from its LLM). Subclasses name their judgement (one of
    ``rag_eval.metrics.judgements.likert_*``) in ``judgements``.
    """

    family = Family.AZURE
    value_range = (1.0, 5.0)
    default_threshold = 3.0

    def texts(self, sample: Sample) -> LikertTexts:
        """The texts the criterion reads: query (with the earlier turns of a conversation:
        ``Sample.question``), response, contexts, ground truth."""
        return LikertTexts(query=None if sample.user_input is None else sample.question(), response=sample.response, contexts=sample.retrieved_contexts,
                           ground_truth=sample.reference)

    def precheck(self, sample: Sample, judge: Judge) -> Measured | NotApplicable | None:
        """An outcome decided without the judge (nothing retrieved...), or ``None``."""
        return None

    async def measure(self, sample: Sample, judge: Judge) -> Measured | NotApplicable:
        decided = self.precheck(sample, judge)
        if decided is not None:
            return decided
        [judgement] = self.judgements
        verdict = await judge.ask(judgement, self.texts(sample))
        return Measured(float(verdict.score), verdict.reason, {"score": verdict.score})
