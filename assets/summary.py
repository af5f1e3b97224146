"""The summary asset: this run's metric results in, per-metric rows for SQL and the report files out.

``eval_summary`` depends on every metric asset and reads the tables it describes. It describes the
metrics the run selected (a run that selects only the summary describes every metric
stored for the version, as results of earlier runs); results of other runs stay in
their own tables of the DuckDB file, one per metric. Its deps and code version follow the
registered metrics, so it is built when asked for (:func:`summary_asset`), as the metric assets are.
"""

import functools
import hashlib
import json

import dagster as dg
import pandas as pd

from rag_eval.assets.cascade import planned_full_runs
from rag_eval.assets.run_config import STRONG_OP, runs_strong_sample, strong_config
from rag_eval.assets.evaluation import metric_code_version, run_metrics
from rag_eval.assets.ingestion import FIELD_ASSETS
from rag_eval.assets.partitions import dataset_versions
from rag_eval.assets.resources import DatasetStore, JudgeResource, ReportStore
from rag_eval.assets.results_store import StoreError
from rag_eval.assets.stored_results import staged, write_ragas_csv_by_chunks, write_results_parquet
from rag_eval.metrics.reports.aggregate import USAGE_COLUMNS, cannot_run, dingo_summary, input_error_lines, summarize
from rag_eval.metrics.reports.conversations import conversation_frame, has_conversations
from rag_eval.metrics.reports.formats import write_azure_jsonl
from rag_eval.metrics.reports.gate_report import diagnosis_markdown
from rag_eval.metrics.core.registry import Registry, describe_judge
from rag_eval.metrics.core.scoring import with_turns
from rag_eval.metrics.core.strong import STRONG_DTYPES
from rag_eval.metrics.stats.cascade_estimates import add_cascade_estimates

#: How many rejected lines and lines with input errors summary.json lists (all are in the tables).
LISTED_LINES = 20
_TABLE_FIELDS = ("user_input", "response", "retrieved_contexts", "reference")


#: The run tag giving the summary's scope when its config does not (the nightly evaluation's runs: ``version``).
SCOPE_TAG = "rag_eval/summary_scope"


class SummaryConfig(dg.Config):
    """``scale``: 1 keeps [0, 1]; 10 presents the [0, 1] metrics on dingo's 0-10 scale.
    ``dingo_layout``: also write ``summary_dingo.json`` in dingo 2.5's exact layout.
    ``scope``: ``run`` describes the metrics this run selected; ``version`` every metric
    stored for the version, those of earlier runs marked so (the nightly evaluation's re-run
    of changed metrics refreshes the whole version's summary this way); unset, the run's tag
    :data:`SCOPE_TAG`, else ``run``."""

    scale: int = 1
    dingo_layout: bool = False
    scope: str | None = None


def markdown_table(summary: dict) -> str:
    """Metric | mean | pass rate | measured/total, as a Markdown table."""
    lines = ["| metric | mean | pass rate | measured/total |", "|---|---|---|---|"]
    for metric, row in summary["metrics"].items():
        lines.append(f"| {metric} | {row['mean']} | {row['pass_rate']} | {row['measured']}/{row['total']} |")
    return "\n".join(lines)


def summary_frame(summary: dict, version: str, run_id: str) -> pd.DataFrame:
    """One row per metric of the run: version, run, mean, pass rate, counts, threshold,
    direction, what the run sent for it, the judge on its rows."""
    rows = []
    for metric, row in summary["metrics"].items():
        rows.append({"version": version, "run_id": run_id, "metric": metric, "mean": row["mean"],
                     "pass_rate": row["pass_rate"], "measured": row["measured"], "total": row["total"],
                     "threshold": row["threshold"], "direction": row["direction"], "this_run": row["this_run"],
                     **{c: row["usage"].get(c, 0) if row["this_run"] else 0 for c in USAGE_COLUMNS},
                     **{f"n_{status}": count for status, count in summary["coverage"][metric].items()
                        if status != "total"},
                     "rejected_rows": summary["rejected"]["rows"], "judge": row.get("judge")})
    return pd.DataFrame(rows)


SUMMARY_VERSION = "4"


def summary_code_version(registry: Registry) -> str:
    """The summary's own version plus a digest of the code version of every metric of ``registry``: Dagster
    does not carry staleness downstream, so a metric with a new code version makes the summary stale too."""
    judge = JudgeResource().code_version()
    metrics = hashlib.sha256(" ".join(metric_code_version(m, judge, registry) for m in sorted(registry))
                             .encode()).hexdigest()
    return f"{SUMMARY_VERSION}-{metrics[:12]}"


