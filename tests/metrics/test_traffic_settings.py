"""Traffic settings and the trace index (rag_eval.metrics.sources.traffic)."""
import os

import pytest

from rag_eval.metrics.sources.traffic import HOUR_NS, TraceIndex, TrafficConfig, window_files
from tests.metrics.test_traces import T0, line, rag_trace


def test_settings_from_a_file_and_the_environment(tmp_path, monkeypatch):
    path = tmp_path / "traffic.toml"
    path.write_text('[tool.rag_eval.traffic]\nsource = "spans"\nbudget_rows = 5\nmetrics = ["faithfulness"]\n',
                    encoding="utf-8")
    config = TrafficConfig.load(path)
    assert (config.source, config.budget_rows, config.metrics, config.budget.cost) == ("spans", 5, ["faithfulness"],
                                                                                       None)
    monkeypatch.setenv("RAG_EVAL_TRAFFIC_SOURCE", "/elsewhere")
    assert TrafficConfig.load(path).source == "/elsewhere"
    path.write_text("[tool.rag_eval.traffic]\nbudget = 5\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"traffic.toml: unknown traffic setting\(s\) \['budget'\]"):
        TrafficConfig.load(path)
    with pytest.raises(ValueError, match="context_recall reads reference, which production traffic has not"):
        TrafficConfig(metrics=["context_recall"])
    with pytest.raises(ValueError, match="'daily' or 'hourly'"):
        TrafficConfig(partition="weekly")


def test_the_index_keeps_each_files_hours_until_the_file_changes(tmp_path):
    source = tmp_path / "traces"
    source.mkdir()
    path = source / "spans.jsonl"
    path.write_text(line(*rag_trace("a" * 32)) + "\n", encoding="utf-8")
    index = TraceIndex(tmp_path / "out", "otlp")
    hour = T0 // HOUR_NS
    assert index.hours(path) == {hour: 3}
    [entry] = (tmp_path / "out" / ".index").iterdir()
    os.utime(entry, (0, 0))
    assert index.hours(path) == {hour: 3} and entry.stat().st_mtime == 0  # read from the index, not rewritten
    path.write_text(line(*rag_trace("a" * 32)) + "\n" + line(*rag_trace("b" * 32, T0 + 30 * HOUR_NS)) + "\n",
                    encoding="utf-8")
    assert index.hours(path) == {hour: 3, hour + 30: 3}
    day = 24 * HOUR_NS
    assert window_files(index, source, T0 + day, T0 + 2 * day) == [path]
    assert window_files(index, source, T0 + 3 * day, T0 + 4 * day) == []


def test_the_partitions_start_at_the_first_day_with_traces(tmp_path):
    """start unset: the day of the earliest span in the source, in the partitions' timezone (no phantom days)."""
    from datetime import datetime, timezone

    from rag_eval.assets.partitions import traffic_partitions

    source = tmp_path / "traces"
    source.mkdir()
    # 2026-11-02T03:00Z (the earliest) is still 2026-11-01 in New York (UTC-5 in November).
    (source / "b.jsonl").write_text(line(*rag_trace("b" * 32, T0 + 27 * HOUR_NS)) + "\n", encoding="utf-8")
    (source / "c.jsonl").write_text(line(*rag_trace("c" * 32, T0 + 50 * HOUR_NS)) + "\n", encoding="utf-8")
    index = TraceIndex(tmp_path / "out", "otlp")
    settings = TrafficConfig(source=str(source)).started(index)
    assert settings.start == "2026-11-02"
    now = datetime(2026, 11, 4, 1, tzinfo=timezone.utc)
    assert traffic_partitions(settings).get_partition_keys(current_time=now) == ["2026-11-02", "2026-11-03"]
    assert TrafficConfig(source=str(source), timezone="America/New_York").started(index).start == "2026-11-01"
    assert TrafficConfig(source=str(source), start="2026-10-01").started(index).start == "2026-10-01"
    # No source yet: today, so the partitions hold no day before it.
    today = datetime.now(timezone.utc).date().isoformat()
    assert TrafficConfig(source=str(tmp_path / "none")).started(index).start == today
    with pytest.raises(ValueError, match="format 'sql' needs start, the first day of traffic"):
        TrafficConfig(source="sqlite://", format="sql", query="select 1")
    with pytest.raises(ValueError, match=r"timezone is an IANA name .* not 'Mars/Olympus'"):
        TrafficConfig(timezone="Mars/Olympus")
