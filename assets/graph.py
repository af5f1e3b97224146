"""The pipeline's asset graph, listed in this one place.

The code location's ``Definitions`` (``rag_eval.orchestration.definitions``), every ``rag-eval``
command that materializes something (``run``, ``backfill``, the label refresh, ``sweep``) and the
tests build their definitions from :func:`asset_graph`; what each of them runs is a named
selection of it (``rag_eval.orchestration.jobs``).
"""
import dagster as dg

from rag_eval.assets.cascade import strong_sample_asset
from rag_eval.assets.evaluation import metric_assets
from rag_eval.assets.gate import gate_asset
from rag_eval.assets.ingestion import ingestion_asset
from rag_eval.assets.labels import human_labels_asset, label_estimates_asset
from rag_eval.assets.quality_check import quality_check
from rag_eval.assets.summary import summary_asset
from rag_eval.assets.targets import target_assets
from rag_eval.assets.traffic import traffic_assets
from rag_eval.metrics.core.registry import Registry
from rag_eval.metrics.sources.traffic import TrafficConfig


def asset_graph(registry: Registry, traffic: TrafficConfig | None = None) -> list[dg.AssetsDefinition]:
    """Every asset and asset check of the pipeline: the target system's assets (``rag-eval
    sweep``), the ingestion of a dataset version and its great-expectations checks, one asset per
    metric of ``registry``, the judge cascade's strong sample, the summary, the human labels and the
    estimates they correct, the regression gate, and the traffic group's assets when ``traffic``
    settings are given.

    ``registry``: the metrics, with the custom and plugin ones the caller chose
    (``rag_eval.metrics.core.registry.build_registry``; the built-in ones: ``builtin_registry()``).
    """
    return [*target_assets, ingestion_asset(registry), quality_check(registry), *metric_assets(registry),
            strong_sample_asset(registry), summary_asset(registry), human_labels_asset(registry), label_estimates_asset(registry),
            gate_asset(registry), *(traffic_assets(traffic) if traffic else [])]
