"""End to end: the Dagster graph in a temporary instance, with the offline and the LLM judge."""
import json
import math
import shutil
from pathlib import Path

import dagster as dg
import duckdb
import pandas as pd
import pytest

from assets.resources import DatasetStore, ExecutionResource, JudgeResource, ReportStore, ResultsIOManager
from metrics.registry import CORE_METRICS
from orchestration.definitions import defs
from orchestration.schedules import nightly_requests
from orchestration.staleness import stale_metrics
from tests.judge_server import JudgeServer

ROOT = Path(__file__).resolve().parent.parent
FIQA = ROOT / "examples" / "fiqa" / "samples.jsonl"
FIELD_ASSETS = {"questions", "responses", "retrieved_contexts", "references", "retrieval_ground_truth",
                "retrieved_documents", "rejected_samples"}
ALL_ASSETS = FIELD_ASSETS | set(CORE_METRICS) | {"eval_summary"}


class Project:
    """A temporary project: datasets/, out/ with the DuckDB file, an instance, resources."""

    def __init__(self, root: Path, instance: dg.DagsterInstance, judge: JudgeResource | None = None) -> None:
        self.datasets, self.out, self.instance = root / "datasets", root / "out", instance
        self.resources = {"dataset_store": DatasetStore(root=str(self.datasets)),
                          "report_store": ReportStore(root=str(self.out)), "judge": judge or JudgeResource(),
                          "io_manager": ResultsIOManager(database=str(root / "results.duckdb"), schema="eval"),
                          "execution": ExecutionResource()}
        self.database = root / "results.duckdb"

    def write(self, version: str, rows: list[dict], register: bool = True) -> None:
        folder = self.datasets / version
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "samples.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
        if register and not self.instance.has_dynamic_partition("dataset_version", version):
            self.instance.add_dynamic_partitions("dataset_version", [version])

    def run(self, version: str, job: str = "evaluation_job", **kwargs):
        return defs.resolve_job_def(job).execute_in_process(partition_key=version, instance=self.instance,
                                                            resources=self.resources, raise_on_error=False, **kwargs)

    def materialize(self, version: str, selection):
        from assets.evaluation import metric_assets
        from assets.ingestion import ingest_dataset
        from assets.summary import eval_summary

        return dg.materialize([ingest_dataset, *metric_assets, eval_summary], selection=selection,
                              partition_key=version, instance=self.instance, resources=self.resources)

    def query(self, sql: str) -> pd.DataFrame:
        # The same connection settings as the IO manager: DuckDB refuses a second configuration in one process.
        with duckdb.connect(str(self.database), config={"custom_user_agent": "dagster",
                                                        "arrow_large_buffer_size": True}) as connection:
            return connection.sql(sql).df()


def materialized(result) -> set[str]:
    return {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()}


@pytest.fixture
def project(tmp_path):
    with dg.instance_for_test() as instance:
        yield Project(tmp_path, instance)


@pytest.fixture(scope="module")
def fiqa_rows() -> list[dict]:
    return [json.loads(line) for line in FIQA.read_text(encoding="utf-8").splitlines()[:4]]


def test_graph_writes_summary_consistent_with_per_row_results(project, fiqa_rows):
    project.write("v1", fiqa_rows)
    result = project.run("v1")
    assert result.success and materialized(result) == ALL_ASSETS
    [check] = result.get_asset_check_evaluations()
    assert check.passed and check.partition == "v1"

    summary = json.loads((project.out / "v1" / "summary.json").read_text())
    results = pd.read_parquet(project.out / "v1" / "results.parquet")
    assert len(results) == 4 * 5 and summary["total"] == 4 and summary["rejected"]["rows"] == 0
    for metric in CORE_METRICS:
        ok = results[(results["metric"] == metric) & (results["status"] == "ok")]
        assert summary["coverage"][metric]["ok"] == len(ok) == 4
        assert summary["metrics"][metric]["mean"] == round(ok["value"].mean(), 4)
        assert summary["metrics"][metric]["pass_rate"] == round(ok["passed"].astype(bool).mean(), 4)
    good = sum(all(group["passed"]) for _, group in results.groupby("row"))
    assert (summary["num_good"], summary["num_bad"]) == (good, 4 - good)
    assert summary["judge"]["judge"] == "offline-heuristic"
    table = project.query("select metric, mean from eval.eval_summary where version = 'v1' order by metric")
    assert dict(zip(table["metric"], table["mean"])) == {m: summary["metrics"][m]["mean"] for m in CORE_METRICS}


