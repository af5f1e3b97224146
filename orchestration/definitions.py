"""The code location: ``dagster dev -w workspace.yaml`` loads ``defs`` from here."""
import dagster as dg

from assets.evaluation import metric_assets
from assets.ingestion import eval_samples
from assets.resources import DatasetStore, JudgeResource, ReportStore
from assets.summary import eval_summary
from orchestration.jobs import evaluation_job

defs = dg.Definitions(
    assets=[eval_samples, *metric_assets, eval_summary],
    jobs=[evaluation_job],
    resources={
        "dataset_store": DatasetStore(),
        "report_store": ReportStore(),
        "judge": JudgeResource(),
    },
    # Two cores: the multiprocess executor is 2.5x slower here (shared/docs/dagster-notes.md).
    executor=dg.in_process_executor,
)
