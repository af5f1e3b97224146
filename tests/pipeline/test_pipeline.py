"""End to end: the Dagster graph in a temporary instance, with the offline and the LLM judge."""
import json
import math
import os
import re
import shutil
import socket
import time
from html import unescape
from pathlib import Path

import dagster as dg
import duckdb
import pandas as pd
import pytest

import rag_eval.metrics.text
from rag_eval.assets.registration import register_version
from rag_eval.assets.resources import JudgeResource
from rag_eval.metrics.core.registry import CORE_METRICS
from rag_eval.metrics.core.samples import sample_from_dict
from rag_eval.metrics.errors import command
from rag_eval.orchestration.definitions import defs
from rag_eval.orchestration.records import out_of_date
from tests.conftest import readable
from rag_eval.orchestration.judge_sim import JudgeServer
from tests.pipeline.conftest import Nights, Project, materialized

ROOT = Path(__file__).resolve().parents[2]
FIQA = ROOT / "examples" / "fiqa" / "samples.jsonl"
FIELD_ASSETS = {"questions", "responses", "retrieved_contexts", "references", "retrieval_ground_truth",
                "retrieved_documents", "rejected_samples"}
NIGHTLY_ASSETS = FIELD_ASSETS | set(CORE_METRICS) | {"eval_summary", "baseline_comparison"}  # a new version's night
ALL_ASSETS = NIGHTLY_ASSETS | {"human_labels", "label_estimates"}
EVALUATED = [*CORE_METRICS, "eval_summary"]


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
    [check] = [c for c in result.get_asset_check_evaluations() if c.check_name == "rejected_share_within_limit"]
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
    # The metric step let go of the offline judge's memos as it ended (``Judge.forget``: the summary has the memory).
    assert sum(memo.cache_info().currsize for memo in rag_eval.metrics.text.memos._MEMOS) == 0


def test_bad_rows_are_rejected_and_a_high_share_blocks_the_version(project, fiqa_rows):
    project.write("v1", fiqa_rows + [{"id": "nothing-usable", "user_input": "What is an ETF?"}])
    result = project.run("v1")  # 1 of 5 lines no core metric can use: 20 % > 5 %, the version fails its check
    [check] = [c for c in result.get_asset_check_evaluations() if c.check_name == "rejected_share_within_limit"]
    assert not check.passed and check.metadata["rejected_share"].value == 0.2
    assert check.description == (f"20.0% of the lines rejected > limit 5.0% (the default; raise it for this version with "
                                 f"{command('register ' + str(project.datasets / 'v1') + ' --max-rejected-share 0.2')}, or in the "
                                 "run's ingest_dataset config)")
    assert materialized(result) == FIELD_ASSETS
    rejected = project.query("select row, line, id, reason, sample from eval.rejected_samples where version = 'v1'")
    assert rejected.to_dict("records") == [{
        "row": 4, "line": 5, "id": "nothing-usable", "sample": '{"id": "nothing-usable", "user_input": "What is an ETF?"}',
        "reason": "no selected metric can use it: response: missing; retrieved_contexts: missing; "
                  "reference: missing"}]
    # With a higher limit every metric reports on all five lines: the rejected one is their input_error.
    result = project.run("v1", run_config={"ops": {"ingest_dataset": {"config": {"max_rejected_share": 0.25}}}})
    assert result.success
    summary = json.loads((project.out / "v1" / "summary.json").read_text())
    assert summary["total"] == 5 and summary["rejected"]["rows"] == 1 and summary["rejected"]["share"] == 0.2
    assert summary["rejected"]["lines"] == [{"line": 5, "id": "nothing-usable", "reason": rejected["reason"][0]}]
    assert all(summary["coverage"][m]["input_error"] == 1 for m in CORE_METRICS)


def test_a_rejection_limit_registered_with_the_version_holds_for_every_launch(project, fiqa_rows):
    """`rag-eval register --max-rejected-share 0.25` keeps the share with the version: a run launched
    with no run config (the UI's Materialize, a backfill, the automation) uses it; a run's own config wins."""
    project.write("v1", fiqa_rows + [{"id": "nothing-usable", "user_input": "What is an ETF?"}])
    store = project.resources["dataset_store"]
    key, new = register_version(project.instance, store, project.datasets / "v1", settings={"max_rejected_share": 0.25})
    assert (key, new) == ("v1", False)  # the same content: the version is kept, its settings added
    result = project.run("v1")
    [check] = [c for c in result.get_asset_check_evaluations() if c.check_name == "rejected_share_within_limit"]
    assert result.success and check.passed
    assert (check.metadata["limit"].value, check.metadata["limit_source"].value) == (
        0.25, f"the version's {project.datasets / 'v1' / 'settings.json'}")
    result = project.run("v1", run_config={"ops": {"ingest_dataset": {"config": {"max_rejected_share": 0.1}}}})
    [check] = [c for c in result.get_asset_check_evaluations() if c.check_name == "rejected_share_within_limit"]
    assert not result.success and not check.passed
    assert check.description.startswith("20.0% of the lines rejected > limit 10.0% (the run's ingest_dataset config;")


