"""Production traffic through Dagster: the sensor requests exactly the partitions with new spans;
the example RAG system's traced traffic is sampled, judged offline and its degraded day fails
its drift check; with the LLM judge a re-run sends nothing."""
import json
import os
import shutil
import sys
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest

from rag_eval.assets.resources import JudgeResource
from rag_eval.assets.traffic import traffic_assets
from rag_eval.assets.traffic_store import TrafficStore, partition_counts
from rag_eval.metrics.sources.traffic import TrafficConfig
from rag_eval.orchestration.traffic import traffic_job, traffic_sensor
from tests.conftest import TEST_KEY
from tests.metrics.test_traces import MS, T0, line, rag_trace

ROOT = Path(__file__).resolve().parents[2]
DAY = 86_400 * 10 ** 9
#: The project's settings (pyproject.toml: daily partitions), from the first day of the traces below.
CONFIG = TrafficConfig.load(ROOT / "pyproject.toml", start="2026-11-01")


def example_traffic():
    """The module examples/rag_system/traffic.py."""
    sys.path.insert(0, str(ROOT / "examples" / "rag_system"))
    try:
        import traffic
    finally:
        sys.path.pop(0)
    return traffic


@pytest.fixture(scope="module")
def example_traces(tmp_path_factory):
    """200 questions over two days from examples/rag_system, half the answers of day 2 degraded."""
    folder = tmp_path_factory.mktemp("example") / "traces"
    example_traffic().simulate(folder, days=2, per_day=100, start="2026-11-01", degrade_from=2, degraded_share=0.5,
                               seed=0)
    return folder


def test_without_bm25s_the_example_traffic_names_the_extra_in_one_line_and_writes_no_file(tmp_path, monkeypatch,
                                                                                          capsys):
    # The traffic tutorial installed `.[traces,report]`: step 2 printed a ModuleNotFoundError's traceback and
    # left an empty traces-2026-11-01.jsonl, a partition "with traces" for `rag-eval traffic`.
    monkeypatch.setitem(sys.modules, "bm25s", None)
    assert example_traffic().main([str(tmp_path / "traces"), "--days", "2", "--per-day", "5"]) == 2
    assert capsys.readouterr() == ("", "error: The BM25 baseline retriever needs the 'testset' extra: "
                                       "pip install 'rag-eval-pipeline[testset]'\n")
    assert list((tmp_path / "traces").iterdir()) == []  # not even the hidden partial file


def test_an_empty_trace_file_makes_no_partition_with_traces(tmp_path):
    source = tmp_path / "traces"
    source.mkdir()
    (source / "a.jsonl").write_text(line(*rag_trace("a" * 32)) + "\n", encoding="utf-8")
    for name, text in (("empty.jsonl", ""), ("blank.jsonl", "\n  \n")):  # what a writer that failed may leave
        (source / name).write_text(text, encoding="utf-8")
        os.utime(source / name, (T0 / 1e9 + 2 * DAY / 1e9,) * 2)  # modified on 2026-11-03
    store = TrafficStore(root=str(tmp_path / "out"), source=str(source))
    assert partition_counts(store, store.settings()) == {"2026-11-01": 3}  # a's three spans; no 2026-11-03


def _sensor(store: TrafficStore, instance, cursor: str | None):
    context = dg.build_sensor_context(instance=instance, cursor=cursor, resources={"traffic_store": store})
    return traffic_sensor(CONFIG)(context)


