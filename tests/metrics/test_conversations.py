"""Conversations read as one sample per assistant turn (Azure AI Evaluation's shape, RAGAS's multi-turn
names), their messages validated with the line and the message's index, and the question a judge reads
for a turn. Expected values worked out by hand from the records below."""
import json

import pytest

from rag_eval.metrics import score_sample
from rag_eval.metrics.core.base import name_problem
from rag_eval.metrics.core.conversation import HISTORY_MESSAGES, NO_HISTORY, asked, resolved, unresolved, with_history
from rag_eval.metrics.core.results import Direction, MetricResult, Status
from rag_eval.metrics.core.samples import load_samples
from rag_eval.metrics.core.scoring import results_frame, with_turns
from rag_eval.metrics.errors import InputError
from rag_eval.metrics.reports.formats import azure_rows, ragas_table

RIGHTS = {"id": "conv-07", "messages": [
    {"role": "system", "content": "Answer from the passages."},
    {"role": "user", "content": "Which three rights does the Act protect?"},
    {"role": "assistant", "content": "Voting, assembly and privacy.", "context": "The Act protects voting, assembly and "
                                                                                 "privacy."},
    {"role": "user", "content": "And how is the second one enforced?"},
    {"role": "assistant", "content": "By the courts.", "reference": "The courts enforce it.",
     "context": {"citations": [{"id": "doc1", "content": "Courts enforce assembly."},
                               {"id": "doc2", "content": "Police must allow it."}]}}]}


def write(tmp_path, *records) -> str:
    path = tmp_path / "conversations.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return str(path)


def test_an_azure_conversation_is_one_sample_per_assistant_turn(tmp_path):
    first, second = load_samples(write(tmp_path, RIGHTS))
    assert (first.id, first.row, first.conversation_id, first.turn) == ("conv-07/1", 0, "conv-07", 1)
    assert (second.id, second.row, second.conversation_id, second.turn) == ("conv-07/2", 0, "conv-07", 2)
    assert first.user_input == "Which three rights does the Act protect?"
    assert first.retrieved_contexts == ["The Act protects voting, assembly and privacy."]  # a string wrapped
    assert first.reference is None and first.history == [{"role": "system", "content": "Answer from the passages."}]
    assert second.user_input == "And how is the second one enforced?" and second.response == "By the courts."
    assert second.retrieved_contexts == ["Courts enforce assembly.", "Police must allow it."]  # the citations' contents
    assert second.reference == "The courts enforce it."
    assert second.history == [{"role": "system", "content": "Answer from the passages."},
                              {"role": "user", "content": "Which three rights does the Act protect?"},
                              {"role": "assistant", "content": "Voting, assembly and privacy."}]
    assert second.problems == {} and first.line == second.line == 1


def test_ragas_multi_turn_names_and_a_conversation_reference_for_the_last_turn():
    record = {"user_input": [{"type": "human", "content": "Who wrote Emma?"},
                             {"type": "ai", "content": "Jane Austen.", "retrieved_contexts": ["Emma is by Jane Austen."]},
                             {"type": "tool", "content": {"lookup": "Emma"}},
                             {"type": "human", "content": "When was it published?"},
                             {"type": "ai", "content": "In 1815."}],
              "reference": "Emma was published in 1815."}
    first, second = load_samples([record])
    assert first.conversation_id == second.conversation_id and len(first.conversation_id) == 16  # a hash: no id given
    assert (first.id, second.id) == (f"{first.conversation_id}/1", f"{first.conversation_id}/2")
    assert first.retrieved_contexts == ["Emma is by Jane Austen."] and first.reference is None
    assert second.reference == "Emma was published in 1815." and second.retrieved_contexts is None
    assert second.history[-1] == {"role": "tool", "content": '{"lookup": "Emma"}'}  # kept in the history only
    other = load_samples([{**record, "user_input": [{**record["user_input"][0], "content": "Who wrote Persuasion?"},
                                                    *record["user_input"][1:]]}])
    assert other[0].conversation_id != first.conversation_id  # the hash is of the user messages
    assert load_samples([record])[0].id == first.id  # and stable


