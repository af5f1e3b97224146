"""The shared shape of Azure AI Evaluation's 1-5 Likert evaluators."""
from __future__ import annotations

from typing import Any, ClassVar

from metrics.base import Measured, Metric, NotApplicable
from metrics.judges.base import Judge, JudgeError
from metrics.samples import Sample


class LikertMetric(Metric):
    """A 1-5 Likert judgement, higher is better, default threshold 3 (Azure's).

    A score outside 1..5 from the judge is a ``judge_error``, never accepted (Azure
    accepts 7 and 2.5, metric-spec fault 3). Subclasses name the ``criterion`` and map
    a sample to the judge's texts.
    """

    family = "azure"
    value_range = (1.0, 5.0)
    default_threshold = 3.0
    criterion: ClassVar[str]

    def texts(self, sample: Sample) -> dict[str, Any]:
        """The texts the criterion reads: query, response, contexts, ground truth."""
        return {"query": sample.user_input, "response": sample.response, "contexts": sample.retrieved_contexts,
                "ground_truth": sample.reference}

    def precheck(self, sample: Sample, judge: Judge) -> Measured | NotApplicable | None:
        """An outcome decided without the judge (nothing retrieved...), or ``None``."""
        return None

    async def measure(self, sample: Sample, judge: Judge) -> Measured | NotApplicable:
        decided = self.precheck(sample, judge)
        if decided is not None:
            return decided
        score, reason = await judge.likert(self.criterion, self.texts(sample))
        if type(score) is not int or not 1 <= score <= 5:
            raise JudgeError(f"{self.criterion} score must be an integer from 1 to 5, got {score!r}")
        return Measured(float(score), reason, {"score": score})