def test_bad_rows_are_rejected_and_a_high_share_blocks_the_version(project, fiqa_rows):
    no_contexts = {"id": "no-contexts", "user_input": "What is an ETF?", "response": "A fund.", "reference": "A fund."}
    project.write("v1", fiqa_rows + [no_contexts])
    result = project.run("v1")  # 1 of 5 rows rejected: 20 % > 5 %, the version fails its blocking check
    [check] = result.get_asset_check_evaluations()
    assert not check.passed and check.metadata["rejected_share"].value == 0.2
    assert materialized(result) == FIELD_ASSETS
    rejected = project.query("select row, id, field, reason from eval.rejected_samples where version = 'v1'")
    assert rejected.to_dict("records") == [{"row": 4, "id": "no-contexts", "field": "retrieved_contexts",
                                            "reason": "missing"}]
    # With a higher limit the metrics run on the four valid rows only.
    result = project.run("v1", run_config={"ops": {"ingest_dataset": {"config": {"max_rejected_share": 0.25}}}})
    assert result.success
    summary = json.loads((project.out / "v1" / "summary.json").read_text())
    assert summary["total"] == 4 and summary["rejected"] == {"rows": 1, "total_rows": 5, "share": 0.2,
                                                             "checked_fields": ["user_input", "response",
                                                                                "retrieved_contexts", "reference"]}


def test_the_response_job_does_not_require_references(project, fiqa_rows):
    project.write("v1", [{k: v for k, v in row.items() if k != "reference"} for row in fiqa_rows])
    result = project.run("v1", job="response_metrics_job")
    assert result.success
    assert materialized(result) == FIELD_ASSETS | {"faithfulness", "answer_relevancy", "eval_summary"}


def test_sensor_registers_a_new_version_and_its_run_materializes_it(project, fiqa_rows):
    project.write("20261130T010000Z-fiqa", fiqa_rows[:2], register=False)
    sensor = defs.resolve_sensor_def("new_dataset_versions")
    context = dg.build_sensor_context(instance=project.instance, definitions=defs,
                                      resources={"dataset_store": project.resources["dataset_store"]})
    outcome = sensor(context)
    assert [r.partition_key for r in outcome.run_requests] == ["20261130T010000Z-fiqa"]
    project.instance.add_dynamic_partitions("dataset_version", outcome.dynamic_partitions_requests[0].partition_keys)
    assert project.run(outcome.run_requests[0].partition_key).success
    assert isinstance(sensor(context), dg.SkipReason)
    # A changed file of a known version is re-ingested.
    project.write("20261130T010000Z-fiqa", fiqa_rows[1:3])
    [request] = sensor(context).run_requests
    assert request.job_name == "ingestion_job"


def test_backfill_over_three_versions_materializes_all_three(tmp_path, monkeypatch, capsys, fiqa_rows):
    from orchestration import cli

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    for i, key in enumerate(["20261101T000000Z-a", "20261102T000000Z-b", "20261103T000000Z-c", "20261104T000000Z-d"]):
        (tmp_path / "in").mkdir(exist_ok=True)
        (tmp_path / "in" / f"{key}.jsonl").write_text(json.dumps(fiqa_rows[i]) + "\n", encoding="utf-8")
        assert cli.main(["register", str(tmp_path / "in" / f"{key}.jsonl"), "--dataset-version", key]) == 0
    assert cli.main(["backfill", "--from", "20261101T000000Z-a", "--to", "20261103T000000Z-c"]) == 0
    printed = capsys.readouterr().out
    assert [line.split(":")[0] for line in printed.splitlines() if line.startswith("2026")][-3:] == \
        ["20261101T000000Z-a", "20261102T000000Z-b", "20261103T000000Z-c"]
    with duckdb.connect(str(tmp_path / "out" / "rag_eval.duckdb"), read_only=True) as connection:
        versions = connection.sql("select distinct version from eval.eval_summary order by 1").df()["version"]
    assert versions.tolist() == ["20261101T000000Z-a", "20261102T000000Z-b", "20261103T000000Z-c"]