def eval_summary(context: dg.AssetExecutionContext, config: SummaryConfig, report_store: ReportStore,
                 dataset_store: DatasetStore, judge: JudgeResource, registry: Registry) -> dg.Output[pd.DataFrame]:
    """Aggregate the run's results of the metrics of ``registry`` and write the version's report files
    (the body of the ``eval_summary`` asset, :func:`summary_asset`).

    Raises
    ------
    StoreError
        When a report file could not be written and the system's error does not name it (a full
        disk reported as the file is closed): naming the version's report folder.
    """
    try:
        return _summarize(context, config, report_store, dataset_store, judge, registry)
    except OSError as exc:
        if exc.filename is not None or isinstance(exc, StoreError):
            raise
        folder = report_store.folder(context.partition_key)
        raise StoreError(f"{folder}: the report files could not be written ({exc.strerror or exc}); the version's "
                         "tables are kept: free the disk and run again") from None  # the line says the cause


def _summarize(context: dg.AssetExecutionContext, config: SummaryConfig, report_store: ReportStore,
               dataset_store: DatasetStore, judge: JudgeResource, registry: Registry) -> dg.Output[pd.DataFrame]:
    version = context.partition_key
    scope = config.scope or context.run.tags.get(SCOPE_TAG, "run")
    if scope not in ("run", "version"):
        raise dg.Failure(f"eval_summary scope must be 'run' or 'version', got {scope!r}")
    database = context.resources.io_manager
    # Held for the reads and the files written from the tables only: another process waits for the file meanwhile.
    with database.connection() as connection:
        tables = database.stored(connection, version, [*registry, "rejected_samples", STRONG_OP,
                                                       *(FIELD_ASSETS[f] for f in _TABLE_FIELDS)])
        stored = {name: tables[name] for name in registry if name in tables}
        selected = [m for m in run_metrics(context, registry) if m in stored]
        if not stored:
            raise dg.Failure(f"no metric has been computed for version {version}")
        described = selected if selected and scope == "run" else list(stored)
        azure = any(registry[m].family in ("azure", "document_retrieval", "custom", "plugin") for m in described)
        # Every column but the evidence, which only input errors are described from (the Azure rows read it all).
        results = with_turns(pd.concat([stored[m].frame(connection, compact=not azure) for m in described],
                                       ignore_index=True).drop(columns="version"))
        rejected = tables["rejected_samples"].frame(connection) if "rejected_samples" in tables \
            else pd.DataFrame(columns=["row", "line", "id", "reason"])
        # A judge cascade's strong results, when this run drew them (earlier ones may describe other cheap scores).
        strong = tables[STRONG_OP].frame(connection).astype(STRONG_DTYPES) \
            if runs_strong_sample(context) and STRONG_OP in tables else None
        if strong is not None:
            strong = strong[strong["metric"].isin(described)]
        folder = report_store.folder(version)
        write_results_parquet(connection, [stored[m] for m in described], folder / "results.parquet",  # by chunks
                              strong)
        write_ragas_csv_by_chunks(connection, results, {f: tables[FIELD_ASSETS[f]] for f in _TABLE_FIELDS},
                                  ["row", "user_input", "retrieved_contexts", "response", "reference"],
                                  folder / "ragas_scores.csv")
    earlier = set(described) - set(selected)
    with database.connection() as connection:  # the failed claims of the diagnosis' worst rows, read on demand
        summary = summarize(results, task_name=version, judge=describe_judge(judge.get_judge(), registry),
                            scale=config.scale, earlier=earlier, registry=registry,
                            failed_of=lambda metric, rows: stored[metric].failed_at(connection, rows))
    if strong is not None:
        add_cascade_estimates(summary, results, strong, strong_config(context.run.run_config).described(), registry,
                              planned_full_runs(context))
    # Lines, as ingestion's check counts them: a conversation's turns share their line's row.
    rejected_lines, lines = int(rejected["row"].nunique()), int(results["row"].nunique())
    summary["rejected"] = {"rows": rejected_lines, "total_rows": lines,
                           "share": round(rejected_lines / lines, 6) if lines else 0.0,
                           "lines": rejected.sort_values("row")[["line", "id", "reason"]]
                           .head(LISTED_LINES).to_dict("records")}
    errors = input_error_lines(results, set(rejected["row"]))
    summary["input_errors"] = {"rows": len(errors), "lines": errors[:LISTED_LINES]}
    summary["cannot_run"] = cannot_run(results, set(rejected["row"]))
    summary["dataset_meta"] = dataset_store.meta(version)
    with staged(folder / "summary.json") as partial:
        partial.write_text(json.dumps(summary, indent=2, ensure_ascii=False, default=str), encoding="utf-8")
    if config.dingo_layout:
        (folder / "summary_dingo.json").write_text(json.dumps(dingo_summary(results, version), indent=2,
                                                              ensure_ascii=False), encoding="utf-8")
    conversations_path = folder / "conversations.parquet"
    if has_conversations(results):  # one row per (conversation, metric): its mean over turns and its worst turn
        with staged(conversations_path) as partial:
            conversation_frame(results).to_parquet(partial, index=False)
    else:
        conversations_path.unlink(missing_ok=True)  # an earlier run's file would describe other results
    azure_path = folder / "azure_results.jsonl"
    azure_lines = write_azure_jsonl(results, azure_path) if azure else 0  # the Azure rows only when selected
    if not azure_lines:
        azure_path.unlink(missing_ok=True)  # an earlier run's file would describe other results
    metadata: dict = {"summary_path": str(folder / "summary.json"), "azure_rows": azure_lines,
                      "metrics": list(summary["metrics"]), "num_good": summary["num_good"],
                      "num_bad": summary["num_bad"], "rejected_rows": summary["rejected"]["rows"],
                      "input_error_rows": summary["input_errors"]["rows"],
                      "table": dg.MetadataValue.md(markdown_table(summary)),
                      # Which retriever and generator produced the version (its meta.json), in the UI.
                      **{f: str(summary["dataset_meta"][f]) for f in ("retriever", "generator")
                         if f in summary["dataset_meta"]}}
    for metric, row in summary["metrics"].items():
        if row["mean"] is not None:
            metadata[f"{metric}_mean"] = dg.MetadataValue.float(float(row["mean"]))
        if (cascade := (row.get("cascade") or {}).get("estimate")) is not None:  # the strong judge's, estimated
            for key in ("estimate", "ci_low", "ci_high"):
                metadata[f"{metric}_strong_{key}"] = dg.MetadataValue.float(float(cascade[key]))
            metadata[f"{metric}_pass_rate"] = dg.MetadataValue.float(float(row["pass_rate"]))
        metadata[f"{metric}_coverage"] = dg.MetadataValue.float(row["measured"] / row["total"] if row["total"] else 0.0)
    for metric, row in (summary.get("conversations") or {}).get("metrics", {}).items():
        for key in ("mean", "worst_turn_mean"):  # plotted over the partitions beside the turns' mean
            if row[key] is not None:
                metadata[f"{metric}_conversation_{key}"] = dg.MetadataValue.float(float(row[key]))
    usage = summary["usage"]
    metadata["requests"] = int(usage.get("chat_requests", 0) + usage.get("embedding_requests", 0))
    metadata["cache_hits"] = int(usage.get("cache_hits", 0))
    metadata["shared_hits"] = int(usage.get("shared_hits", 0))
    if summary.get("diagnosis"):  # RAGChecker's diagnostics: the reading, the groups, the worst rows
        metadata["diagnosis"] = dg.MetadataValue.md("\n".join(diagnosis_markdown(summary["diagnosis"])))
    context.log.info("\n" + markdown_table(summary))
    # The SQL table keeps the internal [0, 1] scale whatever the presentation of summary.json.
    internal = summary if config.scale == 1 else {**summarize(results, version, summary["judge"], earlier=earlier,
                                                                registry=registry),
                                                   "rejected": summary["rejected"]}
    return dg.Output(summary_frame(internal, version, context.run_id), metadata=metadata)


