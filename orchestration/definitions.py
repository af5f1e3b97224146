"""The code location: ``dagster dev -w workspace.yaml`` loads ``defs`` from here."""
import dagster as dg

from assets.evaluation import metric_assets
from assets.gate import baseline_comparison
from assets.ingestion import ingest_dataset
from assets.quality_check import quality_suite
from assets.resources import build_resources
from assets.summary import eval_summary
from assets.targets import target_assets
from orchestration.automation import automated, nightly_evaluation
from orchestration.jobs import JOBS
from orchestration.sensors import new_dataset_versions

defs = dg.Definitions(
    # Each asset with its automation condition (orchestration/automation.py: the nightly evaluation).
    assets=[*target_assets, *automated([ingest_dataset, *metric_assets, eval_summary, baseline_comparison]),
            quality_suite],
    jobs=JOBS,
    sensors=[new_dataset_versions, nightly_evaluation],
    # datasets/ and out/ (tables/<asset>/<version>.parquet and the views of rag_eval.duckdb); the
    # judge the environment configures; `local` execution (`spark`: see the README).
    resources=build_resources(),
    # Two cores: the multiprocess executor is 2.5x slower here (shared/docs/dagster-notes.md).
    executor=dg.in_process_executor,
)
