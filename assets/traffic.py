"""Production traffic, one time partition at a time: traces in, a judged sample, drift caught.

``traffic_samples`` reads the traces of the partition's window (a session's, of the window it started in)
(``rag_eval.metrics.sources.traffic.write_window``: OTLP/OpenInference span files, a Langfuse export, a table
or a SQL query) into ``traces.parquet`` and keeps what could not be read in
``problems.parquet``; its check ``traffic_arrived`` fails when no traffic arrived (fewer
than ``min_traces`` traces). ``traffic_sample`` draws the seeded, stratified sample of conversations within
the partition's budget (``rag_eval.metrics.stats.sampling``); ``traffic_scores`` judges it with the
reference-free metrics (the judge resource, its judgement cache); ``traffic_summary``
writes ``summary.json`` and the traffic page ``report.html``, and its checks
``<metric>_drift`` compare the partition with its trailing window (``rag_eval.metrics.stats.drift``).

Each partition's files live in ``<root>/<partition>/`` (``TrafficStore``): runs of
different partitions never write the same file. The assets return no value (no IO
manager): each reads its upstream's files itself. Nothing is read at import: the assets
are made by :func:`traffic_assets` from the settings the code location loads.
"""

import hashlib
import json
from datetime import timedelta
from pathlib import Path

import dagster as dg
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from rag_eval.assets.evaluation import metric_code_version
from rag_eval.assets.run_config import op_config
from rag_eval.assets.partitions import traffic_partitions
from rag_eval.assets.resources import JudgeResource
from rag_eval.assets.traffic_store import TrafficStore, trailing, window_ns
from rag_eval.metrics.stats.drift import DROP, drift
from rag_eval.metrics.core.registry import build_metrics
from rag_eval.metrics.stats.sampling import Budget, judging_cost, select
from rag_eval.metrics.core.base import Metric
from rag_eval.metrics.core.samples import Sample
from rag_eval.metrics.core.scoring import results_frame, score_all
from rag_eval.metrics.core.strong import judge_cascade
from rag_eval.metrics.errors import SettingsError
from rag_eval.metrics.sources.traces import problems_frame, trace_samples
from rag_eval.metrics.sources.traces.parquet import table_traces, traces_table
from rag_eval.metrics.sources.traces.sessions import conversations, write_records
from rag_eval.metrics.sources.traffic import TrafficConfig, write_window
from rag_eval.metrics.reports.traffic_report import partition_summary, read_summaries, traffic_html

ARRIVED = "traffic_arrived"
#: Problems listed in a check's metadata and the run's log (all are in problems.parquet).
LISTED = 20
GROUP = "traffic"
#: The sample, its scores and the summary follow their upstream in every partition (eager's own condition keeps
#: the latest only: a day re-read for its late spans is judged again too), and the judging of the trailing
#: window is redone when a metric or the judge changes (its code version).
FOLLOWS = dg.AutomationCondition.eager().without(dg.AutomationCondition.in_latest_time_window())


def _judged(config: TrafficConfig) -> dg.AutomationCondition:
    return FOLLOWS | (dg.AutomationCondition.code_version_changed()
                      & dg.AutomationCondition.in_latest_time_window(timedelta(days=config.window))
                      & ~dg.AutomationCondition.any_deps_missing())


def _atomic(folder: Path, name: str) -> tuple[Path, Path]:
    return folder / f".{name}.partial", folder / name


def _samples_asset(windows: dg.TimeWindowPartitionsDefinition) -> dg.AssetsDefinition:
    """``traffic_samples`` in ``windows``, with its check ``traffic_arrived``."""
    @dg.asset(
        partitions_def=windows, group_name=GROUP, code_version="1", kinds={"parquet"},
        check_specs=[dg.AssetCheckSpec(ARRIVED, asset="traffic_samples", blocking=True, partitions_def=windows,
                                       description="Traffic arrived: the partition holds at least min_traces traces "
                                                   "(a blocking check: nothing is judged for an empty partition).")],
        description="The traces that started in the partition (traces.parquet) and what could not be read "
                    "(problems.parquet: file, line, field, reason).",
    )
    def traffic_samples(context: dg.AssetExecutionContext, traffic_store: TrafficStore):
        """Read the partition's traces, streaming, into ``traces.parquet``."""
        settings = traffic_store.settings()
        start, end = window_ns(context.partition_time_window)
        folder = traffic_store.folder(context.partition_key)
        partial, final = _atomic(folder, "traces.parquet")
        try:
            written = write_window(settings, traffic_store.index(settings), start, end, partial)
        except (OSError, ValueError) as exc:
            partial.unlink(missing_ok=True)
            raise dg.Failure(f"traffic source {settings.format}: {exc}", allow_retries=False) from exc
        partial.replace(final)
        problems_frame(written.problems).to_parquet(folder / "problems.parquet", index=False)
        for problem in written.problems[:LISTED]:
            context.log.warning(f"unreadable: {problem}")
        latency = np.array(written.latencies) if written.latencies else np.array([0.0])
        listed = [str(p) for p in written.problems[:LISTED]]
        yield dg.MaterializeResult(
            data_version=dg.DataVersion(written.digest),
            metadata={"traces": written.traces, "problems": len(written.problems), "path": str(final),
                      "latency_p50_ms": float(np.percentile(latency, 50)),
                      "latency_p95_ms": float(np.percentile(latency, 95)),
                      **{name: int(value) for name, value in written.tokens.items()},
                      "routes": dg.MetadataValue.json(dict(written.routes.most_common(50))),
                      "first_problems": dg.MetadataValue.json(listed)})
        yield dg.AssetCheckResult(
            check_name=ARRIVED, asset_key="traffic_samples", passed=written.traces >= settings.min_traces,
            description=None if written.traces >= settings.min_traces else
            f"no traffic arrived: {written.traces} traces in {context.partition_key} (at least {settings.min_traces} "
            f"expected; {len(written.problems)} unreadable spans or rows)",
            metadata={"traces": written.traces, "min_traces": settings.min_traces, "problems": len(written.problems),
                      "first_problems": dg.MetadataValue.json(listed)})
    return traffic_samples


