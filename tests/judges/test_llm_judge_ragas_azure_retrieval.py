"""The RAGAS metrics beyond the core five, the Azure evaluators and DocumentRetrieval through
the LLM judge, over real HTTP against rag_eval.orchestration.judge_sim.

Each test scripts the verdicts the server gives and checks the value worked out by hand
from them, the judgement kinds asked and the number of requests sent.
"""
import json
import math

import pytest

from rag_eval.metrics import Status, evaluate, score_sample
from rag_eval.metrics.rag.factual_correctness import FactualCorrectness
from rag_eval.orchestration.judge_sim import Reply, build_answer, embedding_body, oracle
from tests.judges.test_diagnostics_llm import claims_script

pytestmark = pytest.mark.slow  # the test server or the offline encoder, in every test


def kinds(server):
    return sorted(r.kind for r in server.chat_requests())


# --------------------------------------------------------------------------- NoiseSensitivity

# RAGAS's noise sensitivity, an example: reference claims G1, G2, response claims A1..A4; C1 supports G1 (relevant), nothing
# supports G2, C2 is irrelevant. Rows of the claim x chunk matrix by claim.
NS_ROW = {"id": "ns", "user_input": "Tell me about the tower.",
          "response": "The tower is in Paris. It opened in 1900. It is 500 m tall. It is made of gold.",
          "reference": "The tower is in Paris. It opened in 1889.",
          "retrieved_contexts": ["The Eiffel Tower is in Paris.", "A tower of gold, 500 m tall, opened in 1900."]}
NS_MATRIX = {"The tower is in Paris.": [1, 0], "The tower stands in Paris.": [1, 0],  # G1 = A1 (correct)
             "It opened in 1889.": [0, 0],                                             # G2
             "It opened in 1900.": [1, 0], "It is 500 m tall.": [0, 1], "It is made of gold.": [1, 1]}  # A2-A4
NS_CORRECT = [1, 0, 0, 0]  # the reference supports A1 only
NS_STATED = [1, 0]


def test_noise_sensitivity_both_modes_three_requests_per_row(server, tmp_path, make_judge):
    server.script = claims_script(NS_MATRIX, NS_ROW["retrieved_contexts"], NS_CORRECT, NS_STATED)
    rows = [NS_ROW, dict(NS_ROW, id="ns2", response=NS_ROW["response"].replace("is in Paris", "stands in Paris"))]
    result = evaluate(rows, ["noise_sensitivity_relevant", "noise_sensitivity_irrelevant"],
                      judge=make_judge())
    by = result.results.set_index(["sample_id", "metric"])["value"]
    for row in ("ns", "ns2"):
        assert by[(row, "noise_sensitivity_relevant")] == 0.5
        assert by[(row, "noise_sensitivity_irrelevant")] == 0.25
    # The reference's claims x chunks (the same for both rows: asked once), the response's, and the
    # claims' correctness, shared by both modes (and by the diagnostics).
    assert kinds(server) == ["context_support_matrix"] * 3 + ["statement_classification"] * 2
    matrices = [r for r in server.chat_requests() if r.kind == "context_support_matrix"]
    assert all(m.schema["required"] == ["C1", "C2"] for m in matrices)
    assert sorted(len(m.schema["properties"]["C1"]["required"]) for m in matrices) == [2, 4, 4]
    usage = result.results.groupby("metric")["chat_requests"].sum()
    assert usage.sum() == 5 and result.results["shared_hits"].sum() == 12 - 5  # shared within the run
    assert result.results["cache_hits"].sum() == 0  # the cache was empty: nothing paid by an earlier run


