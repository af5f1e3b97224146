"""The regression gate in Dagster: baseline_comparison and its check, offline, in a temporary instance."""
import json

import dagster as dg
import pandas as pd
import pytest

from rag_eval.orchestration.definitions import defs
from tests.conftest import FIQA
from tests.pipeline.conftest import Project

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
