"""The RAGAS metrics beyond the core five, the Azure evaluators and DocumentRetrieval, the
direction-aware summary and the peers' output shapes, with scripted judges.

Every expected value is worked out by hand (shown next to it) or taken from
the peers' own code run on the same input (RAGAS 0.4.3, Azure AI Evaluation 1.18.10), or the regression
cases (BR-NN).
"""
from __future__ import annotations

import math

import pandas as pd
import pytest

from rag_eval.metrics import evaluate
from rag_eval.metrics.reports.aggregate import summarize
from rag_eval.metrics.azure.groundedness import Groundedness
from rag_eval.metrics.azure.groundedness_pro import GroundednessPro
from rag_eval.metrics.azure.relevance import Relevance
from rag_eval.metrics.azure.response_completeness import ResponseCompleteness
from rag_eval.metrics.azure.retrieval import Retrieval
from rag_eval.metrics.evaluate import results_frame
from rag_eval.metrics.reports.formats import azure_rows, ragas_table
from rag_eval.metrics.judges.offline import OfflineJudge
from rag_eval.metrics.rag.answer_correctness import AnswerCorrectness, answer_correctness_score
from rag_eval.metrics.rag.context_entity_recall import ContextEntityRecall, normalise_entity
from rag_eval.metrics.rag.context_utilization import ContextUtilization
from rag_eval.metrics.rag.factual_correctness import FactualCorrectness, f_beta
from rag_eval.metrics.rag.noise_sensitivity import (NoiseSensitivityIrrelevant, NoiseSensitivityRelevant,
                                           noise_sensitivity_score)
from rag_eval.metrics.rag.nv_context_relevance import NVContextRelevance, nv_context_relevance_score
from rag_eval.metrics.core.registry import build_metrics
from rag_eval.metrics.core.results import Direction, MetricResult, Status
from rag_eval.metrics.retrieval.document_retrieval import RankingSettings, document_retrieval
from rag_eval.metrics.core.samples import sample_from_dict

from tests.conftest import ScriptedJudge, regression_case


def sample(**fields):
    base = {"id": "s1", "user_input": "Tell me about the Eiffel Tower."}
    return sample_from_dict({**base, **fields}, row=0)


# --------------------------------------------------------------------------- NoiseSensitivity

# RAGAS's noise sensitivity, an example: contexts c1, c2; c1 supports G1, nothing supports G2 (c1 relevant, c2 not).
REFERENCE_SUPPORT = [[1, 0], [0, 0]]
A1_A4_SUPPORT = [[1, 0],   # A1 correct, by c1
                 [1, 0],   # A2 incorrect, by c1
                 [0, 1],   # A3 incorrect, by c2 only
                 [1, 1]]   # A4 incorrect, by c1 and c2
A1_A4_CORRECT = [1, 0, 0, 0]


def test_noise_sensitivity_score_spec_example_a1_to_a4():
    assert noise_sensitivity_score(REFERENCE_SUPPORT, A1_A4_SUPPORT, A1_A4_CORRECT, "relevant") == 0.5
    assert noise_sensitivity_score(REFERENCE_SUPPORT, A1_A4_SUPPORT, A1_A4_CORRECT, "irrelevant") == 0.25


def test_noise_sensitivity_score_without_a4_both_modes_one_third():
    for mode in ("relevant", "irrelevant"):
        assert noise_sensitivity_score(REFERENCE_SUPPORT, A1_A4_SUPPORT[:3], A1_A4_CORRECT[:3], mode) == \
            pytest.approx(1 / 3)


def test_noise_sensitivity_score_rejects_unequal_rows_empty_reference_and_unknown_mode():
    with pytest.raises(ValueError):
        noise_sensitivity_score([[1, 0], [0]], A1_A4_SUPPORT, A1_A4_CORRECT, "relevant")
    with pytest.raises(ValueError):
        noise_sensitivity_score(REFERENCE_SUPPORT, [[1, 0], [1]], [1, 0], "relevant")
    with pytest.raises(ValueError):  # RAGAS crashes on an empty reference statement list
        noise_sensitivity_score([], A1_A4_SUPPORT, A1_A4_CORRECT, "relevant")
    with pytest.raises(ValueError):
        noise_sensitivity_score(REFERENCE_SUPPORT, A1_A4_SUPPORT, A1_A4_CORRECT, "noisy")


