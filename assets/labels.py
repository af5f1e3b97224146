"""Human labels in the graph: ``human_labels`` and the estimates they correct, ``label_estimates``.

``human_labels`` reads a version's ``labels.jsonl`` (``rag-eval annotate import`` writes it;
``rag_eval.metrics.sources.labels``), checks it against the version's rows (the ``questions`` table) and the
metrics' scales, and stores the usable labels (table ``eval.human_labels``), with a data
version that is the hash of that content. ``label_estimates`` depends on it, on
``eval_summary`` and on the metric assets: for each labelled metric it computes the
prediction-powered estimate, its interval and the judge–human agreement
(``rag_eval.metrics.stats.estimates``), puts them into the version's ``summary.json`` beside the judge's
raw mean, and stores one row per metric (``eval.label_estimates``). New labels make these
two stale and nothing else: no metric is judged again.
"""
import functools
import json
import os
from pathlib import Path

import dagster as dg
import pandas as pd

from rag_eval.assets.ingestion import content_version
from rag_eval.assets.partitions import dataset_versions
from rag_eval.assets.registration import sha256_of
from rag_eval.assets.resources import DatasetStore, ReportStore
from rag_eval.metrics.stats.estimates import add_estimates
from rag_eval.metrics.sources.labels import LABELS_FILE, STORED_KEYS, labels_frame
from rag_eval.metrics.core.registry import Registry

_LABEL_COLUMNS = {"version": "string", **dict.fromkeys(STORED_KEYS, "string"), "line": "int64", "label": "float64"}
_ESTIMATE_COLUMNS = {"version": "string", "metric": "string", "basis": "string", "raw_mean": "float64",
                     "estimate": "float64", "ci_low": "float64", "ci_high": "float64", "se": "float64", "n": "int64",
                     "N": "int64", "lam": "float64", "method": "string", "accuracy": "float64",
                     "cohen_kappa": "float64", "spearman": "float64", "auroc": "float64"}


def labels_path(dataset_store: DatasetStore, version: str) -> Path:
    """Where ``version``'s labels are stored (``<datasets>/<version>/labels.jsonl``)."""
    return Path(dataset_store.root) / version / LABELS_FILE


@functools.cache
def human_labels_asset(registry: Registry) -> dg.AssetsDefinition:
    """The ``human_labels`` asset, its labels checked against the metrics of ``registry``; built once per set of
    metrics."""

    @dg.asset(
        partitions_def=dataset_versions,
        group_name="labels",
        code_version="1",
        kinds={"pandas"},
        deps=["questions"],  # the rows the labels name: their ids
        description="People's labels of the version's rows, per (line, metric), from its labels.jsonl "
                    "(rag-eval annotate import); lines that cannot be used are listed in the metadata.",
    )
    def human_labels(context: dg.AssetExecutionContext, dataset_store: DatasetStore) -> dg.Output[pd.DataFrame]:
        """The version's usable labels; the file's SHA-256 as ``labels_sha256`` (``rag-eval run`` compares it)."""
        version = context.partition_key
        path = labels_path(dataset_store, version)
        database = context.resources.io_manager
        with database.connection() as connection:
            found = database.stored(connection, version, ["questions"])
            if "questions" not in found:
                raise dg.Failure(f"version {version} has not been ingested: its rows are unknown")
            ids = connection.execute(f"select row, id from ({found['questions'].query})").fetchall()
        labels, problems = labels_frame(path.parent, ids, version, registry)
        for problem in problems[:20]:
            context.log.warning(f"{version}: label refused: {problem}")
        frame = labels.assign(version=version)[list(_LABEL_COLUMNS)].astype(_LABEL_COLUMNS)
        metadata: dict[str, dg.MetadataValue] = {
            "num_rows": dg.MetadataValue.int(len(frame)),
            "labels_sha256": dg.MetadataValue.text(sha256_of(path) if path.exists() else ""),
            "refused": dg.MetadataValue.json([str(p) for p in problems[:50]]),
            "refused_rows": dg.MetadataValue.int(len(problems)),
                    "per_metric": dg.MetadataValue.json(frame["metric"].value_counts().to_dict())}
        return dg.Output(frame, metadata=metadata,
                         data_version=content_version(frame, ["line", "metric", "label"]))

    return human_labels


