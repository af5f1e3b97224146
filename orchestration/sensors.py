"""The sensor: a new folder under datasets/ becomes a partition (renamed to a key that
sorts by time by ``rag_eval.assets.registration``, the rule of ``rag-eval register``) and is
evaluated; a changed samples.jsonl of a known version is re-ingested (the metrics that read
what changed are then re-run by the nightly evaluation, ``rag_eval.orchestration.automation``)."""

import dagster as dg

from rag_eval.assets.partitions import DATASET_VERSIONS, dataset_versions
from rag_eval.assets.registration import adopt_folder
from rag_eval.assets.resources import DatasetStore
from rag_eval.orchestration.automation import SENSOR_INTERVAL
from rag_eval.orchestration.jobs import evaluation_job, ingestion_job
from rag_eval.orchestration.records import changed_since_ingestion


@dg.sensor(jobs=[evaluation_job, ingestion_job], minimum_interval_seconds=SENSOR_INTERVAL,
           default_status=dg.DefaultSensorStatus.STOPPED,
           description="Registers new dataset version folders and requests their evaluation; re-ingests "
                       "versions whose samples.jsonl changed. Interval: RAG_EVAL_SENSOR_INTERVAL seconds "
                       "(default 60).")
def new_dataset_versions(context: dg.SensorEvaluationContext, dataset_store: DatasetStore):
    """Compare the dataset folders with the registered partitions and the last ingestion."""
    known = set(context.instance.get_dynamic_partitions(DATASET_VERSIONS))
    on_disk = dataset_store.versions()
    new = sorted({adopt_folder(dataset_store, v) for v in on_disk if v not in known} - known)
    requests = [dg.RunRequest(job_name=evaluation_job.name, partition_key=v, run_key=f"new-{v}") for v in new]
    for version in sorted(known & set(on_disk)):
        if digest := changed_since_ingestion(context.instance, dataset_store.samples_path(version), version):
            requests.append(dg.RunRequest(job_name=ingestion_job.name, partition_key=version,
                                          run_key=f"changed-{version}-{digest[:12]}"))
    if not requests:
        return dg.SkipReason("no new or changed dataset version")
    return dg.SensorResult(run_requests=requests,
                           dynamic_partitions_requests=[dataset_versions.build_add_request(new)] if new else [])
