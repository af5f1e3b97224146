"""The summary asset: dingo-layout summary.json and per-row results.parquet for a version."""

import json

import dagster as dg
import pandas as pd

from assets.partitions import dataset_versions
from assets.resources import JudgeResource, ReportStore
from metrics.aggregate import summarize
from metrics.registry import CORE_METRICS


class SummaryConfig(dg.Config):
    """``scale``: 1 keeps [0, 1]; 10 writes dingo's 0-10 presentation."""

    scale: int = 1


def markdown_table(summary: dict) -> str:
    """Metric | mean | pass rate | measured/total, as a Markdown table."""
    lines = ["| metric | mean | pass rate | measured/total |", "|---|---|---|---|"]
    for metric, row in summary["metrics"].items():
        lines.append(f"| {metric} | {row['mean']} | {row['pass_rate']} | {row['measured']}/{row['total']} |")
    return "\n".join(lines)


@dg.asset(
    partitions_def=dataset_versions,
    group_name="summary",
    code_version="1",
    kinds={"pandas"},
    ins={name: dg.AssetIn(key=name) for name in CORE_METRICS},
    description="summary.json (dingo layout, coverage, judge) and results.parquet for the version.",
)
def eval_summary(context: dg.AssetExecutionContext, config: SummaryConfig, report_store: ReportStore,
                 judge: JudgeResource, **metric_results: pd.DataFrame) -> dg.Output[dict]:
    """Aggregate every metric's per-row results and write the version's report files."""
    results = pd.concat([metric_results[name] for name in CORE_METRICS], ignore_index=True)
    summary = summarize(results, task_name=context.partition_key, judge=judge.get_judge().describe(),
                        scale=config.scale)
    folder = report_store.folder(context.partition_key)
    (folder / "summary.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False), encoding="utf-8")
    results.to_parquet(folder / "results.parquet", index=False)
    metadata: dict = {"summary_path": str(folder / "summary.json"), "num_good": summary["num_good"],
                      "num_bad": summary["num_bad"], "table": dg.MetadataValue.md(markdown_table(summary))}
    for metric, row in summary["metrics"].items():
        if row["mean"] is not None:
            metadata[f"{metric}_mean"] = dg.MetadataValue.float(float(row["mean"]))
            metadata[f"{metric}_pass_rate"] = dg.MetadataValue.float(float(row["pass_rate"]))
        metadata[f"{metric}_coverage"] = dg.MetadataValue.float(row["measured"] / row["total"] if row["total"] else 0.0)
    context.log.info("\n" + markdown_table(summary))
    return dg.Output(summary, metadata=metadata)