NS_FIELDS = dict(
    response="The tower is in Paris. It opened in 1900. It is 500 m tall. It is made of gold.",
    reference="The tower is in Paris. It opened in 1889.",
    retrieved_contexts=["The Eiffel Tower is in Paris.", "A tower of gold, 500 m tall, opened in 1900."],
)
# Each claim's row of the claim x chunk matrix: G1 = A1 "The tower is in Paris.", G2, then A2-A4.
NS_MATRIX = dict(zip(["The tower is in Paris.", "It opened in 1889.", "It opened in 1900.", "It is 500 m tall.",
                      "It is made of gold."], [*REFERENCE_SUPPORT, *A1_A4_SUPPORT[1:]]))
NS_CLASSIFY = (A1_A4_CORRECT, [1, 0])  # response claims the reference supports; reference claims the response states


def test_noise_sensitivity_metrics_spec_example_both_modes():
    judge = ScriptedJudge(matrix=NS_MATRIX, classify=NS_CLASSIFY)
    relevant = NoiseSensitivityRelevant().score(sample(**NS_FIELDS), judge)
    irrelevant = NoiseSensitivityIrrelevant().score(sample(**NS_FIELDS), judge)
    assert (relevant.status, relevant.value) == (Status.OK, 0.5)
    assert (irrelevant.status, irrelevant.value) == (Status.OK, 0.25)
    # Lower is better, threshold 0.5: 0.5 passes, 0.25 passes.
    assert relevant.direction is Direction.LOWER and relevant.passed is True and irrelevant.passed is True
    assert relevant.details["relevant_contexts"] == [True, False]
    # Wrong claims by a relevant chunk (A2, A4); by an irrelevant one only (A3).
    assert relevant.details["failed"] == ["It opened in 1900.", "It is made of gold."]
    assert irrelevant.details["failed"] == ["It is 500 m tall."]
    # The reference's claims and the response's against the chunks, and their correctness: three judgements.
    assert sorted(judge.calls) == ["context_support_matrix"] * 4 + ["statement_classification"] * 2


def test_noise_sensitivity_reference_without_statements_is_not_applicable():
    judge = ScriptedJudge(matrix=NS_MATRIX, classify=NS_CLASSIFY)
    result = NoiseSensitivityRelevant().score(sample(**{**NS_FIELDS, "reference": "I don't know."}), judge)
    assert result.status is Status.NOT_APPLICABLE and result.value is None
    assert "reference has no claim" in result.reason
    assert judge.calls == []


def test_noise_sensitivity_malformed_matrix_is_judge_error_not_a_crash():
    ragged = {**NS_MATRIX, "It opened in 1900.": [1]}
    result = NoiseSensitivityRelevant().score(sample(**NS_FIELDS), ScriptedJudge(matrix=ragged, classify=NS_CLASSIFY))
    assert result.status is Status.JUDGE_ERROR and "one verdict per chunk" in result.reason
    short = NoiseSensitivityIrrelevant().score(sample(**NS_FIELDS),
                                               ScriptedJudge(matrix=REFERENCE_SUPPORT, classify=NS_CLASSIFY))
    assert short.status is Status.JUDGE_ERROR and "2 matrix rows for 4 items" in short.reason


# --------------------------------------------------------------------------- NVIDIA ContextRelevance


def test_nv_context_relevance_score_spec_example():
    assert nv_context_relevance_score(2, 1) == 0.75  # (1.0 + 0.5) / 2


@pytest.mark.parametrize("ratings", [(3, 1), (2, -1), (10, 2)])
def test_nv_context_relevance_score_refuses_out_of_range(ratings):
    with pytest.raises(ValueError):
        nv_context_relevance_score(*ratings)


def test_nv_context_relevance_metric():
    ok = NVContextRelevance().score(sample(retrieved_contexts=["The tower is in Paris."]), ScriptedJudge(whole=(2, 1)))
    assert (ok.status, ok.value, ok.details["ratings"]) == (Status.OK, 0.75, [2, 1])
    bad = NVContextRelevance().score(sample(retrieved_contexts=["The tower is in Paris."]), ScriptedJudge(whole=(3, 1)))
    assert bad.status is Status.JUDGE_ERROR


