"""Framework-free RAG metrics: no Dagster import anywhere under this package.

Quick use::

    from metrics import evaluate
    result = evaluate("examples/fiqa/samples.jsonl")   # offline judge, five core metrics
    result.summary["metrics_score"]

Custom metrics (``./custom_metrics.yaml``) and installed plugin metrics join the registry when
``load_extensions()`` is called (the CLI and the Dagster definitions call it; importing
``metrics`` never reads a file or loads a plugin).
"""
from metrics.calibrate import calibrate
from metrics.evaluate import EvaluationResult, evaluate, score_sample
from metrics.judges import Judge, JudgeError, OfflineJudge
from metrics.registry import CORE_METRICS, METRICS, build_metrics, load_extensions
from metrics.results import Direction, MetricResult, Status
from metrics.samples import Sample, load_samples

__all__ = ["CORE_METRICS", "METRICS", "Direction", "EvaluationResult", "Judge", "JudgeError", "MetricResult",
           "OfflineJudge", "Sample", "Status", "build_metrics", "calibrate", "evaluate", "load_extensions",
           "load_samples", "score_sample"]
