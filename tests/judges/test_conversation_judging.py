"""A conversation's turns judged with their history: the LLM judge's prompts for turn k show turns 1..k-1
(read on the simulated endpoint), the history costs prompt text and no request, and is part of the cache
key; the offline judge reads a follow-up completed by the earlier turns. Expected values worked out by
hand from the conversations below."""
import json

import pytest

from rag_eval.metrics import OfflineJudge, evaluate
from rag_eval.metrics.core.conversation import HISTORY_HEADING, NO_HISTORY
from rag_eval.orchestration.judge_sim import oracle

CONTEXT = "The Act protects voting, assembly and privacy; the courts enforce assembly and a regulator privacy."
TURNS = [("Which three rights does the Act protect?", "Voting, assembly and privacy."),
         ("And how is the second one enforced?", "The courts enforce the right of assembly."),
         ("What about the third?", "A regulator enforces privacy.")]
METRICS = ["context_relevancy", "context_precision", "faithfulness"]


def conversation(conversation_id: str, turns=TURNS) -> dict:
    messages = []
    for question, answer in turns:
        messages += [{"role": "user", "content": question},
                     {"role": "assistant", "content": answer, "context": CONTEXT, "reference": answer}]
    return {"id": conversation_id, "messages": messages}


def singles(turns=TURNS) -> list[dict]:
    return [{"id": f"single-{k}", "user_input": q, "response": a, "retrieved_contexts": [CONTEXT], "reference": a}
            for k, (q, a) in enumerate(turns, start=1)]


def prompts_asking(server, question: str) -> list[str]:
    """The chat prompts showing ``question`` as the question judged."""
    return [seen.prompt for seen in server.chat_requests() if f"Question:\n{question}" in seen.prompt]


def test_the_llm_prompts_of_turn_k_show_turns_1_to_k_minus_1(server, make_judge):
    server.script = oracle()
    result = evaluate([conversation("rights"), singles()[0]], metrics=METRICS, judge=make_judge())
    assert set(result.results["status"]) == {"ok"}
    first, second, third = (prompts_asking(server, q) for q, _ in TURNS)
    # turn 1 has no earlier message: its requests are the single-turn line's (the same question), sent once each
    assert first and not any(HISTORY_HEADING in p for p in first)
    hits = result.results.set_index(["sample_id", "metric"])["shared_hits"]
    assert hits["single-1", "context_relevancy"] + hits["rights/1", "context_relevancy"] == 2  # its two wordings
    for prompt in second:
        assert f"{TURNS[1][0]}\n\n{HISTORY_HEADING}\nUser: {TURNS[0][0]}\nAssistant: {TURNS[0][1]}\n\n" in prompt
    for prompt in third:
        assert (f"{TURNS[2][0]}\n\n{HISTORY_HEADING}\nUser: {TURNS[0][0]}\nAssistant: {TURNS[0][1]}\n"
                f"User: {TURNS[1][0]}\nAssistant: {TURNS[1][1]}\n\n") in prompt
    assert len(second) == len(third) == 2  # context_relevance and context_usefulness, once each


def test_history_adds_prompt_text_not_requests(server, make_judge, tmp_path):
    server.script = oracle()
    evaluate([conversation("rights")], metrics=METRICS, judge=make_judge(cache_path=str(tmp_path / "a.sqlite")))
    as_turns = len(server.chat_requests())
    server.seen.clear()
    evaluate(singles(), metrics=METRICS, judge=make_judge(cache_path=str(tmp_path / "b.sqlite")))
    as_lines = len(server.chat_requests())
    # per turn, history or not: context relevance in its two wordings, context usefulness, statement support
    assert as_turns == as_lines == 3 * 4 and as_turns / as_lines <= 1.2


def test_the_same_follow_up_after_different_histories_is_not_one_cached_verdict(server, make_judge, tmp_path):
    server.script = oracle()
    other = [("Which two duties does the Act impose?", "Reporting and consultation."), TURNS[1]]
    judge = make_judge()
    result = evaluate([conversation("rights", TURNS[:2]), conversation("duties", other)],
                      metrics=["context_relevancy"], judge=judge)
    asked = prompts_asking(server, TURNS[1][0])
    assert len(asked) == 2 and asked[0] != asked[1]  # the same follow-up, its two histories: two requests
    second = result.results.set_index("sample_id")
    assert second.loc["duties/2", "cache_hits"] == second.loc["duties/2", "shared_hits"] == 0
    # the control: the same question and contexts on two single-turn lines is judged once
    server.seen.clear()
    evaluate([{**singles()[1], "id": "a"}, {**singles()[1], "id": "b"}], metrics=["context_relevancy"],
             judge=make_judge(cache_path=str(tmp_path / "control.sqlite")))
    assert len(prompts_asking(server, TURNS[1][0])) == 1


@pytest.fixture(scope="module")
def offline():
    return OfflineJudge()


