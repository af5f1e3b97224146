"""Ingestion: a dataset version's JSONL into a frame of samples, with its quality checks."""

import hashlib

import dagster as dg
import pandas as pd

from assets.partitions import dataset_versions
from assets.quality import CHECKS, run_checks
from assets.resources import DatasetStore
from metrics.samples import load_samples, samples_to_frame


@dg.asset(
    partitions_def=dataset_versions,
    group_name="ingestion",
    code_version="1",
    kinds={"pandas"},
    description="The version's samples.jsonl as one row per sample, RAGAS field names, problems recorded per row.",
    check_specs=[dg.AssetCheckSpec(name, asset="eval_samples", blocking=blocking, description=description,
                                   partitions_def=dataset_versions)
                 for name, (_, blocking, description) in CHECKS.items()],
)
def eval_samples(context: dg.AssetExecutionContext, dataset_store: DatasetStore):
    """Load the partition's samples; yield the frame, then one check result per quality check."""
    path = dataset_store.samples_path(context.partition_key)
    frame = samples_to_frame(load_samples(path))
    if frame.empty:
        raise dg.Failure(f"{path} holds no samples (empty or blank lines only)")
    with_problems = int(frame["problems"].map(bool).sum())
    context.log.info(f"loaded {len(frame)} samples from {path} ({with_problems} with malformed fields)")
    yield dg.Output(
        frame,
        data_version=dg.DataVersion(hashlib.sha256(path.read_bytes()).hexdigest()[:16]),
        metadata={"num_rows": len(frame), "rows_with_problems": with_problems, "path": str(path)},
    )
    for name, outcome in run_checks(frame).items():
        yield dg.AssetCheckResult(
            check_name=name,
            passed=outcome["passed"],
            severity=dg.AssetCheckSeverity.ERROR if outcome["blocking"] else dg.AssetCheckSeverity.WARN,
            metadata={"failing_rows": len(outcome["failing_rows"]),
                      "failures": dg.MetadataValue.json(outcome["failing_rows"][:50])},
        )
