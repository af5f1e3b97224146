"""RAGChecker's diagnostics on a hand-worked row: claims and verdicts written out, each metric's value
worked out by hand from RAGChecker's formulas (ragchecker/computation.py), and the cases where we differ."""
import pytest

from rag_eval.metrics.diagnostics.claims import check_claims
from rag_eval.metrics.diagnostics.overall import f1
from rag_eval.metrics.judges.base import JudgeError
from rag_eval.metrics.core.registry import build_metrics, builtin_registry
from rag_eval.metrics.core.results import Direction, Status
from rag_eval.metrics.core.samples import sample_from_dict

from tests.conftest import ScriptedJudge

QUESTION = "What do we know about the Eiffel Tower?"
# Response claims A1-A5 and reference claims G1-G3 (the texts' sentences); chunks C1-C3.
RESPONSE = ("The tower is in Paris. It is 500 m tall. It was designed by Gustave Eiffel. It has nine floors. "
            "It is made of gold.")
REFERENCE = "The tower is in Paris. It opened in 1889. It was designed by Gustave Eiffel."
CHUNKS = ["The Eiffel Tower in Paris opened in 1889 and is 500 m tall.",  # C1
          "A tower of gold, 500 m tall, opened in 1900.",                  # C2
          "Gustave Eiffel's company built bridges."]                       # C3
# Claim x chunk verdicts (RAGChecker's retrieved2answer for G, retrieved2response for A), one row per claim.
MATRIX = {"The tower is in Paris.": [1, 0, 0],              # G1 = A1
          "It opened in 1889.": [1, 0, 0],                  # G2
          "It was designed by Gustave Eiffel.": [0, 0, 0],  # G3 = A3: in no chunk
          "It is 500 m tall.": [1, 1, 0],                   # A2
          "It has nine floors.": [0, 0, 0],                 # A4
          "It is made of gold.": [0, 1, 0]}                 # A5
# answer2response (the reference supports A1..A5), response2answer (the response states G1..G3).
CORRECT = [1, 0, 1, 0, 0]
STATED = [1, 0, 1]
ROW = {"id": "tower", "user_input": QUESTION, "response": RESPONSE, "reference": REFERENCE,
       "retrieved_contexts": CHUNKS}

# By hand: relevant chunks (supporting some G) = C1 only; recalled G = G1, G2; faithful A = A1, A2 (C1), A5 (C2).
EXPECTED = {
    "overall_precision": 2 / 5,              # mean(answer2response) = A1, A3
    "overall_recall": 2 / 3,                 # mean(response2answer) = G1, G3
    "overall_f1": 0.5,                       # 2 * 0.4 * 2/3 / (0.4 + 2/3)
    "claim_recall": 2 / 3,                   # G1, G2 in some chunk; G3 in none
    "retriever_context_precision": 1 / 3,    # C1 of C1-C3 holds a G
    "generator_context_utilization": 1 / 2,  # recalled {G1, G2} & stated {G1, G3} = {G1}: 1 of 2
    "noise_sensitivity_relevant": 1 / 5,     # wrong & by a relevant chunk: A2 (C1)
    "noise_sensitivity_irrelevant": 1 / 5,   # wrong & by an irrelevant chunk only: A5 (C2); A2 is by C1 too
    "hallucination": 1 / 5,                  # in no chunk & wrong: A4
    "self_knowledge": 1 / 5,                 # in no chunk & correct: A3
    "generator_faithfulness": 3 / 5,         # in some chunk: A1, A2, A5
}


def judge():
    return ScriptedJudge(matrix=MATRIX, classify=(CORRECT, STATED))


def score(name, row=ROW, judged=None):
    [metric] = build_metrics([name])
    return metric.score(sample_from_dict(row, row=0), judged or judge())


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_diagnostic_on_the_hand_worked_row(name):
    result = score(name)
    assert result.status is Status.OK
    assert result.value == pytest.approx(EXPECTED[name], abs=1e-12)


def test_the_diagnostics_selection_and_directions():
    families = builtin_registry().families
    assert sorted(families["diagnostics"]) == sorted(EXPECTED)
    assert "noise_sensitivity_relevant" in families["ragas"]  # RAGAS's metric, in both selections
    lower = {"noise_sensitivity_relevant", "noise_sensitivity_irrelevant", "hallucination", "self_knowledge"}
    for name in EXPECTED:
        [metric] = build_metrics([name])
        assert metric.direction is (Direction.LOWER if name in lower else Direction.HIGHER)


def test_failed_claims_are_the_ones_counted_against_each_metric():
    failed = {name: score(name).details["failed"] for name in EXPECTED}
    assert failed["claim_recall"] == ["It was designed by Gustave Eiffel."]
    assert failed["hallucination"] == ["It has nine floors."]
    assert failed["self_knowledge"] == ["It was designed by Gustave Eiffel."]
    assert failed["noise_sensitivity_relevant"] == ["It is 500 m tall."]
    assert failed["noise_sensitivity_irrelevant"] == ["It is made of gold."]
    assert failed["generator_context_utilization"] == ["It opened in 1889."]
    assert failed["generator_faithfulness"] == ["It was designed by Gustave Eiffel.", "It has nine floors."]
    assert failed["overall_recall"] == ["It opened in 1889."]
    assert [f.split(":")[0] for f in failed["retriever_context_precision"]] == ["C2", "C3"]
    assert score("claim_recall").details["claims"][0] == {"claim": "The tower is in Paris.", "in_chunks": [1]}


