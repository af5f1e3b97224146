"""The nightly schedule: evaluate versions never evaluated, re-run what Dagster reports stale."""
import os

import dagster as dg

from assets.partitions import dataset_versions
from metrics.registry import METRICS
from orchestration.jobs import evaluation_job
from orchestration.staleness import latest_materialization, stale_assets

NIGHTLY_CRON = os.environ.get("RAG_EVAL_CRON", "0 2 * * *")
NIGHTLY_TIMEZONE = os.environ.get("RAG_EVAL_TIMEZONE", "UTC")


def evaluated() -> list[str]:
    """The assets the schedule keeps fresh: every registered metric and the summary."""
    return [*METRICS, "eval_summary"]


def nightly_requests(instance: dg.DagsterInstance, repository: dg.RepositoryDefinition,
                     tick: str) -> list[dg.RunRequest]:
    """One run per version never summarized (``evaluation_job``, the whole core graph), and one
    per version with stale metric assets or a stale summary (exactly those assets), in key
    order. Staleness is Dagster's own (:func:`orchestration.staleness.stale_assets`), the same
    the UI shows as "Unsynced". ``tick`` makes the run keys unique per night."""
    requests = []
    for version in sorted(instance.get_dynamic_partitions(dataset_versions.name)):
        if latest_materialization(instance, "eval_summary", version) is None:
            requests.append(dg.RunRequest(run_key=f"{version}-{tick}", partition_key=version,
                                          tags={"rag_eval/reason": "not evaluated"}))
            continue
        stale = stale_assets(instance, repository, version, evaluated())
        if "eval_summary" in stale:  # a new summary (results.parquet) makes the comparison out of date
            stale["baseline_comparison"] = "its eval_summary is re-run"
            stale["label_estimates"] = "its eval_summary is re-run"  # they go into the summary.json it rewrites
        if stale:
            # The summary of a partial re-run still describes the whole version (scope "version").
            config = {"ops": {"eval_summary": {"config": {"scope": "version"}}}} if "eval_summary" in stale else None
            requests.append(dg.RunRequest(run_key=f"{version}-{tick}", partition_key=version,
                                          asset_selection=[dg.AssetKey(a) for a in stale], run_config=config,
                                          tags={"rag_eval/reason": "; ".join(f"{a}: {w}" for a, w in stale.items())}))
    return requests


@dg.schedule(job=evaluation_job, cron_schedule=NIGHTLY_CRON, execution_timezone=NIGHTLY_TIMEZONE,
             default_status=dg.DefaultScheduleStatus.STOPPED,
             description="Evaluate versions not yet evaluated; re-materialize the metric assets and summaries "
                         "Dagster reports stale (Unsynced). Cron and timezone from RAG_EVAL_CRON and "
                         "RAG_EVAL_TIMEZONE.")
def nightly_evaluation(context: dg.ScheduleEvaluationContext):
    """The night's run requests (see :func:`nightly_requests`)."""
    requests = nightly_requests(context.instance, context.repository_def,
                                f"{context.scheduled_execution_time:%Y%m%dT%H%M}")
    return requests or dg.SkipReason("every version is evaluated and fresh")
