"""The code location: ``dagster dev -w workspace.yaml`` loads ``defs`` from here."""
import dagster as dg

from assets.evaluation import metric_assets
from assets.gate import baseline_comparison
from assets.ingestion import ingest_dataset
from assets.quality_check import quality_suite
from assets.resources import build_resources
from assets.summary import eval_summary
from assets.targets import target_assets
from assets.traffic import TrafficStore, traffic_assets
from orchestration.jobs import JOBS
from orchestration.schedules import nightly_evaluation
from orchestration.sensors import new_dataset_versions
from orchestration.traffic import new_traffic, traffic_job

defs = dg.Definitions(
    assets=[*target_assets, ingest_dataset, quality_suite, *metric_assets, eval_summary, baseline_comparison,
            *traffic_assets],
    jobs=[*JOBS, traffic_job],
    schedules=[nightly_evaluation],
    sensors=[new_dataset_versions, new_traffic],
    # datasets/ and out/ (rag_eval.duckdb: one table per asset, rows keyed by `version`); the
    # judge the environment configures; `local` execution (`spark`: see the README).
    # out/traffic/ (one folder per traffic partition) and the traffic settings of ./pyproject.toml.
    resources={**build_resources(), "traffic_store": TrafficStore()},
    # Two cores: the multiprocess executor is 2.5x slower here (shared/docs/dagster-notes.md).
    executor=dg.in_process_executor,
)
