"""Judges: what decides per-item verdicts. Metrics do the arithmetic on those verdicts."""
from rag_eval.metrics.judges.base import Judge, JudgeError, Verdict
from rag_eval.metrics.judges.offline import OfflineJudge
from rag_eval.metrics.judges.usage import Usage

__all__ = ["Judge", "JudgeError", "OfflineJudge", "Usage", "Verdict"]