@pytest.mark.parametrize("contexts", [[], ["", "   "]])
def test_nv_context_relevance_nothing_retrieved_is_zero_without_judging(contexts):
    judge = ScriptedJudge(whole=(2, 2))
    result = NVContextRelevance().score(sample(retrieved_contexts=contexts), judge)
    assert (result.status, result.value, result.reason) == (Status.OK, 0.0, "nothing retrieved")
    assert judge.calls == []


# --------------------------------------------------------------------------- ContextEntityRecall


def entity_recall(entities, contexts, reference="The Eiffel Tower in Paris opened in 1889."):
    return ContextEntityRecall().score(sample(reference=reference, retrieved_contexts=contexts),
                                       ScriptedJudge(entities=entities))


def test_context_entity_recall_spec_example_is_exactly_two_thirds():
    result = entity_recall(["Eiffel Tower", "Paris", "1889"], ["The Eiffel Tower is in Paris, France."])
    assert result.value == 2 / 3  # RAGAS: 0.6666666644 (epsilon)
    assert result.details["found"] == ["eiffel tower", "paris"]


def test_context_entity_recall_normalises_case_and_punctuation():
    assert entity_recall(["paris"], ["It stands in Paris, the capital."]).value == 1.0  # RAGAS: 0.0


def test_context_entity_recall_counts_duplicates_once():
    # {paris, lyon}: one of two found. RAGAS legacy divides by the list length (1/3).
    assert entity_recall(["Paris", "Paris", "paris", "Lyon"], ["Paris."]).value == 0.5


def test_context_entity_recall_whole_words_only():
    # "Paris" inside "Parisian" is not the entity.
    assert entity_recall(["Paris"], ["A Parisian landmark."]).value == 0.0


def test_context_entity_recall_no_entities_is_not_applicable():
    result = entity_recall([], ["The Eiffel Tower is in Paris."])
    assert result.status is Status.NOT_APPLICABLE and result.reason == "the reference names no entity"


def test_context_entity_recall_chinese_with_offline_judge_is_not_applicable():
    row = sample(user_input="长城有多长？", reference="长城全长约两万一千公里。", retrieved_contexts=["长城全长约两万一千公里。"])
    result = ContextEntityRecall().score(row, OfflineJudge())
    assert result.status is Status.NOT_APPLICABLE
    assert "cannot extract entities" in result.reason and "LLM judge" in result.reason


@pytest.mark.parametrize("raw, normalised", [("  Eiffel   Tower ", "eiffel tower"), ("Paris,", "paris"),
                                             ("ＰＡＲＩＳ", "paris"), ("Straße", "strasse"),
                                             ("1889.", "1889"), ("“长城”", "长城")])
def test_normalise_entity_examples(raw, normalised):
    assert normalise_entity(raw) == normalised


# --------------------------------------------------------------------------- Answer/FactualCorrectness


def test_f_beta_and_answer_correctness_spec_examples():
    assert f_beta(2, 1, 1) == pytest.approx(2 / 3)
    assert answer_correctness_score(2, 1, 1, 0.9) == pytest.approx(0.725)  # .75 * 2/3 + .25 * .9


CORRECTNESS = dict(response="The tower is in Paris. It opened in 1889. It is made of gold.",
                   reference="The tower is in Paris. It opened in 1889.")


@pytest.mark.parametrize("mode, classify, expected", [
    ("f1", ([1, 1, 0], [1, 0]), 2 / 3), ("precision", ([1, 1, 0], [1, 0]), 2 / 3),
    ("recall", ([1, 1, 0], [1, 0]), 2 / 3),
    # tp 1, fp 2, fn 0: precision 1/3, recall 1, f1 2 * (1/3) / (4/3) = 0.5
    ("f1", ([1, 0, 0], [1, 1]), 0.5), ("precision", ([1, 0, 0], [1, 1]), 1 / 3),
    ("recall", ([1, 0, 0], [1, 1]), 1.0),
])
def test_factual_correctness_modes(mode, classify, expected):
    result = FactualCorrectness(mode=mode).score(sample(**CORRECTNESS), ScriptedJudge(classify=classify))
    assert result.status is Status.OK and result.value == pytest.approx(expected)
    assert (result.details["tp"], result.details["fp"]) == (sum(classify[0]), 3 - sum(classify[0]))