def test_noise_sensitivity_chinese_statements(server, tmp_path, make_judge):
    row = {"user_input": "长城有哪些特点？", "response": "长城在中国。长城建于明朝。长城长两万公里。",
           "reference": "长城位于中国北方。它主要建于明朝。",
           "retrieved_contexts": ["长城位于中国北方，主要建于明朝。", "长城总长约两万公里。"]}
    # G1, G2 by C1 (relevant); A1, A2 by C1 and correct; A3 by C2 only (irrelevant) and incorrect.
    matrix = {"长城位于中国北方。": [1, 0], "它主要建于明朝。": [1, 0], "长城在中国。": [1, 0], "长城建于明朝。": [1, 0],
              "长城长两万公里。": [0, 1]}
    server.script = claims_script(matrix, row["retrieved_contexts"], [1, 1, 0], [1, 1])
    results = score_sample(row, ["noise_sensitivity_relevant", "noise_sensitivity_irrelevant"],
                           judge=make_judge())
    assert results["noise_sensitivity_relevant"].value == 0.0
    assert results["noise_sensitivity_irrelevant"].value == pytest.approx(1 / 3)
    classification = next(r for r in server.chat_requests() if r.kind == "statement_classification")
    assert classification.schema["properties"]["response"]["required"] == ["S1", "S2", "S3"]
    assert "[S3] 长城长两万公里。" in classification.prompt
    assert len(server.chat_requests()) == 3


def test_noise_sensitivity_invalid_matrix_cell_is_reasked_then_judge_error(server, tmp_path, make_judge):
    def script(seen):
        if seen.kind == "context_support_matrix" and "It is made of gold." in seen.prompt:
            return Reply(content=json.dumps(build_answer(seen.schema, lambda field, key: 2)))
        return oracle()(seen)

    server.script = script
    result = score_sample(NS_ROW, ["noise_sensitivity_relevant"], judge=make_judge())
    assert result["noise_sensitivity_relevant"].status is Status.JUDGE_ERROR
    assert "invalid judge output after one re-ask" in result["noise_sensitivity_relevant"].reason
    assert sum(r.kind == "context_support_matrix" and "It is made of gold." in r.prompt
               for r in server.chat_requests()) == 2


# --------------------------------------------------------------------------- Answer/FactualCorrectness

CORRECTNESS_ROW = {"user_input": "Tell me about the tower.",
                   "response": "The tower is in Paris. It opened in 1889. It is made of gold.",
                   "reference": "The tower is in Paris. It opened in 1889."}


def test_answer_and_factual_correctness_one_chat_and_one_embeddings_request(server, tmp_path, make_judge):
    classification = {"supported": {"S1": 1, "S2": 1, "S3": 0}, "covered": {"R1": 1, "R2": 0}}
    vectors = {CORRECTNESS_ROW["response"]: [1.0, 0.0], CORRECTNESS_ROW["reference"]: [0.9, math.sqrt(1 - 0.81)]}

    def script(seen):
        if seen.path.endswith("/embeddings"):
            return Reply(body=embedding_body(seen.body["input"], lambda text: vectors[text]))
        return Reply(content=json.dumps(build_answer(seen.schema, lambda field, key: classification[field][key])))

    server.script = script
    result = evaluate([CORRECTNESS_ROW], ["answer_correctness", "factual_correctness"],
                      judge=make_judge())
    values = result.results.set_index("metric")["value"]
    assert values["answer_correctness"] == pytest.approx(0.725)  # .75 * F1(2, 1, 1) + .25 * .9
    assert values["factual_correctness"] == pytest.approx(2 / 3)
    assert len(server.chat_requests()) == 1 and len(server.embedding_requests()) == 1
    request = server.chat_requests()[0]
    assert request.kind == "statement_classification"
    assert request.schema["properties"]["response"]["required"] == ["S1", "S2", "S3"]
    assert request.schema["properties"]["reference"]["required"] == ["R1", "R2"]


