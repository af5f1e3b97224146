"""Continuous evaluation of production traffic: settings, where traces are, and what a window holds.

Settings live in ``[tool.rag_eval.traffic]`` of the project's ``pyproject.toml`` (or a TOML
file of the same keys)::

    [tool.rag_eval.traffic]
    source = "traces"        # a folder (or file) of traces, or a database URL for format "sql"
    format = "otlp"          # otlp | langfuse | table | sql   (rag_eval.metrics.sources.traces)
    query = ""               # sql: the query whose rows are traces
    mapping = {}             # table and sql: {field: column} (rag_eval.metrics.sources.traces.tables.FIELDS)
    partition = "daily"      # or "hourly"
    start = ""               # the first partition (YYYY-MM-DD; default: the day of the earliest trace, or
                             # today while the source holds none; required for format "sql")
    timezone = "UTC"         # of the partitions' boundaries
    metrics = ["faithfulness", "answer_relevancy", "context_relevancy"]   # reference-free only
    budget_rows = 100        # turns (traces) judged per partition at most, in whole conversations (0: none;
                             # see rag_eval.metrics.stats.sampling)
    budget_cost = -1         # or a price limit per partition (-1: none), at `price`
    strong_share = 0         # > 0: a judge cascade: the offline judge scores every sampled trace and the
                             # judge this share of them (rag_eval.metrics.core.strong), the means its estimates
    price = [0.15, 0.60]     # per million prompt and completion tokens
    strata = ["route", "score_band"]
    seed = 0
    window = 7               # trailing partitions a partition's drift check compares with
    margins = {}             # per metric, on its scale (default rag_eval.metrics.stats.compare.default_margin)
    blocking = false         # the drift checks fail with severity ERROR (true) or WARN (false)
    min_traces = 1           # traffic_arrived fails below this many traces in a partition
    session_hours = 6        # a session's trace is read with the partition where the session's earliest
                             # trace of the session_hours before it started (rag_eval.metrics.sources.traces.sessions)

Which partitions a trace source touches is read once per file (the start hour of every
span, :func:`file_hours`) and kept beside the traffic results (``.index/``, one small JSON
a file, keyed by its size and modification time), so the sensor and each partition read
only the files that concern them.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import InitVar, dataclass, field, fields, replace
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from rag_eval.metrics.core.bounded import clip, quote
from rag_eval.metrics.core.registry import Registry, given
from rag_eval.metrics.core.settings import tool_section
from rag_eval.metrics.stats.sampling import STRATA, Budget
from rag_eval.metrics.sources.traces import FORMATS, Trace, TraceProblem, read_traces, source_files
from rag_eval.metrics.sources.traces.parquet import WrittenTraces, write_traces
from rag_eval.metrics.sources.traces.sessions import in_window
from rag_eval.metrics.errors import SettingsError

HOUR_NS = 3600 * 10 ** 9
#: Fields production traffic does not have: a metric reading one of them is refused.
REFERENCE_FIELDS = ("reference", "retrieval_ground_truth")
DEFAULT_METRICS = ["faithfulness", "answer_relevancy", "context_relevancy"]


@dataclass
class TrafficConfig:
    """The traffic settings (see the module's notes for each key).

    Raises
    ------
    ValueError
        For an unknown format, partition or stratum; a metric that is unknown or needs a
        reference; a negative budget, window, margin or ``session_hours``; ``blocking`` not a boolean; an
        unknown ``timezone``; format ``sql`` without ``start``.
    """

    source: str = "traces"
    format: str = "otlp"
    query: str = ""
    mapping: dict[str, str] = field(default_factory=dict)
    partition: str = "daily"
    start: str = ""
    timezone: str = "UTC"
    metrics: list[str] = field(default_factory=lambda: list(DEFAULT_METRICS))
    budget_rows: int = 100
    budget_cost: float = -1
    strong_share: float = 0.0
    price: list[float] = field(default_factory=lambda: [0.15, 0.60])
    strata: list[str] = field(default_factory=lambda: list(STRATA))
    seed: int = 0
    window: int = 7
    margins: dict[str, float] = field(default_factory=dict)
    blocking: bool = False
    min_traces: int = 1
    session_hours: int = 6
    #: The metrics ``metrics`` and ``margins`` may name (default the built-in ones): not a setting of the file.
    registry: InitVar[Registry | None] = None
    #: ``registry``, where the traffic assets find the metrics they judge.
    known: Registry = field(init=False, repr=False, compare=False)

    def __post_init__(self, registry: Registry | None) -> None:
        known = self.known = given(registry)
        if self.format not in FORMATS:
            raise SettingsError(f"traffic config: format is one of {list(FORMATS)}, not {quote(self.format)}")
        if self.partition not in ("daily", "hourly"):
            raise SettingsError(f"traffic config: partition is 'daily' or 'hourly', not {quote(self.partition)}")
        if not self.metrics:
            raise SettingsError("traffic config: metrics must name at least one metric")
        try:
            ZoneInfo(self.timezone)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise SettingsError(f"traffic config: timezone is an IANA name such as 'UTC' or 'Europe/Paris', "
                                f"not {quote(self.timezone)}") from exc
        if self.format == "sql" and not self.start:
            raise SettingsError("traffic config: format 'sql' needs start, the first day of traffic (YYYY-MM-DD): "
                                "the partitions are made when the code location loads, without querying the database")
        for metric in [*self.metrics, *self.margins]:
            if metric not in known:
                raise SettingsError(f"traffic config: unknown metric {quote(metric)}")
            needs = [f for f in known[metric].required_fields if f in REFERENCE_FIELDS]
            if needs:
                raise SettingsError(f"traffic config: {metric} reads {needs[0]}, which production traffic has not; "
                                    "choose reference-free metrics")
        if [s for s in self.strata if s not in STRATA]:
            raise SettingsError(f"traffic config: strata are among {list(STRATA)}, not {quote(self.strata)}")
        for name in ("budget_rows", "window", "min_traces", "seed", "session_hours"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise SettingsError(f"traffic config: {name} must be a whole number, 0 or more, got {quote(value)}")
        if not isinstance(self.blocking, bool):
            raise SettingsError(f"traffic config: blocking is true or false, got {quote(self.blocking)}")
        share = self.strong_share
        if isinstance(share, bool) or not isinstance(share, int | float) or not 0 <= share <= 1:
            raise SettingsError(f"traffic config: strong_share is a share from 0 (no cascade) to 1, got {quote(share)}")
        if len(self.price) != 2 or any(not isinstance(p, int | float) or p < 0 for p in self.price):
            raise SettingsError(f"traffic config: price is [prompt, completion] per million tokens, got {quote(self.price)}")
        numbers = {"budget_cost": self.budget_cost, **{f"margins.{m}": v for m, v in self.margins.items()}}
        for name, value in numbers.items():
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or \
                    (value < 0 and name != "budget_cost"):
                raise SettingsError(f"traffic config: {clip(name, 80)} must be a finite number, got {quote(value)}")

    @property
    def budget(self) -> Budget:
        """The per-partition budget of ``budget_rows`` and ``budget_cost`` (a negative cost: no cost limit)."""
        return Budget(rows=self.budget_rows, cost=None if self.budget_cost < 0 else float(self.budget_cost),
                      price=(float(self.price[0]), float(self.price[1])))

    def started(self, index: TraceIndex) -> TrafficConfig:
        """These settings with ``start`` set: as given, else the day (in ``timezone``) of the earliest hour
        ``index`` (:class:`TraceIndex`) holds for a file of ``source``, else today while ``source`` does not
        exist. Reads each file not yet in the index (:func:`file_hours`).

        Raises
        ------
        OSError
            For a trace file that cannot be read.
        """
        if self.start:
            return self
        zone = ZoneInfo(self.timezone)
        try:
            hours = [hour for counter in index.counts(self.source).values() for hour in counter]
        except FileNotFoundError:
            hours = []
        first = datetime.fromtimestamp(min(hours) * 3600, zone) if hours else datetime.now(zone)
        return replace(self, start=first.date().isoformat(), registry=self.known)

    @classmethod
    def load(cls, path: str | Path | None = None, registry: Registry | None = None,
             **overrides: Any) -> TrafficConfig:
        """Settings from ``path`` (default ``pyproject.toml`` in the working folder, whose
        ``[tool.rag_eval.traffic]`` may be absent: defaults), then ``overrides`` (``None`` ignored);
        ``$RAG_EVAL_TRAFFIC_SOURCE`` overrides ``source`` when set. The metrics named are those of
        ``registry`` (default the built-in ones).

        Raises
        ------
        FileNotFoundError
            If ``path`` is given and does not exist.
        ValueError
            For a file that is not TOML, an unknown key (named with the file), or a bad value.
        """
        values = tool_section(path, "traffic", {f.name for f in fields(cls) if f.init})
        if os.environ.get("RAG_EVAL_TRAFFIC_SOURCE"):
            values["source"] = os.environ["RAG_EVAL_TRAFFIC_SOURCE"]
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values, registry=registry)


def file_hours(path: Path, format: str, mapping: dict[str, str] | None = None) -> Counter:
    """``{hour: spans or traces}`` of a trace file, ``hour`` counted since the epoch (UTC):
    every span's start for OTLP (``rag_eval.metrics.sources.traces.otlp_wire.span_times``: no JSON parsing), every
    trace's start for the other formats. A file with no readable start at all is
    ``{the hour it was last modified: 0}``: the partition of that hour reads it and reports
    why none of its lines could be placed (never skipped silently); unless it holds nothing (empty, or blank
    lines only, as a writer that failed may leave it): no hour, so no partition "with traces"."""
    if _blank(path):
        return Counter()
    if format == "otlp":
        from rag_eval.metrics.sources.traces.otlp_wire import span_times

        hours = Counter(t // HOUR_NS for t in span_times(path))
    else:
        hours = Counter(t.start_ns // HOUR_NS for t in read_traces(path, format, mapping) if isinstance(t, Trace))
    return hours or Counter({path.stat().st_mtime_ns // HOUR_NS: 0})


def _blank(path: Path) -> bool:
    """Whether the file holds nothing but white space (read up to its first other byte)."""
    with path.open("rb") as stream:
        return not any(chunk.strip() for chunk in iter(lambda: stream.read(1 << 16), b""))


class TraceIndex:
    """The hours each trace file of a source touches, kept in ``<folder>/.index/`` (one JSON
    per file, rewritten atomically when the file's size or modification time changed)."""

    def __init__(self, folder: str | Path, format: str, mapping: dict[str, str] | None = None) -> None:
        self.folder, self.format, self.mapping = Path(folder) / ".index", format, mapping

    def hours(self, path: Path) -> Counter:
        """The file's ``{hour: count}`` (:func:`file_hours`), from the index when it is current."""
        stat = path.stat()
        entry = self.folder / (hashlib.sha1(str(path.resolve()).encode()).hexdigest() + ".json")
        stamp = [stat.st_size, stat.st_mtime_ns]
        if entry.exists():
            try:
                kept = json.loads(entry.read_text(encoding="utf-8"))
                if kept["stamp"] == stamp:
                    return Counter({int(h): n for h, n in kept["hours"].items()})
            except (ValueError, KeyError):
                pass  # a damaged entry is worked out again
        hours = file_hours(path, self.format, self.mapping)
        self.folder.mkdir(parents=True, exist_ok=True)
        partial = entry.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps({"path": str(path), "stamp": stamp, "hours": hours}), encoding="utf-8")
        partial.replace(entry)
        return hours

    def counts(self, source: str | Path) -> dict[Path, Counter]:
        """``{file: {hour: count}}`` of every file of ``source``."""
        return {path: self.hours(path) for path in source_files(source, self.format)}


def window_files(index: TraceIndex, source: str | Path, start_ns: int, end_ns: int) -> list[Path]:
    """The files of ``source`` with a span or trace starting within an hour of [start, end):
    the hour around catches a trace whose spans began on both sides of a boundary."""
    return _touching(index.counts(source), start_ns, end_ns)


def _touching(counts: dict[Path, Counter], start_ns: int, end_ns: int) -> list[Path]:
    first, last = start_ns // HOUR_NS - 1, (end_ns - 1) // HOUR_NS + 1
    return [path for path, hours in counts.items() if any(first <= h <= last for h in hours)]


def window_queries(query: str, mapping: dict[str, str] | None) -> tuple[str, str]:
    """``query`` limited to a window (bound parameters ``:window_start`` and ``:window_end``) on its
    start column (``mapping["start"]``, default ``start``), and ``query`` limited to the rows
    without a start (no window holds them: each window reports them as problems)."""
    column = (mapping or {}).get("start", "start")
    quoted = '"' + column.replace('"', '""') + '"'
    return (f"select * from ({query}) as traffic where {quoted} >= :window_start and {quoted} < :window_end",
            f"select * from ({query}) as traffic where {quoted} is null")


def write_window(config: TrafficConfig, index: TraceIndex, start_ns: int, end_ns: int, path: Path) -> WrittenTraces:
    """The traces starting in [start, end) written to the Parquet file ``path``
    (``rag_eval.metrics.sources.traces.parquet.write_traces``), streaming, and the problems met."""
    return write_traces(read_window(config, index, start_ns, end_ns), path)


def read_window(config: TrafficConfig, index: TraceIndex, start_ns: int,
                end_ns: int) -> Iterator[Trace | TraceProblem]:
    """The traces of the partition [start, end) and the problems met reading them, streaming: a trace
    without a session that started in it, a session's trace whose session started in it (read from
    ``session_hours`` before to ``session_hours`` after the window:
    ``rag_eval.metrics.sources.traces.sessions.in_window``). A problem without a time — a row without a
    start, a file's unreadable line — is given by every window reading its file or query for the window
    itself (such a SQL row is named by its trace id, its row number being its place among the rows
    without a start)."""
    horizon = config.session_hours * HOUR_NS
    items: Iterator[Trace | TraceProblem]
    placed: set[str] | None = None
    if config.format == "sql":
        from rag_eval.metrics.sources.traces import utc
        from rag_eval.metrics.sources.traces.tables import read_sql

        windowed, undated = window_queries(config.query, config.mapping)
        items = itertools.chain(read_sql(config.source, windowed, config.mapping,
                                         {"window_start": utc(start_ns - horizon), "window_end": utc(end_ns + horizon)}),
                                read_sql(config.source, undated, config.mapping))
    else:
        counts = index.counts(config.source)
        placed = {str(path) for path in _touching(counts, start_ns, end_ns)}
        items = read_traces(config.source, config.format, config.mapping,
                            files=_touching(counts, start_ns - horizon, end_ns + horizon))
    return in_window(items, start_ns, end_ns, horizon, placed)
