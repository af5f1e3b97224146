"""Framework-free RAG metrics: no Dagster import anywhere under this package.

Quick use::

    from rag_eval.metrics import evaluate
    result = evaluate("examples/fiqa/samples.jsonl")   # offline judge, five core metrics
    result.summary["metrics_score"]

Custom metrics (a YAML file) and installed plugin metrics are in the registry
``build_registry("custom_metrics.yaml")`` returns, passed as ``registry=`` (the default is the
built-in metrics; importing ``metrics`` never reads a file or loads a plugin).
"""
from rag_eval.metrics.stats.calibrate import calibrate
from rag_eval.metrics.evaluate import EvaluationResult, evaluate, score_sample
from rag_eval.metrics.judges import Judge, JudgeError, OfflineJudge
from rag_eval.metrics.core.registry import CORE_METRICS, Registry, build_metrics, build_registry, builtin_registry
from rag_eval.metrics.core.results import Direction, MetricResult, Status
from rag_eval.metrics.core.samples import Sample, load_samples

__all__ = ["CORE_METRICS", "Direction", "EvaluationResult", "Judge", "JudgeError", "MetricResult",
           "OfflineJudge", "Registry", "Sample", "Status", "build_metrics", "build_registry", "builtin_registry",
           "calibrate", "evaluate", "load_samples", "score_sample"]