class TrafficSampleConfig(dg.Config):
    """The sample's budget and seed for this run (unset: ``[tool.rag_eval.traffic]``'s
    ``budget_rows``, ``budget_cost`` (negative: none) and ``seed``); ``strong_share``: a judge
    cascade's share of the sample the judge scores (unset: the settings'; 0: no cascade), read by
    ``traffic_scores``."""

    budget_rows: int | None = None
    budget_cost: float | None = None
    seed: int | None = None
    strong_share: float | None = None


def _sample_asset(traffic: TrafficConfig, windows: dg.TimeWindowPartitionsDefinition) -> dg.AssetsDefinition:
    """``traffic_sample`` in ``windows``, costed with ``traffic``'s metrics."""
    @dg.asset(
        partitions_def=windows, group_name=GROUP, code_version="1", kinds={"parquet"}, deps=["traffic_samples"],
        automation_condition=FOLLOWS,
        description="The traces judged: a seeded sample of whole conversations stratified by route and retrieval score "
                    "band within the partition's budget of turns and/or cost (sample.parquet; conversations.jsonl).",
    )
    def traffic_sample(context: dg.AssetExecutionContext, config: TrafficSampleConfig, traffic_store: TrafficStore,
                       judge: JudgeResource) -> dg.MaterializeResult:
        """Select the partition's sample (``rag_eval.metrics.stats.sampling.select``)."""
        settings = traffic_store.settings(traffic.known)
        folder = traffic_store.folder(context.partition_key)
        traces = table_traces(pq.read_table(folder / "traces.parquet"))
        rows = settings.budget_rows if config.budget_rows is None else config.budget_rows
        cost = settings.budget_cost if config.budget_cost is None else config.budget_cost
        seed = settings.seed if config.seed is None else config.seed
        try:
            price = (settings.price[0], settings.price[1])  # [prompt, completion]: TrafficConfig checks there are two
            budget = Budget(rows=rows, cost=None if cost < 0 else cost, price=price)
        except ValueError as exc:
            raise dg.Failure(str(exc), allow_retries=False) from exc
        cost_of = None
        if budget.cost is not None:
            samples = trace_samples(traces)
            cost_of = judging_cost(samples, build_metrics(traffic.metrics, registry=traffic.known), judge.get_judge(),
                                   price)
        selection = select(traces, budget, seed, settings.strata, cost_of, conversations(traces))
        sampled = [traces[i] for i in selection.rows]
        write_records(sampled, folder / "conversations.jsonl")
        table = traces_table(sampled).append_column(
            "stratum", pa.array(selection.stratum, pa.string())).append_column(
            "estimated_cost", pa.array(selection.costs, pa.float64()))
        partial, final = _atomic(folder, "sample.parquet")
        pq.write_table(table, partial)
        partial.replace(final)
        drawn = {"rows": rows, "cost": budget.cost, "price": list(price), "seed": seed, "strata": settings.strata,
                 "estimated_cost": selection.total_cost, "per_stratum": selection.strata}
        (folder / "sample.json").write_text(json.dumps(drawn, indent=2, ensure_ascii=False), encoding="utf-8")
        context.log.info(f"{context.partition_key}: {len(selection.rows)} of {len(traces)} traces sampled "
                         f"(budget: {rows} rows, cost {budget.cost if budget.cost is not None else 'unlimited'})")
        return dg.MaterializeResult(
            data_version=dg.DataVersion(hashlib.sha256(" ".join(traces[i].trace_id for i in selection.rows).encode())
                                        .hexdigest()[:16]),
            metadata={"traces": len(traces), "sampled": len(selection.rows), "budget_rows": rows,
                      "budget_cost": budget.cost if budget.cost is not None else -1.0,
                      "estimated_cost": float(selection.total_cost), "seed": seed,
                      "strata": dg.MetadataValue.json(selection.strata)})
    return traffic_sample