def build_summary_asset(registry: Registry) -> dg.AssetsDefinition:
    """The ``eval_summary`` asset (:func:`eval_summary`) over the metrics of ``registry``."""

    def summary_of(context: dg.AssetExecutionContext, config: SummaryConfig, report_store: ReportStore,
                   dataset_store: DatasetStore, judge: JudgeResource) -> dg.Output[pd.DataFrame]:
        return eval_summary(context, config, report_store, dataset_store, judge, registry)

    return dg.asset(
        name="eval_summary",
        partitions_def=dataset_versions,
        group_name="summary",
        code_version=summary_code_version(registry),
        kinds={"pandas"},
        # Every metric asset and field asset is a dep: the summary reads the tables it describes itself, on
        # demand over one connection (rag_eval.assets.results_store.PartitionFiles.stored; no input events per table); only
        # the metrics the run selected are summarized. A version whose
        # data changed shows its summary stale at once, like the metrics that read the changed field
        # (Dagster does not carry staleness downstream).
        deps=[*registry, "rejected_samples", STRONG_OP, *FIELD_ASSETS.values()],
        description="This run's metrics per metric; writes summary.json, results.parquet, ragas_scores.csv and "
                    "azure_results.jsonl for the version.",
    )(summary_of)


@functools.cache
def summary_asset(registry: Registry) -> dg.AssetsDefinition:
    """``build_summary_asset(registry)``, built once per set of metrics (as ``metric_assets``)."""
    return build_summary_asset(registry)