def test_readme_queries_run_on_the_results_database(project, fiqa_rows):
    project.write("20261101T000000Z-a", fiqa_rows)
    project.write("20261102T000000Z-b", [dict(r, response=r["response"] + " It is guaranteed by law.")
                                         for r in fiqa_rows])
    for version in ("20261101T000000Z-a", "20261102T000000Z-b"):
        assert project.run(version).success
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    queries = [block.split("```", 1)[0] for block in readme.split("```sql\n")[1:]]
    assert len(queries) == 3
    trend, changed, cost = (project.query(q) for q in queries)
    assert trend["version"].tolist() == ["20261101T000000Z-a", "20261102T000000Z-b"]
    assert set(changed.columns) >= {"id", "before", "after"}
    assert cost["requests"].tolist() == [0, 0]  # the offline judge sends no request


def test_cli_run_prints_table_and_writes_reports(tmp_path, monkeypatch, capsys):
    from orchestration import cli

    dataset = tmp_path / "tiny" / "samples.jsonl"
    dataset.parent.mkdir()
    dataset.write_text("\n".join(FIQA.read_text(encoding="utf-8").splitlines()[:3]) + "\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    assert cli.main(["run", str(dataset), "--dataset-version", "tiny-v1", "--scale", "10"]) == 0
    out = capsys.readouterr().out
    assert "faithfulness" in out and "3/3" in out
    summary = json.loads((tmp_path / "out" / "tiny-v1" / "summary.json").read_text())
    assert summary["scale"] == "0-10" and summary["total"] == 3
    assert dg.DagsterInstance.get().get_dynamic_partitions("dataset_version") == ["tiny-v1"]
    # Registering the same content again reuses its version; other content under the key is refused.
    assert cli.main(["register", str(dataset)]) == 0
    assert "tiny-v1" in capsys.readouterr().out
    shutil.copyfile(FIQA, dataset)
    assert cli.main(["register", str(dataset), "--dataset-version", "tiny-v1"]) == 2


@pytest.fixture
def llm_project(tmp_path, monkeypatch):
    secret = "sk-pipeline-SECRET-987654321"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    server = JudgeServer().start()
    judge = JudgeResource(base_url=server.url, model="judge-test", cache_path=str(tmp_path / "cache.sqlite"))
    with dg.instance_for_test() as instance:
        project = Project(tmp_path, instance, judge)
        project.server, project.secret = server, secret
        yield project
    judge.get_judge().close()
    server.stop()


def test_llm_judge_in_the_graph_keeps_the_key_out_of_everything(llm_project, fiqa_rows, capsys, caplog):
    project = llm_project
    project.write("v1", fiqa_rows[:2])
    result = project.run("v1", run_config={"ops": {"answer_relevancy": {"config": {"strictness": 2}}}})
    assert result.success
    summary = json.loads((project.out / "v1" / "summary.json").read_text())
    assert summary["judge"]["judge"] == "llm:judge-test"
    assert summary["usage"]["chat_requests"] == 2 * 5 and summary["usage"]["embedding_requests"] == 2
    metadata = [str(e.event_specific_data.materialization.metadata) for e in result.get_asset_materialization_events()]
    everything = (json.dumps(summary) + "".join(metadata)
                  + "".join(r.message for r in project.instance.all_logs(result.run_id))
                  + (project.out / "v1" / "results.parquet").read_bytes().decode("latin-1")
                  + project.database.read_bytes().decode("latin-1") + capsys.readouterr().out + caplog.text)
    assert project.secret not in everything


def test_responses_only_change_rejudges_only_response_metrics(llm_project, fiqa_rows):
    project = llm_project
    project.write("v1", fiqa_rows)
    assert project.run("v1").success
    assert len(project.server.chat_requests()) == 4 * 5 and len(project.server.embedding_requests()) == 4
    project.write("v1", [dict(r, response=f"Regenerated: {r['response']}") for r in fiqa_rows])
    assert project.run("v1", job="ingestion_job").success
    stale = stale_metrics(project.instance, "v1")
    assert set(stale) == {"faithfulness", "answer_relevancy"}
    from datetime import datetime, timezone

    schedule = defs.resolve_schedule_def("nightly_evaluation")
    [request] = schedule(dg.build_schedule_context(instance=project.instance,
                                                   scheduled_execution_time=datetime(2026, 12, 1, 2, tzinfo=timezone.utc)))
    assert request.run_key == "v1-20261201T0200" and request.partition_key == "v1"
    assert {k.to_user_string() for k in request.asset_selection} == {"faithfulness", "answer_relevancy",
                                                                     "eval_summary"}
    project.server.seen = []
    result = project.materialize("v1", request.asset_selection)
    assert result.success and materialized(result) == {"faithfulness", "answer_relevancy", "eval_summary"}
    kinds = sorted(r.kind for r in project.server.chat_requests())
    assert kinds == ["answer_questions"] * 4 + ["statement_support"] * 4  # one of each per row, nothing else
    assert project.server.embedding_requests() == []  # the question and the scripted questions are cached
    assert stale_metrics(project.instance, "v1") == {} and nightly_requests(project.instance, "tick2") == []


def test_a_new_version_pays_only_for_what_changed(llm_project, fiqa_rows):
    project = llm_project
    project.write("20261101T000000Z-a", fiqa_rows)
    assert project.run("20261101T000000Z-a").success
    # New generator: same questions, contexts and references -> context metrics cost nothing.
    project.server.seen = []
    project.write("20261102T000000Z-b", [dict(r, response=f"New generator: {r['response']}") for r in fiqa_rows])
    assert project.run("20261102T000000Z-b").success
    assert sorted({r.kind for r in project.server.chat_requests()}) == ["answer_questions", "statement_support"]
    assert len(project.server.chat_requests()) == 2 * 4
    # New retriever order only for the questions: same (question, response, contexts) -> faithfulness is free.
    project.server.seen = []
    project.write("20261103T000000Z-c", [dict(r, user_input=f"Please answer: {r['user_input']}") for r in fiqa_rows])
    assert project.run("20261103T000000Z-c").success
    assert "statement_support" not in {r.kind for r in project.server.chat_requests()}
    summary = project.query("select version, sum(chat_requests) as chat from eval.eval_summary group by 1 order by 1")
    assert summary["chat"].tolist() == [20, 8, len(project.server.chat_requests())]


def test_nightly_schedule_requests_versions_never_evaluated(project, fiqa_rows):
    project.write("20261101T000000Z-a", fiqa_rows[:2])
    project.write("20261102T000000Z-b", fiqa_rows[2:])
    assert project.run("20261101T000000Z-a").success
    [request] = nightly_requests(project.instance, "t")
    assert (request.partition_key, request.asset_selection) == ("20261102T000000Z-b", None)
    assert request.tags["rag_eval/reason"] == "not evaluated"


def test_text_and_retrieval_datasets_share_one_database(project, fiqa_rows):
    project.write("20261101T000000Z-text", fiqa_rows[:2])
    assert project.run("20261101T000000Z-text").success
    qrels = [{"document_id": "d1", "query_relevance_label": 2}, {"document_id": "d2", "query_relevance_label": 0}]
    run = [{"document_id": "d2", "relevance_score": 0.9}, {"document_id": "d1", "relevance_score": 0.5}]
    project.write("20261102T000000Z-trec", [{"id": "q1", "retrieval_ground_truth": qrels, "retrieved_documents": run}])
    assert project.run("20261102T000000Z-trec", job="document_retrieval_job").success
    ndcg = project.query("select value from eval.ndcg where version = '20261102T000000Z-trec'")["value"].tolist()
    assert ndcg == [pytest.approx(1 / math.log2(3))]  # d1 (gain 2^2 - 1 = 3) at rank 2: (3 / log2 3) / 3