def estimates_frame(version: str, estimates: dict) -> pd.DataFrame:
    """One row per labelled metric: its basis, raw mean, estimate with interval, n, N and agreement."""
    rows = []
    for metric, e in estimates.items():
        ppi = e.estimate.to_dict() if e.estimate else {}
        rows.append({"version": version, "metric": metric, "basis": e.basis, "raw_mean": e.raw_mean,
                     **{k: ppi.get(k) for k in ("estimate", "ci_low", "ci_high", "se", "lam", "method")},
                     "n": e.n, "N": e.rows - e.n, **{k: e.agreement.get(k) for k in
                                                     ("accuracy", "cohen_kappa", "spearman", "auroc")}})
    return pd.DataFrame(rows, columns=list(_ESTIMATE_COLUMNS)).astype(_ESTIMATE_COLUMNS)


def markdown_estimates(estimates: dict) -> str:
    """Metric | judge's raw mean | estimate [95 % CI] | n/rows | agreement, as Markdown."""
    lines = ["| metric | judge (raw mean) | estimate [95 % CI] | labelled/ok rows | accuracy | kappa or Spearman | AUROC |",
             "|---|---|---|---|---|---|---|"]
    for metric, e in estimates.items():
        shown = f"{e.estimate.estimate:.4f} [{e.estimate.ci_low:.4f}, {e.estimate.ci_high:.4f}]" if e.estimate \
            else e.note
        second = e.agreement.get("cohen_kappa", e.agreement.get("spearman"))
        lines.append(f"| {metric} | {e.raw_mean if e.raw_mean is None else round(e.raw_mean, 4)} | {shown} | "
                     f"{e.n}/{e.rows} | {e.agreement.get('accuracy')} | {second} | {e.agreement.get('auroc')} |")
    return "\n".join(lines)


@functools.cache
def label_estimates_asset(registry: Registry) -> dg.AssetsDefinition:
    """The ``label_estimates`` asset over the metrics of ``registry``; built once per set of metrics."""

    @dg.asset(
        partitions_def=dataset_versions,
        group_name="labels",
        code_version="1",
        kinds={"pandas"},
        # Reads the labels and the metric tables itself, and adds to the summary.json that eval_summary wrote.
        deps=["human_labels", "eval_summary", *registry],
        description="Each labelled metric corrected by the labels: the prediction-powered (PPI++) estimate with its "
                    "95 % interval beside the judge's raw mean, and judge-human agreement; added to summary.json.",
    )
    def label_estimates(context: dg.AssetExecutionContext, report_store: ReportStore) -> dg.Output[pd.DataFrame]:
        """Estimate the labelled metrics of the version and add them to its summary.json."""
        version = context.partition_key
        path = Path(report_store.root) / version / "summary.json"
        if not path.exists():
            raise dg.Failure(f"version {version} has no summary.json: materialize eval_summary first")
        summary = json.loads(path.read_text(encoding="utf-8"))
        database = context.resources.io_manager
        with database.connection() as connection:
            tables = database.stored(connection, version, ["human_labels", *(m for m in summary["metrics"] if m in registry)])
            labels = tables.pop("human_labels").frame(connection) if "human_labels" in tables else \
                pd.DataFrame(columns=list(_LABEL_COLUMNS))
            labelled = [tables[m] for m in dict.fromkeys(labels["metric"]) if m in tables]
            results = pd.concat([t.frame(connection, compact=True) for t in labelled], ignore_index=True) if labelled \
                else pd.DataFrame(columns=["row", "sample_id", "metric", "status", "value", "threshold", "direction"])
        estimates = add_estimates(summary, results, labels, registry)
        staged = path.with_name(f".summary.json.{os.getpid()}.tmp")
        staged.write_text(json.dumps(summary, indent=2, ensure_ascii=False, default=str), encoding="utf-8")
        os.replace(staged, path)
        metadata: dict = {"labels": len(labels), "summary_path": str(path),
                          "table": dg.MetadataValue.md(markdown_estimates(estimates))}
        for metric, e in estimates.items():
            metadata[f"{metric}_basis"] = e.basis
            metadata[f"{metric}_labels_n"] = dg.MetadataValue.int(e.n)
            if e.raw_mean is not None:
                metadata[f"{metric}_raw_mean"] = dg.MetadataValue.float(e.raw_mean)
            if e.estimate is not None:
                for key in ("estimate", "ci_low", "ci_high"):
                    metadata[f"{metric}_ppi_{key}"] = dg.MetadataValue.float(float(getattr(e.estimate, key)))
        if estimates:
            context.log.info("\n" + markdown_estimates(estimates))
        return dg.Output(estimates_frame(version, estimates), metadata=metadata)

    return label_estimates
