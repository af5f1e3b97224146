"""The code location: ``dagster dev -w workspace.yaml`` loads ``defs`` from here."""
import dagster as dg

from assets.evaluation import metric_assets
from assets.gate import baseline_comparison
from assets.ingestion import ingest_dataset
from assets.resources import DatasetStore, ExecutionResource, JudgeResource, ReportStore, ResultsDatabase
from assets.summary import eval_summary
from orchestration.jobs import JOBS
from orchestration.schedules import nightly_evaluation
from orchestration.sensors import new_dataset_versions

defs = dg.Definitions(
    assets=[ingest_dataset, *metric_assets, eval_summary, baseline_comparison],
    jobs=JOBS,
    schedules=[nightly_evaluation],
    sensors=[new_dataset_versions],
    resources={
        "dataset_store": DatasetStore(),
        "report_store": ReportStore(),
        "judge": JudgeResource(),
        # `local` by default; `spark` scores each metric's samples in Spark tasks (see the README).
        "execution": ExecutionResource(),
        # Every asset is a DataFrame with a `version` column: one DuckDB table per asset.
        "io_manager": ResultsDatabase(database="out/rag_eval.duckdb", schema="eval"),
    },
    # Two cores: the multiprocess executor is 2.5x slower here (shared/docs/dagster-notes.md).
    executor=dg.in_process_executor,
)
