"""The code location's definitions, built from the one asset graph (``rag_eval.assets.graph``).

``rag_eval.orchestration.definitions`` (what ``dagster dev -w workspace.yaml`` loads) is
:func:`build_definitions` with the resources the environment configures; each ``rag-eval``
command builds the same definitions with its own resources and runs a job of them in-process.
"""
import dagster as dg

from rag_eval.assets.graph import asset_graph
from rag_eval.assets.resources import build_resources
from rag_eval.assets.traffic_store import TrafficStore
from rag_eval.metrics.core.registry import Registry
from rag_eval.metrics.sources.traffic import TrafficConfig
from rag_eval.orchestration.automation import automated, nightly_evaluation
from rag_eval.orchestration.jobs import JOBS
from rag_eval.orchestration.sensors import new_dataset_versions
from rag_eval.orchestration.traffic import traffic_job, traffic_sensor


def build_definitions(registry: Registry, resources: dict | None = None) -> dg.Definitions:
    """The code location's definitions over the metrics of ``registry`` (the entry point built it once:
    ``rag_eval.metrics.core.registry.build_registry``). ``resources``: those of
    ``rag_eval.assets.resources.build_resources`` (default: its defaults, the judge the environment
    configures).

    Raises
    ------
    SettingsError
        As ``rag_eval.metrics.sources.traffic.TrafficConfig.load`` does for bad traffic settings.
    OSError
        For a trace file of the traffic source that cannot be read (``TrafficConfig.started``).
    """
    traffic = TrafficConfig.load(registry=registry)  # [tool.rag_eval.traffic] of ./pyproject.toml
    store = TrafficStore()
    traffic = traffic.started(store.index(traffic))  # the partitions begin at the first day with traces
    return dg.Definitions(
        # Each asset with its automation condition (orchestration/automation.py: the nightly evaluation).
        assets=automated(asset_graph(registry, traffic)),
        jobs=[*JOBS, traffic_job(traffic)],
        sensors=[new_dataset_versions, nightly_evaluation, traffic_sensor(traffic)],
        # datasets/ and out/ (tables/<asset>/<version>.parquet and the views of rag_eval.duckdb); the
        # judge the environment configures; `local` execution (`spark`: docs/how-to/spark.md).
        # out/traffic/ (one folder per traffic partition) and the traffic settings of ./pyproject.toml.
        resources={**(resources or build_resources()), "traffic_store": store},
        # In-process: on a machine of few cores the multiprocess executor is slower (docs/performance.md, Spark).
        executor=dg.in_process_executor,
    )