def test_one_claim_matrix_per_row_asks_each_check_once():
    """Three judgements cover every check of the row: G x chunks, A x chunks, correctness both ways."""
    scripted = judge()
    checked = ScriptedJudge.run(scripted, check_claims(sample_from_dict(ROW, row=0), scripted,
                                                       ["reference_in_chunks", "response_in_chunks", "correctness"]))
    assert sorted(scripted.calls) == ["context_support_matrix", "context_support_matrix", "statement_classification"]
    assert checked.reference_in_chunks.astype(int).tolist() == [[1, 0, 0], [1, 0, 0], [0, 0, 0]]
    assert checked.recalled.tolist() == [True, True, False] and checked.relevant.tolist() == [True, False, False]
    assert checked.faithful.tolist() == [True, True, False, False, True]
    # What a metric reads of its checks: one not asked is a LookupError (that row's judge_error), never None.
    only = ScriptedJudge.run(scripted, check_claims(sample_from_dict(ROW, row=0), scripted, ["correctness"]))
    assert only.verdicts("response_correct").astype(int).tolist() == CORRECT
    with pytest.raises(LookupError, match=r"^reference_in_chunks was not checked"):
        only.verdicts("reference_in_chunks")
    # A metric asks only its own checks: claim recall the reference's matrix, faithfulness the response's.
    for name, asked in (("claim_recall", ["context_support_matrix"]), ("overall_recall", ["statement_classification"]),
                        ("generator_faithfulness", ["context_support_matrix"])):
        scripted = judge()
        score(name, judged=scripted)
        assert scripted.calls == asked


def test_f1_is_zero_unless_precision_and_recall_are_positive():
    assert f1(0.5, 2 / 3) == pytest.approx(4 / 7)
    assert f1(0.0, 1.0) == 0.0 and f1(1.0, 0.0) == 0.0


# --------------------------------------------------------------------------- where we differ from RAGChecker

def test_a_refusal_recalls_nothing_and_has_no_precision():
    """RAGChecker scores a response without claims 0 on everything; here what needs its claims is
    not_applicable, and recall and F1 are 0 (it states none of the reference's), with no judgement asked."""
    refusal = dict(ROW, response="I'm sorry, I don't know.")
    scripted = judge()
    assert score("overall_precision", refusal, scripted).status is Status.NOT_APPLICABLE
    assert score("hallucination", refusal, scripted).status is Status.NOT_APPLICABLE
    assert score("generator_faithfulness", refusal, scripted).reason.startswith("no_factual_statements")
    assert score("overall_recall", refusal, scripted).value == 0.0
    assert score("overall_f1", refusal, scripted).value == 0.0
    assert scripted.calls == []
    # The retriever's metrics do not read the response.
    assert score("claim_recall", refusal).value == pytest.approx(2 / 3)


def test_nothing_retrieved():
    """No chunk: claim recall, context precision and faithfulness 0 (as RAGChecker and the core metrics);
    utilization and noise sensitivity not_applicable; hallucination and self-knowledge by the formula
    (RAGChecker returns 0, as if no claim were made up): every claim is in no chunk."""
    empty = dict(ROW, retrieved_contexts=[])
    scripted = judge()
    values = {name: score(name, empty, scripted) for name in EXPECTED}
    assert values["claim_recall"].value == 0.0 and values["retriever_context_precision"].value == 0.0
    assert values["generator_faithfulness"].value == 0.0
    assert values["hallucination"].value == pytest.approx(3 / 5)  # A2, A4, A5 are wrong
    assert values["self_knowledge"].value == pytest.approx(2 / 5)  # A1, A3 are right
    for name in ("generator_context_utilization", "noise_sensitivity_relevant", "noise_sensitivity_irrelevant"):
        assert values[name].status is Status.NOT_APPLICABLE
    assert "context_support_matrix" not in scripted.calls  # nothing retrieved supports nothing: not asked


def test_utilization_when_no_reference_claim_was_retrieved_is_not_the_generators_fault():
    nothing_needed = {claim: [0, 0, 0] for claim in MATRIX}
    result = score("generator_context_utilization", judged=ScriptedJudge(matrix=nothing_needed,
                                                                         classify=(CORRECT, STATED)))
    assert result.status is Status.NOT_APPLICABLE and "claim_recall" in result.reason
    assert score("claim_recall", judged=ScriptedJudge(matrix=nothing_needed)).value == 0.0


def test_a_reference_without_claims():
    evasive = dict(ROW, reference="I don't know.")
    for name in EXPECTED:
        result = score(name, evasive)
        if name == "generator_faithfulness":  # reads no reference
            assert result.value == pytest.approx(3 / 5)
        else:
            assert result.status is Status.NOT_APPLICABLE, name


def test_a_judge_answering_the_wrong_shape_is_a_judge_error():
    short = {**MATRIX, "It has nine floors.": [0, 0]}
    assert score("hallucination", judged=ScriptedJudge(matrix=short, classify=(CORRECT, STATED))).status \
        is Status.JUDGE_ERROR
    result = score("overall_precision", judged=ScriptedJudge(matrix=MATRIX, classify=(CORRECT[:4], STATED)))
    assert result.status is Status.JUDGE_ERROR and "4 response verdicts for 5 items" in result.reason
    with pytest.raises(JudgeError):
        ScriptedJudge.run(judge(), check_claims(sample_from_dict(ROW, row=0), ScriptedJudge(matrix=short),
                                                ["response_in_chunks"]))
