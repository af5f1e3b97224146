"""The great-expectations suite of a version (``assets.quality``) as a non-blocking asset check.

``quality_suite`` checks ``rejected_samples`` against the version's stored field assets: GE's
verdicts on the suite for the run's selected metrics, severity WARN. It is not blocking:
what blocks a version is ``rejected_share_within_limit`` (``assets.ingestion``), decided by
the sample model's own rules, the rules the suite's expectations state; so the metrics never
wait for GE (its import takes ~4 s of CPU). Its step runs last among the steps ready
(``dagster/priority`` -1): in ``rag-eval run`` after the summary, by when the worker started
with the command has given the verdicts the ingestion asked for (``assets.quality.settle``).
A version whose blocking check fails has no verdict of it (its step is skipped with the metrics).
"""
import dagster as dg
import pandas as pd

from assets.evaluation import FieldSamples
from assets.ingestion import FIELD_ASSETS, selected_metrics
from assets.partitions import dataset_versions
from assets.quality import settled, suite_verdicts, validation_frame
from metrics.scoring import CHUNK_ROWS


@dg.asset_check(
    asset="rejected_samples", name="quality_suite", blocking=False, partitions_def=dataset_versions,
    required_resource_keys={"io_manager", "dataset_store"}, op_tags={"dagster/priority": "-1"},
    additional_deps=list(dict.fromkeys(FIELD_ASSETS.values())),
    description="great-expectations' suite on the version's fields for the selected metrics: every line usable, "
                "each field read present, typed, non-empty and within bounds, unique ids (WARN, not blocking).",
)
def quality_suite(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
    """GE's verdicts on the version's stored fields (read a chunk of rows at a time)."""
    version = context.partition_key
    required = selected_metrics(context.run.asset_selection or context.job_def.asset_layer.selected_asset_keys)
    fields = list(dict.fromkeys(f for needs in required.values() for f in needs))
    database = context.resources.io_manager
    with database.connection() as connection:
        tables = database.stored(connection, version, [FIELD_ASSETS[f] for f in fields])
    if missing := [f for f in fields if FIELD_ASSETS[f] not in tables]:
        raise dg.Failure(f"version {version} has no {', '.join(FIELD_ASSETS[f] for f in missing)} rows: "
                         "materialize ingest_dataset for it first", allow_retries=False)
    keep = context.resources.dataset_store.samples_path(version).parent / ".quality"
    verdicts = settled(context.run.run_id, keep)  # asked for by this run's ingestion
    if verdicts is None:
        samples = FieldSamples.stored({f: tables[FIELD_ASSETS[f]] for f in fields}, database.connection)
        frame = pd.concat([validation_frame(samples[start:start + CHUNK_ROWS], required)
                           for start in range(0, len(samples), CHUNK_ROWS)], ignore_index=True)
        verdicts = suite_verdicts(frame, required, keep)
    return dg.AssetCheckResult(passed=not verdicts["failed"], severity=dg.AssetCheckSeverity.WARN,
                               metadata={**{k: v for k, v in verdicts["statistics"].items() if k != "failed_expectations"},
                                         "failed_expectations": dg.MetadataValue.json(
                                             verdicts["statistics"]["failed_expectations"]),
                                         "metrics": list(required)})