def scores_code_version(config: TrafficConfig) -> str:
    """Changes with a code version of ``config``'s metrics or the judge (as the metric assets')."""
    judge = JudgeResource().code_version()
    versions = " ".join(metric_code_version(m, judge, config.known) for m in sorted(config.metrics))
    return "1-" + hashlib.sha256(versions.encode()).hexdigest()[:12]


def _scores_asset(config: TrafficConfig, windows: dg.TimeWindowPartitionsDefinition) -> dg.AssetsDefinition:
    """``traffic_scores`` in ``windows``, judging ``config``'s metrics."""
    @dg.asset(
        partitions_def=windows, group_name=GROUP, code_version=scores_code_version(config), kinds={"parquet"},
        deps=["traffic_sample"], automation_condition=_judged(config),
        description="The sample judged with the reference-free metrics of [tool.rag_eval.traffic] (results.parquet, "
                    "one row per trace and metric; a session's traces judged as a conversation's turns).",
    )
    def traffic_scores(context: dg.AssetExecutionContext, traffic_store: TrafficStore,
                       judge: JudgeResource) -> dg.MaterializeResult:
        """Judge the sample (``rag_eval.metrics.core.scoring.score_all``; the judge's cache answers what was judged
        before); with a ``strong_share``, as a judge cascade (:func:`_cascade`)."""
        folder = traffic_store.folder(context.partition_key)
        traces = table_traces(pq.read_table(folder / "sample.parquet"))
        samples = trace_samples(traces)
        scorer = judge.get_judge()
        metrics = build_metrics(config.metrics, registry=config.known)
        settings = traffic_store.settings(config.known)
        share = op_config(context.run.run_config, "traffic_sample").get("strong_share")
        share = settings.strong_share if share is None else share
        try:
            frame = _cascade(samples, metrics, judge, share, settings.seed) if share and samples else \
                results_frame(score_all(samples, metrics, scorer) if samples else [])
        finally:
            scorer.forget()
        partial, final = _atomic(folder, "results.parquet")
        frame.assign(partition=context.partition_key).to_parquet(partial, index=False)
        partial.replace(final)
        sent = [f"{p}{c}" for p in ("", "strong_") for c in ("chat_requests", "embedding_requests") if f"{p}{c}" in frame]
        metadata: dict = {"rows": len(samples), "judge": scorer.name, "strong_share": float(share or 0),
                          "requests": int(sum(frame[c].fillna(0).sum() for c in sent)),
                          "cache_hits": int(frame["cache_hits"].sum())}
        for metric, rows in frame.groupby("metric", sort=False):
            ok = rows[rows["status"] == "ok"]
            metadata[f"{metric}_coverage"] = float(len(ok) / len(rows))
            if len(ok):
                metadata[f"{metric}_mean"] = float(ok["value"].mean())
        return dg.MaterializeResult(metadata=metadata)
    return traffic_scores


def _cascade(samples: list[Sample], metrics: list[Metric], judge: JudgeResource, share: float,
             seed: int) -> pd.DataFrame:
    """The sample's results as a judge cascade: the offline judge on every trace, ``judge`` (the strong
    judge) on an active, seeded ``share`` of each metric's (``rag_eval.metrics.core.strong``); the frame
    carries the strong columns, from which the summary and the drift checks estimate the strong judge's means.

    Raises
    ------
    dagster.Failure
        When ``judge`` is the offline judge too, or ``share`` is not in [0, 1], or a metric has no offline
        rule (``rag_eval.metrics.core.strong.refuse_unscorable``)."""
    if judge.code_version().startswith("offline"):
        raise dg.Failure("traffic strong_share: the strong judge is the judge resource, here the offline judge: "
                         "configure an LLM endpoint (OPENAI_BASE_URL or OPENAI_API_KEY)", allow_retries=False)
    cheap, strong = JudgeResource(offline=True).get_judge(), judge.get_judge()
    try:  # on a stream of its own: not the sample's
        return judge_cascade(samples, metrics, cheap, strong, float(share), "active", seed, stream="cascade:",
                             plan=False)[0]
    except SettingsError as exc:
        raise dg.Failure(f"traffic strong_share: {exc}", allow_retries=False) from None


