"""Judges: what decides per-item verdicts. Metrics do the arithmetic on those verdicts."""
from metrics.judges.base import AnswerRelevanceJudgement, Judge, JudgeError, Usage, Verdict
from metrics.judges.offline import OfflineJudge

__all__ = ["AnswerRelevanceJudgement", "Judge", "JudgeError", "OfflineJudge", "Usage", "Verdict"]