def test_answer_correctness_metric():
    result = AnswerCorrectness().score(sample(**CORRECTNESS), ScriptedJudge(classify=([1, 1, 0], [1, 0]), similarity=0.9))
    assert result.value == pytest.approx(0.725)
    assert (result.details["tp"], result.details["fp"], result.details["fn"]) == (2, 1, 1)


@pytest.mark.parametrize("fields", [dict(CORRECTNESS, response="I don't know."),
                                    dict(CORRECTNESS, reference="Sorry, I cannot answer that.")])
def test_correctness_without_statements_is_not_applicable(fields):
    # RAGAS collections sets factuality to 1.0 when either statement list is empty.
    for metric in (AnswerCorrectness(), FactualCorrectness()):
        judge = ScriptedJudge()
        result = metric.score(sample(**fields), judge)
        assert result.status is Status.NOT_APPLICABLE and result.value is None
        assert judge.calls == []


def test_factual_correctness_wrong_verdict_count_is_judge_error():
    result = FactualCorrectness().score(sample(**CORRECTNESS), ScriptedJudge(classify=([1, 1], [1, 0])))
    assert result.status is Status.JUDGE_ERROR and "2 response verdicts for 3 items" in result.reason


def test_factual_correctness_unknown_mode():
    with pytest.raises(ValueError):
        FactualCorrectness(mode="accuracy")


def test_br16_field_aliases_answer_correctness_and_faithfulness():
    rows = regression_case("BR-16")["input"]["rows"]
    result = evaluate(rows, ["answer_correctness", "faithfulness"], judge=ScriptedJudge(similarity=0.9))
    by = result.results.set_index(["row", "metric"])
    assert by.loc[(0, "answer_correctness"), "status"] == "ok"
    assert by.loc[(0, "answer_correctness"), "value"] == pytest.approx(0.975)  # .75 * F1 1 + .25 * .9
    assert by.loc[(0, "faithfulness"), "status"] == "input_error"
    assert "'retrieved_contexts'" in by.loc[(0, "faithfulness"), "reason"]
    for row in (1, 2):
        assert (by.loc[(row, "faithfulness"), "status"], by.loc[(row, "faithfulness"), "value"]) == ("ok", 1.0)


# --------------------------------------------------------------------------- ContextUtilization


def test_context_utilization_average_precision():
    row = sample(response="The tower is in Paris.", retrieved_contexts=["a", "b", "c"])
    result = ContextUtilization().score(row, ScriptedJudge(usefulness=[1, 0, 1]))
    assert result.value == pytest.approx((1 + 2 / 3) / 2)  # 0.8333..., no epsilon
    assert ContextUtilization().score(row, ScriptedJudge(usefulness=[1, 1, 1])).value == 1.0


def test_context_utilization_refusal_is_not_applicable():
    judge = ScriptedJudge(usefulness=[1])
    result = ContextUtilization().score(sample(response="I don't know.", retrieved_contexts=["a"]), judge)
    assert result.status is Status.NOT_APPLICABLE and judge.calls == []


# --------------------------------------------------------------------------- Azure Likert metrics

LIKERT_ROW = dict(response="The tower is in Paris.", retrieved_contexts=["The Eiffel Tower is in Paris."],
                  reference="The Eiffel Tower is in Paris.")


@pytest.mark.parametrize("metric", [Groundedness, Relevance, Retrieval, ResponseCompleteness])
def test_likert_score_four_passes_two_fails(metric):
    four = metric().score(sample(**LIKERT_ROW), ScriptedJudge(likert=(4, "mostly")))
    assert (four.status, four.value, four.passed, four.threshold, four.reason) == (Status.OK, 4.0, True, 3.0, "mostly")
    two = metric().score(sample(**LIKERT_ROW), ScriptedJudge(likert=(2, "weak")))
    assert (two.value, two.passed) == (2.0, False)


@pytest.mark.parametrize("score", [7, 2.5, "5", 0])
def test_likert_out_of_scale_score_is_judge_error(score):
    result = Groundedness().score(sample(**LIKERT_ROW), ScriptedJudge(likert=(score, "x")))
    assert result.status is Status.JUDGE_ERROR and result.value is None
    assert repr(score) in result.reason


