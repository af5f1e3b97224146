"""Production traffic: its job, the sensor that notices new traces, and ``rag-eval traffic``.

The sensor ``new_traffic`` counts the spans (or rows) of the trace source per partition
(``rag_eval.assets.traffic_store.partition_counts``: the trace index for files, the query's start column
for SQL) and requests ``traffic_job`` for exactly the partitions whose count changed since
it last requested them: a new day, or an earlier day whose late spans arrived in a new
file. A partition that has not ended yet (today, with daily partitions) is requested once
it has. ``rag-eval traffic`` does the same in-process for users who do not run the daemon.
The job and the sensor are made from the traffic settings (:func:`traffic_job`,
:func:`traffic_sensor`): importing this module reads nothing.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import dagster as dg

from rag_eval.assets.partitions import traffic_partitions
from rag_eval.assets.traffic import traffic_assets
from rag_eval.assets.traffic_store import TrafficStore, partition_counts
from rag_eval.metrics.sources.traffic import TrafficConfig
from rag_eval.orchestration.automation import SENSOR_INTERVAL


def traffic_job(config: TrafficConfig):
    """``traffic_job`` (``dagster.define_asset_job``): the ``traffic`` group in ``config``'s partitions
    (``rag_eval.metrics.sources.traffic.TrafficConfig``)."""
    return dg.define_asset_job(
        "traffic_job", selection=dg.AssetSelection.groups("traffic"), partitions_def=traffic_partitions(config),
        description="A partition of production traffic: read its traces, sample them within the budget, judge the "
                    "sample, summarize it and check it for drift against the trailing window.")


def new_partitions(config: TrafficConfig, counts: dict[str, int], requested: dict[str, int], now: float) -> list[str]:
    """The partitions whose count differs from the one last requested, among those of ``config``'s
    partitioning that have ended by ``now`` (seconds since the epoch), in key order."""
    windows = traffic_partitions(config)
    ended = set(windows.get_partition_keys(current_time=datetime.fromtimestamp(now, tz=timezone.utc)))
    return [key for key, count in counts.items() if requested.get(key) != count and key in ended]


def no_new_traces(config: TrafficConfig, counts: dict[str, int]) -> str:
    """Why the sensor requests nothing, given ``counts`` per partition of the source as read now: no new traces, or
    only traces before ``config``'s first partition, which the code location fixed when it loaded (``start``
    unset: the first day with traces then) and must be reloaded to add."""
    earlier = [key for key in counts if key < config.start]
    if not earlier:
        return "no new traces"
    found = earlier[0] if len(earlier) == 1 else f"{len(earlier)} partitions, {earlier[0]} to {earlier[-1]}"
    return (f"no new traces from the first partition, {config.start}, on; traces before it were found ({found}): "
            "reload the code location to add their partitions (they begin at the first day with traces when it loads)")


def traffic_sensor(config: TrafficConfig) -> dg.SensorDefinition:
    """The sensor ``new_traffic`` for ``traffic_job`` in ``config``'s partitions (stopped by default)."""

    @dg.sensor(job_name="traffic_job", minimum_interval_seconds=SENSOR_INTERVAL,
               default_status=dg.DefaultSensorStatus.STOPPED,
               description="Requests traffic_job for exactly the partitions with new traces (a new day, or late "
                           "spans of an earlier one), once the partition has ended. Interval: "
                           "RAG_EVAL_SENSOR_INTERVAL.")
    def new_traffic(context: dg.SensorEvaluationContext, traffic_store: TrafficStore):
        """Compare the source's spans per partition with what the cursor says was requested."""
        settings = traffic_store.settings(config.known)
        try:
            counts = partition_counts(traffic_store, settings)
        except FileNotFoundError as exc:
            return dg.SkipReason(str(exc))
        requested = json.loads(context.cursor) if context.cursor else {}
        keys = new_partitions(config, counts, requested, time.time())
        if not keys:
            return dg.SkipReason(no_new_traces(config, counts))
        stamp = int(time.time())
        return dg.SensorResult(
            run_requests=[dg.RunRequest(partition_key=key, run_key=f"traffic-{key}-{counts[key]}-{stamp}",
                                        tags={"rag_eval/spans": str(counts[key])}) for key in keys],
            cursor=json.dumps({**requested, **{key: counts[key] for key in keys}}, sort_keys=True))

    return new_traffic


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``rag-eval traffic``."""
    parser.add_argument("source", nargs="?", help="folder or file of traces, or a database URL (default: "
                        "[tool.rag_eval.traffic] source of ./pyproject.toml)")
    parser.add_argument("--config", help="TOML file of the traffic settings (default ./pyproject.toml)")
    parser.add_argument("--from", dest="start", help="first partition (default: the first with traces)")
    parser.add_argument("--to", dest="end", help="last partition (default: the last ended with traces)")
    parser.add_argument("--out", default="out", help="folder of the results (default out/: out/traffic/)")
    parser.add_argument("--budget-rows", type=int, help="traces judged per partition at most")
    parser.add_argument("--budget-cost", type=float, help="estimated judging cost per partition at most")
    parser.add_argument("--seed", type=int, help="the sample's seed")
    parser.add_argument("--strong-share", type=float, metavar="SHARE",
                        help="a judge cascade: the offline judge scores every sampled trace, the LLM judge this share "
                             "of them (active, seeded); the means are its estimates (default the settings' "
                             "strong_share, 0: none)")
    parser.set_defaults(handler=cmd_traffic, judges=True)


def _print_problems(path: Path, count: int, shown: int = 3) -> None:
    """The first ``shown`` unreadable lines of a day (file, line, field, why) on stderr, then how many more."""
    import pandas as pd

    from rag_eval.orchestration.report import printable

    if not path.exists():
        return
    frame = pd.read_parquet(path, columns=["file", "line", "field", "reason"]).head(shown)
    for row in frame.itertuples():
        print(printable(f"  unreadable: {row.file} line {row.line}: {row.field}: {row.reason}"), file=sys.stderr)
    if count > len(frame):
        print(f"  … and {count - len(frame)} more in {path}", file=sys.stderr)


def cmd_traffic(args: argparse.Namespace) -> int:
    """Materialize ``traffic_job`` in-process for each ended partition with traces between
    ``--from`` and ``--to``, in key order; print each one's volume, means and drift verdicts.
    Exit 1 when a partition could not be summarized (no traffic arrived, a step failed), else 4
    when a drift check failed, else 0."""
    from rag_eval.metrics.errors import SettingsError
    from rag_eval.orchestration.failures import print_run_failure
    from rag_eval.orchestration.settings import RunSettings

    run_settings = RunSettings.from_args(args)  # the sample's budget and seed, the judge, the folder
    store = TrafficStore(root=str(Path(run_settings.paths.out) / "traffic"), config_path=args.config,
                         source=args.source)
    settings = store.settings(args.registry)
    counts = partition_counts(store, settings)
    keys = [k for k in new_partitions(settings, counts, {}, time.time())
            if (not args.start or k >= args.start) and (not args.end or k <= args.end)]
    if not keys:
        raise SettingsError(f"no ended partition with traces in {settings.source} between {args.start or 'the first'} "
                            f"and {args.end or 'the last'} (partitions with traces: {', '.join(counts) or 'none'})")
    job = dg.Definitions(assets=traffic_assets(settings), jobs=[traffic_job(settings)],
                         resources={"traffic_store": store, "judge": run_settings.judge}).resolve_job_def("traffic_job")
    drifted = failed = 0
    for key in keys:
        result = job.execute_in_process(partition_key=key, instance=args.instance, raise_on_error=False,
                                        run_config=run_settings.to_run_config())  # its log in the instance, the UI's
        checks = result.get_asset_check_evaluations()
        drops = [c for c in checks if c.check_name.endswith("_drift") and not c.passed]
        summarized = dg.AssetKey("traffic_summary") in {e.asset_key for e in result.get_asset_materialization_events()}
        if not summarized:  # traffic_arrived blocked it (no traffic), or a step failed
            failed += 1
            why = "; ".join(c.description or c.check_name for c in checks if not c.passed)
            print(f"{key}: {why or f'the run failed (its log: run {result.run_id} in the Dagster UI)'}",
                  file=sys.stderr)
            if not why:
                print_run_failure(result)
            continue
        summary = json.loads((store.folder(key) / "summary.json").read_text(encoding="utf-8"))
        means = ", ".join(f"{m} {s['mean']:.3f} [{s['low']:.3f}, {s['high']:.3f}]"
                          for m, s in summary["metrics"].items())
        print(f"{key}: {summary['traces']} traces, {summary['sampled']} judged, {summary['problems']} unreadable; "
              f"{means}")
        if summary["problems"]:
            _print_problems(store.folder(key) / "problems.parquet", summary["problems"])
        drifted += len(drops)  # with blocking = true a drop also fails the run: still a drift, not a failure
        for check in drops:
            print(f"  DRIFT {check.description}")
    print(f"wrote {Path(store.root) / 'report.html'}")
    return 1 if failed else 4 if drifted else 0