def test_factual_correctness_precision_and_recall_modes(server, tmp_path, make_judge):
    # tp 1, fp 2, fn 0: precision 1/3, recall 1.
    classification = {"supported": {"S1": 1, "S2": 0, "S3": 0}, "covered": {"R1": 1, "R2": 1}}
    server.script = oracle(lambda field, key: classification[field][key])
    judge = make_judge()
    precision = score_sample(CORRECTNESS_ROW, [FactualCorrectness(mode="precision")], judge=judge)
    recall = score_sample(CORRECTNESS_ROW, [FactualCorrectness(mode="recall")], judge=judge)
    assert precision["factual_correctness"].value == pytest.approx(1 / 3)
    assert recall["factual_correctness"].value == 1.0
    assert len(server.chat_requests()) == 1  # the second mode comes from the cache


# --------------------------------------------------------------------------- entities


def test_context_entity_recall_english(server, tmp_path, make_judge):
    row = {"user_input": "Where is the tower?", "reference": "The Eiffel Tower in Paris opened in 1889.",
           "retrieved_contexts": ["The Eiffel Tower is in Paris, France."]}
    server.script = oracle(lambda field, key: ["Eiffel Tower", "Paris", "1889"])
    result = score_sample(row, ["context_entity_recall"], judge=make_judge())["context_entity_recall"]
    assert result.value == 2 / 3
    [request] = server.chat_requests()
    assert request.kind == "entities" and row["reference"] in request.prompt
    assert row["retrieved_contexts"][0] not in request.prompt  # one extraction, from the reference only


def test_context_entity_recall_chinese(server, tmp_path, make_judge):
    row = {"user_input": "长城什么时候成为世界遗产？", "reference": "长城在1987年被列入世界遗产名录，秦始皇曾连接各段城墙。",
           "retrieved_contexts": ["长城是中国古代的军事防御工程。", "1987年，长城被联合国教科文组织列为世界遗产。"]}
    server.script = oracle(lambda field, key: ["长城", "1987年", "世界遗产", "秦始皇"])
    result = score_sample(row, ["context_entity_recall"], judge=make_judge())["context_entity_recall"]
    assert (result.status, result.value) == (Status.OK, 0.75)  # 秦始皇 is in no context
    assert sorted(result.details["found"]) == sorted(["长城", "1987年", "世界遗产"])


def test_context_entity_recall_no_entity_from_the_judge_is_not_applicable(server, tmp_path, make_judge):
    row = {"reference": "It was a fine day.", "retrieved_contexts": ["Sunny."]}
    server.script = oracle()  # default: no entity
    result = score_sample(row, ["context_entity_recall"], judge=make_judge())["context_entity_recall"]
    assert result.status is Status.NOT_APPLICABLE


# --------------------------------------------------------------------------- the rest of the RAGAS extras


def test_nv_context_relevance_two_judges(server, tmp_path, make_judge):
    ratings = {"whole_context_relevance_a": 2, "whole_context_relevance_b": 1}
    server.script = lambda seen: Reply(content=json.dumps(
        build_answer(seen.schema, lambda field, key: ratings[seen.kind])))
    row = {"user_input": "Where is the tower?", "retrieved_contexts": ["The Eiffel Tower is in Paris.", "It is tall."]}
    result = score_sample(row, ["nv_context_relevance"], judge=make_judge())["nv_context_relevance"]
    assert result.value == 0.75
    assert kinds(server) == ["whole_context_relevance_a", "whole_context_relevance_b"]


def test_context_utilization_one_request(server, tmp_path, make_judge):
    server.script = oracle(lambda field, key: {"C2": 0}.get(key, 1))
    row = {"user_input": "Where is the tower?", "response": "The tower is in Paris. It opened in 1889.",
           "retrieved_contexts": ["It is in Paris.", "Cats sleep a lot.", "It opened in 1889."]}
    result = score_sample(row, ["context_utilization"], judge=make_judge())["context_utilization"]
    assert result.value == pytest.approx((1 + 2 / 3) / 2)  # [1, 0, 1]
    [request] = server.chat_requests()
    assert request.kind == "reference_attribution" and "[R2] It opened in 1889." in request.prompt


