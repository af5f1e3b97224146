"""Production traffic under the real daemon: `dagster dev` on 127.0.0.1, the sensor new_traffic
turned on from the CLI, the runs it requests launched by the daemon's run queue."""
import json

import pytest

from tests.judge_server import JudgeServer
from tests.metrics.test_traces import T0, line, rag_trace
from tests.pipeline.test_deployment import Deployment

DAY = 86_400 * 10 ** 9


@pytest.mark.deployment
def test_the_daemon_materializes_the_partitions_the_sensor_requests(tmp_path):
    judge = JudgeServer().start()
    deployment = Deployment(tmp_path, judge.url)
    traces = deployment.root / "traces"  # [tool.rag_eval.traffic]'s default source, in the project folder
    traces.mkdir()
    spans = [line(*rag_trace(f"{d + 1}{i:031x}", T0 + i * 3600 * 10 ** 9 + d * DAY, question=f"Question {i}, day {d}?"))
             for d in range(2) for i in range(1, 4)]
    (traces / "spans.jsonl").write_text("\n".join(spans) + "\n", encoding="utf-8")
    try:
        deployment.start()
        deployment.wait_until("the code location", deployment.loaded, 300)
        deployment.cli("dagster", "sensor", "start", "new_traffic", "-w", "workspace.yaml")
        runs = deployment.wait_until("the sensor's runs", lambda: deployment.finished(2), 600)
        deployment.cli("dagster", "sensor", "stop", "new_traffic", "-w", "workspace.yaml")
        assert sorted((r["jobName"], r["tags"]["dagster/partition"], r["status"]) for r in runs) == \
            [("traffic_job", "2026-11-01", "SUCCESS"), ("traffic_job", "2026-11-02", "SUCCESS")]
        assert all(r["tags"]["dagster/sensor_name"] == "new_traffic" for r in runs)
        for day in ("2026-11-01", "2026-11-02"):
            summary = json.loads((deployment.root / "out" / "traffic" / day / "summary.json").read_text())
            assert (summary["traces"], summary["sampled"]) == (3, 3)
            assert sorted(summary["metrics"]) == ["answer_relevancy", "context_relevancy", "faithfulness"]
        assert (deployment.root / "out" / "traffic" / "report.html").exists()
        assert judge.seen, "the runs judged with the configured LLM endpoint"
    finally:
        deployment.stop()
        judge.stop()
