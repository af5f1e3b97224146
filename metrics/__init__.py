"""Framework-free RAG metrics: no Dagster import anywhere under this package.

Quick use::

    from metrics import evaluate
    result = evaluate("examples/fiqa/samples.jsonl")   # offline judge, five core metrics
    result.summary["metrics_score"]
"""
from metrics.calibrate import calibrate
from metrics.evaluate import EvaluationResult, evaluate, score_sample
from metrics.judges import Judge, JudgeError, OfflineJudge
from metrics.registry import CORE_METRICS, METRICS, build_metrics
from metrics.results import Direction, MetricResult, Status
from metrics.samples import Sample, load_samples

__all__ = ["CORE_METRICS", "calibrate", "METRICS", "Direction", "EvaluationResult", "Judge", "JudgeError", "MetricResult",
           "OfflineJudge", "Sample", "Status", "build_metrics", "evaluate", "load_samples", "score_sample"]
