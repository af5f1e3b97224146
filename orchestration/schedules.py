"""The nightly schedule: evaluate new versions, re-materialize stale metric assets."""
import os

import dagster as dg

from assets.partitions import dataset_versions
from orchestration.jobs import evaluation_job
from orchestration.staleness import latest_materialization, stale_metrics

NIGHTLY_CRON = os.environ.get("RAG_EVAL_CRON", "0 2 * * *")
NIGHTLY_TIMEZONE = os.environ.get("RAG_EVAL_TIMEZONE", "UTC")


def nightly_requests(instance: dg.DagsterInstance, tick: str) -> list[dg.RunRequest]:
    """One run per version never summarized (the whole graph) or with stale metric
    assets (those and the summary); ``tick`` makes the run keys unique per night."""
    requests = []
    for version in instance.get_dynamic_partitions(dataset_versions.name):
        if latest_materialization(instance, "eval_summary", version) is None:
            requests.append(dg.RunRequest(run_key=f"{version}-{tick}", partition_key=version,
                                          tags={"rag_eval/reason": "not evaluated"}))
            continue
        stale = stale_metrics(instance, version)
        if stale:
            keys = [dg.AssetKey(m) for m in sorted(stale)] + [dg.AssetKey("eval_summary")]
            requests.append(dg.RunRequest(run_key=f"{version}-{tick}", partition_key=version, asset_selection=keys,
                                          tags={"rag_eval/reason": "; ".join(f"{m}: {w}" for m, w in stale.items())}))
    return requests


@dg.schedule(job=evaluation_job, cron_schedule=NIGHTLY_CRON, execution_timezone=NIGHTLY_TIMEZONE,
             default_status=dg.DefaultScheduleStatus.STOPPED,
             description="Evaluate versions not yet evaluated; re-materialize stale metric assets. "
                         "Cron and timezone from RAG_EVAL_CRON and RAG_EVAL_TIMEZONE.")
def nightly_evaluation(context: dg.ScheduleEvaluationContext):
    """The night's run requests (see :func:`nightly_requests`)."""
    requests = nightly_requests(context.instance, f"{context.scheduled_execution_time:%Y%m%dT%H%M}")
    return requests or dg.SkipReason("every version is evaluated and fresh")
