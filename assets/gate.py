"""The regression gate in the pipeline: ``baseline_comparison`` and its check ``no_regression_vs_baseline``.

Per dataset version, after ``eval_summary`` has written the version's ``results.parquet``,
the asset compares the version with its baseline (``rag_eval.metrics.stats.gate``: the settings of
``[tool.rag_eval.gate]``, the previous version by default), writes ``comparison.json``,
``report.md`` and ``report.html`` beside the summary, stores one row per metric in the
DuckDB table ``eval.baseline_comparison``, and puts each metric's difference and interval
in its metadata (the UI plots them per version). The check fails when the gate fails;
with ``blocking = true`` it fails with severity ERROR (downstream assets do not run),
otherwise with WARN. A baseline sharing no row id with the version (another question set)
is no decision: the check passes, its description saying nothing was compared.
"""
import functools

import dagster as dg
import pandas as pd

from rag_eval.assets.partitions import dataset_versions
from rag_eval.assets.resources import DatasetStore, JudgeResource, ReportStore
from rag_eval.metrics.stats.gate import (GateConfig, evaluated_versions, history, load_version, no_baseline, read_tags,
                          resolve_baseline, run_comparison, write_reports)
from rag_eval.metrics.core.registry import Registry
from rag_eval.metrics.reports.gate_report import comparison_table
from rag_eval.metrics.errors import InputError

CHECK = "no_regression_vs_baseline"
_COLUMNS = {"version": "string", "baseline": "string", "metric": "string", "gated": "bool", "n": "int64",
            "baseline_mean": "float64", "candidate_mean": "float64", "difference": "float64", "low": "float64",
            "high": "float64", "margin": "float64", "p_regression_holm": "float64", "verdict": "string",
            "error_share_baseline": "float64", "error_share_candidate": "float64"}


class GateAssetConfig(dg.Config):
    """``config_path``: the gate's TOML settings (default ``[tool.rag_eval.gate]`` of
    ``pyproject.toml`` in the working folder); ``baseline`` overrides its baseline
    (``previous``, ``tag:NAME`` or a version key)."""

    config_path: str | None = None
    baseline: str | None = None


def comparison_frame(comparison, version: str) -> pd.DataFrame:
    """One row per compared metric (the columns of ``eval.baseline_comparison``); none
    when ``comparison`` is ``None`` (no baseline yet)."""
    rows = [{"version": version, "baseline": comparison.baseline, "metric": m.metric,
             "gated": m.metric in comparison.gated, "n": m.n, "baseline_mean": m.baseline_mean,
             "candidate_mean": m.candidate_mean, "difference": m.difference, "low": m.low, "high": m.high,
             "margin": m.margin, "p_regression_holm": m.p_regression_holm, "verdict": m.verdict,
             "error_share_baseline": comparison.coverage.get(m.metric, {}).get("baseline", {}).get("error_share"),
             "error_share_candidate": comparison.coverage.get(m.metric, {}).get("candidate", {}).get("error_share")}
            for m in comparison.metrics.values()] if comparison is not None else []
    return pd.DataFrame(rows, columns=list(_COLUMNS)).astype(_COLUMNS)


@functools.cache
def gate_asset(registry: Registry) -> dg.AssetsDefinition:
    """The ``baseline_comparison`` asset and its check, gating metrics of ``registry``; built once per set of metrics."""

    @dg.asset(
        # Reads the results.parquet that eval_summary writes and the labels.jsonl that human_labels reads, of this
        # version and the baseline: new labels re-run the comparison too.
        deps=["eval_summary", "label_estimates"], partitions_def=dataset_versions, group_name="gate", code_version="1",
        kinds={"pandas"},
        check_specs=[dg.AssetCheckSpec(CHECK, asset="baseline_comparison", blocking=True, partitions_def=dataset_versions,
                                       description="No gated metric regressed beyond its margin against the baseline, "
                                                   "and coverage did not drop beyond the limit. A baseline sharing no "
                                                   "row id (another question set) is no decision: the check passes "
                                                   "and says nothing was compared.")],
        description="The version compared with its baseline: per-metric paired difference with a 95 % bootstrap "
                    "interval; writes comparison.json, report.md and report.html.",
    )
    def baseline_comparison(context: dg.AssetExecutionContext, config: GateAssetConfig, report_store: ReportStore,
                            dataset_store: DatasetStore, judge: JudgeResource):
        """Compare the version with its baseline and decide the gate."""
        version = context.partition_key
        try:
            settings = GateConfig.load(config.config_path, registry, baseline=config.baseline)
            versions = evaluated_versions(report_store.root)
            if version not in versions:
                raise InputError(f"version {version} has no results.parquet under {report_store.root}/")
            baseline = resolve_baseline(version, settings.baseline, versions, read_tags(dataset_store.root))
        except (OSError, ValueError) as exc:
            raise dg.Failure(str(exc)) from exc
        severity = dg.AssetCheckSeverity.ERROR if settings.blocking else dg.AssetCheckSeverity.WARN
        if baseline is None or baseline == version:
            why = "the baseline is this version" if baseline else no_baseline(version)
            context.log.info(f"{version}: nothing to compare ({why})")
            yield dg.Output(comparison_frame(None, version), metadata={"baseline": why})
            yield dg.AssetCheckResult(check_name=CHECK, passed=True, severity=severity, metadata={"baseline": why})
            return
        scorer = judge.get_judge()
        base, candidate = (load_version(v, report_store.root, dataset_store.root, scorer, settings.metrics, registry)
                           for v in (baseline, version))
        comparison, notes = run_comparison(base, candidate, settings, scorer)
        paths = write_reports(comparison, notes, report_store.folder(version),
                              history(report_store.root, base, candidate))
        table = comparison_table(comparison)
        context.log.info("\n" + table)
        metadata: dict = {"baseline": baseline, "baseline_rule": settings.baseline, "passed": comparison.passed,
                          "verdict": comparison.verdict,
                          "table": dg.MetadataValue.md(table), "report_html": str(paths["html"]),
                          "failures": dg.MetadataValue.json(comparison.failures), "notes": dg.MetadataValue.json(notes)}
        for m in comparison.metrics.values():
            metadata[f"{m.metric}_n"] = dg.MetadataValue.int(m.n)
            # "judge", or decided on estimates: "ppi (n=…/… vs …/…)" (human labels), "cascade (…)" (judge cascades)
            metadata[f"{m.metric}_basis"] = m.basis
            for name in ("difference", "low", "high"):
                if getattr(m, name) is not None:
                    metadata[f"{m.metric}_{name}"] = dg.MetadataValue.float(float(getattr(m, name)))
        yield dg.Output(comparison_frame(comparison, version), metadata=metadata)
        yield dg.AssetCheckResult(check_name=CHECK, passed=comparison.passed, severity=severity,
                                  description="; ".join(comparison.failures) or (
                                      None if comparison.decided and not comparison.not_applicable else comparison.verdict),
                                  metadata={k: v for k, v in metadata.items() if k != "report_html"})

    return baseline_comparison