def test_groundedness_missing_context_is_input_error_never_self_judged():
    judge = ScriptedJudge(likert=(5, "x"))
    result = Groundedness().score(sample(response="The tower is in Paris."), judge)
    assert result.status is Status.INPUT_ERROR and "'retrieved_contexts'" in result.reason
    assert judge.calls == []


@pytest.mark.parametrize("metric", [Groundedness, Retrieval])
def test_likert_nothing_retrieved_scores_one_without_judging(metric):
    judge = ScriptedJudge(likert=(5, "x"))
    result = metric().score(sample(response="The tower is in Paris.", retrieved_contexts=[]), judge)
    assert (result.status, result.value, result.passed, result.reason) == (Status.OK, 1.0, False, "nothing retrieved")
    assert judge.calls == []


def test_groundedness_pro_all_supported_and_one_unsupported():
    row = sample(response="The tower is in Paris. It is made of gold.", retrieved_contexts=["The tower is in Paris."])
    good = GroundednessPro().score(row, ScriptedJudge(support=[1, 1]))
    assert (good.value, good.passed, good.details["label"]) == (1.0, True, True)
    bad = GroundednessPro().score(row, ScriptedJudge(support=[1, 0]))
    assert (bad.value, bad.passed, bad.details["label"]) == (0.0, False, False)
    assert "It is made of gold." in bad.reason and "The tower is in Paris." not in bad.reason


# --------------------------------------------------------------------------- DocumentRetrieval

GROUND_TRUTH = [{"document_id": d, "query_relevance_label": label}
                for d, label in (("d1", 4), ("d2", 2), ("d3", 3), ("d4", 0), ("d5", 1))]


def docs(*pairs):
    return [{"document_id": d, "relevance_score": s} for d, s in pairs]


def test_document_retrieval_spec_case_a():
    values = document_retrieval(GROUND_TRUTH, docs(("d2", .9), ("d1", .8), ("x9", .7), ("d4", .5)))
    log3 = math.log2(3)
    assert values["ndcg"] == pytest.approx((3 + 15 / log3) / (15 + 7 / log3 + 3 / 2))
    assert values["ndcg"] == pytest.approx(0.5958904, abs=1e-7)
    assert values["xdcg"] == pytest.approx(56.122449, abs=1e-6)  # 25 * (2 + 4 * .6) / 1.96
    assert values["fidelity"] == pytest.approx(0.6785714, abs=1e-7)  # (7 + 31) / 56
    assert (values["top1_relevance"], values["top3_max_relevance"], values["holes"], values["holes_ratio"]) == \
        (2, 4, 1, 0.25)
    assert (values["total_retrieved_documents"], values["total_ground_truth_documents"]) == (4, 5)


def test_document_retrieval_spec_case_d():
    values = document_retrieval(GROUND_TRUTH, docs(("d1", 3), ("d3", 2), ("d2", 1)))
    assert values["ndcg"] == pytest.approx(1.0)
    assert values["xdcg"] == pytest.approx(83.163265, abs=1e-6)  # 25 * (4 + 1.8 + .72) / 1.96
    assert values["fidelity"] == pytest.approx(53 / 56)  # 0.9464286
    assert (values["holes"], values["holes_ratio"]) == (0, 0.0)


def test_document_retrieval_case_e_fidelity_pairs_weights_with_labels():
    truth = [{"document_id": "d1", "query_relevance_label": 10}, {"document_id": "d2", "query_relevance_label": 2}]
    values = document_retrieval(truth, docs(("d2", 1.0)), RankingSettings(label_max=10))
    assert values["fidelity"] == pytest.approx(7 / 2054)  # (2^3 - 1) / (2^11 - 1 + 7); Azure: 0.681818 (bug)


def test_br08_duplicates_count_once_and_ndcg_stays_at_most_one():
    case = regression_case("BR-08")
    metrics = build_metrics(["ndcg", "xdcg", "holes", "total_retrieved_documents"])
    results = {m.name: m.score(sample_from_dict(case["input"], row=0), ScriptedJudge()) for m in metrics}
    assert results["ndcg"].value == case["expected"]["ndcg@3_if_deduplicated"] == 1.0
    assert results["xdcg"].value == pytest.approx(25 * 2 / 1.96)  # d1 counted once, at rank 1
    assert results["holes"].value == 1 and results["total_retrieved_documents"].value == 2