def test_offline_a_follow_up_judged_with_its_history_gains_the_subject_it_lacks(offline):
    """"How tall is it?" names nothing the response or the context name; read with its history it is
    "How tall is it? (When was the Eiffel Tower built? Eiffel Tower 1889 World's Fair)", which names the
    Eiffel Tower both are about: its cosine with the response (answer_relevancy) and the judges' ratings
    of the context (nv_context_relevance) rise."""
    context = ["The Eiffel Tower is 330 metres tall and stands in Paris."]
    turns = [("When was the Eiffel Tower built?", "The Eiffel Tower was built in 1889 for the World's Fair."),
             ("How tall is it?", "The Eiffel Tower is 330 metres tall.")]
    messages = [m for q, a in turns for m in ({"role": "user", "content": q},
                                              {"role": "assistant", "content": a, "context": context})]
    alone = {"id": "alone", "user_input": turns[1][0], "response": turns[1][1], "retrieved_contexts": context}
    read = {**alone, "id": "read", "user_input": "How tall is it? \u2063(When was the Eiffel Tower built? Eiffel Tower "
                                                 "1889 World's Fair)"}
    metrics = ["answer_relevancy", "nv_context_relevance"]
    results = evaluate([{"id": "tower", "messages": messages}, alone, read], metrics=metrics, judge=offline).results
    value = results.set_index(["sample_id", "metric"])["value"]
    for metric in metrics:
        assert value["tower/2", metric] > value["alone", metric], metric
        assert value["tower/2", metric] == value["read", metric], metric  # judged as the question it resolves to
    assert value["tower/2", "answer_relevancy"] - value["alone", "answer_relevancy"] > 0.3  # 0.66 against 0.27
    assert not results["reason"].str.contains(NO_HISTORY, regex=False).any()  # "it" alone is no sure follow-up


def test_offline_an_answer_naming_what_the_earlier_answer_named_is_no_restatement(offline):
    """"Who publishes the second one?" is completed with the names of the answer before it (Arthur's Magazine,
    First for Women, Bauer Media Group); the answer "First for Women is published by Bauer Media Group in the
    USA." names only those. Read against the completed question it would "only restate the question" and
    score 0 as evasive; read against the follow-up's own words it brings names the question lacks."""
    context = ["First for Women is a woman's magazine published by Bauer Media Group in the USA."]
    messages = [{"role": "user", "content": "Which magazine was started first, Arthur's Magazine or First for Women?"},
                {"role": "assistant", "content": "Arthur's Magazine, before First for Women (Bauer Media Group, USA).",
                 "context": context},
                {"role": "user", "content": "Who publishes the second one?"},
                {"role": "assistant", "content": "First for Women is published by Bauer Media Group in the USA.",
                 "context": context}]
    results = evaluate([{"id": "mags", "messages": messages}], metrics=["answer_relevancy"], judge=offline).results
    second = results.set_index("sample_id").loc["mags/2"]
    assert second["reason"] != "the response is noncommittal or evasive" and second["value"] > 0


def test_offline_a_question_that_stands_on_its_own_is_judged_alone_in_a_conversation(offline):
    turns = [TURNS[0], ("Where is the Louvre?", "The Louvre is in Paris.")]
    standalone = {"id": "louvre", "user_input": turns[1][0], "response": turns[1][1], "retrieved_contexts": [CONTEXT]}
    results = evaluate([conversation("rights", turns), standalone], metrics=["answer_relevancy", "context_relevancy"],
                       judge=offline).results.set_index(["sample_id", "metric"])
    for metric in ("answer_relevancy", "context_relevancy"):
        assert results.loc[("rights/2", metric), "value"] == results.loc[("louvre", metric), "value"]


def test_offline_a_follow_up_without_its_history_is_judged_as_it_stands_and_says_so(offline):
    row = {"id": "alone", "user_input": TURNS[1][0], "response": TURNS[1][1], "retrieved_contexts": [CONTEXT]}
    result = evaluate([row, conversation("rights", TURNS[:2])], metrics=["answer_relevancy"], judge=offline)
    reasons = result.results.set_index("sample_id")["reason"]
    assert reasons["alone"].endswith(f"; {NO_HISTORY}")
    assert NO_HISTORY not in reasons["rights/2"]  # the same question with the turn it continues
    details = json.loads(result.results.set_index("sample_id").loc["alone", "details"])
    assert details["question"] == NO_HISTORY


def test_a_judge_cascade_on_conversations_is_refused_before_anything_is_scored(offline):
    with pytest.raises(ValueError, match=r"^a judge cascade is not offered on conversations yet: line 2 holds the turns "
                                         r"of conversation 'rights'"):
        evaluate([singles()[0], conversation("rights")], metrics=["faithfulness"], judge=offline,
                 strong_judge=offline, strong_budget=0.5)


def test_statements_are_split_with_the_plain_question_while_the_prompt_shows_the_history(server, make_judge):
    server.script = oracle()
    turns = [("When was the Eiffel Tower built?", "1889"), ("How tall is it?", "330")]  # bare spans: read with a question
    evaluate([conversation("tower", turns)], metrics=["context_precision"], judge=make_judge())
    [prompt] = prompts_asking(server, turns[1][0])
    assert f"Question:\n{turns[1][0]}\n\n{HISTORY_HEADING}\nUser: {turns[0][0]}\nAssistant: 1889\n\n" in prompt
    assert "\n[R1] Q: How tall is it? A: 330\n" in prompt  # the statement: its question alone, no history
