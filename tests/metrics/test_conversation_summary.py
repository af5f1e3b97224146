"""The conversation aggregates of a summary: Azure's mean over turns, the worst turn, the mean by turn index.

Figures worked out by hand from the frames below.
"""
import pandas as pd
import pytest

from rag_eval.metrics.reports.aggregate import summarize
from rag_eval.metrics.reports.conversations import conversation_frame


def _row(conversation, turn, line, metric, status, value=None, threshold=0.5, direction="higher_is_better"):
    passed = None if value is None else (value >= threshold if direction == "higher_is_better" else value <= threshold)
    return {"sample_id": f"{conversation}/{turn}" if conversation else f"single-{line}", "row": line - 1,
            "conversation_id": conversation, "turn": turn, "metric": metric, "status": status, "value": value,
            "passed": passed, "threshold": threshold, "direction": direction, "reason": "", "details": "{}",
            "judge": "offline"}


def _frame(rows):
    frame = pd.DataFrame(rows)
    return frame.astype({"value": "float64", "passed": "boolean", "turn": "Int64", "conversation_id": "string"})


CONVERSATIONS = _frame([
    # conv-a (line 1): faithfulness 1.0, 0.2, 0.9 -> mean 0.7, worst 0.2 at turn 2, one turn fails
    _row("conv-a", 1, 1, "faithfulness", "ok", 1.0), _row("conv-a", 2, 1, "faithfulness", "ok", 0.2),
    _row("conv-a", 3, 1, "faithfulness", "ok", 0.9),
    # conv-b (line 2): 0.8, then a judge_error -> mean 0.8 over the one ok turn, passes
    _row("conv-b", 1, 2, "faithfulness", "ok", 0.8), _row("conv-b", 2, 2, "faithfulness", "judge_error"),
    # conv-c (line 4): nothing measured
    _row("conv-c", 1, 4, "faithfulness", "input_error"),
    # a single-turn line (line 3) is no conversation
    _row(None, None, 3, "faithfulness", "ok", 0.1),
])


def test_a_conversation_has_its_mean_over_turns_and_its_worst_turn():
    per = conversation_frame(CONVERSATIONS).set_index("conversation_id")
    assert list(per.index) == ["conv-a", "conv-b", "conv-c"]  # the single-turn line is left out
    assert per.loc["conv-a", "mean"] == pytest.approx(0.7) and per.loc["conv-a", "worst"] == 0.2
    assert per.loc["conv-a", "worst_turn"] == 2 and not per.loc["conv-a", "passed"]
    assert (per.loc["conv-b", "turns"], per.loc["conv-b", "measured"], per.loc["conv-b", "mean"]) == (2, 1, 0.8)
    assert per.loc["conv-b", "passed"]
    assert per.loc["conv-c", "measured"] == 0 and pd.isna(per.loc["conv-c", "mean"])
    assert list(per["line"]) == [1, 2, 4]


def test_the_summary_averages_conversations_and_turn_indexes():
    summary = summarize(CONVERSATIONS)
    block = summary["conversations"]
    assert (block["conversations"], block["turns"]) == (3, 6)
    faithfulness = block["metrics"]["faithfulness"]
    assert faithfulness["mean"] == 0.75  # (0.7 + 0.8) / 2: conv-c has no measured turn
    assert faithfulness["worst_turn_mean"] == 0.5  # (0.2 + 0.8) / 2
    assert faithfulness["pass_rate"] == 0.5 and (faithfulness["measured"], faithfulness["total"]) == (2, 3)
    assert faithfulness["by_turn"] == {"1": {"mean": 0.9, "measured": 2}, "2": {"mean": 0.2, "measured": 1},
                                       "3": {"mean": 0.9, "measured": 1}}
    assert faithfulness["worst"][0] == {"conversation_id": "conv-a", "line": 1, "turn": 2, "value": 0.2}
    # every turn is a judged unit: 6 turns + the single-turn line, though conv-a's three share line 1
    assert summary["total"] == 7 and summary["metrics"]["faithfulness"]["total"] == 7


def test_a_lower_is_better_metric_has_its_highest_turn_as_the_worst():
    frame = _frame([_row("c", 1, 1, "noise_sensitivity", "ok", 0.1, 0.3, "lower_is_better"),
                    _row("c", 2, 1, "noise_sensitivity", "ok", 0.6, 0.3, "lower_is_better")])
    block = summarize(frame)["conversations"]["metrics"]["noise_sensitivity"]
    assert block["worst_turn_mean"] == 0.6 and block["worst"][0]["turn"] == 2 and block["pass_rate"] == 0.0


def test_scale_ten_presents_the_conversation_figures_on_it():
    block = summarize(CONVERSATIONS, scale=10)["conversations"]["metrics"]["faithfulness"]
    assert block["mean"] == 7.5 and block["worst_turn_mean"] == 5.0 and block["by_turn"]["2"]["mean"] == 2.0


