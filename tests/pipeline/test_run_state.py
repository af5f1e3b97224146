"""A command's state lives in the objects it hands its runs, not in the process (issue 36): progress is told by
the run's execution resource, the judges belong to the judge resource (and to the copies Dagster makes of it
for each run), the Dagster instance is opened from its folder without writing ``DAGSTER_HOME``, and the garbage
collector is as the caller left it when the command returns."""
import gc
import os
from pathlib import Path

import dagster as dg

from rag_eval.assets.resources import JudgeResource

ROOT = Path(__file__).resolve().parents[2]
FIQA = ROOT / "examples" / "fiqa" / "samples.jsonl"


def test_a_run_tells_its_progress_opens_the_default_instance_and_leaves_the_process_as_it_was(
        server, tmp_path, monkeypatch, capsys):
    from rag_eval.orchestration import cli

    (tmp_path / "s.jsonl").write_text("".join(FIQA.read_text(encoding="utf-8").splitlines(True)[:3]),
                                      encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    monkeypatch.delenv("RAG_EVAL_CUSTOM_METRICS", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-state-test")
    collecting = gc.isenabled()
    status = cli.main(["run", "s.jsonl", "--dataset-version", "v1", "--metrics", "faithfulness",
                       "--base-url", server.url, "--model", "judge-test"])
    err = capsys.readouterr().err.splitlines()
    assert status == 0
    # Not on a terminal: a line as the metric starts and one as it ends (report.progress_display), 3 rows.
    assert [line for line in err if line.endswith(" scored")] == ["faithfulness: 1/3 scored", "faithfulness: 3/3 scored"]
    home = tmp_path.resolve() / "dagster_home"
    assert any(line.endswith(f"with Dagster (DAGSTER_HOME={home})") for line in err)
    assert (home / "dagster.yaml").is_file() and (home / ".rag-eval-storage-ready").is_file()
    assert "DAGSTER_HOME" not in os.environ
    # The endpoint check the command started before opening the instance is the run's judge's: one check.
    assert server.probes == ["/v1/models/judge-test"]
    assert gc.isenabled() is collecting and gc.get_freeze_count() == 0


def test_the_judges_belong_to_the_resource_and_the_copies_dagster_runs():
    used = []

    @dg.asset
    def judged(judge: JudgeResource) -> None:
        used.append(judge.get_judge())

    resource = JudgeResource(support_threshold=0.4)
    job = dg.Definitions(assets=[judged], resources={"judge": resource}).resolve_implicit_global_asset_job_def()
    with dg.instance_for_test() as instance:
        for config in ({}, {}, {"resources": {"judge": {"config": {"support_threshold": 0.6}}}}):
            assert job.execute_in_process(instance=instance, run_config=config).success
    assert used[0] is used[1] is resource.get_judge()  # two runs, each on its own copy of the resource: one judge
    assert (used[0].rules.support_threshold, used[2].rules.support_threshold) == (0.4, 0.6)
    assert JudgeResource(support_threshold=0.4).get_judge() is not used[0]  # another resource, its own judges
