"""Ingestion: a dataset version's file into one asset per field, plus the rejected rows.

Each field (questions, responses, retrieved contexts, references, and the retrieval
ground truth and retrieved documents of DocumentRetrieval) is its own asset with
a data version that is the hash of its content, so a metric asset depends only on the
fields it reads: changing only the responses of a version makes only the
response-dependent metrics stale. Rows that fail the data-quality suite are kept in
``rejected_samples`` with the failing field and the reason; the metrics run on the rest.
"""

import hashlib
import json

import dagster as dg
import pandas as pd

from assets.partitions import dataset_versions
from assets.quality import validate
from assets.resources import DatasetStore
from metrics.registry import CORE_METRICS, METRICS
from metrics.samples import FIELDS, Sample, load_samples, sample_from_dict, samples_to_frame

#: Field of the sample model -> the asset holding it.
FIELD_ASSETS = {"user_input": "questions", "response": "responses", "retrieved_contexts": "retrieved_contexts",
                "reference": "references", "retrieval_ground_truth": "retrieval_ground_truth",
                "retrieved_documents": "retrieved_documents"}


class IngestConfig(dg.Config):
    """``max_rejected_share``: the share of rejected rows above which the version fails."""

    max_rejected_share: float = 0.05


def selected_fields(asset_selection: set[dg.AssetKey] | None) -> list[str]:
    """The fields read by the metric assets of the run (the core metrics' when it selects none)."""
    selected = [m for m in METRICS if asset_selection and dg.AssetKey(m) in asset_selection] or CORE_METRICS
    return [f for f in FIELDS if any(f in METRICS[m].required_fields for m in selected)]


def content_version(frame: pd.DataFrame, column: str) -> dg.DataVersion:
    """SHA-256 of the (id, value) pairs of ``column``, in row order."""
    pairs = [[str(i), v] for i, v in zip(frame["id"], frame[column])]
    digest = hashlib.sha256(json.dumps(pairs, ensure_ascii=True, default=str).encode()).hexdigest()
    return dg.DataVersion(digest[:16])


@dg.multi_asset(
    partitions_def=dataset_versions,
    group_name="ingestion",
    outs={
        **{asset: dg.AssetOut(code_version="1", kinds={"pandas"}, metadata={"partition_expr": "version"},
                              description=f"The {field} of the version's accepted samples (id, row, {field}).")
           for field, asset in FIELD_ASSETS.items()},
        "rejected_samples": dg.AssetOut(code_version="1", kinds={"pandas"}, metadata={"partition_expr": "version"},
                                        description="Rows that failed the data-quality suite: row, id, field, reason."),
    },
    check_specs=[dg.AssetCheckSpec("rejected_share_within_limit", asset="rejected_samples", blocking=True,
                                   partitions_def=dataset_versions,
                                   description="The share of rejected rows is at most max_rejected_share.")],
)
def ingest_dataset(context: dg.AssetExecutionContext, config: IngestConfig, dataset_store: DatasetStore):
    """Load ``<datasets>/<version>/samples.jsonl``, validate it, split it into field assets."""
    version = context.partition_key
    path = dataset_store.samples_path(version)
    samples = samples_to_frame(load_samples(path))
    if samples.empty:
        raise dg.Failure(f"{path} holds no samples (empty or blank lines only)")
    fields = selected_fields(context.run.asset_selection or context.job_def.asset_layer.selected_asset_keys)
    failures, statistics = validate(samples, fields)
    rejected_rows = {f["row"] for f in failures}
    accepted = samples[~samples["row"].isin(rejected_rows)]
    context.log.info(f"{version}: {len(samples)} rows, {len(rejected_rows)} rejected, checked fields {fields}")
    for field, asset in FIELD_ASSETS.items():
        frame = accepted[["id", "row", field]].assign(version=version).reset_index(drop=True)
        frame[field] = frame[field].map(as_text).astype("string")  # VARCHAR in DuckDB, even when all empty
        yield dg.Output(frame, output_name=asset, data_version=content_version(frame, field),
                        metadata={"num_rows": len(frame)})
    raw = dict(zip(samples["row"], samples.drop(columns=["problems"]).to_dict("records")))
    rejected = pd.DataFrame(failures, columns=["row", "id", "field", "reason"]).assign(
        version=version, sample=lambda f: [json.dumps(raw[r], ensure_ascii=False, default=str) for r in f["row"]])
    share = len(rejected_rows) / len(samples)
    source = hashlib.sha256(path.read_bytes()).hexdigest()
    yield dg.Output(rejected, output_name="rejected_samples", data_version=content_version(rejected, "reason"),
                    metadata={"rejected_rows": len(rejected_rows), "rejected_share": share, "total_rows": len(samples),
                              "source_sha256": source, "checked_fields": fields,
                              "dataset_meta": dg.MetadataValue.json(dataset_store.meta(version)),
                              "suite": dg.MetadataValue.json(statistics)})
    yield dg.AssetCheckResult(
        check_name="rejected_share_within_limit", asset_key="rejected_samples",
        passed=share <= config.max_rejected_share,
        metadata={"rejected_share": share, "limit": config.max_rejected_share, "rejected_rows": len(rejected_rows),
                  "failures": dg.MetadataValue.json(failures[:50])},
    )


def as_text(value) -> str | None:
    """A field value as stored in its asset: strings as they are, lists as JSON text."""
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def samples_from_fields(frames: dict[str, pd.DataFrame]) -> list[Sample]:
    """Samples rebuilt from field assets (``{field: frame}``); fields not given stay ``None``."""
    merged = None
    for field, frame in frames.items():
        part = frame[["id", "row", field]]
        merged = part if merged is None else merged.merge(part, on=["id", "row"], how="inner")
    lists = {"retrieved_contexts", "retrieval_ground_truth", "retrieved_documents"}
    return [sample_from_dict({**{f: _decode(record.get(f), f in lists) for f in FIELDS}, "id": record["id"]},
                             int(record["row"])) for record in merged.sort_values("row").to_dict("records")]


def _decode(value, is_list: bool):
    if value is None or (isinstance(value, float) and value != value) or value is pd.NA:
        return None
    return json.loads(value) if is_list and isinstance(value, str) else value
