"""The Spark path (local[2], two attempts per task) gives the local path's results."""
import json
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest

from rag_eval.metrics import OfflineJudge, evaluate
from rag_eval.metrics.judges.llm import LLMConfig, LLMJudge
from rag_eval.metrics.core.spark import _slices
from rag_eval.orchestration.judge_sim import oracle

ROOT = Path(__file__).resolve().parents[2]
FIQA = ROOT / "examples" / "fiqa" / "samples.jsonl"
ROWS = [json.loads(line) for line in FIQA.read_text(encoding="utf-8").splitlines()]
COLUMNS = ["sample_id", "row", "metric", "status", "value", "passed", "threshold", "reason", "details"]


@pytest.fixture(scope="module")
def local_offline():
    return evaluate(ROWS, judge=OfflineJudge())


def test_fiqa_offline_rdd_and_dataframe_equal_local(spark, local_offline):
    from_rdd = evaluate(spark.sparkContext.parallelize(ROWS, 3), judge=OfflineJudge())
    from_frame = evaluate(spark.read.json(str(FIQA)), judge=OfflineJudge())
    for distributed in (from_rdd, from_frame):
        assert distributed.results[COLUMNS].equals(local_offline.results[COLUMNS])
        assert distributed.summary == local_offline.summary


def test_fiqa_llm_judge_equal_local_over_http(spark, server):
    judge = LLMJudge(LLMConfig(base_url=server.url, api_key="sk-test", model="judge-test", cache_path=None,
                               concurrency=8, timeout=5))
    server.script = oracle(lambda field, key: int(field != "noncommittal" and not str(key).endswith("2")))
    try:
        local = evaluate(ROWS[:8], judge=judge)
        sent = len(server.seen)
        distributed = evaluate(spark.sparkContext.parallelize(ROWS[:8], 2), judge=judge)
    finally:
        judge.close()
    assert sent == 8 * 6 and len(server.seen) == 2 * sent  # the same requests again, from the executors
    assert distributed.results[COLUMNS].equals(local.results[COLUMNS])
    assert distributed.summary == local.summary
    assert set(local.results["status"]) == {"ok"}
    faithfulness = local.results[local.results["metric"] == "faithfulness"]
    for value, details in zip(faithfulness["value"], faithfulness["details"]):
        n = len(json.loads(details)["statements"])  # the scripted judge rejects statement S2 only
        assert value == (n - 1) / n if n >= 2 else value == 1.0


def test_a_task_retried_by_spark_counts_each_row_once(spark, local_offline):
    class ExecutorLost(BaseException):
        """Kills the task, as a lost executor does: no ``Exception``, so no metric takes it for a
        fault of one row (those become that row's ``judge_error``)."""

    class FlakyJudge(OfflineJudge):
        """Fails the first attempt of partition 0, as a lost executor would."""

        def recipe(self, share=1.0):
            return FlakyJudge

        async def support(self, statements, contexts):
            from pyspark import TaskContext

            task = TaskContext.get()
            if task is not None and task.partitionId() == 0 and task.attemptNumber() == 0:
                raise ExecutorLost("executor lost")
            return await super().support(statements, contexts)

    distributed = evaluate(spark.sparkContext.parallelize(ROWS, 2), judge=FlakyJudge())
    assert len(distributed.results) == len(local_offline.results) == 30 * 5
    assert distributed.results[COLUMNS].equals(local_offline.results[COLUMNS])
    assert distributed.summary == local_offline.summary


def test_the_pipeline_switches_to_spark_by_config(spark, tmp_path):
    from rag_eval.assets.resources import ExecutionResource
    from tests.pipeline.conftest import Project

    summaries = {}
    for executor in ("local", "spark"):
        with dg.instance_for_test() as instance:
            project = Project(tmp_path / executor, instance)
            project.resources["execution"] = ExecutionResource(executor=executor, parallelism=2)
            project.write("v1", ROWS[:6])
            assert project.run("v1").success
            summaries[executor] = json.loads((project.out / "v1" / "summary.json").read_text())
            results = pd.read_parquet(project.out / "v1" / "results.parquet")
            summaries[executor]["values"] = results[["metric", "row", "status", "value"]].to_dict("records")
    assert summaries["spark"] == summaries["local"]
    assert spark.sparkContext._jsc is not None  # the deployment's session was used, not stopped


def test_spark_never_runs_more_tasks_than_the_concurrency_limit(server):
    for concurrency, tasks in ((1, 1), (3, 3), (16, 4)):
        limited = LLMJudge(LLMConfig(base_url=server.url, concurrency=concurrency, cache_path=None))
        try:
            assert _slices(4, limited) == tasks
        finally:
            limited.close()