def test_a_version_over_a_new_rejection_limit_is_not_up_to_date(tmp_path, monkeypatch, capsys):
    """Evaluated under --max-rejected-share 0.25 (2 of 10 lines rejected), the version run again with 0.05
    fails its check (exit 1), and so does the next plain run: neither is "up to date" with the passing run."""
    from rag_eval.orchestration import cli

    rows = [json.loads(line) for line in FIQA.read_text(encoding="utf-8").splitlines()[:8]]
    dataset = tmp_path / "mine.jsonl"
    dataset.write_text("".join(json.dumps(r) + "\n" for r in rows) + "{oops\n" + '{"id": "only-a-question", '
                       '"user_input": "What is an ETF?"}\n', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    assert cli.main(["run", str(dataset), "--max-rejected-share", "0.25"]) == 0
    assert cli.main(["run", str(dataset), "--max-rejected-share", "0.05"]) == 1
    assert cli.main(["run", str(dataset)]) == 1  # the version keeps 0.05 now
    err = capsys.readouterr().err
    assert "up to date" not in err
    assert err.count("quality check rejected_share_within_limit failed: 20.0% of the lines rejected > limit 5.0%") == 2
    # The way out names the file run and a share it passes (2 of 10 lines: 0.2), as it can be typed.
    assert err.count(f"(raise it with --max-rejected-share 0.2: {command(f'run {dataset} --max-rejected-share 0.2')}; "
                     f"through make: make run DATASET={dataset} ARGS='--max-rejected-share 0.2')\n") == 2


def test_the_rejection_limit_a_hint_gives_is_the_share_rounded_up_to_two_decimals():
    from rag_eval.assets.ingestion import passing_share, raise_limit

    # 1 of 8 lines, 2 of 10 (0.2 * 100 is 20.000000000000004 in floats), 1 of 3, just above 0.13, all of them.
    assert [passing_share(s) for s in (1 / 8, 2 / 10, 1 / 3, 0.13 + 1e-9, 1.0)] == [0.13, 0.2, 0.34, 0.14, 1.0]
    # Without the file run (a backfill, a launch from the UI): the version's own limit.
    assert raise_limit(1 / 8, Path("datasets/v1")) == \
        f"raise it for this version with {command('register datasets/v1 --max-rejected-share 0.13')}"


def test_the_great_expectations_checks_name_line_and_field_and_link_their_data_docs(project, fiqa_rows):
    # Worked out by hand. Lines 1-4 are FiQA's (no ids: stable ids from question and reference); line 5 repeats
    # line 1 (its id too); line 6 has a number for a response and no context. Nothing is rejected (line 6 feeds the
    # context metrics), so the blocking check passes and every metric runs; GE's step runs after the summary and
    # fails 4 of the 12 checks the core metrics' fields have (16 expectations: 3 on lines, 2 per field read, a
    # length per text, contexts per row, language mix); the document-retrieval checks
    # (fields not read) have no result.
    bad = {"id": "bad-response", "user_input": "Is a Roth IRA taxed?", "response": 42, "retrieved_contexts": [],
           "reference": "Withdrawals are tax-free."}
    project.write("v1", fiqa_rows + [dict(fiqa_rows[0]), bad])
    result = project.run("v1")
    assert result.success and materialized(result) == ALL_ASSETS
    checks = {c.check_name: c for c in result.get_asset_check_evaluations()}
    assert checks.pop("rejected_share_within_limit").passed
    checks.pop("no_regression_vs_baseline")
    assert len(checks) == 12 and all(c.partition == "v1" for c in checks.values())
    assert sum(len(c.metadata["expectations"].value) for c in checks.values()) == 16
    failed = {name: (c.asset_key.to_user_string(), c.severity.value, c.metadata["failing_lines"].value, c.description)
              for name, c in checks.items() if not c.passed}
    first = sample_from_dict(fiqa_rows[0], 0).id  # its stable id
    assert failed == {
        "ids_unique": ("rejected_samples", "ERROR", 2, f"line 1 id: {first!r} is also another line's id; "
                                                        f"line 5 id: {first!r} is also another line's id"),
        "no_duplicate_samples": ("rejected_samples", "WARN", 2,
                                 "line 1 user_input, response, retrieved_contexts, reference: the same as another "
                                 "line; line 5 user_input, response, retrieved_contexts, reference: the same as "
                                 "another line"),
        "response_typed": ("responses", "ERROR", 1, "line 6 response: type number, expected string"),
        "contexts_per_row": ("retrieved_contexts", "WARN", 1,
                             "line 6 retrieved_contexts: 0 contexts, expected 1 to 200"),
    }
    assert checks["response_typed"].metadata["failures"].value == [
        {"line": 6, "value": "number", "message": "line 6 response: type number, expected string"}]
    # Every check links the version's page of the Data Docs site, where `make dev` serves it (no RAG_EVAL_DATA_DOCS_URL
    # here): a CLI run's links open from the UI too.
    [link] = {c.metadata["data_docs"].value for c in checks.values()}
    page = Path(checks["ids_unique"].metadata["data_docs_path"].value)
    relative = page.relative_to((project.out / "data_docs").resolve()).as_posix()
    assert link == f"http://127.0.0.1:3001/{relative}" and result.run_id in page.parts
    html = page.read_text(encoding="utf-8")
    text = " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())
    assert "Evaluated Expectations 16 Successful Expectations 12 Unsuccessful Expectations 4" in text
    headings = re.findall(r"<h5[^>]*>\s*(\w+)\s*</h5>", html)  # the overview, then a section per column
    assert headings[0] == "Overview" and sorted(headings[1:]) == sorted([
        "record", "id", "sample_digest", "user_input_type", "user_input_chars", "user_input_script", "response_type",
        "response_chars", "retrieved_contexts_type", "retrieved_contexts_count", "reference_type", "reference_chars"])
    assert "values must be unique" in text and "values must belong to this set: string list of strings" in text
    index = (project.out / "data_docs" / "index.html").read_text(encoding="utf-8")
    assert page.relative_to(project.out / "data_docs").as_posix() in index  # the site's index lists it
    started = [e.step_key for e in result.all_events if e.event_type_value == "STEP_START"]
    assert started.index("score_metrics") < started.index("eval_summary") < started.index(
        "great_expectations_suite")  # the metrics never wait for great-expectations


def test_a_version_failing_its_blocking_check_is_not_validated_by_great_expectations(project, fiqa_rows):
    # Its great_expectations_suite step is skipped with the metrics: no check result, no Data Docs page.
    project.write("v1", fiqa_rows + [{"id": "nothing-usable", "user_input": "What is an ETF?"}])
    result = project.run("v1")  # 20 % rejected > 5 %
    assert not result.success
    assert "great_expectations_suite" not in {e.step_key for e in result.all_events
                                              if e.event_type_value == "STEP_START"}
    assert [c.check_name for c in result.get_asset_check_evaluations()] == ["rejected_share_within_limit"]
    assert not (project.out / "data_docs").exists()


def test_a_file_without_reference_runs_the_metrics_that_do_not_need_it(project):
    # Production traffic: FiQA rows without `reference` (on main: every row rejected, the version failed).
    rows = [{k: v for k, v in json.loads(line).items() if k != "reference"}
            for line in FIQA.read_text(encoding="utf-8").splitlines()[:6]]
    project.write("prod", rows)
    result = project.run("prod")
    assert result.success and materialized(result) == ALL_ASSETS
    [check] = [c for c in result.get_asset_check_evaluations() if c.check_name == "rejected_share_within_limit"]
    assert check.passed and check.metadata["rejected_rows"].value == 0
    assert check.metadata["cannot_run"].value == {"context_recall": "no line has a usable 'reference'",
                                                   "context_precision": "no line has a usable 'reference'"}
    summary = json.loads((project.out / "prod" / "summary.json").read_text())
    for metric in ("faithfulness", "answer_relevancy", "context_relevancy"):
        assert summary["coverage"][metric]["ok"] == 6
    assert summary["coverage"]["context_recall"]["input_error"] == 6
    assert summary["cannot_run"] == check.metadata["cannot_run"].value
    assert summary["input_errors"]["rows"] == 0  # the absent field is said once, not on every line
    reasons = project.query("select reason from eval.context_recall where version = 'prod' order by row")["reason"]
    assert reasons[0].startswith("line 1 (id ") and reasons[0].endswith("field 'reference' missing")


def test_every_line_is_in_every_per_row_output(project, fiqa_rows):
    lines = [json.dumps(r) for r in fiqa_rows[:2]] + [
        "{not json",
        json.dumps(dict(fiqa_rows[2], response=42)),  # malformed: an input error of the metrics that read it
        "[" * 100_000 + "]" * 100_000,  # on main: a RecursionError that failed the version
        json.dumps(fiqa_rows[3])]
    folder = project.datasets / "v1"
    folder.mkdir(parents=True)
    (folder / "samples.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    project.instance.add_dynamic_partitions("dataset_version", ["v1"])
    metrics = ["faithfulness", "context_relevancy", "groundedness"]
    result = project.materialize("v1", dg.AssetSelection.groups("ingestion") | dg.AssetSelection.assets(
        *metrics, "eval_summary"), run_config={"ops": {"ingest_dataset": {"config": {"max_rejected_share": 0.5}}}})
    assert result.success
    out = project.out / "v1"
    results = pd.read_parquet(out / "results.parquet")
    assert sorted(results["row"].unique()) == [0, 1, 2, 3, 4, 5] and len(results) == 6 * 3
    by_row = results.groupby("row")["status"].agg(set).to_dict()
    assert by_row[2] == by_row[4] == {"input_error"} and by_row[3] == {"input_error", "ok"}  # context_relevancy ok
    assert results.loc[results["row"] == 2, "reason"].iloc[0].startswith("line 3: unreadable: not valid JSON")
    malformed = results[(results["row"] == 3) & (results["status"] == "input_error")]
    assert malformed["reason"].str.contains("line 4 .*field 'response' is malformed").all() and len(malformed) == 2
    ragas = pd.read_csv(out / "ragas_scores.csv")
    assert ragas["row"].tolist() == [0, 1, 2, 3, 4, 5]
    assert ragas.loc[ragas["row"] == 4, "unscored"].iloc[0].startswith("faithfulness: input_error: line 5: unreadable")
    azure = [json.loads(line) for line in (out / "azure_results.jsonl").read_text().splitlines()]
    assert [a["row"] for a in azure] == [0, 1, 2, 3, 4, 5] and azure[2]["groundedness_result"] == "error"
    for table in metrics:
        stored = project.query(f"select row, status from eval.{table} where version = 'v1' order by row")
        assert stored["row"].tolist() == [0, 1, 2, 3, 4, 5]
    rejected = project.query("select line, sample from eval.rejected_samples order by line")
    assert rejected["line"].tolist() == [3, 5] and rejected["sample"][0] == "{not json"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["total"] == 6 and [e["line"] for e in summary["input_errors"]["lines"]] == [4]
    assert summary["input_errors"]["lines"][0]["fields"] == {"response": "is malformed: expected a string, got int"}


def test_a_runs_summary_describes_that_run_and_history_stays_in_duckdb(project, fiqa_rows):
    project.write("v1", fiqa_rows[:2])
    assert project.run("v1").success
    selection = dg.AssetSelection.groups("ingestion") | dg.AssetSelection.assets("relevance", "eval_summary")
    assert project.materialize("v1", selection).success
    summary = json.loads((project.out / "v1" / "summary.json").read_text())
    assert list(summary["metrics"]) == ["relevance"] and summary["total"] == 2  # not the 6 metrics ever run
    assert set(pd.read_parquet(project.out / "v1" / "results.parquet")["metric"]) == {"relevance"}
    table = project.query("select metric, run_id from eval.eval_summary where version = 'v1'")
    assert table["metric"].tolist() == ["relevance"]
    history = project.query("select count(*) as n from eval.faithfulness where version = 'v1'")
    assert history["n"].tolist() == [2]  # the earlier run's results stay queryable
    # A run of the summary alone describes every metric stored for the version, as earlier results.
    assert project.materialize("v1", dg.AssetSelection.assets("eval_summary")).success
    summary = json.loads((project.out / "v1" / "summary.json").read_text())
    assert set(summary["metrics"]) == {*CORE_METRICS, "relevance"}
    assert not any(row["this_run"] for row in summary["metrics"].values())
    # Scope "version" (the nightly re-run of stale metrics): the run's metric and every other one stored.
    selection = dg.AssetSelection.groups("ingestion") | dg.AssetSelection.assets("faithfulness", "eval_summary")
    assert project.materialize("v1", selection, run_config={"ops": {"eval_summary": {"config": {
        "scope": "version"}}}}).success
    summary = json.loads((project.out / "v1" / "summary.json").read_text())
    assert set(summary["metrics"]) == {*CORE_METRICS, "relevance"}
    assert [m for m, row in summary["metrics"].items() if row["this_run"]] == ["faithfulness"]


def test_the_response_job_does_not_require_references(project, fiqa_rows):
    project.write("v1", [{k: v for k, v in row.items() if k != "reference"} for row in fiqa_rows])
    result = project.run("v1", job="response_metrics_job")
    assert result.success
    assert materialized(result) == FIELD_ASSETS | {"faithfulness", "answer_relevancy", "eval_summary", "human_labels",
                                                   "label_estimates"}


def test_sensor_registers_a_new_version_and_its_run_materializes_it(project, fiqa_rows):
    import re

    project.write("20261130T010000Z-fiqa", fiqa_rows[:2], register=False)
    # A folder not named by a time key is renamed by the registration rule: <UTC time>-<name>-<hash>.
    project.write("new retriever", fiqa_rows[2:3], register=False)
    sensor = defs.resolve_sensor_def("new_dataset_versions")
    context = dg.build_sensor_context(instance=project.instance, definitions=defs,
                                      resources={"dataset_store": project.resources["dataset_store"]})
    outcome = sensor(context)
    keys = sorted(r.partition_key for r in outcome.run_requests)
    [renamed] = [k for k in keys if k != "20261130T010000Z-fiqa"]
    assert len(keys) == 2 and re.fullmatch(r"\d{8}T\d{6}Z-new-retriever-[0-9a-f]{8}", renamed)
    assert sorted(p.name for p in project.datasets.iterdir()) == keys
    project.instance.add_dynamic_partitions("dataset_version", outcome.dynamic_partitions_requests[0].partition_keys)
    assert project.run("20261130T010000Z-fiqa").success
    assert isinstance(sensor(context), dg.SkipReason)
    # A changed file of a known version is re-ingested.
    project.write("20261130T010000Z-fiqa", fiqa_rows[1:3])
    [request] = sensor(context).run_requests
    assert request.job_name == "ingestion_job"


def test_backfill_over_three_versions_materializes_all_three(tmp_path, monkeypatch, capsys, fiqa_rows):
    from rag_eval.orchestration import cli

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
    # A version whose folder is gone fails alone; the backfill goes on with the others and says how to mend it.
    shutil.rmtree(tmp_path / "datasets" / "20261102T000000Z-b")
    assert cli.main(["backfill", "--from", "20261102T000000Z-b", "--to", "20261104T000000Z-d"]) == 1
    printed = capsys.readouterr()
    assert [line.split(":")[0] for line in printed.out.splitlines() if line.startswith("2026")] == \
        ["20261103T000000Z-c", "20261104T000000Z-d"]
    assert ("20261102T000000Z-b: failed: dataset file not found: datasets/20261102T000000Z-b/samples.jsonl (register "
            f"its file again: `{command('register FILE --dataset-version 20261102T000000Z-b --replace')}`)") in printed.err
    assert printed.err.splitlines()[-1] == "failed: 20261102T000000Z-b"


def test_the_docs_queries_run_on_the_results_database(project, fiqa_rows):
    project.write("20261101T000000Z-a", fiqa_rows)
    project.write("20261102T000000Z-b", [dict(r, response=r["response"] + " It is guaranteed by law.")
                                         for r in fiqa_rows])
    for version in ("20261101T000000Z-a", "20261102T000000Z-b"):
        assert project.run(version).success
    page = (ROOT / "docs" / "how-to" / "sql.md").read_text(encoding="utf-8")
    queries = [block.split("```", 1)[0] for block in page.split("```sql\n")[1:]]
    assert len(queries) == 3
    trend, changed, cost = (project.query(q) for q in queries)
    assert trend["version"].tolist() == ["20261101T000000Z-a", "20261102T000000Z-b"]
    assert set(changed.columns) >= {"id", "before", "after"}
    assert cost["requests"].tolist() == [0, 0]  # the offline judge sends no request


def test_cli_run_prints_table_and_writes_reports(tmp_path, monkeypatch, capsys):
    from rag_eval.orchestration import cli

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
    # Again, unchanged: Dagster reports it up to date, so nothing runs; the console says so and shows the summary.
    written = (tmp_path / "out" / "tiny-v1" / "summary.json").stat().st_mtime_ns
    assert cli.main(["run", str(dataset), "--dataset-version", "tiny-v1", "--scale", "10"]) == 0
    printed = capsys.readouterr()
    assert "dataset version tiny-v1 is up to date: Dagster records its ingestion, faithfulness" in printed.err
    assert "--force evaluates the version again" in printed.err and "3/3" in printed.out
    assert "wrote " not in printed.out and len(dg.DagsterInstance.get().get_runs()) == 1
    assert (tmp_path / "out" / "tiny-v1" / "summary.json").stat().st_mtime_ns == written
    # A gate's report of an earlier day is not listed as written by a later run (--force: run it anyway).
    old = tmp_path / "out" / "tiny-v1" / "report.md"
    old.write_text("# gate of yesterday\n", encoding="utf-8")
    os.utime(old, (time.time() - 86400, time.time() - 86400))
    assert cli.main(["run", str(dataset), "--dataset-version", "tiny-v1", "--scale", "10", "--force"]) == 0
    [listing] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("wrote ")]
    assert "summary.json" in listing and "report.md" not in listing
    # Other options (another run config): it runs, though Dagster reports the assets up to date.
    assert cli.main(["run", str(dataset), "--dataset-version", "tiny-v1"]) == 0
    assert "is up to date" not in capsys.readouterr().err and len(dg.DagsterInstance.get().get_runs()) == 3
    assert json.loads((tmp_path / "out" / "tiny-v1" / "summary.json").read_text())["scale"] == "0-1"
    # The same options, but the version's meta changed, then its summary's table file gone: it runs, twice.
    meta = tmp_path / "meta.json"
    meta.write_text('{"retriever": "bm25-v2"}', encoding="utf-8")
    assert cli.main(["run", str(dataset), "--dataset-version", "tiny-v1", "--meta", str(meta)]) == 0
    assert "is up to date" not in capsys.readouterr().err
    assert json.loads((tmp_path / "out" / "tiny-v1" / "summary.json").read_text())["dataset_meta"] == \
        {"retriever": "bm25-v2"}
    (tmp_path / "out" / "tables" / "eval_summary" / "tiny-v1.parquet").unlink()
    assert cli.main(["run", str(dataset), "--dataset-version", "tiny-v1", "--meta", str(meta)]) == 0
    assert "is up to date" not in capsys.readouterr().err and len(dg.DagsterInstance.get().get_runs()) == 5
    # Registering the same content again reuses its version; other content under the key is refused.
    assert cli.main(["register", str(dataset)]) == 0
    assert "tiny-v1" in capsys.readouterr().out
    shutil.copyfile(FIQA, dataset)
    assert cli.main(["register", str(dataset), "--dataset-version", "tiny-v1"]) == 2


def test_cli_run_prints_the_great_expectations_checks_that_failed(tmp_path, monkeypatch, capsys):
    # Three FiQA lines and line 1 again as line 4: the run succeeds (nothing blocks), and the console names the two
    # failed checks of the twelve, their lines and fields, and the Data Docs page.
    from rag_eval.orchestration import cli

    lines = FIQA.read_text(encoding="utf-8").splitlines()[:3]
    dataset = tmp_path / "twice.jsonl"
    dataset.write_text("\n".join([*lines, lines[0]]) + "\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    assert cli.main(["run", str(dataset), "--dataset-version", "twice-v1"]) == 0
    err = capsys.readouterr().err
    first = sample_from_dict(json.loads(lines[0]), 0).id
    [page] = (tmp_path / "out" / "data_docs" / "validations").rglob("*-twice-v1.html")
    fields = "user_input, response, retrieved_contexts, reference"
    assert f"""great-expectations: 2 of 12 checks failed, none blocking (Data Docs: {page})
  ids_unique (ERROR on rejected_samples): 2 line(s)
    line 1 id: '{first}' is also another line's id
    line 4 id: '{first}' is also another line's id
  no_duplicate_samples (WARN on rejected_samples): 2 line(s)
    line 1 {fields}: the same as another line
    line 4 {fields}: the same as another line
""" in err


def test_a_file_replaced_under_its_key_is_evaluated_again_not_reported_up_to_date(tmp_path, monkeypatch, capsys):
    """Dagster does not see a version's file: after ``register --replace`` the next plain ``run``
    must evaluate the new content, not show the old content's summary as up to date."""
    from rag_eval.orchestration import cli

    lines = FIQA.read_text(encoding="utf-8").splitlines()
    dataset = tmp_path / "tiny.jsonl"
    dataset.write_text("\n".join(lines[:3]) + "\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    assert cli.main(["run", str(dataset), "--dataset-version", "tiny-v1"]) == 0
    dataset.write_text("\n".join(lines[3:5]) + "\n", encoding="utf-8")  # two other lines
    assert cli.main(["register", str(dataset), "--dataset-version", "tiny-v1", "--replace"]) == 0
    assert "registered again (--replace" in capsys.readouterr().out
    assert cli.main(["run", str(dataset), "--dataset-version", "tiny-v1"]) == 0
    assert "is up to date" not in capsys.readouterr().err and len(dg.DagsterInstance.get().get_runs()) == 2
    summary = json.loads((tmp_path / "out" / "tiny-v1" / "summary.json").read_text(encoding="utf-8"))
    assert summary["total"] == 2  # the new content's two lines, not the old three
    # Unchanged since: up to date again.
    assert cli.main(["run", str(dataset), "--dataset-version", "tiny-v1"]) == 0
    assert "is up to date" in capsys.readouterr().err and len(dg.DagsterInstance.get().get_runs()) == 2


@pytest.fixture
def llm_project(tmp_path, monkeypatch):
    secret = "sk-pipeline-SECRET-not-a-real-key"
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
    result = project.run("v1", run_config={"ops": {"score_metrics": {"config": {"answer_relevancy": {"strictness": 2}}}}})
    assert result.success
    summary = json.loads((project.out / "v1" / "summary.json").read_text())
    assert summary["judge"]["judge"] == "llm:judge-test"
    assert summary["usage"]["chat_requests"] == 2 * 5 and summary["usage"]["embedding_requests"] == 2
    metadata = [str(e.event_specific_data.materialization.metadata) for e in result.get_asset_materialization_events()]
    everything = (json.dumps(summary) + "".join(metadata)
                  + "".join(r.message for r in project.instance.all_logs(result.run_id))
                  + (project.out / "v1" / "results.parquet").read_bytes().decode("latin-1")
                  + "".join(t.decode("latin-1") for path in (project.out / "tables").rglob("*.parquet")
                            for t in readable(path))
                  + capsys.readouterr().out + caplog.text)
    assert project.secret not in everything


def test_responses_only_change_rejudges_only_response_metrics(llm_project, fiqa_rows):
    project = llm_project
    project.write("20261101T000000Z-a", fiqa_rows)
    project.write("20261102T000000Z-b", fiqa_rows[:2])
    assert project.run("20261101T000000Z-a").success and project.run("20261102T000000Z-b").success
    assert len(project.server.chat_requests()) == 4 * 5 and len(project.server.embedding_requests()) == 4
    nights = Nights(project.instance)
    assert nights.next() == {}  # the automation sensor's first evaluation
    assert nights.next() == {}  # nothing changed: nothing is requested
    project.write("20261101T000000Z-a", [dict(r, response=f"Regenerated: {r['response']}") for r in fiqa_rows])
    assert project.run("20261101T000000Z-a", job="ingestion_job").success
    # What the UI shows as Unsynced: the metrics that read responses and the summary, for version a only.
    stale = out_of_date(project.instance, defs, "20261101T000000Z-a", EVALUATED)
    assert stale == {"faithfulness": "has a new dependency data version (responses)",
                     "answer_relevancy": "has a new dependency data version (responses)",
                     "eval_summary": "has a new dependency data version (responses)"}
    assert out_of_date(project.instance, defs, "20261102T000000Z-b", EVALUATED) == {}
    # The next night's automation requests exactly those, and the regression gate after the summary.
    [(version, selection)] = nights.next().items()
    # label_estimates too: it was materialized (with no labels) and its summary is re-run.
    assert (version, selection) == ("20261101T000000Z-a", {"faithfulness", "answer_relevancy", "eval_summary",
                                                           "baseline_comparison", "label_estimates"})
    project.server.seen = []
    result = nights.run(project, version, selection)
    assert result.success and materialized(result) == selection
    kinds = sorted(r.kind for r in project.server.chat_requests())
    assert kinds == ["answer_questions"] * 4 + ["statement_support"] * 4  # one of each per row, nothing else
    assert project.server.embedding_requests() == []  # the question and the scripted questions are cached
    # The run's summary describes the whole version (the sensor's runs are tagged summary scope "version").
    summary = json.loads((project.out / version / "summary.json").read_text())
    assert sorted(summary["metrics"]) == sorted(CORE_METRICS) and summary["total"] == 4
    assert out_of_date(project.instance, defs, "20261101T000000Z-a", EVALUATED) == {}
    assert nights.next() == {}


def test_a_new_metric_code_version_makes_it_and_the_summary_stale_and_rerun_the_next_night(project, fiqa_rows,
                                                                                          monkeypatch):
    from rag_eval.assets.evaluation import build_metric_assets
    from rag_eval.assets.gate import gate_asset
    from rag_eval.assets.ingestion import ingestion_asset
    from rag_eval.assets.summary import build_summary_asset
    from rag_eval.metrics.core.registry import builtin_registry
    from rag_eval.orchestration.automation import automated

    project.write("v1", fiqa_rows[:2])
    assert project.run("v1").success
    assert out_of_date(project.instance, defs, "v1", EVALUATED) == {}
    nights = Nights(project.instance)
    assert nights.next() == {} and nights.next() == {}
    # A developer changes faithfulness's formula and bumps its version: the code location reloads.
    metrics = builtin_registry()
    monkeypatch.setattr(metrics["faithfulness"], "version", metrics["faithfulness"].version + "-next")
    reloaded = dg.Definitions(assets=automated([ingestion_asset(metrics), build_metric_assets(metrics),
                                                build_summary_asset(metrics),
                                                gate_asset(metrics)]), resources=project.resources)
    stale = out_of_date(project.instance, reloaded, "v1", EVALUATED)
    requested = nights.next(reloaded)
    assert stale == {"faithfulness": "has a new code version", "eval_summary": "has a new code version"}
    assert requested == {"v1": {"faithfulness", "eval_summary", "baseline_comparison"}}


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
    # New wording of the questions only: same responses and contexts -> faithfulness is free, except for
    # the response opening with "Yes," to the yes/no question "Can I send a money order …?": that first
    # sentence is judged with its question, and "Please answer: Can I …" no longer reads as a yes/no question.
    project.server.seen = []
    project.write("20261103T000000Z-c", [dict(r, user_input=f"Please answer: {r['user_input']}") for r in fiqa_rows])
    assert project.run("20261103T000000Z-c").success
    assert [r.kind for r in project.server.chat_requests()].count("statement_support") == 1
    summary = project.query("select version, sum(chat_requests) as chat from eval.eval_summary group by 1 order by 1")
    assert summary["chat"].tolist() == [20, 8, len(project.server.chat_requests())]


def test_the_next_night_evaluates_versions_never_evaluated_and_retries_failed_ones_only(project, fiqa_rows, tmp_path):
    project.write("20261101T000000Z-a", fiqa_rows[:2])
    project.write("20261102T000000Z-b", fiqa_rows[2:])
    project.write("20261103T000000Z-c", [{"id": "x", "user_input": "What is an ETF?"}] * 3)  # nothing usable
    project.write("20261104T000000Z-d", fiqa_rows[:1])
    assert project.run("20261101T000000Z-a").success
    # d's run meets a dead endpoint: ingested, its blocking check passed, no metric judged.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    failed = Project(tmp_path, project.instance, JudgeResource(base_url=dead, model="judge-test")).run(
        "20261104T000000Z-d")
    assert not failed.success and materialized(failed) == FIELD_ASSETS | {"human_labels"}  # labels need no judge
    nights = Nights(project.instance)
    assert nights.next() == {}  # the sensor's first evaluation starts its memory: nothing is due yet
    requested = nights.next()
    assert requested == {"20261102T000000Z-b": NIGHTLY_ASSETS, "20261103T000000Z-c": NIGHTLY_ASSETS,
                         "20261104T000000Z-d": NIGHTLY_ASSETS - FIELD_ASSETS}
    for version in requested:
        nights.run(project, version, requested[version])
    # c's blocking check failed: its metrics are neither run nor retried; b and d are done; nothing is due.
    assert nights.next() == {}
    assert out_of_date(project.instance, defs, "20261103T000000Z-c", ["faithfulness"]) == {"faithfulness": "missing"}
    assert out_of_date(project.instance, defs, "20261104T000000Z-d", EVALUATED) == {}


def test_text_and_retrieval_datasets_share_one_database(project, fiqa_rows):
    project.write("20261101T000000Z-text", fiqa_rows[:2])
    assert project.run("20261101T000000Z-text").success
    qrels = [{"document_id": "d1", "query_relevance_label": 2}, {"document_id": "d2", "query_relevance_label": 0}]
    run = [{"document_id": "d2", "relevance_score": 0.9}, {"document_id": "d1", "relevance_score": 0.5}]
    project.write("20261102T000000Z-trec", [{"id": "q1", "retrieval_ground_truth": qrels, "retrieved_documents": run}])
    assert project.run("20261102T000000Z-trec", job="document_retrieval_job").success
    ndcg = project.query("select value from eval.ndcg where version = '20261102T000000Z-trec'")["value"].tolist()
    assert ndcg == [pytest.approx(1 / math.log2(3))]  # d1 (gain 2^2 - 1 = 3) at rank 2: (3 / log2 3) / 3


def test_usage_is_what_this_run_sent_and_what_the_provider_received(llm_project, fiqa_rows):
    from rag_eval.orchestration.judge_sim import Reply, oracle

    project, healthy, calls = llm_project, oracle(), []

    def faulty(seen):  # every third request fails (500, then 429 with Retry-After 0): retried, and paid for
        calls.append(seen)
        if len(calls) % 3 == 0:
            return Reply(status=500 if len(calls) % 2 else 429, body={"error": {"message": "try again"}},
                         headers={"retry-after": "0"})
        return healthy(seen)

    project.server.script = faulty
    project.write("v1", fiqa_rows)
    assert project.run("v1").success
    summary = json.loads((project.out / "v1" / "summary.json").read_text())
    sent = summary["usage"]["chat_requests"] + summary["usage"]["embedding_requests"]
    assert sent == len(project.server.seen) and len(project.server.seen) > 4 * 6  # retries counted too
    assert summary["usage"]["chat_requests"] == len(project.server.chat_requests())
    # A re-run answers everything from the cache: it sent nothing, whatever earlier runs paid.
    project.server.seen = []
    result = project.run("v1")
    summary = json.loads((project.out / "v1" / "summary.json").read_text())
    assert project.server.seen == [] and summary["usage"]["chat_requests"] == 0
    assert summary["usage"]["embedding_requests"] == 0 and summary["usage"]["cache_hits"] > 0
    assert summary["usage"]["shared_hits"] == 0  # every answer was bought by the first run: none by this one
    [metadata] = [e.event_specific_data.materialization.metadata for e in result.get_asset_materialization_events()
                  if e.asset_key.to_user_string() == "eval_summary"]
    assert metadata["requests"].value == 0 and metadata["cache_hits"].value == summary["usage"]["cache_hits"]
    assert metadata["shared_hits"].value == summary["usage"]["shared_hits"]
    sql = project.query(f"select sum(chat_requests) as chat from eval.eval_summary where run_id = '{result.run_id}'")
    assert sql["chat"].tolist() == [0]


def test_cli_runs_every_metric_on_fiqa_and_says_what_cannot_run(tmp_path, monkeypatch, capsys):
    from rag_eval.metrics.core.registry import builtin_registry
    from rag_eval.orchestration import cli

    dataset = tmp_path / "fiqa3.jsonl"
    lines = FIQA.read_text(encoding="utf-8").splitlines()[:3]
    bad = json.loads(lines[0])
    bad["response"] = ["not", "text"]
    bad["user_input"] = "Why is \x1b[31mred\x1b[0m?"
    dataset.write_text("\n".join(lines + [json.dumps(bad), "{oops"]) + "\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    assert cli.main(["run", str(dataset), "--metrics", "all", "--max-rejected-share", "0.25", "--scale", "10",
                     "--threshold", "faithfulness=7", "--dingo-summary"]) == 0
    captured = capsys.readouterr()
    err = captured.err.splitlines()
    assert "note: ndcg cannot run: no line has a usable 'retrieval_ground_truth' or 'retrieved_documents'; its " \
           "results are input_error, the other metrics run" in err
    assert err.index("1 line(s) rejected: no selected metric can use them (20.0% of 5, limit 25.0%); listed in "
                     "rejected_samples with the line as read") < len(err)
    assert any(line.startswith("  line 5 (id unreadable-line-5): not valid JSON") for line in err)
    [account] = [line for line in err if line.startswith("  line 4 (id ")]
    assert "response is malformed: expected a string, got list" in account and "\x1b" not in captured.err
    assert "faithfulness" in captured.out and "≥ 7" in captured.out  # the threshold on the table's scale
    [summary_path] = list((tmp_path / "out").glob("*/summary.json"))
    summary = json.loads(summary_path.read_text())
    assert summary["metrics"]["faithfulness"]["threshold"] == 7.0 and summary["total"] == 5
    assert set(summary["metrics"]) == set(builtin_registry()) and summary["coverage"]["ndcg"]["input_error"] == 5
    # The share given to `run` is kept with the version, for every launch of it (the UI, a backfill, the automation).
    assert json.loads((summary_path.parent.parent.parent / "datasets" / summary_path.parent.name /
                       "settings.json").read_text()) == {"max_rejected_share": 0.25}
    dingo = json.loads((summary_path.parent / "summary_dingo.json").read_text())
    assert set(dingo["metrics_score"]["user_input,response,retrieved_contexts,reference"]["stats"]) == {
        "LLMRAGFaithfulness", "LLMRAGAnswerRelevancy", "LLMRAGContextRelevancy", "LLMRAGContextRecall",
        "LLMRAGContextPrecision"}


def test_a_dagster_run_against_a_dead_endpoint_fails_the_metric_step_naming_the_cause(tmp_path):
    import dagster as dg

    from rag_eval.assets.resources import JudgeResource
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    row = {"id": "r1", "user_input": "Where was Einstein born?",
           "response": "Einstein was born in Ulm. He was a physicist.",
           "retrieved_contexts": ["Albert Einstein was born in Ulm, Germany."], "reference": "He was born in Ulm."}
    resource = JudgeResource(base_url=url, model="judge-test", cache_path=str(tmp_path / "cache.sqlite"))
    with dg.instance_for_test() as instance:
        project = Project(tmp_path, instance, resource)
        project.write("v1", [row, {**row, "id": "r2"}])
        result = project.run("v1")
    resource.get_judge().close()
    assert not result.success  # before: every row judge_error after 5 "timeouts", and the run succeeded
    failures = {e.step_key: e.event_specific_data.error.message for e in result.all_events if e.is_step_failure}
    assert set(failures) == {"score_metrics"}  # the one step judging every selected metric
    assert all(f"the judge endpoint {url} cannot be reached: connection refused" in m for m in failures.values())