@pytest.mark.parametrize("messages, problem", [
    ([{"role": "user", "content": "Hi"}, {"role": "bot", "content": "Hello"}],
     "messages[1].role: 'bot' is not user or assistant (nor system or tool)"),
    ([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": 7}], "messages[1].content: not a string"),
    ([{"role": "system", "content": "Be brief."}, {"role": "assistant", "content": "Hello"}],
     "messages[1]: an assistant message with no user message before it"),
    ([{"role": "user", "content": "Hi"}], "no assistant turn"),
    ([{"role": "user", "content": "Hi"}, "Hello"], "messages[1]: not an object"),
    ([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello", "context": {"citations": [{"id": 1}]}}],
     "messages[1].context.citations[0].content: not a string"),
])
def test_a_malformed_message_rejects_its_line_naming_the_index_and_the_other_line_is_kept(tmp_path, messages, problem):
    samples = load_samples(write(tmp_path, RIGHTS, {"id": "bad", "messages": messages}))
    assert [s.id for s in samples] == ["conv-07/1", "conv-07/2", "unreadable-line-2"]
    assert samples[2].problems == {"row": problem} and samples[2].line == 2
    assert all(s.problems == {} for s in samples[:2])


def test_a_single_turn_record_is_unchanged_and_reads_its_question_alone():
    [sample] = load_samples([{"id": "s1", "question": "Where is the Louvre?", "answer": "In Paris."}])
    assert (sample.id, sample.conversation_id, sample.turn, sample.history) == ("s1", None, None, None)
    assert sample.question() == "Where is the Louvre?"


def test_the_question_a_judge_reads_shows_the_latest_earlier_messages_clipped():
    history = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}"} for i in range(8)]
    history[-1]["content"] = "x" * 700
    shown = with_history("And the third?", history)
    assert shown.splitlines()[:3] == ["And the third?", "", "Earlier in this conversation, oldest first:"]
    assert shown.splitlines()[3:] == [f"{'User' if i % 2 == 0 else 'Assistant'}: message {i}" for i in range(2, 7)] + \
        ["Assistant: " + "x" * 600 + "…"]
    assert len(shown.splitlines()) == 3 + HISTORY_MESSAGES
    assert with_history("And the third?", []) == "And the third?"


def test_the_offline_reading_completes_a_follow_up_and_leaves_a_standalone_question():
    history = [{"role": "user", "content": "When was the Eiffel Tower built?"},
               {"role": "assistant", "content": "The Eiffel Tower was built in 1889 for the World's Fair."}]
    completed = resolved(with_history("How tall is it?", history))
    assert completed == "How tall is it? \u2063(When was the Eiffel Tower built? Eiffel Tower 1889 World's Fair)"
    assert asked(completed) == "How tall is it?" and asked("Is it (really) tall?") == "Is it (really) tall?"
    assert resolved(with_history("Where is the Louvre?", history)) == "Where is the Louvre?"
    assert resolved("How tall is it?") == "How tall is it?"
    assert unresolved("And how is the second one enforced?", None) == NO_HISTORY
    assert unresolved("And how is the second one enforced?", history) is None
    assert unresolved("How tall is it?", None) is None  # a pronoun alone: single-turn questions hold them too


def turn_result(metric: str, sample_id: str, row: int, conversation_id=None, turn=None) -> MetricResult:
    return MetricResult(metric=metric, sample_id=sample_id, status=Status.OK, value=4.0, passed=True, threshold=3.0,
                        direction=Direction.HIGHER, reason="fine", row=row, conversation_id=conversation_id, turn=turn)


def test_every_per_row_output_has_the_turn_and_results_stored_before_read_as_na():
    frame = results_frame([turn_result("relevance", "c/1", 0, "c", 1), turn_result("relevance", "c/2", 0, "c", 2),
                           turn_result("relevance", "s", 1)])
    assert frame["conversation_id"].tolist()[:2] == ["c", "c"] and frame["turn"].tolist()[:2] == [1, 2]
    assert frame["conversation_id"].isna().tolist() == [False, False, True] and frame["turn"].isna().iloc[2]
    assert [r["id"] for r in azure_rows(frame)] == ["c", "s"]  # a conversation is one row, as Azure gives it
    table = ragas_table(frame)
    assert table["id"].tolist() == ["c/1", "c/2", "s"] and table["turn"].isna().tolist() == [False, False, True]
    older = with_turns(frame.drop(columns=["conversation_id", "turn"]))  # a frame written before conversations
    assert str(older["conversation_id"].dtype) == "string" and str(older["turn"].dtype) == "Int64"
    assert older["turn"].isna().all() and older["conversation_id"].isna().all()
    assert name_problem("turn") is not None and name_problem("conversation_id") is not None  # taken by the outputs


def test_score_sample_refuses_a_conversation_and_names_what_scores_it():
    with pytest.raises(InputError, match=r"this record is a conversation .*: evaluate\(\[record\]\) scores its turns$"):
        score_sample(RIGHTS, ["faithfulness"])


def test_a_long_conversation_keeps_what_a_judge_reads_of_its_history_not_all_of_it(tmp_path):
    """800 turns of 700-character messages: each turn holds the latest six earlier messages, clipped to 600
    characters (what the judge reads), so the samples grow with the conversation, not with its square."""
    long = "word " * 140  # 700 characters
    messages = [m for k in range(800) for m in ({"role": "user", "content": f"question {k} {long}"},
                                                {"role": "assistant", "content": f"answer {k} {long}", "context": "c"})]
    samples = load_samples([{"id": "huge", "messages": messages}])
    assert len(samples) == 800 and all(len(s.history) <= HISTORY_MESSAGES for s in samples)
    last = samples[-1].history
    assert [m["content"].split()[:2] for m in last] == [
        ["question", "796"], ["answer", "796"], ["question", "797"], ["answer", "797"], ["question", "798"],
        ["answer", "798"]]
    assert all(len(m["content"]) <= 601 and m["content"].endswith("…") for m in last)


def test_a_single_turn_that_logs_its_prompts_messages_stays_a_single_turn():
    logged = {"id": "q1", "user_input": "What is the capital of France?", "response": "Paris.",
              "retrieved_contexts": ["Paris is the capital of France."],
              "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is..."}]}
    [sample] = load_samples([logged, {**logged, "id": "q2", "messages": []}])[:1]
    assert (sample.id, sample.turn, sample.user_input, sample.problems) == ("q1", None, logged["user_input"], {})


