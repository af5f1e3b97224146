"""A conversation file through the CLI and a Dagster materialization: one result row per (conversation, turn,
metric) with its conversation_id and turn, the turns judged with their history as the Python API judges
them, a malformed message named by line and index while the other lines are scored."""
import json

import dagster as dg
import pandas as pd

from rag_eval.metrics import OfflineJudge, evaluate
from tests.pipeline.conftest import Project

CONTEXT = "The Eiffel Tower was built in 1889 for the World's Fair; it is 330 metres tall and stands in Paris."
TOWER = {"id": "tower", "messages": [
    {"role": "user", "content": "When was the Eiffel Tower built?"},
    {"role": "assistant", "content": "It was built in 1889.", "context": CONTEXT, "reference": "In 1889."},
    {"role": "user", "content": "How tall is it?"},
    {"role": "assistant", "content": "It is 330 metres tall.", "context": [CONTEXT], "reference": "330 metres."}]}
SINGLE = {"id": "louvre", "user_input": "Where is the Louvre?", "response": "The Louvre is in Paris.",
          "retrieved_contexts": ["The Louvre museum is in Paris."], "reference": "In Paris."}
BAD = {"id": "bad", "messages": [{"role": "user", "content": "Hi"}, {"role": "bot", "content": "Hello"}]}
#: Well formed, but no metric can use either turn (a question without a letter or digit): one rejected line.
UNASKED = {"id": "unasked", "messages": [{"role": "user", "content": "??"}, {"role": "assistant", "content": "Yes."},
                                         {"role": "user", "content": "!"}, {"role": "assistant", "content": "No."}]}


def check_turn_columns(results: pd.DataFrame, metrics: int) -> None:
    assert str(results["conversation_id"].dtype) == "string" and str(results["turn"].dtype) == "Int64"
    tower = results[results["sample_id"].str.startswith("tower/")]
    assert len(tower) == 2 * metrics and set(tower["conversation_id"]) == {"tower"} and set(tower["row"]) == {0}
    assert sorted(tower["turn"].tolist()) == sorted([1, 2] * metrics)
    assert (tower["turn"] == tower["sample_id"].str[-1].astype(int)).all()
    single = results[results["sample_id"] == "louvre"]
    assert len(single) == metrics and single["conversation_id"].isna().all() and single["turn"].isna().all()


def test_cli_run_writes_a_row_per_turn_and_names_a_malformed_message(tmp_path, monkeypatch, capsys):
    from rag_eval.orchestration import cli

    dataset = tmp_path / "chat" / "samples.jsonl"
    dataset.parent.mkdir()
    dataset.write_text("".join(json.dumps(r) + "\n" for r in (TOWER, BAD, SINGLE, UNASKED)), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    # 2 of the 4 lines rejected (the bad one, and both turns of the unasked one count once): 50 %, within 0.5
    assert cli.main(["run", str(dataset), "--dataset-version", "chat-v1", "--metrics",
                     "answer_relevancy,context_relevancy", "--max-rejected-share", "0.5"]) == 0
    printed = capsys.readouterr()
    assert "line 2 (id unreadable-line-2): messages[1].role: 'bot' is not user or assistant" in printed.err + printed.out
    # the share of lines, as the blocking check counts it: 2 of the 4 lines, not 3 rejected turns of 6
    assert "2 line(s) rejected: no selected metric can use them (50.0% of 4, limit 50.0%)" in printed.err
    summary = json.loads((tmp_path / "out" / "chat-v1" / "summary.json").read_text(encoding="utf-8"))
    assert {k: summary["rejected"][k] for k in ("rows", "total_rows", "share")} == {"rows": 2, "total_rows": 4,
                                                                                   "share": 0.5}
    results = pd.read_parquet(tmp_path / "out" / "chat-v1" / "results.parquet")
    check_turn_columns(results, metrics=2)
    assert set(results.loc[results["row"].isin([1, 3]), "status"]) == {"input_error"}
    assert set(results.loc[~results["row"].isin([1, 3]), "status"]) == {"ok"}
    ragas = pd.read_csv(tmp_path / "out" / "chat-v1" / "ragas_scores.csv")
    assert ragas["id"].tolist() == ["tower/1", "tower/2", "unreadable-line-2", "louvre", "unasked/1", "unasked/2"]
    assert ragas["user_input"].fillna("").tolist()[:4] == ["When was the Eiffel Tower built?", "How tall is it?", "",
                                                           "Where is the Louvre?"]  # a row per turn, not per line
    assert ragas["conversation_id"].fillna("").tolist() == ["tower", "tower", "", "", "unasked", "unasked"]


def test_a_materialization_judges_each_turn_with_its_history_as_the_python_api(tmp_path):
    with dg.instance_for_test() as instance:
        project = Project(tmp_path, instance)
        project.write("v1", [TOWER, SINGLE])
        result = project.run("v1")
        assert result.success
        checks = {c.check_name: c.passed for c in result.get_asset_check_evaluations()}
        assert checks["rejected_share_within_limit"] and checks["user_input_typed"] and checks["ids_unique"]
    results = pd.read_parquet(project.out / "v1" / "results.parquet")
    check_turn_columns(results, metrics=5)
    questions = pd.read_parquet(project.out / "tables" / "questions" / "v1.parquet").set_index("id")
    assert json.loads(questions.loc["tower/2", "history"]) == [
        {"role": "user", "content": "When was the Eiffel Tower built?"},
        {"role": "assistant", "content": "It was built in 1889."}]
    expected = evaluate([TOWER, SINGLE], judge=OfflineJudge()).results  # the five core metrics, in memory
    got = results.set_index(["sample_id", "metric"])["value"]
    for sample_id, metric, value in zip(expected["sample_id"], expected["metric"], expected["value"]):
        assert got[sample_id, metric] == value, (sample_id, metric)


def test_annotate_export_shows_a_follow_up_with_its_earlier_turns(tmp_path, monkeypatch):
    """A person labels what the judge read: the follow-up "How tall is it?" with the turn that says what "it" is,
    in the CSV and in the Label Studio task; a single-turn line's question as it is."""
    from rag_eval.orchestration import cli

    (tmp_path / "chats.jsonl").write_text(json.dumps(TOWER) + "\n" + json.dumps(SINGLE) + "\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    assert cli.main(["annotate", "export", "chats.jsonl", "-n", "5", "--metrics", "context_relevancy"]) == 0
    follow_up = ("How tall is it?\n\nEarlier in this conversation, oldest first:\n"
                 "User: When was the Eiffel Tower built?\nAssistant: It was built in 1889.")
    sheet = next((tmp_path / "annotate").glob("*.csv"))
    questions = dict(zip(*(pd.read_csv(sheet, encoding="utf-8-sig")[c] for c in ("id", "user_input"))))
    assert questions["tower/2"] == follow_up and questions["louvre"] == "Where is the Louvre?"
    # Every turn is drawn once, each its own item: the line's first turn too.
    assert sorted(pd.read_csv(sheet, encoding="utf-8-sig")["id"]) == ["louvre", "tower/1", "tower/2"]
    tasks = json.loads(next((tmp_path / "annotate").glob("*.label_studio.json")).read_text(encoding="utf-8"))
    assert {t["data"]["sample_id"]: t["data"]["user_input"] for t in tasks}["tower/2"] == follow_up
