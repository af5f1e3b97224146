"""Framework-free RAG metrics: no Dagster import anywhere under this package.

Quick use::

    from rag_eval.metrics import evaluate
    result = evaluate("examples/fiqa/samples.jsonl")   # offline judge, five core metrics
    result.summary["metrics_score"]

Custom metrics (``./custom_metrics.yaml``) and installed plugin metrics join the registry when
``load_extensions()`` is called (the CLI and the Dagster definitions call it; importing
``metrics`` never reads a file or loads a plugin).
"""
from rag_eval.metrics.stats.calibrate import calibrate
from rag_eval.metrics.evaluate import EvaluationResult, evaluate, score_sample
from rag_eval.metrics.judges import Judge, JudgeError, OfflineJudge
from rag_eval.metrics.core.registry import CORE_METRICS, METRICS, build_metrics, load_extensions
from rag_eval.metrics.core.results import Direction, MetricResult, Status
from rag_eval.metrics.core.samples import Sample, load_samples

__all__ = ["CORE_METRICS", "METRICS", "Direction", "EvaluationResult", "Judge", "JudgeError", "MetricResult",
           "OfflineJudge", "Sample", "Status", "build_metrics", "calibrate", "evaluate", "load_extensions",
           "load_samples", "score_sample"]