def test_tie_break_input_versus_docid_desc_with_linear_gain():
    truth = [{"document_id": "a", "query_relevance_label": 1}, {"document_id": "b", "query_relevance_label": 3}]
    retrieved = docs(("a", .5), ("b", .5))
    log3 = math.log2(3)
    as_given = document_retrieval(truth, retrieved, RankingSettings(gain="linear", tie_break="input"))
    # order a, b: (1/1 + 3/log2 3) / (3/1 + 1/log2 3) = 2.892789 / 3.630930
    assert as_given["ndcg"] == pytest.approx((1 + 3 / log3) / (3 + 1 / log3))
    assert as_given["ndcg"] == pytest.approx(0.7967076, abs=1e-7)
    assert as_given["top1_relevance"] == 1
    by_id = document_retrieval(truth, retrieved, RankingSettings(gain="linear", tie_break="docid_desc"))
    assert by_id["ndcg"] == 1.0 and by_id["top1_relevance"] == 3  # order b, a


def test_label_outside_scale_is_input_error_naming_the_field():
    row = sample_from_dict({"id": "q", "retrieval_ground_truth": [{"document_id": "d1", "query_relevance_label": 5}],
                            "retrieved_documents": docs(("d1", 1.0))}, row=3)
    result = build_metrics(["ndcg"])[0].score(row, ScriptedJudge())
    assert result.status is Status.INPUT_ERROR
    assert "retrieval_ground_truth" in result.reason and "outside [0, 4]" in result.reason
    assert result.details["field"] == "retrieval_ground_truth"


def test_ground_truth_without_relevant_document_makes_ndcg_not_applicable():
    row = sample_from_dict({"id": "q", "retrieval_ground_truth": [{"document_id": "d1", "query_relevance_label": 0}],
                            "retrieved_documents": docs(("d1", 1.0))}, row=0)
    ndcg, fidelity, top1 = (m.score(row, ScriptedJudge()) for m in build_metrics(["ndcg", "fidelity", "top1_relevance"]))
    assert ndcg.status is Status.NOT_APPLICABLE and "no relevant document" in ndcg.reason
    assert fidelity.status is Status.NOT_APPLICABLE
    assert (top1.status, top1.value) == (Status.OK, 0.0)  # labelled 0: judged like any other label


def test_top1_and_top3_thresholds_are_the_label_scale_midpoint():
    default = build_metrics(["top1_relevance", "top3_max_relevance"])
    assert [m.threshold for m in default] == [2.0, 2.0]
    ten = build_metrics(["top1_relevance", "top3_max_relevance"],
                        options={"top1_relevance": {"label_max": 10}, "top3_max_relevance": {"label_max": 10}})
    assert [m.threshold for m in ten] == [5.0, 5.0]
    row = sample_from_dict({"id": "q", "retrieval_ground_truth": [{"document_id": "d1", "query_relevance_label": 7}],
                            "retrieved_documents": docs(("d1", 1.0))}, row=0)
    result = ten[0].score(row, ScriptedJudge())
    assert (result.status, result.value, result.passed) == (Status.OK, 7.0, True)


# --------------------------------------------------------------------------- summary and formats


def result(metric, value, *, sample_id="s1", row=0, status=Status.OK, passed=None, threshold=0.5,
           direction=Direction.HIGHER, reason="r"):
    return MetricResult(metric=metric, sample_id=sample_id, status=status, value=value, passed=passed,
                        threshold=threshold, direction=direction, reason=reason, judge="scripted", row=row)


def test_overall_average_is_direction_aware_and_leaves_likert_out():
    frame = results_frame([
        result("faithfulness", 0.8, passed=True),
        result("noise_sensitivity_relevant", 0.2, passed=True, direction=Direction.LOWER),
        result("groundedness", 4.0, passed=True, threshold=3.0),
    ])
    summary = summarize(frame)
    assert summary["overall_average"] == 0.8  # (0.8 + (1 - 0.2)) / 2; groundedness (1-5) not mixed in
    assert summary["metrics"]["noise_sensitivity_relevant"]["direction"] == "lower_is_better"


