"""Production traffic under the real daemon: `dagster dev` on 127.0.0.1, the sensor new_traffic
turned on from the CLI, the runs it requests launched by the daemon's run queue, judged offline."""
import json
import sys
from pathlib import Path

import pytest

from tests.pipeline.test_deployment import Deployment

ROOT = Path(__file__).resolve().parents[2]


def _drift_checks(deployment: Deployment) -> dict[str, tuple[str, bool | None]]:
    """The UI's record of faithfulness_drift: ``{partition: (status, passed)}``."""
    data = deployment.graphql("query($k: AssetKeyInput!) { assetCheckExecutions(assetKey: $k, checkName: "
                              "\"faithfulness_drift\", limit: 20) { partition status evaluation { success "
                              "description } } }", k={"path": ["traffic_summary"]})
    return {e["partition"]: (e["status"], (e["evaluation"] or {}).get("success"))
            for e in data["assetCheckExecutions"]}


@pytest.mark.deployment
def test_the_daemon_judges_the_new_days_and_day_two_drifts(tmp_path):
    """The example's traced traffic lands a day at a time; the sensor requests exactly the new day, the
    daemon runs traffic_job for it, and day 2's faithfulness drift check fails."""
    sys.path.insert(0, str(ROOT / "examples" / "rag_system"))
    try:
        from traffic import simulate
    finally:
        sys.path.pop(0)
    spans = tmp_path / "spans"
    first, second = simulate(spans, days=2, per_day=100, start="2026-11-01", degrade_from=2, seed=0)
    deployment = Deployment(tmp_path, judge_url="")
    deployment.env = {k: v for k, v in deployment.env.items() if not k.startswith("OPENAI_")}  # the offline judge
    # The code location reads the project folder's settings: 40 traces judged a day.
    (deployment.root / "pyproject.toml").write_text("[tool.rag_eval.traffic]\nbudget_rows = 40\n", encoding="utf-8")
    traces = deployment.root / "traces"  # the default source, in the project folder
    traces.mkdir()
    try:
        (traces / first.name).write_bytes(first.read_bytes())
        deployment.start()
        deployment.wait_until("the code location", deployment.loaded, 300)
        deployment.cli("dagster", "sensor", "start", "new_traffic", "-w", "workspace.yaml")
        runs = deployment.wait_until("day 1's run", lambda: deployment.finished(1), 600)
        (traces / second.name).write_bytes(second.read_bytes())  # day 2 lands: only it is requested
        runs = deployment.wait_until("day 2's run", lambda: deployment.finished(2), 600)
        deployment.cli("dagster", "sensor", "stop", "new_traffic", "-w", "workspace.yaml")
        assert sorted((r["jobName"], r["tags"]["dagster/partition"], r["status"]) for r in runs) == \
            [("traffic_job", "2026-11-01", "SUCCESS"), ("traffic_job", "2026-11-02", "SUCCESS")]
        assert all(r["tags"]["dagster/sensor_name"] == "new_traffic" for r in runs)
        folder = deployment.root / "out" / "traffic"
        summaries = [json.loads((folder / d / "summary.json").read_text()) for d in ("2026-11-01", "2026-11-02")]
        assert [(s["traces"], s["sampled"]) for s in summaries] == [(100, 40), (100, 40)]
        drop = summaries[1]["drift"]["faithfulness"]
        assert drop["verdict"] == "drop" and drop["high"] < -drop["margin"]
        # The UI shows it: day 2's check did not pass (a warning: blocking = false), day 1's did.
        assert _drift_checks(deployment) == {"2026-11-01": ("SUCCEEDED", True), "2026-11-02": ("FAILED", False)}
    finally:
        deployment.stop()
