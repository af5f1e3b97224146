"""The summary asset: per-metric rows for SQL, and the version's summary.json and results.parquet."""

import hashlib
import json

import dagster as dg
import pandas as pd

from assets.evaluation import metric_code_version
from assets.ingestion import FIELD_ASSETS
from assets.partitions import dataset_versions
from assets.resources import DatasetStore, JudgeResource, ReportStore
from metrics.aggregate import USAGE_COLUMNS, summarize
from metrics.formats import azure_rows, ragas_table, write_azure_jsonl
from metrics.registry import METRICS
from metrics.samples import load_samples


class SummaryConfig(dg.Config):
    """``scale``: 1 keeps [0, 1]; 10 writes dingo's 0-10 presentation."""

    scale: int = 1


def markdown_table(summary: dict) -> str:
    """Metric | mean | pass rate | measured/total, as a Markdown table."""
    lines = ["| metric | mean | pass rate | measured/total |", "|---|---|---|---|"]
    for metric, row in summary["metrics"].items():
        lines.append(f"| {metric} | {row['mean']} | {row['pass_rate']} | {row['measured']}/{row['total']} |")
    return "\n".join(lines)


def summary_frame(summary: dict, version: str) -> pd.DataFrame:
    """One row per metric: version, mean, pass rate, counts, threshold, direction, usage, judge."""
    rows = []
    for metric, row in summary["metrics"].items():
        rows.append({"version": version, "metric": metric, "mean": row["mean"], "pass_rate": row["pass_rate"],
                     "measured": row["measured"], "total": row["total"], "threshold": row["threshold"],
                     "direction": row["direction"], **{c: row["usage"].get(c, 0) for c in USAGE_COLUMNS},
                     **{f"n_{status}": count for status, count in summary["coverage"][metric].items()
                        if status != "total"},
                     "rejected_rows": summary["rejected"]["rows"], "judge": summary["judge"].get("judge")})
    return pd.DataFrame(rows)


SUMMARY_VERSION = "3"


def summary_code_version() -> str:
    """The summary's own version plus a digest of every metric's code version: Dagster does not
    carry staleness downstream, so a metric with a new code version makes the summary stale too."""
    metrics = hashlib.sha256(" ".join(metric_code_version(m) for m in sorted(METRICS)).encode()).hexdigest()
    return f"{SUMMARY_VERSION}-{metrics[:12]}"


@dg.asset(
    partitions_def=dataset_versions,
    group_name="summary",
    code_version=summary_code_version(),
    kinds={"pandas"},
    # The metric results are read from their files: a run may select any subset of metrics,
    # and the summary covers every metric computed for the version. The rejected rows come
    # from their materialization metadata: an empty frame has no DuckDB table to load. The
    # field assets are deps too, so a version whose data changed shows its summary stale at
    # once, like the metrics that read the changed field (Dagster does not carry staleness
    # downstream); the summary also reads the samples file for ragas_scores.csv.
    deps=[*METRICS, *FIELD_ASSETS.values(), "rejected_samples"],
    metadata={"partition_expr": "version"},
    description="Per-metric summary rows; writes summary.json (dingo layout), results.parquet, ragas_scores.csv "
                "and azure_results.jsonl for the version.",
)
def eval_summary(context: dg.AssetExecutionContext, config: SummaryConfig, report_store: ReportStore,
                 dataset_store: DatasetStore, judge: JudgeResource) -> dg.Output[pd.DataFrame]:
    """Aggregate every metric's per-row results and write the version's report files."""
    version = context.partition_key
    files = {path.stem: path for path in report_store.metric_results(version) if path.stem in METRICS}
    if not files:
        raise dg.Failure(f"no metric has been computed for version {version}")
    results = pd.concat([pd.read_parquet(files[name]) for name in METRICS if name in files], ignore_index=True)
    summary = summarize(results, task_name=version, judge=judge.get_judge().describe(), scale=config.scale)
    ingestion = context.instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey("rejected_samples"), asset_partitions=[version]), limit=1
    ).records[0].asset_materialization.metadata
    summary["rejected"] = {"rows": ingestion["rejected_rows"].value, "total_rows": ingestion["total_rows"].value,
                           "share": ingestion["rejected_share"].value, "checked_fields": ingestion["checked_fields"].value}
    summary["dataset_meta"] = dataset_store.meta(version)
    folder = report_store.folder(version)
    (folder / "summary.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False, default=str),
                                         encoding="utf-8")
    results.to_parquet(folder / "results.parquet", index=False)
    ragas_table(results, load_samples(dataset_store.samples_path(version))).to_csv(folder / "ragas_scores.csv",
                                                                                  index=False)
    azure_lines = write_azure_jsonl(results, folder / "azure_results.jsonl") if azure_rows(results) else 0
    metadata: dict = {"summary_path": str(folder / "summary.json"), "azure_rows": azure_lines,
                      "metrics": sorted(files), "num_good": summary["num_good"],
                      "num_bad": summary["num_bad"], "rejected_rows": summary["rejected"]["rows"],
                      "table": dg.MetadataValue.md(markdown_table(summary)),
                      # Which retriever and generator produced the version (its meta.json), in the UI.
                      **{f: str(summary["dataset_meta"][f]) for f in ("retriever", "generator")
                         if f in summary["dataset_meta"]}}
    for metric, row in summary["metrics"].items():
        if row["mean"] is not None:
            metadata[f"{metric}_mean"] = dg.MetadataValue.float(float(row["mean"]))
            metadata[f"{metric}_pass_rate"] = dg.MetadataValue.float(float(row["pass_rate"]))
        metadata[f"{metric}_coverage"] = dg.MetadataValue.float(row["measured"] / row["total"] if row["total"] else 0.0)
    metadata["requests"] = int(summary["usage"].get("chat_requests", 0) + summary["usage"].get("embedding_requests", 0))
    context.log.info("\n" + markdown_table(summary))
    # The SQL table keeps the internal [0, 1] scale whatever the presentation of summary.json.
    internal = summary if config.scale == 1 else {**summarize(results, version, summary["judge"]),
                                                   "rejected": summary["rejected"]}
    return dg.Output(summary_frame(internal, version), metadata=metadata)
