"""A judge or metric option outside its domain is refused before anything is registered or
sent: by ``rag-eval run`` with status 2 naming the option, and by a Dagster run's config as
the metric step starts (the review's ``answer_relevancy.strictness=0`` used to pass both and
kill the step that judges every selected metric, losing faithfulness's results)."""
import json
import sys
from pathlib import Path

import dagster as dg
import pytest

from rag_eval.assets.resources import JudgeResource
from rag_eval.orchestration.judge_sim import JudgeServer
from tests.pipeline.conftest import Project

ROOT = Path(__file__).resolve().parents[2]
FIQA = ROOT / "examples" / "fiqa" / "samples.jsonl"


@pytest.mark.parametrize(("option", "message"), [
    (["--metric-option", "answer_relevancy.strictness=0"],
     "bad metric option 'answer_relevancy.strictness=0': Input should be greater than or equal to 1"),
    (["--metric-option", "faithfulness.temperature=nan"],
     "bad metric option 'faithfulness.temperature=nan': Input should be a finite number"),
    (["--metric-option", "faithfulness.temperature=-1"],
     "bad metric option 'faithfulness.temperature=-1': Input should be greater than or equal to 0"),
    (["--strictness", "0"], "--strictness 0: Input should be greater than or equal to 1"),
    (["--temperature", "2.5"], "--temperature 2.5: Input should be less than or equal to 2"),
])
def test_cli_refuses_an_option_outside_its_domain_with_status_2(option, message, server, tmp_path, monkeypatch,
                                                                capsys):
    from rag_eval.orchestration import cli

    dataset = tmp_path / "tiny.jsonl"
    dataset.write_text("\n".join(FIQA.read_text(encoding="utf-8").splitlines()[:3]) + "\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-options-test")
    status = cli.main(["run", str(dataset), "--base-url", server.url, "--model", "judge-test",
                       "--metrics", "faithfulness,answer_relevancy", *option])
    assert status == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == f"error: {message}"
    assert server.seen == [] and not (tmp_path / "datasets").exists()  # nothing sent, nothing registered


def test_a_run_config_outside_the_domain_fails_the_metric_step_before_sending(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-options-test")
    server = JudgeServer().start()
    judge = JudgeResource(base_url=server.url, model="judge-test", cache_path=str(tmp_path / "cache.sqlite"))
    rows = [json.loads(line) for line in FIQA.read_text(encoding="utf-8").splitlines()[:2]]
    try:
        with dg.instance_for_test() as instance:
            project = Project(tmp_path, instance, judge)
            project.write("v1", rows)
            result = project.run("v1", run_config={"ops": {"score_metrics": {"config": {
                "answer_relevancy": {"strictness": 0}}}}})
    finally:
        judge.get_judge().close()
        server.stop()
    assert not result.success
    failures = {e.step_key: e.event_specific_data.error for e in result.all_events if e.is_step_failure}
    assert set(failures) == {"score_metrics"}
    error = failures["score_metrics"]
    text = error.message + "".join(c.message for c in [error.cause] if c)
    assert "strictness" in text and "greater than or equal to 1" in text
    assert server.chat_requests() == []


def test_a_version_over_the_rejected_share_exits_1_naming_its_lines_and_sends_nothing(server, tmp_path, monkeypatch,
                                                                                      capsys):
    # The blocking check's contract at the CLI: 1 of 2 lines no core metric can use is 50 % > 5 %: the
    # metrics do not run, no judgement is sent, the version is not kept, and the rejected line is named.
    from rag_eval.orchestration import cli

    dataset = tmp_path / "half.jsonl"
    dataset.write_text(FIQA.read_text(encoding="utf-8").splitlines()[0] + '\n{"user_input": "What is an ETF?"}\n',
                       encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-blocking-test")
    status = cli.main(["run", str(dataset), "--base-url", server.url, "--model", "judge-test"])
    err = capsys.readouterr().err
    assert status == 1
    assert "quality check rejected_share_within_limit failed: 50.0% of the lines rejected > limit 5.0%" in err
    assert "line 2" in err and "no selected metric can use it" in err
    assert server.seen == []  # the endpoint check's GET only: no judgement requested
    assert not list((tmp_path / "out").glob("*/summary.json"))


def test_spark_without_its_extra_names_the_extra_before_anything_runs(tmp_path, monkeypatch, capsys):
    from rag_eval.assets.resources import ExecutionResource
    from rag_eval.metrics import OfflineJudge, build_metrics, load_samples
    from rag_eval.orchestration import cli

    monkeypatch.setitem(sys.modules, "pyspark", None)  # as Python has it for a package not installed
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    message = "Spark execution needs the 'spark' extra: pip install 'rag-eval-pipeline[spark]'"
    assert cli.main(["run", str(FIQA), "--executor", "spark"]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1] == f"error: {message}" and "Traceback" not in err
    assert not (tmp_path / "datasets").exists()  # nothing registered
    # A run the UI or the daemon launches with the spark executor: its metric step fails, saying the same.
    samples = load_samples(FIQA)[:1]
    with pytest.raises(dg.Failure) as failed:
        ExecutionResource(executor="spark").score([(build_metrics(["faithfulness"])[0], samples, OfflineJudge())], "v1")
    assert failed.value.description == message


@pytest.mark.parametrize("error, line", [
    (OSError(28, "No space left on device", "/data/out/v1/summary.json"),
     "error: /data/out/v1/summary.json: No space left on device; free space on that disk, then run the same command "
     "again (every judgement already answered is kept in the judgement cache)"),
    (OSError(28, "No space left on device"),  # a write that names no file: the folders the command writes to
     "error: writing its files (--out /data/out, --datasets /data/ds): No space left on device; free space on that "
     "disk, then run the same command again (every judgement already answered is kept in the judgement cache)"),
    (OSError(30, "Read-only file system", "/data/out/.locks/v1.lock"),
     "error: /data/out/.locks/v1.lock: Read-only file system; make that file system writable (or pass a folder "
     "elsewhere), then run the same command again"),
    (OSError(111, "Connection refused"), "error: [Errno 111] Connection refused")])
def test_a_storage_error_names_its_path_and_the_way_out(capsys, error, line):
    from argparse import Namespace

    from rag_eval.orchestration.cli import run_handler

    def handler(args):
        raise error

    assert run_handler(Namespace(handler=handler, out="/data/out", datasets="/data/ds")) == 2
    assert capsys.readouterr().err == line + "\n"
