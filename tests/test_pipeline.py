"""End to end: the Dagster graph materialized for small partitions in a temporary instance."""
import json
import shutil
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest

from assets.resources import DatasetStore, JudgeResource, ReportStore
from metrics.registry import CORE_METRICS
from orchestration.definitions import defs

ROOT = Path(__file__).resolve().parent.parent
FIQA = ROOT / "examples" / "fiqa" / "samples.jsonl"


def _write_version(root: Path, version: str, rows: list[dict]) -> None:
    folder = root / version
    folder.mkdir(parents=True)
    (folder / "samples.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")


def _materialize(tmp_path: Path, version: str, rows: list[dict]):
    datasets, out = tmp_path / "datasets", tmp_path / "out"
    _write_version(datasets, version, rows)
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("dataset_version", [version])
    result = defs.resolve_job_def("evaluation_job").execute_in_process(
        partition_key=version, instance=instance, raise_on_error=False,
        resources={"dataset_store": DatasetStore(root=str(datasets)), "report_store": ReportStore(root=str(out)),
                   "judge": JudgeResource()},
    )
    return result, out / version


@pytest.fixture(scope="module")
def fiqa_rows() -> list[dict]:
    return [json.loads(line) for line in FIQA.read_text(encoding="utf-8").splitlines()[:4]]


def test_graph_writes_summary_consistent_with_per_row_results(tmp_path, fiqa_rows):
    # Five rows: four FiQA rows, one without retrieved_contexts (input_error for four metrics).
    rows = fiqa_rows + [{"id": "no-contexts", "user_input": "What is an ETF?", "response": "A fund traded on exchanges.",
                         "reference": "An exchange-traded fund."}]
    result, folder = _materialize(tmp_path, "v1", rows)
    assert result.success
    materialized = {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()}
    assert materialized == {"eval_samples", *CORE_METRICS, "eval_summary"}

    checks = {c.check_name: c for c in result.get_asset_check_evaluations()}
    assert checks["unique_ids"].passed
    assert not checks["contexts_are_string_lists"].passed
    failures = checks["contexts_are_string_lists"].metadata["failures"].value
    assert failures == [{"row": 4, "id": "no-contexts", "field": "retrieved_contexts", "reason": "missing"}]

    summary = json.loads((folder / "summary.json").read_text())
    results = pd.read_parquet(folder / "results.parquet")
    assert len(results) == 5 * 5 and summary["total"] == 5
    for metric in CORE_METRICS:
        rows_of = results[results["metric"] == metric]
        ok = rows_of[rows_of["status"] == "ok"]
        assert summary["coverage"][metric]["ok"] == len(ok)
        assert summary["coverage"][metric]["total"] == 5
        assert summary["metrics"][metric]["mean"] == round(ok["value"].mean(), 4)
        assert summary["metrics"][metric]["pass_rate"] == round(ok["passed"].astype(bool).mean(), 4)
    assert summary["coverage"]["faithfulness"]["input_error"] == 1
    assert summary["coverage"]["answer_relevancy"]["input_error"] == 0
    bad = results[(results["sample_id"] == "no-contexts") & (results["metric"] == "faithfulness")].iloc[0]
    assert bad["reason"] == "row 4 (id no-contexts): field 'retrieved_contexts' missing"
    # A row is good when every metric measured on it passed.
    ok = results[results["status"] == "ok"]
    good = sum(all(group["passed"]) for _, group in ok.groupby("sample_id"))
    assert (summary["num_good"], summary["num_bad"]) == (good, 5 - good)
    assert summary["judge"]["judge"] == "offline-heuristic"
    group = summary["metrics_score"]["user_input,response,retrieved_contexts"]["stats"]["faithfulness"]
    assert group["score_count"] == 4


def test_duplicate_ids_block_the_metrics(tmp_path, fiqa_rows):
    rows = [dict(fiqa_rows[0], id="same"), dict(fiqa_rows[1], id="same")]
    result, folder = _materialize(tmp_path, "dupes", rows)
    checks = {c.check_name: c for c in result.get_asset_check_evaluations()}
    assert not checks["unique_ids"].passed
    assert [f["row"] for f in checks["unique_ids"].metadata["failures"].value] == [0, 1]
    materialized = {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()}
    assert materialized == {"eval_samples"}
    assert not (folder / "summary.json").exists()


def test_cli_run_prints_table_and_writes_reports(tmp_path, monkeypatch, capsys):
    from orchestration import cli

    dataset = tmp_path / "tiny" / "samples.jsonl"
    dataset.parent.mkdir()
    shutil.copyfile(FIQA, dataset)
    dataset.write_text("\n".join(FIQA.read_text(encoding="utf-8").splitlines()[:3]) + "\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    assert cli.main(["run", str(dataset), "--dataset-version", "tiny-v1", "--scale", "10"]) == 0
    out = capsys.readouterr().out
    assert "faithfulness" in out and "3/3" in out
    summary = json.loads((tmp_path / "out" / "tiny-v1" / "summary.json").read_text())
    assert summary["scale"] == "0-10" and summary["total"] == 3
    assert (tmp_path / "datasets" / "tiny-v1" / "samples.jsonl").exists()
    assert dg.DagsterInstance.get().get_dynamic_partitions("dataset_version") == ["tiny-v1"]


def test_graph_with_the_llm_judge_keeps_the_key_out_of_everything(tmp_path, fiqa_rows, monkeypatch, capsys, caplog):
    from tests.judge_server import JudgeServer

    secret = "sk-pipeline-SECRET-987654321"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    server = JudgeServer().start()
    try:
        datasets, out = tmp_path / "datasets", tmp_path / "out"
        _write_version(datasets, "v-llm", fiqa_rows[:2])
        instance = dg.DagsterInstance.ephemeral()
        instance.add_dynamic_partitions("dataset_version", ["v-llm"])
        judge = JudgeResource(base_url=server.url, model="judge-test", cache_path=str(tmp_path / "cache.sqlite"))
        result = defs.resolve_job_def("evaluation_job").execute_in_process(
            partition_key="v-llm", instance=instance,
            run_config={"ops": {"answer_relevancy": {"config": {"strictness": 2}}}},
            resources={"dataset_store": DatasetStore(root=str(datasets)), "report_store": ReportStore(root=str(out)),
                       "judge": judge})
        judge.get_judge().close()
    finally:
        server.stop()
    assert result.success
    summary = json.loads((out / "v-llm" / "summary.json").read_text())
    assert summary["judge"]["judge"] == "llm:judge-test"
    assert summary["usage"]["chat_requests"] == 2 * 5 and summary["usage"]["embedding_requests"] == 2
    assert {r.body["model"] for r in server.chat_requests()} == {"judge-test"}
    assert len(server.chat_requests()[0].body["messages"]) == 2
    metadata = [str(e.event_specific_data.materialization.metadata) for e in result.get_asset_materialization_events()]
    records = instance.all_logs(result.run_id)
    everything = (json.dumps(summary) + "".join(metadata) + "".join(r.message for r in records)
                  + (out / "v-llm" / "results.parquet").read_bytes().decode("latin-1") + capsys.readouterr().out
                  + capsys.readouterr().err + caplog.text)
    assert secret not in everything
