"""Judges: what decides per-item verdicts. Metrics do the arithmetic on those verdicts."""
from metrics.judges.base import Judge, JudgeError, Verdict
from metrics.judges.offline import OfflineJudge
from metrics.judges.usage import Usage

__all__ = ["Judge", "JudgeError", "OfflineJudge", "Usage", "Verdict"]