def test_the_sensor_requests_exactly_the_new_partitions(tmp_path):
    source = tmp_path / "traces"
    source.mkdir()
    store = TrafficStore(root=str(tmp_path / "out"), source=str(source))
    later = T0 + 5 * 3600 * 10 ** 9
    (source / "a.jsonl").write_text(line(*rag_trace("a" * 32)) + "\n" + line(*rag_trace("b" * 32, later)) + "\n",
                                    encoding="utf-8")
    with dg.instance_for_test() as instance:
        first = _sensor(store, instance, None)
        assert [(r.partition_key, r.tags["rag_eval/spans"]) for r in first.run_requests] == [("2026-11-01", "6")]
        again = _sensor(store, instance, first.cursor)
        assert isinstance(again, dg.SkipReason) and again.skip_message == "no new traces"
        # A new day, then late spans of the first day in a file of their own: each asks for its day only.
        (source / "b.jsonl").write_text(line(*rag_trace("c" * 32, T0 + DAY)) + "\n", encoding="utf-8")
        second = _sensor(store, instance, first.cursor)
        assert [r.partition_key for r in second.run_requests] == ["2026-11-02"]
        late = list(rag_trace("d" * 32, T0 + 7 * 3600 * 10 ** 9))
        (source / "c.jsonl").write_text(line(*late) + "\n", encoding="utf-8")
        third = _sensor(store, instance, second.cursor)
        assert [r.partition_key for r in third.run_requests] == ["2026-11-01"]
        assert json.loads(third.cursor) == {"2026-11-01": 9, "2026-11-02": 3}
        # Materialized again, the day holds its late trace too.
        assets = traffic_assets(CONFIG)
        defs = dg.Definitions(assets=assets, resources={"traffic_store": store, "judge": JudgeResource()})
        before = dg.evaluate_automation_conditions(defs=defs, instance=instance)
        assert before.total_requested == 0
        dg.materialize(assets[:1], partition_key="2026-11-01", instance=instance,
                       resources={"traffic_store": store})
        day = pd.read_parquet(tmp_path / "out" / "2026-11-01" / "traces.parquet")
        assert sorted(day["trace_id"]) == ["a" * 32, "b" * 32, "d" * 32]
        # Declarative automation: the day's sample, scores and summary follow its re-read traces, that day only.
        evaluated = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=before.cursor)
        for asset in ("traffic_sample", "traffic_scores", "traffic_summary"):
            assert evaluated.get_requested_partitions(dg.AssetKey(asset)) == {"2026-11-01"}
        assert evaluated.total_requested == 3
        # A day still running is not a partition yet: today's spans wait for its end.
        now = (pd.Timestamp.now(tz="UTC").value // DAY) * DAY
        (source / "d.jsonl").write_text(line(*rag_trace("e" * 32, now + MS)) + "\n", encoding="utf-8")
        assert isinstance(_sensor(store, instance, third.cursor), dg.SkipReason)


def test_the_sensor_says_traces_before_the_first_partition_need_a_reload_of_the_code_location(tmp_path):
    # The partitions begin at the first day with traces when the code location loads (CONFIG: 2026-11-01). Traces
    # of 2026-10-30 added later are no partition of it: the sensor said "no new traces".
    source = tmp_path / "traces"
    source.mkdir()
    (source / "a.jsonl").write_text(line(*rag_trace("a" * 32)) + "\n", encoding="utf-8")
    (source / "b.jsonl").write_text(line(*rag_trace("b" * 32, T0 - 2 * DAY)) + "\n", encoding="utf-8")
    store = TrafficStore(root=str(tmp_path / "out"), source=str(source))
    with dg.instance_for_test() as instance:
        first = _sensor(store, instance, None)
        assert [r.partition_key for r in first.run_requests] == ["2026-11-01"]
        again = _sensor(store, instance, first.cursor)
    assert isinstance(again, dg.SkipReason)
    assert again.skip_message == ("no new traces from the first partition, 2026-11-01, on; traces before it were found "
                                  "(2026-10-30): reload the code location to add their partitions (they begin at the "
                                  "first day with traces when it loads)")


def test_the_example_traffic_drifts_on_its_degraded_day(example_traces, tmp_path, monkeypatch, capsys):
    """rag-eval traffic (the in-process path of the daemon's job): two partitions, sampled within the
    budget, judged offline; day 2's faithfulness drift check fails with its difference and interval."""
    from rag_eval.orchestration import cli

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(ROOT)  # the project's [tool.rag_eval.traffic]
    status = cli.main(["traffic", str(example_traces), "--out", str(tmp_path / "out"), "--budget-rows", "60"])
    printed = capsys.readouterr().out
    assert status == 4, printed
    folder = tmp_path / "out" / "traffic"
    first, second = (json.loads((folder / d / "summary.json").read_text()) for d in ("2026-11-01", "2026-11-02"))
    assert (first["traces"], first["sampled"], second["traces"], second["sampled"]) == (100, 60, 100, 60)
    assert first["drift"]["faithfulness"]["verdict"] == "no trailing window"
    drop = second["drift"]["faithfulness"]
    assert drop["verdict"] == "drop" and drop["high"] < -drop["margin"] and second["window"] == ["2026-11-01"]
    assert f"DRIFT faithfulness: drop: {drop['difference']:+.3f} [{drop['low']:+.3f}, {drop['high']:+.3f}]" in printed
    # The sample is stratified by route and score band within the budget, and recorded.
    drawn = json.loads((folder / "2026-11-02" / "sample.json").read_text())
    assert sum(s["sampled"] for s in drawn["per_stratum"].values()) == 60 and drawn["rows"] == 60
    # No session or user id leaves the traces file: not in the summary, the page or the results.
    for path in (folder / "2026-11-02" / "summary.json", folder / "report.html",
                 folder / "2026-11-02" / "results.parquet"):
        data = path.read_bytes()
        assert b"session-" not in data and b"user-" not in data, path
    assert pd.read_parquet(folder / "2026-11-02" / "traces.parquet")["session_id"].str.startswith("session-").all()
    page = (folder / "report.html").read_text()
    assert "DRIFT" in page and "Worst rows of 2026-11-02" in page and page.count("<svg") >= 2


def test_an_llm_judged_partition_rerun_sends_nothing(example_traces, tmp_path, server, monkeypatch):
    """With the LLM judge (the test server), the second run of a partition draws the same sample
    and the judgement cache answers every request."""
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    store = TrafficStore(root=str(tmp_path / "out"), source=str(example_traces))
    judge = JudgeResource(base_url=server.url, model="judge-test", embedding_model="embed-test",
                          cache_path=str(tmp_path / "cache.sqlite"))
    job = dg.Definitions(assets=traffic_assets(CONFIG), jobs=[traffic_job(CONFIG)],
                         resources={"traffic_store": store, "judge": judge}).resolve_job_def("traffic_job")
    config = {"ops": {"traffic_sample": {"config": {"budget_rows": 20}}}}
    with dg.instance_for_test() as instance:
        runs = [job.execute_in_process(partition_key="2026-11-01", instance=instance, run_config=config)
                for _ in range(2)]
        requests = []
        for run in runs:
            [scores] = [e for e in run.get_asset_materialization_events()
                        if e.asset_key == dg.AssetKey("traffic_scores")]
            requests.append(scores.materialization.metadata["requests"].value)
    sent = len(server.seen)
    assert requests[0] == sent > 0 and requests[1] == 0
    assert len(pd.read_parquet(tmp_path / "out" / "2026-11-01" / "sample.parquet")) == 20
    print(f"LLM judge: {sent} requests for 20 sampled rows ({sent / 20:.2f} a row), re-run 0")


def test_a_traffic_cascade_judges_a_share_of_the_sample_with_the_llm_judge_and_reports_its_estimates(
        example_traces, tmp_path, server, monkeypatch):
    """``strong_share`` in the sampler's run config: the offline judge scores the 80 sampled traces, the LLM
    judge (the test server) about a quarter of each metric's (about 20: an interval needs 10); the day's means
    are the cascade's estimates."""
    from rag_eval.orchestration.judge_sim_command import Simulation, simulated

    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    server.script = simulated(Simulation(verdict_p1=0.7))
    store = TrafficStore(root=str(tmp_path / "out"), source=str(example_traces))
    judge = JudgeResource(base_url=server.url, model="judge-test", embedding_model="embed-test",
                          cache_path=str(tmp_path / "cache.sqlite"))
    job = dg.Definitions(assets=traffic_assets(CONFIG), jobs=[traffic_job(CONFIG)],
                         resources={"traffic_store": store, "judge": judge}).resolve_job_def("traffic_job")
    config = {"ops": {"traffic_sample": {"config": {"budget_rows": 80, "strong_share": 0.25}}}}
    with dg.instance_for_test() as instance:
        assert job.execute_in_process(partition_key="2026-11-01", instance=instance, run_config=config).success
    results = pd.read_parquet(tmp_path / "out" / "2026-11-01" / "results.parquet")
    assert len(results) == 80 * len(CONFIG.metrics) and results["judge"].str.startswith("offline").all()
    drawn = results[results["strong_status"].notna()]
    assert (drawn["strong_judge"] == "llm:judge-test").all() and 0 < len(drawn) < len(results) / 2
    sent = drawn["strong_chat_requests"].sum() + drawn["strong_embedding_requests"].sum()
    assert sent == len(server.seen) > 0  # the LLM judge was asked about the drawn traces only
    summary = json.loads((tmp_path / "out" / "2026-11-01" / "summary.json").read_text(encoding="utf-8"))
    for metric in CONFIG.metrics:
        figure = summary["metrics"][metric]
        assert figure["published"] == "cascade" and figure["rows"] == 80
        assert figure["n"] == (drawn["metric"] == metric).sum() and figure["low"] <= figure["mean"] <= figure["high"]


def test_a_partition_without_traffic_fails_traffic_arrived(tmp_path):
    source = tmp_path / "traces"
    source.mkdir()
    (source / "spans.jsonl").write_text("not json\n", encoding="utf-8")
    # No line can be placed in time: the file belongs to the partition of its modification time.
    os.utime(source / "spans.jsonl", (T0 / 1e9 + 2 * DAY / 1e9 + 3600,) * 2)  # 2026-11-03T01:00Z
    store = TrafficStore(root=str(tmp_path / "out"), source=str(source))
    job = dg.Definitions(assets=traffic_assets(CONFIG), jobs=[traffic_job(CONFIG)],
                         resources={"traffic_store": store, "judge": JudgeResource()}).resolve_job_def("traffic_job")
    with dg.instance_for_test() as instance:
        result = job.execute_in_process(partition_key="2026-11-03", instance=instance, raise_on_error=False)
    [arrived] = [c for c in result.get_asset_check_evaluations() if c.check_name == "traffic_arrived"]
    assert not arrived.passed
    assert arrived.description == ("no traffic arrived: 0 traces in 2026-11-03 (at least 1 expected; "
                                   "1 unreadable spans or rows)")
    problems = pd.read_parquet(tmp_path / "out" / "2026-11-03" / "problems.parquet")
    assert problems[["line", "field"]].values.tolist() == [[1, "line"]]
    assert problems["reason"][0].startswith("not valid JSON")
    # Blocking: nothing downstream was materialized for the empty day.
    assert {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()} == {"traffic_samples"}
    shutil.rmtree(tmp_path / "out")


def test_hourly_partitions(tmp_path):
    """partition = "hourly": one partition an hour from start, keys as Dagster writes them."""
    from rag_eval.assets.partitions import traffic_partitions

    hourly = traffic_partitions(TrafficConfig(partition="hourly", start="2026-11-01"))
    assert hourly.get_partition_key_for_timestamp(T0 / 1e9 + 13 * 3600 + 5) == "2026-11-01-13:00"
    window = hourly.time_window_for_partition_key("2026-11-01-13:00")
    assert (window.end - window.start).total_seconds() == 3600
    assert TrafficStore(root=str(tmp_path)).folder("2026-11-01-13:00") == tmp_path / "2026-11-01-1300"


def test_a_cost_budget_costs_the_sample_with_the_traffic_metrics(example_traces, tmp_path, monkeypatch):
    # traffic_sample read the metrics off its run config (which has none): a cost budget was an AttributeError.
    # The offline judge sends nothing, so every sampled trace costs 0 and the row budget bounds the sample.
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    store = TrafficStore(root=str(tmp_path / "out"), source=str(example_traces))
    job = dg.Definitions(assets=traffic_assets(CONFIG), jobs=[traffic_job(CONFIG)],
                         resources={"traffic_store": store, "judge": JudgeResource()}).resolve_job_def("traffic_job")
    config = {"ops": {"traffic_sample": {"config": {"budget_rows": 5, "budget_cost": 0.5}}}}
    with dg.instance_for_test() as instance:
        result = job.execute_in_process(partition_key="2026-11-01", instance=instance, run_config=config,
                                        raise_on_error=False)
    assert result.success
    drawn = json.loads((tmp_path / "out" / "2026-11-01" / "sample.json").read_text(encoding="utf-8"))
    assert (drawn["rows"], drawn["cost"], drawn["estimated_cost"]) == (5, 0.5, 0.0)
    assert len(pd.read_parquet(tmp_path / "out" / "2026-11-01" / "sample.parquet")) == 5


def test_a_day_of_the_example_traffic_samples_whole_conversations(example_traces, tmp_path, monkeypatch):
    """The example's day: 100 requests in 70 conversations (of each ten, five single questions and sessions
    of two and three turns). A budget of 25 turns takes whole sessions; the sample's records
    (conversations.jsonl) are conversations with their trace ids, and no session id leaves the traces."""
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    store = TrafficStore(root=str(tmp_path / "out"), source=str(example_traces))
    job = dg.Definitions(assets=traffic_assets(CONFIG), jobs=[traffic_job(CONFIG)],
                         resources={"traffic_store": store, "judge": JudgeResource()}).resolve_job_def("traffic_job")
    with dg.instance_for_test() as instance:
        assert job.execute_in_process(partition_key="2026-11-01", instance=instance,
                                      run_config={"ops": {"traffic_sample": {"config": {"budget_rows": 25}}}}).success
    folder = tmp_path / "out" / "2026-11-01"
    summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    assert (summary["traces"], summary["conversations"]) == (100, 70)
    traces, sample = pd.read_parquet(folder / "traces.parquet"), pd.read_parquet(folder / "sample.parquet")
    sessions = traces["session_id"].value_counts()
    assert sorted(sessions.value_counts().items()) == [(2, 10), (3, 10)] and traces["session_id"].isna().sum() == 50
    # Whole sessions only, each with all its turns, within 25 turns.
    assert summary["sampled"] == len(sample) <= 25 and sample["session_id"].notna().any()
    for session, turns in sample["session_id"].dropna().value_counts().items():
        assert turns == sessions[session]
    records = [json.loads(r) for r in (folder / "conversations.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(records) == summary["sampled_conversations"] == \
        sample["session_id"].nunique() + sample["session_id"].isna().sum()
    in_sample = list(sample["trace_id"])
    for found in records:
        ids = found.get("trace_ids", [found["id"]])
        assert found["id"] == ids[0] and ids == in_sample[:len(ids)]  # records in sample order, turns in time order
        in_sample = in_sample[len(ids):]
        if "messages" in found:
            turns = sample.set_index("trace_id").loc[ids]
            assert turns["session_id"].nunique() == 1 and turns["start"].is_monotonic_increasing
            assert [m["content"] for m in found["messages"][::2]] == list(turns["user_input"])
            assert [m["context"] for m in found["messages"][1::2]] == [list(c) for c in turns["retrieved_contexts"]]
    assert in_sample == [] and b"session-" not in (folder / "conversations.jsonl").read_bytes()
    assert "100 traces in 70 conversations" in (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    # Judged as conversations: a session's trace k is turn k of its first trace's conversation; the others alone.
    results = pd.read_parquet(folder / "results.parquet")
    first = results[results["metric"] == results["metric"].iloc[0]].set_index("row")
    for row, trace in sample.reset_index(drop=True).iterrows():
        judged = first.loc[row]
        if pd.isna(trace["session_id"]):
            assert judged["sample_id"] == trace["trace_id"] and pd.isna(judged["turn"])
        else:
            ids = list(sample.loc[sample["session_id"] == trace["session_id"], "trace_id"])
            assert judged["conversation_id"] == ids[0] and judged["turn"] == ids.index(trace["trace_id"]) + 1
            assert judged["sample_id"] == f"{ids[0]}/{int(judged['turn'])}"
    assert not results["sample_id"].str.contains("session-").any()
    worst = [r for rows in summary["worst_rows"].values() for r in rows]
    assert worst and all(r["trace_id"] in set(sample["trace_id"]) for r in worst)
