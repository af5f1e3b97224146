"""A judge cascade from the command line (issue 38): ``rag-eval run --strong-budget`` runs
``cascade_evaluation_job`` (the offline judge on every row, the LLM judge over real HTTP to the
project's simulated endpoint on a seeded sample, ``strong_sample``), prints the estimate of the LLM
judge's mean beside the cheap judge's, and a larger budget later sends requests for the added rows only."""
import json
import re
from pathlib import Path

import pandas as pd
import pytest

from rag_eval.orchestration import cli
from rag_eval.orchestration.judge_sim_command import Simulation, simulated
from tests.conftest import TEST_KEY

pytestmark = pytest.mark.slow  # Dagster runs against the simulated endpoint

HELD_OUT = Path(__file__).parents[1] / "data" / "halueval_qa" / "rows_400_499.jsonl"


@pytest.fixture
def project(tmp_path, monkeypatch, server):
    """200 HaluEval QA rows (each question with its right and its hallucinated answer) in a fresh
    project folder with its own Dagster home, the simulated endpoint as the LLM judge."""
    rows = []
    for line in HELD_OUT.read_text(encoding="utf-8").splitlines():
        item = json.loads(line)
        rows += [{"id": f"{item['id']}-{kind}", "user_input": item["question"], "response": item[kind],
                  "retrieved_contexts": [item["knowledge"]]} for kind in ("right_answer", "hallucinated_answer")]
    (tmp_path / "qa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    server.script = simulated(Simulation(verdict_p1=0.7))
    return tmp_path


def run(server, *options: str) -> int:
    return cli.main(["run", "qa.jsonl", "--base-url", server.url, "--model", "judge-test",
                     "--embedding-model", "embed-test", "--metrics", "faithfulness", *options])


def drawn(folder: Path) -> set[int]:
    results = pd.read_parquet(next((folder / "out").glob("*/results.parquet")))
    return set(results.loc[results["strong_status"].notna(), "row"])


def test_a_tenth_sends_at_most_12_percent_of_a_full_run_and_a_fifth_later_only_the_added_rows(project, server,
                                                                                             capsys):
    assert run(server, "--cache-path", "full.sqlite") == 0  # the full strong run: the LLM judge on every row
    full = len(server.chat_requests())
    assert full == 200  # faithfulness: one chat request a row
    summary_path = next((project / "out").glob("*/summary.json"))
    full_mean = json.loads(summary_path.read_text(encoding="utf-8"))["metrics"]["faithfulness"]["mean"]
    capsys.readouterr()

    server.seen.clear()
    assert run(server, "--strong-budget", "0.1", "--cache-path", "full.sqlite") == 0
    sent, out = len(server.chat_requests()), capsys.readouterr().out
    summary = json.loads(summary_path.read_text(encoding="utf-8"))["metrics"]["faithfulness"]
    tenth = drawn(project)
    # Every drawn row was judged by the full run with the same model and prompts: its answer is in the cache.
    assert sent == 0 and summary["cascade"]["requests"]["reused"] == len(tenth) > 0
    assert len(tenth) <= 0.12 * full and summary["published"] == "cascade"
    found = summary["cascade"]["estimate"]
    assert found["ci_low"] <= full_mean <= found["ci_high"]  # the strong judge's mean over every row
    row = next(line for line in out.splitlines() if line.startswith("faithfulness ") and "[" in line)
    assert re.fullmatch(rf"faithfulness\s+{summary['mean']:.3f}\s+{found['estimate']:.3f} \[{found['ci_low']:.3f}, "
                        rf"{found['ci_high']:.3f}\]\s+{len(tenth)}/200\s+\S+\s+0 of 0", row), row  # every answer cached: none sent

    server.seen.clear()
    assert run(server, "--strong-budget", "0.1", "--cache-path", "cascade.sqlite", "--force") == 0  # else up to date
    assert len(server.chat_requests()) == len(drawn(project)) == len(tenth)  # a fresh cache: each drawn row once
    assert drawn(project) == tenth  # the same seed and budget draw the same rows
    # A full strong run's chat requests, planned exactly before the strong judge sent (a fresh cache: one a row).
    requests = json.loads(summary_path.read_text(encoding="utf-8"))["metrics"]["faithfulness"]["cascade"]["requests"]
    assert (requests["full_run"], requests["from"], requests["sent"]) == (200, "plan", len(tenth))
    assert f"the strong judge sent: {len(tenth)} chat + 0 embeddings requests\n" in capsys.readouterr().out

    server.seen.clear()
    assert run(server, "--strong-budget", "0.2", "--cache-path", "cascade.sqlite") == 0
    fifth = drawn(project)
    assert tenth < fifth and len(server.chat_requests()) == len(fifth - tenth)  # nested: the added rows only
    assert (f"the strong judge sent: {len(fifth - tenth)} chat + 0 embeddings requests; judgements not bought "
            f"again: {len(tenth)} reused from the cache (paid by earlier runs)\n") in capsys.readouterr().out

    server.seen.clear()
    capsys.readouterr()
    assert run(server, "--strong-budget", "0.2", "--cache-path", "cascade.sqlite") == 0
    printed = capsys.readouterr()
    assert server.seen == [] and "is up to date" in printed.err and "the strong judge sent" not in printed.out
    assert re.search(r"^faithfulness .*\[", printed.out, re.M)  # that run's estimate is shown


def test_a_budget_in_money_buys_the_rows_the_dry_run_prices(project, server, capsys):
    assert run(server, "--dry-run", "--price", "1000000") == 0  # $1 a token: the cost is the tokens
    cost = float(re.search(r"^cost: ([\d.]+)", capsys.readouterr().out, re.M)[1])
    # 50.5 % of the full strong run's cost buys 101 of the 200 rows (rounded down, as the rows are whole).
    assert run(server, "--strong-budget", f"{cost * 0.505:.4f}usd", "--price", "1000000") == 0
    assert "--strong-budget" in (err := capsys.readouterr().err) and ": 101 of 200 rows per metric" in err
    summary = json.loads(next((project / "out").glob("*/summary.json")).read_text(encoding="utf-8"))
    assert summary["cascade"]["budget"] == 101 and summary["metrics"]["faithfulness"]["cascade"]["rows"] == 200


@pytest.mark.parametrize(("options", "message"), [
    (["--strong-budget", "201"], "--strong-budget 201: more rows than qa.jsonl's 200 lines; give at most 200"),
    (["--strong-budget", "1.5"], "--strong-budget '1.5': give a share of the rows (0.1 or 10%, above 0 and at most 1)"),
    (["--strong-budget", "0"], "--strong-budget '0': give a share of the rows"),
    (["--strong-sampling", "uniform"], "--strong-sampling applies to a judge cascade: give --strong-budget too"),
    (["--strong-budget", "5usd"], "--strong-budget 5usd: give the strong judge's prices too, --price PROMPT"),
    (["--strong-budget", "0.1", "--cheap-model", "judge-test"],
     "--cheap-model judge-test: the strong judge's model too; give a smaller one"),
    (["--price", "1"], "--price applies to --dry-run and to a --strong-budget in money only"),
])
def test_a_cascade_setting_that_cannot_run_is_refused_before_anything_is_sent(project, server, capsys, options,
                                                                              message):
    assert run(server, *options) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith(f"error: {message}")
    assert server.chat_requests() == [] and not (project / "datasets").exists()


def test_a_cascade_needs_an_llm_judge(project, monkeypatch, capsys):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    assert cli.main(["run", "qa.jsonl", "--strong-budget", "0.1"]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "error: --strong-budget: the strong judge is an LLM judge: set OPENAI_BASE_URL or OPENAI_API_KEY, or pass "
        "--base-url (the cheap judge is the offline one, or --cheap-model)")


def test_the_cascade_job_launched_with_both_judges_alike_stops_before_anything_is_scored(project, server, monkeypatch):
    """The launchpad's default config sets the budget only: with no ``judge: {config: {offline: true}}`` the cheap
    judge is the environment's LLM judge, the strong judge's too. The metric step refuses before it sends or
    stores anything (it would otherwise pay a full strong run as the cheap judge's scores), naming what to set;
    a budget given twice is refused as early."""
    import dagster as dg

    from tests.pipeline.conftest import Project

    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    monkeypatch.setenv("OPENAI_MODEL", "judge-test")
    rows = [json.loads(line) for line in (project / "qa.jsonl").read_text(encoding="utf-8").splitlines()[:4]]
    with dg.instance_for_test() as instance:
        built = Project(project, instance)
        built.write("v1", rows)
        offline = {"judge": {"config": {"offline": True}}}
        for config, resources, message in (({"share": 0.1}, {}, "the strong judge is the cheap judge (llm:judge-test)"),
                                           ({"share": 0.1, "rows": 2}, offline, "give exactly one of share")):
            result = built.run("v1", "cascade_evaluation_job",
                               run_config={"ops": {"strong_sample": {"config": config}}, "resources": resources})
            failures = {e.step_key: e.event_specific_data.error for e in result.all_events if e.is_step_failure}
            assert list(failures) == ["score_metrics"] and message in failures["score_metrics"].message
            assert not result.get_asset_materialization_events() or all(
                e.asset_key.to_user_string() not in ("faithfulness", "strong_sample", "eval_summary")
                for e in result.get_asset_materialization_events())
    assert server.chat_requests() == []


def refused_before_scoring(project: Path, server, monkeypatch, rows: list[dict], budget_rows: int) -> str:
    """The message of ``cascade_evaluation_job`` launched on ``rows`` with a budget of ``budget_rows`` and the offline
    judge as the cheap one, after asserting that the metric step failed before anything was scored or sent."""
    import dagster as dg

    from tests.pipeline.conftest import Project

    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    monkeypatch.setenv("OPENAI_MODEL", "judge-test")
    with dg.instance_for_test() as instance:
        built = Project(project, instance)
        built.write("v1", rows)
        result = built.run("v1", "cascade_evaluation_job",
                           run_config={"ops": {"strong_sample": {"config": {"rows": budget_rows}}},
                                       "resources": {"judge": {"config": {"offline": True}}}})
        failures = {e.step_key: e.event_specific_data.error for e in result.all_events if e.is_step_failure}
        assert list(failures) == ["score_metrics"]
        assert all(e.asset_key.to_user_string() not in ("faithfulness", "strong_sample", "eval_summary")
                   for e in result.get_asset_materialization_events())
    assert server.chat_requests() == []
    return failures["score_metrics"].message


def test_two_rows_with_one_id_stop_the_cascade_job_before_the_cheap_judge_scores_anything(project, server,
                                                                                          monkeypatch):
    """Lines 1 and 3 share an id: they would share their draw. The metric step refuses, naming both lines and the
    field, before the cheap judge scores a row (not the strong sample's step, after the whole version is scored)."""
    rows = [json.loads(line) for line in (project / "qa.jsonl").read_text(encoding="utf-8").splitlines()[:4]]
    rows[2]["id"] = rows[0]["id"]
    assert f"strong_sample: line 3: id {rows[0]['id']!r} repeats line 1's: row ids must be unique" in \
        refused_before_scoring(project, server, monkeypatch, rows, 2)


def test_a_rows_budget_above_a_version_s_rows_stops_the_cascade_job_before_the_cheap_judge_scores(project, server,
                                                                                                 monkeypatch):
    """A nightly or backfill budget of 5 rows meets a version of 3: the metric step refuses it, as `rag-eval run`
    refuses it before registering, not the strong sample's step after the cheap judge (a paid model) scored all."""
    rows = [json.loads(line) for line in (project / "qa.jsonl").read_text(encoding="utf-8").splitlines()[:3]]
    assert "strong_sample: strong budget of 5 rows exceeds the 3 rows" in \
        refused_before_scoring(project, server, monkeypatch, rows, 5)


def test_a_strong_judge_error_exits_3_as_a_cheap_one_does(project, server, capsys):
    """Every strong answer malformed (asked again once, then judge_error): the cheap judge's results are all ok, yet
    the run did not get what it was asked for; it exited 0 with no warning before, as a cheap judge_error exits 3."""
    server.script = simulated(Simulation(verdict_p1=0.7, malformed=1.0))
    assert run(server, "--strong-budget", "12") == 3
    summary = json.loads(next((project / "out").glob("*/summary.json")).read_text(encoding="utf-8"))
    block = summary["metrics"]["faithfulness"]["cascade"]
    assert block["judge_error"] == block["n"] > 0 and block["estimate"] is None  # 12 rows expected, drawn actively
    assert f"warning: {block['n']} of {200 + block['n']} results are judge_error" in capsys.readouterr().err


#: A conversation of two turns: a cascade's draw is keyed by line, so its turns would share one draw.
TOWER = {"id": "tower", "messages": [
    {"role": "user", "content": "When was the Eiffel Tower built?"},
    {"role": "assistant", "content": "It was built in 1889.", "context": "The Eiffel Tower was built in 1889."},
    {"role": "user", "content": "How tall is it?"},
    {"role": "assistant", "content": "It is 330 metres tall.", "context": "The Eiffel Tower is 330 metres tall."}]}
CONVERSATION_REFUSED = ("a judge cascade is not offered on conversations yet: line 2 holds the turns of conversation "
                        "'tower'; judge them with one judge")


def test_a_cascade_on_a_conversation_file_is_refused_before_the_cheap_judge_sends_anything(project, server, capsys):
    """The cheap judge a small model: it used to score (and bill) every turn before the strong sample's step
    refused the conversation; now `run` refuses before registering, naming the line."""
    single = json.loads((project / "qa.jsonl").read_text(encoding="utf-8").splitlines()[0])
    (project / "chats.jsonl").write_text(json.dumps(single) + "\n" + json.dumps(TOWER) + "\n", encoding="utf-8")
    assert cli.main(["run", "chats.jsonl", "--base-url", server.url, "--model", "judge-test", "--embedding-model",
                     "embed-test", "--metrics", "faithfulness", "--strong-budget", "0.5",
                     "--cheap-model", "tiny-model"]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == f"error: {CONVERSATION_REFUSED}"
    assert server.chat_requests() == [] and not (project / "datasets").exists()


def test_a_cascade_job_on_a_conversation_version_stops_before_the_cheap_judge_scores(project, server, monkeypatch):
    """Launched from the UI or a backfill: the metric step refuses, not the strong sample's after every turn."""
    single = json.loads((project / "qa.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert f"strong_sample: {CONVERSATION_REFUSED}" in refused_before_scoring(project, server, monkeypatch,
                                                                             [single, TOWER], 1)
