"""Judges: what decides per-item verdicts. Metrics do the arithmetic on those verdicts."""
from metrics.judges.base import Judge, JudgeError, Usage, Verdict
from metrics.judges.offline import OfflineJudge

__all__ = ["Judge", "JudgeError", "OfflineJudge", "Usage", "Verdict"]
