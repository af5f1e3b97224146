"""The pipeline's asset graph, listed in this one place.

The code location's ``Definitions`` (``rag_eval.orchestration.definitions``), every ``rag-eval``
command that materializes something (``run``, ``backfill``, the label refresh, ``sweep``) and the
tests build their definitions from :func:`asset_graph`; what each of them runs is a named
selection of it (``rag_eval.orchestration.jobs``).
"""
import dagster as dg

from rag_eval.assets.evaluation import metric_assets
from rag_eval.assets.gate import baseline_comparison
from rag_eval.assets.ingestion import ingest_dataset
from rag_eval.assets.labels import human_labels, label_estimates
from rag_eval.assets.quality_check import great_expectations_suite
from rag_eval.assets.summary import summary_asset
from rag_eval.assets.targets import target_assets
from rag_eval.assets.traffic import traffic_assets
from rag_eval.metrics.sources.traffic import TrafficConfig


def asset_graph(traffic: TrafficConfig | None = None) -> list[dg.AssetsDefinition]:
    """Every asset and asset check of the pipeline: the target system's assets (``rag-eval
    sweep``), the ingestion of a dataset version and its great-expectations checks, one asset per
    registered metric, the summary, the human labels and the estimates they correct, the regression
    gate, and the traffic group's assets when ``traffic`` settings are given.

    The metric assets are those of the registry as loaded when this is called: load the custom
    metrics and plugins first (``rag_eval.metrics.core.registry.load_extensions``).
    """
    return [*target_assets, ingest_dataset, great_expectations_suite, *metric_assets(), summary_asset(),
            human_labels, label_estimates, baseline_comparison, *(traffic_assets(traffic) if traffic else [])]