def _drift_check(config: TrafficConfig, windows: dg.TimeWindowPartitionsDefinition, metric: str) -> dg.AssetCheckSpec:
    return dg.AssetCheckSpec(f"{metric}_drift", asset="traffic_summary", blocking=config.blocking,
                             partitions_def=windows,
                             description=f"{metric} of the partition did not drop beyond its margin against the "
                                         f"trailing {config.window} partitions (two-sample bootstrap "
                                         "interval; not applicable or too few rows decide nothing).")


def _results(folder: Path) -> pd.DataFrame:
    path = folder / "results.parquet"
    return pd.read_parquet(path) if path.exists() else pd.DataFrame(columns=["metric", "status", "value"])


def _summary_asset(config: TrafficConfig, windows: dg.TimeWindowPartitionsDefinition) -> dg.AssetsDefinition:
    """``traffic_summary`` in ``windows``, with a drift check per metric of ``config``."""
    @dg.asset(
        partitions_def=windows, group_name=GROUP, code_version="1", kinds={"json", "html"},
        deps=["traffic_scores", "traffic_samples"], automation_condition=FOLLOWS,
        check_specs=[_drift_check(config, windows, m) for m in config.metrics],
        description="The partition's summary (summary.json: volume, latency, metric means with 95 % intervals, judging "
                    "cost, drift, worst rows) and the traffic page report.html; drift checks per metric.",
    )
    def traffic_summary(context: dg.AssetExecutionContext, traffic_store: TrafficStore):
        """Summarize the partition, compare it with its trailing window, rewrite the traffic page."""
        settings = traffic_store.settings(config.known)
        key = context.partition_key
        folder = traffic_store.folder(key)
        day = _results(folder)
        window_keys = [k for k in trailing(windows, key, settings.window) if (Path(traffic_store.root) / k.replace(":", "")
                                                                      / "results.parquet").exists()]
        before = pd.concat([_results(traffic_store.folder(k)) for k in window_keys], ignore_index=True) \
            if window_keys else pd.DataFrame(columns=["metric", "status", "value"])
        drifts = drift(day, before, config.metrics, settings.margins, settings.seed, registry=config.known)
        sample = pd.read_parquet(folder / "sample.parquet")
        traces = pd.read_parquet(folder / "traces.parquet", columns=["latency_ms", "prompt_tokens", "completion_tokens",
                                                                     "total_tokens", "session_id"])
        problems = len(pd.read_parquet(folder / "problems.parquet", columns=["line"]))
        drawn = json.loads((folder / "sample.json").read_text(encoding="utf-8"))
        summary = partition_summary(key, traces, problems, day, config.metrics, drifts, sample, drawn)
        summary["window"] = window_keys
        (folder / "summary.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False), encoding="utf-8")
        root = Path(traffic_store.root)
        page = root / "report.html"
        page.write_text(traffic_html(read_summaries(sorted(root.glob("*/summary.json"))), key), encoding="utf-8")
        metadata: dict = {"traces": summary["traces"], "sampled": summary["sampled"], "problems": problems,
                          "summary_path": str(folder / "summary.json"), "report_html": str(page),
                          "window": dg.MetadataValue.json(window_keys)}
        for metric, stats in summary["metrics"].items():
            metadata[f"{metric}_mean"] = float(stats["mean"])
            metadata[f"{metric}_low"], metadata[f"{metric}_high"] = float(stats["low"]), float(stats["high"])
        yield dg.MaterializeResult(metadata=metadata)
        severity = dg.AssetCheckSeverity.ERROR if config.blocking else dg.AssetCheckSeverity.WARN
        for metric, result in drifts.items():
            numbers = {name: float(getattr(result, name)) for name in ("difference", "low", "high", "day_mean",
                                                                       "window_mean", "p_drop_holm")
                       if getattr(result, name) is not None}
            yield dg.AssetCheckResult(
                check_name=f"{metric}_drift", asset_key="traffic_summary", passed=result.verdict != DROP,
                severity=severity, description=result.describe(),
                metadata={"metric": metric, "verdict": result.verdict, **numbers, "margin": result.margin,
                          "n_day": result.n_day, "n_window": result.n_window, "window": dg.MetadataValue.json(window_keys)})
    return traffic_summary


def traffic_assets(config: TrafficConfig) -> list[dg.AssetsDefinition]:
    """The traffic group's assets, partitioned, judged and checked as ``config``
    (``rag_eval.metrics.sources.traffic.TrafficConfig``: its partitioning, metrics, window and ``blocking``) says:
    ``traffic_samples``, ``traffic_sample``, ``traffic_scores``, ``traffic_summary``.
    Builds the metric registry (the scores' code version).

    Raises
    ------
    KeyError
        For a metric of ``config`` the registry does not know (as ``rag_eval.metrics.core.registry.build_metrics``).
    """
    windows = traffic_partitions(config)
    return [_samples_asset(windows), _sample_asset(config, windows), _scores_asset(config, windows),
            _summary_asset(config, windows)]
