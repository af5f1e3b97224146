"""The code location: ``dagster dev -w workspace.yaml`` loads ``defs`` from here."""
import dagster as dg

from rag_eval.assets.evaluation import metric_assets
from rag_eval.assets.gate import baseline_comparison
from rag_eval.assets.ingestion import ingest_dataset
from rag_eval.assets.labels import human_labels, label_estimates
from rag_eval.assets.quality_check import great_expectations_suite
from rag_eval.assets.resources import build_resources
from rag_eval.assets.summary import summary_asset
from rag_eval.assets.targets import target_assets
from rag_eval.assets.traffic import TrafficStore, traffic_assets
from rag_eval.metrics.core.registry import load_extensions
from rag_eval.metrics.sources.traffic import TrafficConfig
from rag_eval.orchestration.automation import automated, nightly_evaluation
from rag_eval.orchestration.jobs import JOBS
from rag_eval.orchestration.sensors import new_dataset_versions
from rag_eval.orchestration.traffic import traffic_job, traffic_sensor


def build_definitions() -> dg.Definitions:
    """The code location's definitions, after the custom metrics file and the installed plugins
    are loaded (``rag_eval.metrics.core.registry.load_extensions``: ``$RAG_EVAL_CUSTOM_METRICS``, else
    ``./custom_metrics.yaml``), so the UI, the daemon and their run workers see the CLI's metrics.

    Raises
    ------
    ValueError, OSError
        As ``load_extensions`` does: the code location fails to load, naming the file or plugin;
        as ``rag_eval.metrics.sources.traffic.TrafficConfig.load`` does for bad traffic settings.
    """
    load_extensions()
    traffic = TrafficConfig.load()  # [tool.rag_eval.traffic] of ./pyproject.toml
    return dg.Definitions(
        # Each asset with its automation condition (orchestration/automation.py: the nightly evaluation).
        assets=[*target_assets, *automated([ingest_dataset, *metric_assets(), summary_asset(), baseline_comparison,
                                            label_estimates]), great_expectations_suite, human_labels,
                *traffic_assets(traffic)],
        jobs=[*JOBS, traffic_job(traffic)],
        sensors=[new_dataset_versions, nightly_evaluation, traffic_sensor(traffic)],
        # datasets/ and out/ (tables/<asset>/<version>.parquet and the views of rag_eval.duckdb); the
        # judge the environment configures; `local` execution (`spark`: docs/how-to/spark.md).
        # out/traffic/ (one folder per traffic partition) and the traffic settings of ./pyproject.toml.
        resources={**build_resources(), "traffic_store": TrafficStore()},
        # In-process: on a machine of few cores the multiprocess executor is slower (docs/performance.md, Spark).
        executor=dg.in_process_executor,
    )


defs = build_definitions()
