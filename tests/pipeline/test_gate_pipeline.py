"""The regression gate in Dagster: baseline_comparison and its check, offline, in a temporary instance."""
import json

import dagster as dg
import pandas as pd
import pytest

from rag_eval.orchestration.definitions import defs
from tests.conftest import FIQA
from tests.pipeline.conftest import ROOT, Project

FIRST, SECOND = "20261101T000000Z-a", "20261102T000000Z-b"


@pytest.fixture
def project(tmp_path):
    with dg.instance_for_test() as instance:
        yield Project(tmp_path, instance)


def _rows(n: int = 12) -> list[dict]:
    return [json.loads(line) for line in FIQA.read_text(encoding="utf-8").splitlines()[:n]]


def _worse(rows: list[dict]) -> list[dict]:
    """Every third response replaced by another row's (unsupported by this row's context)."""
    return [dict(r, response=rows[(i + 6) % len(rows)]["response"]) if i % 3 == 0 else r for i, r in enumerate(rows)]


def _config(tmp_path, blocking: bool):
    path = tmp_path / "gate.toml"
    path.write_text(f'metrics = ["faithfulness"]\nblocking = {str(blocking).lower()}\n', encoding="utf-8")
    return {"ops": {"baseline_comparison": {"config": {"config_path": str(path)}}}}


def _gate_check(result):
    [check] = [c for c in result.get_asset_check_evaluations() if c.check_name == "no_regression_vs_baseline"]
    return check


def test_each_version_is_compared_with_the_previous_one_blocking_or_warning(project, tmp_path):
    rows = _rows()
    project.write(FIRST, rows)
    project.write(SECOND, _worse(rows))
    config = _config(tmp_path, blocking=True)
    # The nightly job (evaluation_job) holds the comparison and its check.
    assert {"baseline_comparison"} <= {k.to_user_string() for k in defs.resolve_job_def("evaluation_job")
                                       .asset_layer.selected_asset_keys}
    selection = dg.AssetSelection.groups("ingestion", "gate") | dg.AssetSelection.assets("faithfulness", "eval_summary")
    first = project.materialize(FIRST, selection, run_config=config)
    assert first.success and _gate_check(first).passed  # the first version has no baseline
    assert _gate_check(first).metadata["baseline"].value == f"no version before {FIRST} has results"
    second = project.materialize(SECOND, selection, run_config=config, raise_on_error=False)
    check = _gate_check(second)
    assert not check.passed and check.partition == SECOND and check.severity == dg.AssetCheckSeverity.ERROR
    assert not second.success  # a blocking check failing with ERROR fails its step, as rejected_share_within_limit
    # The difference in the metadata is the paired mean difference of the two results files, worked out here.
    a = pd.read_parquet(project.out / FIRST / "results.parquet").set_index("sample_id")["value"]
    b = pd.read_parquet(project.out / SECOND / "results.parquet").set_index("sample_id")["value"]
    expected = float((b - a.reindex(b.index)).mean())
    assert b.index.equals(a.index) and expected < -0.1
    assert check.metadata["faithfulness_difference"].value == pytest.approx(expected)
    assert check.metadata["faithfulness_n"].value == 12
    assert check.metadata["faithfulness_high"].value < -0.02  # the whole interval below -margin
    assert check.metadata["failures"].value[0].startswith("faithfulness regressed")
    table = project.query(f"select metric, gated, n, difference, verdict from eval.baseline_comparison "
                          f"where version = '{SECOND}'")
    assert table.to_dict("records") == [{"metric": "faithfulness", "gated": True, "n": 12,
                                         "difference": pytest.approx(expected), "verdict": "regressed"}]
    for name in ("report.md", "report.html", "comparison.json"):
        assert (project.out / SECOND / name).exists()
    assert (project.out / SECOND / "report.md").read_text().startswith(
        f"## Regression gate FAILED: `{SECOND}` vs baseline `{FIRST}`")
    # blocking = false: the same comparison fails its check with WARN, and the run succeeds.
    warned = project.materialize(SECOND, dg.AssetSelection.assets("baseline_comparison"),
                                 run_config=_config(tmp_path, blocking=False))
    check = _gate_check(warned)
    assert warned.success and not check.passed and check.severity == dg.AssetCheckSeverity.WARN
    # A version of other questions after it (no id of SECOND's): no decision; the check passes and says so.
    third = "20261103T000000Z-c"
    project.write(third, [dict(r, id=f"new-{i}") for i, r in enumerate(rows)])
    other = project.materialize(third, selection, run_config=config)
    check = _gate_check(other)
    verdict = f"no decision: the candidate shares no row id with baseline {SECOND}; nothing was compared"
    assert other.success and check.passed and (check.description, check.metadata["verdict"].value) == (verdict, verdict)
    assert (project.out / third / "report.md").read_text().startswith(f"## Regression gate: no decision: `{third}`")


