"""Where traffic partitions live and what the trace source holds: the ``traffic_store`` resource
(:class:`TrafficStore`: each partition's folder, the traffic settings, the trace index) and the partition
arithmetic the traffic assets (``rag_eval.assets.traffic``) and the traffic sensor share."""
from pathlib import Path

import dagster as dg

from rag_eval.assets.outputs import output_folder
from rag_eval.assets.partitions import traffic_partitions
from rag_eval.metrics.core.registry import Registry
from rag_eval.metrics.sources.traffic import HOUR_NS, TrafficConfig, TraceIndex


class TrafficStore(dg.ConfigurableResource):
    """Where traffic partitions are written (``<root>/<partition>/``: ``traces.parquet``,
    ``problems.parquet``, ``sample.parquet``, ``conversations.jsonl``, ``results.parquet``, ``summary.json``; the traffic
    page ``<root>/report.html``; the trace index ``<root>/.index/``) and the traffic settings:
    ``[tool.rag_eval.traffic]`` of ``config_path`` (default: ``pyproject.toml`` of the working
    folder), ``source`` overriding its source. The partitioning, the metrics and ``blocking``
    are those the assets were made with (``rag_eval.assets.traffic.traffic_assets``: they shape the assets and checks)."""

    root: str = "out/traffic"
    config_path: str | None = None
    source: str | None = None

    def settings(self, registry: Registry | None = None) -> TrafficConfig:
        """The traffic settings (``rag_eval.metrics.sources.traffic.TrafficConfig``), naming metrics of
        ``registry`` (default the built-in ones), ``start`` by default the first day with traces (``started``).

        Raises
        ------
        dagster.Failure
            For unreadable or invalid settings.
        """
        try:
            settings = TrafficConfig.load(self.config_path, registry, source=self.source)
            return settings.started(self.index(settings))
        except (OSError, ValueError) as exc:
            raise dg.Failure(str(exc), allow_retries=False) from exc

    def folder(self, key: str) -> Path:
        """The folder of partition ``key`` (``:`` of hourly keys left out), created if needed, never
        through a symbolic link out of ``root`` (``rag_eval.assets.outputs.output_folder``: a
        ``StorageError`` naming it)."""
        return output_folder(self.root, Path(self.root) / key.replace(":", ""))

    def index(self, settings: TrafficConfig) -> TraceIndex:
        """The index of which hours each trace file touches (``rag_eval.metrics.sources.traffic.TraceIndex``)."""
        return TraceIndex(self.root, settings.format, settings.mapping)


def window_ns(window: dg.TimeWindow) -> tuple[int, int]:
    """The partition's window [start, end) in nanoseconds since the epoch."""
    return int(window.start.timestamp()) * 10 ** 9, int(window.end.timestamp()) * 10 ** 9


def partition_counts(store: TrafficStore, settings: TrafficConfig) -> dict[str, int]:
    """``{partition: spans or traces}`` of the whole source, from the trace index (files) or
    the query's start column (SQL), in ``settings``' partitions; hours before the first
    partition are left out."""
    windows = traffic_partitions(settings)
    if settings.format == "sql":
        from rag_eval.metrics.sources.traces.tables import sql_times

        hours: dict[int, int] = {}
        for ns in sql_times(settings.source, settings.query, settings.mapping.get("start", "start")):
            hours[ns // HOUR_NS] = hours.get(ns // HOUR_NS, 0) + 1
    else:
        hours = {}
        for counter in store.index(settings).counts(settings.source).values():
            for hour, count in counter.items():
                hours[hour] = hours.get(hour, 0) + count
    first = windows.start.timestamp()
    counts: dict[str, int] = {}
    for hour, count in hours.items():
        if hour * 3600 >= first:
            key = windows.get_partition_key_for_timestamp(hour * 3600)
            counts[key] = counts.get(key, 0) + count
    return dict(sorted(counts.items()))


def trailing(windows: dg.TimeWindowPartitionsDefinition, key: str, count: int) -> list[str]:
    """The ``count`` partitions of ``windows`` before ``key`` (fewer at the start), latest first."""
    keys, start = [], windows.time_window_for_partition_key(key).start
    for _ in range(count):
        window = windows.get_prev_partition_window(start)
        if window is None:
            break
        keys.append(windows.get_partition_key_for_timestamp(window.start.timestamp()))
        start = window.start
    return keys