def test_a_file_without_conversations_has_no_block():
    assert "conversations" not in summarize(CONVERSATIONS[CONVERSATIONS["conversation_id"].isna()])


def test_the_console_shows_the_conversation_figures_at_80_columns(capsys):
    from rag_eval.orchestration.report import print_table

    print_table(summarize(CONVERSATIONS, task_name="chat-v1"), width=80)
    out = capsys.readouterr().out
    assert "conversations: 3 (6 turns)" in out
    line = next(line for line in out.splitlines()[out.splitlines().index(next(
        l for l in out.splitlines() if l.startswith("conversations:"))):] if line.startswith("faithfulness"))
    assert line.split()[:7] == ["faithfulness", "0.750", "0.500", "50%", "0.90", "0.20", "0.90"]
    assert "conv-a/2 0.20" in out and max(len(line) for line in out.splitlines()) <= 80


def test_the_python_api_gives_no_conversation_rows_for_single_turn_samples():
    from rag_eval.metrics import evaluate

    result = evaluate([{"user_input": "What is 2+2?", "response": "4.", "retrieved_contexts": ["2+2 is 4."]}],
                      metrics=["faithfulness"])
    frame = result.conversations()
    assert list(frame.columns) == ["conversation_id", "line", "metric", "turns", "measured", "mean", "worst",
                                   "worst_turn", "passed"] and frame.empty


def test_the_gate_resamples_conversations_not_their_turns():
    """Six conversations of three turns; the candidate lowers every turn of conversations c0-c2 by 0.3.
    Compared as conversations there are 6 units, each the mean over its turns (worked out below);
    resampling the 18 turns as independent rows would give n = 18."""
    from rag_eval.metrics.judges.offline import OfflineJudge
    from rag_eval.metrics.stats.gate import GateConfig, Version, run_comparison

    def side(drop):
        rows = []
        for c in range(6):
            for turn, value in enumerate((0.9, 0.6, 0.75), start=1):
                rows.append(_row(f"c{c}", turn, c + 1, "faithfulness", "ok", round(value - (drop if c < 3 else 0), 2)))
        return _frame(rows)

    comparison, notes = run_comparison(Version("base", side(0.0)), Version("cand", side(0.3)),
                                       GateConfig(metrics=["faithfulness"]), OfflineJudge())
    row = comparison.metrics["faithfulness"]
    assert row.n == 6
    assert row.baseline_mean == pytest.approx(0.75) and row.candidate_mean == pytest.approx(0.6)  # (3*0.45+3*0.75)/6
    assert any(note.startswith("conversations compared as units") for note in notes)


def test_azure_rows_give_a_conversation_its_mean_and_each_turn_in_turn_order():
    from rag_eval.metrics.reports.formats import azure_rows

    rows = [_row("c", turn, 1, "groundedness", "ok", value, 3.0) for turn, value in ((1, 5.0), (2, 2.0), (10, 4.0))]
    rows.append(_row(None, None, 2, "groundedness", "ok", 4.0, 3.0))
    frame = _frame(rows)
    frame["reason"] = ["first", "second", "tenth", "single"]
    single, conversation = sorted(azure_rows(frame), key=lambda r: r["id"] == "c")
    assert single["id"] == "single-2" and single["groundedness"] == 4.0 and "evaluation_per_turn" not in single
    assert conversation["id"] == "c" and conversation["row"] == 0
    assert conversation["groundedness"] == pytest.approx(11 / 3) and conversation["groundedness_threshold"] == 3.0
    per_turn = conversation["evaluation_per_turn"]
    assert per_turn["groundedness"] == [5.0, 2.0, 4.0]  # turn 10 after turn 2, not between 1 and 2
    assert per_turn["groundedness_reason"] == ["first", "second", "tenth"] and "groundedness_reason" not in conversation
    assert per_turn["groundedness_result"] == ["pass", "fail", "pass"]


def test_input_errors_are_listed_per_turn_of_a_conversations_line():
    from rag_eval.metrics.reports.aggregate import input_error_lines

    rows = []
    for turn in (1, 2, 10):
        row = _row("c", turn, 3, "context_recall", "input_error" if turn > 1 else "ok", None if turn > 1 else 0.5)
        row["details"] = '{"field": "reference", "problem": "missing"}' if turn > 1 else "{}"
        rows.append(row)
    rows.append(_row(None, None, 1, "context_recall", "ok", 0.9))
    listed = input_error_lines(_frame(rows))
    assert [(e["line"], e["id"], e["fields"]) for e in listed] == [(3, "c/2", {"reference": "missing"}),
                                                                    (3, "c/10", {"reference": "missing"})]