def _cli(folder, *args: str):
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "EMBEDDING_"))}
    env["DAGSTER_HOME"] = str(folder / "dagster_home")
    return subprocess.run([sys.executable, "-m", "rag_eval.orchestration.cli", *args], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=300)


def _what_ran(events) -> tuple[set[str], set[tuple[str, bool]]]:
    """The asset keys materialized and the (check, passed) evaluated, from a run's Dagster events."""
    assets = {e.asset_key.to_user_string() for e in events if e.event_type_value == "ASSET_MATERIALIZATION"}
    checks = {(e.event_specific_data.check_name, e.event_specific_data.passed) for e in events
              if e.event_type_value == "ASSET_CHECK_EVALUATION"}
    return assets, checks


def test_the_cli_run_is_evaluation_job_the_same_assets_checks_and_gate_as_materialize_all(tmp_path, project):
    """`rag-eval run` of a version, then of a worse one, against "Materialize all" of evaluation_job
    (what the UI launches) on the same two files: the same assets and checks, the same gate
    verdict; the CLI exits 4 on the regression and keeps the version."""
    cli = tmp_path / "cli"
    (cli / "v").mkdir(parents=True)
    (cli / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text(encoding="utf-8"))  # the gate's settings
    rows = _rows(9)
    worse = [dict(r, response="I cannot answer that.") for r in rows]  # answer_relevancy 0 on every row
    for name, content in (("a.jsonl", rows), ("b.jsonl", worse)):
        (cli / "v" / name).write_text("".join(json.dumps(r) + "\n" for r in content), encoding="utf-8")
    first = _cli(cli, "run", "v/a.jsonl", "--dataset-version", FIRST)
    second = _cli(cli, "run", "v/b.jsonl", "--dataset-version", SECOND)
    assert first.returncode == 0, first.stderr
    assert "regression gate: nothing to compare (no version before" in first.stdout
    assert second.returncode == 4, second.stderr
    again = _cli(cli, "run", "v/b.jsonl", "--dataset-version", SECOND)  # a CI retry: up to date, still failing
    assert again.returncode == 4 and "is up to date" in again.stderr, again.stderr
    assert [line for line in again.stderr.splitlines() if line.startswith("gate failed: ")] == \
        [line for line in second.stderr.splitlines() if line.startswith("gate failed: ")]
    instance = dg.DagsterInstance.from_config(str(cli / "dagster_home"))
    cli_runs = {r.dagster_run.tags["dagster/partition"]: r.dagster_run for r in instance.get_run_records()}
    assert {run.job_name for run in cli_runs.values()} == {"evaluation_job"}
    assert SECOND in instance.get_dynamic_partitions("dataset_version")  # a regression is a result, kept

    project.write(FIRST, rows)
    project.write(SECOND, worse)
    ui = {version: project.run(version) for version in (FIRST, SECOND)}
    events = {v: [e.dagster_event for e in instance.all_logs(run.run_id) if e.dagster_event] for v, run in cli_runs.items()}
    for version, result in ui.items():
        assert _what_ran(events[version]) == _what_ran(result.all_events)
    ui_gate = _gate_check(ui[SECOND])
    assert not ui_gate.passed and ui[SECOND].success is False
    [cli_gate] = [e.event_specific_data for e in events[SECOND] if e.event_type_value == "ASSET_CHECK_EVALUATION"
                  and e.event_specific_data.check_name == "no_regression_vs_baseline"]
    assert cli_gate.description == ui_gate.description and cli_gate.description
    assert f"gate failed: {ui_gate.description.split('; ')[0]}" in second.stderr