def test_an_answer_after_tool_calls_is_the_turn_and_the_calls_its_history():
    openai = {"id": "tools", "messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "t1", "type": "function",
                                                               "function": {"name": "weather", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "t1", "content": "18 C, sunny"},
        {"role": "assistant", "content": "It is 18 C and sunny.", "context": ["18 C, sunny"]}]}
    ragas = {"id": "rg", "user_input": [
        {"type": "human", "content": "Weather in Paris?"},
        {"type": "ai", "content": "", "tool_calls": [{"name": "weather", "args": {}}]},
        {"type": "tool", "content": "18 C, sunny"},
        {"type": "ai", "content": "It is 18 C and sunny."}]}
    for record in (openai, ragas):
        [turn] = load_samples([record])
        assert (turn.id, turn.response) == (f"{record['id']}/1", "It is 18 C and sunny.")
        assert turn.history == [{"role": "assistant", "content": "(calls tools: weather)"},
                                {"role": "tool", "content": "18 C, sunny"}]


def test_a_second_answer_to_one_question_is_read_with_the_first():
    [_, second] = load_samples([{"id": "two", "messages": [
        {"role": "user", "content": "Capital of France?"}, {"role": "assistant", "content": "Paris."},
        {"role": "assistant", "content": "It has the Eiffel Tower."}]}])
    assert (second.user_input, second.history) == ("Capital of France?", [{"role": "assistant", "content": "Paris."}])


def test_azures_conversation_column_numpy_lists_and_messages_that_are_no_list():
    import numpy as np
    import pandas as pd

    azure = {"conversation": {"messages": [{"role": "user", "content": "Hi?"}, {"role": "assistant", "content": "Hello."}]}}
    from_parquet = {"id": "p", "messages": np.array([{"role": "user", "content": "Hi?"},
                                                     {"role": "assistant", "content": "Hello.",
                                                      "context": np.array(["a", "b"], dtype=object)}], dtype=object)}
    turned, parquet_turn, bad = load_samples(pd.DataFrame([azure, from_parquet, {"id": "b", "messages": "hello"}]))
    assert turned.turn == 1 and turned.response == "Hello."
    assert (parquet_turn.id, parquet_turn.retrieved_contexts) == ("p/1", ["a", "b"])
    assert bad.problems["row"] == "messages: not a list of messages"


def test_a_conversation_id_used_again_on_a_later_line_is_that_lines_own(tmp_path):
    """A scripted conversation run twice without ids hashes alike: the later line's turns are ``<id>#2/<k>``."""
    script = {"messages": [{"role": "user", "content": "Hi?"}, {"role": "assistant", "content": "Hello."}]}
    again = {"messages": [{"role": "user", "content": "Hi?"}, {"role": "assistant", "content": "Go away."}]}
    first, second, third = load_samples(write(tmp_path, script, again, {**script, "id": "x"}))
    assert first.conversation_id == second.conversation_id.removesuffix("#2") and second.conversation_id.endswith("#2")
    assert second.id == f"{second.conversation_id}/1" and (third.id, third.conversation_id) == ("x/1", "x")