def test_azure_rows_keys_and_result_words():
    frame = results_frame([
        result("groundedness", 4.0, passed=True, threshold=3.0, reason="grounded"),
        result("groundedness", 2.0, sample_id="s2", row=1, passed=False, threshold=3.0),
        result("groundedness", None, sample_id="s3", row=2, status=Status.NOT_APPLICABLE, threshold=3.0),
        result("groundedness", None, sample_id="s4", row=3, status=Status.JUDGE_ERROR, threshold=3.0),
        result("groundedness_pro", 1.0, passed=True, threshold=1.0, reason="all supported"),
        result("groundedness_pro", 0.0, sample_id="s2", row=1, passed=False, threshold=1.0),
        result("ndcg", 0.5958904, passed=True),
        result("holes", 1.0, passed=False, threshold=0.0, direction=Direction.LOWER),
        result("faithfulness", 1.0, sample_id="s5", row=4, passed=True),
    ])
    rows = {r["id"]: r for r in azure_rows(frame)}
    assert set(rows) == {"s1", "s2", "s3", "s4"}  # s5 has no Azure metric
    first = rows["s1"]
    assert (first["groundedness"], first["gpt_groundedness"], first["groundedness_reason"],
            first["groundedness_result"], first["groundedness_threshold"]) == (4.0, 4.0, "grounded", "pass", 3.0)
    assert first["groundedness_pro_label"] is True and first["groundedness_pro_reason"] == "all supported"
    assert rows["s2"]["groundedness_result"] == "fail" and rows["s2"]["groundedness_pro_label"] is False
    assert rows["s3"]["groundedness_result"] == "not_applicable" and rows["s3"]["groundedness"] is None
    assert rows["s4"]["groundedness_result"] == "error"
    assert (first["ndcg@3"], first["ndcg@3_result"], first["ndcg@3_threshold"]) == (0.5958904, "pass", 0.5)
    assert (first["holes"], first["holes_result"], first["holes_threshold"],
            first["holes_higher_is_better"]) == (1, "fail", 0, False)
    assert first["ndcg@3_higher_is_better"] is True


def test_ragas_table_one_row_per_sample_one_column_per_metric():
    frame = results_frame([
        result("faithfulness", 0.75, passed=True),
        result("answer_correctness", 0.725, passed=True),
        result("faithfulness", None, sample_id="s2", row=1, status=Status.INPUT_ERROR),
        result("answer_correctness", 0.5, sample_id="s2", row=1, passed=True),
    ])
    table = ragas_table(frame)
    assert len(table) == 2
    assert [c for c in table.columns if c not in ("row", "id", "conversation_id", "turn")] == ["faithfulness", "answer_correctness", "unscored"]
    assert table["faithfulness"].iloc[0] == 0.75 and pd.isna(table["faithfulness"].iloc[1])
    assert table["answer_correctness"].tolist() == [0.725, 0.5]
    assert table["id"].tolist() == ["s1", "s2"]


def test_ndcg_with_negative_labels_scores_the_row_and_an_overflowing_label_is_its_input_error():
    truth = [{"document_id": "a", "query_relevance_label": -1}, {"document_id": "b", "query_relevance_label": 2}]
    rows = [{"id": "bad-first", "retrieval_ground_truth": truth,
             "retrieved_documents": [{"document_id": "a", "relevance_score": 0.9}]},
            {"id": "both", "retrieval_ground_truth": truth,
             "retrieved_documents": [{"document_id": "a", "relevance_score": 0.9},
                                     {"document_id": "b", "relevance_score": 0.5}]},
            {"id": "huge", "retrieval_ground_truth": [{"document_id": "a", "query_relevance_label": 1500}],
             "retrieved_documents": [{"document_id": "a", "relevance_score": 0.9}]}]
    metrics = build_metrics(["ndcg"], options={"ndcg": {"label_min": -1, "label_max": 2000}})
    result = evaluate(rows, metrics=metrics).results.set_index("sample_id")
    # A label of -1 gains 0 (trec_eval counts only positive gains); ideal DCG = 2^2 - 1 = 3.
    assert result.loc["bad-first", "value"] == 0.0  # Azure's gain 2^-1 - 1 = -0.5 made it -1/6
    assert result.loc["both", "value"] == pytest.approx((3 / math.log2(3)) / 3)
    assert result.loc["huge", "status"] == Status.INPUT_ERROR.value
    assert "field 'retrieval_ground_truth': a label is too large for exponential gain" in result.loc["huge", "reason"]