# --------------------------------------------------------------------------- Azure


AZURE_ROW = {"user_input": "Where is the tower?", "response": "The tower is in Paris. It is made of gold.",
             "retrieved_contexts": ["The Eiffel Tower is in Paris."], "reference": "The Eiffel Tower is in Paris."}


def test_likert_metrics_scores_and_prompts(server, tmp_path, make_judge):
    scores = {"likert_groundedness": 4, "likert_relevance": 2, "likert_retrieval": 5, "likert_response_completeness": 3}
    server.script = lambda seen: Reply(content=json.dumps(
        build_answer(seen.schema, lambda field, key: scores[seen.kind])))
    results = score_sample(AZURE_ROW, ["groundedness", "relevance", "retrieval", "response_completeness"],
                           judge=make_judge())
    assert {m: (r.value, r.passed) for m, r in results.items()} == {
        "groundedness": (4.0, True), "relevance": (2.0, False), "retrieval": (5.0, True),
        "response_completeness": (3.0, True)}
    assert results["groundedness"].reason == "scripted reason"
    assert kinds(server) == sorted(scores)
    grounded = next(r for r in server.chat_requests() if r.kind == "likert_groundedness")
    assert "[C1] The Eiffel Tower is in Paris." in grounded.prompt and AZURE_ROW["response"] in grounded.prompt


def test_likert_score_seven_is_reasked_then_judge_error(server, tmp_path, make_judge):
    server.script = lambda seen: Reply(content=json.dumps({"reason": "great", "score": 7}))
    result = score_sample(AZURE_ROW, ["groundedness"], judge=make_judge())["groundedness"]
    assert result.status is Status.JUDGE_ERROR and result.value is None
    assert "score must be an integer from 1 to 5, got 7" in result.reason
    assert len(server.chat_requests()) == 2
    assert server.chat_requests()[1].body["messages"][-1]["content"].startswith("That answer is invalid")


def test_groundedness_nothing_retrieved_sends_no_request(server, tmp_path, make_judge):
    result = score_sample(dict(AZURE_ROW, retrieved_contexts=[]), ["groundedness", "retrieval"],
                          judge=make_judge())
    assert [(r.value, r.reason) for r in result.values()] == [(1.0, "nothing retrieved")] * 2
    assert server.seen == []


def test_groundedness_pro_shares_the_faithfulness_request(server, tmp_path, make_judge):
    server.script = oracle(lambda field, key: {"S2": 0}.get(key, 1))
    result = evaluate([AZURE_ROW], ["faithfulness", "groundedness_pro"], judge=make_judge())
    frame = result.results.set_index("metric")
    assert frame.loc["faithfulness", "value"] == 0.5
    assert (frame.loc["groundedness_pro", "value"], frame.loc["groundedness_pro", "passed"]) == (0.0, False)
    assert "It is made of gold." in frame.loc["groundedness_pro", "reason"]
    assert len(server.chat_requests()) == 1
    [row] = result.azure_rows()
    assert row["groundedness_pro_label"] is False


def test_document_retrieval_sends_no_request(server, tmp_path, make_judge):
    row = {"id": "q", "retrieval_ground_truth": [{"document_id": "d1", "query_relevance_label": 4},
                                                 {"document_id": "d2", "query_relevance_label": 2}],
           "retrieved_documents": [{"document_id": "d2", "relevance_score": 0.9},
                                   {"document_id": "d1", "relevance_score": 0.1}]}
    result = score_sample(row, ["ndcg", "top1_relevance"], judge=make_judge())
    # By hand (Azure's linear gain): (3 + 15/log2 3) / (15 + 3/log2 3) = 0.737826; top1 = 2
    assert result["ndcg"].value == pytest.approx(0.737826, abs=1e-6)
    assert result["top1_relevance"].value == 2.0
    assert server.seen == []
