"""The offline judge on a small bilingual fixture of our own wording, and the
judge-dependent regression cases. Orderings and verdicts, not exact similarities."""
import json
from pathlib import Path

import pytest

from rag_eval.metrics import OfflineJudge, Status, evaluate, score_sample
from rag_eval.metrics.judgements.context_relevance import context_relevance
from tests.judges.ruled import ruled

pytestmark = pytest.mark.slow  # the test server or the offline encoder, in every test

CASES = {json.loads(line)["id"]: json.loads(line)
         for line in (Path(__file__).parents[1] / "data" / "regression_cases.jsonl").read_text().splitlines()}
EN_CONTEXT = ("The Great Wall of China was built over many centuries. Its best-known sections were built during "
              "the Ming dynasty. In 1987 it was listed as a UNESCO World Heritage Site.")
ZH_CONTEXT = "长城修建了许多个世纪。最著名的部分建于明朝。1987年，长城被列入联合国教科文组织世界遗产名录。"


@pytest.fixture(scope="module")
def judge():
    return OfflineJudge()


@pytest.mark.parametrize("claim, expected", [
    ("The most famous parts of the wall date from the Ming dynasty.", 1),   # paraphrase
    ("UNESCO listed the Great Wall as a World Heritage Site in 1987.", 1),  # paraphrase
    ("The Great Wall is visible from the Moon with the naked eye.", 0),     # not in the context
    ("It was listed as a World Heritage Site in 1995.", 0),                 # changed number
    ("Its best-known sections were built during the Qin dynasty.", 0),      # changed name
    ("最著名的部分是明朝修建的。", 1),
    ("长城在1995年被列入世界遗产名录。", 0),
    ("长城可以从月球上用肉眼看到。", 0),
])
def test_support_verdicts_en_zh(judge, claim, expected):
    context = ZH_CONTEXT if any("\u4e00" <= ch <= "\u9fff" for ch in claim) else EN_CONTEXT
    assert judge.run(judge.support([claim], [context]))[0].evidence["rule_verdict"] == expected


def test_relevance_orders_relevant_above_irrelevant(judge):
    ratings = judge.run(judge.ask(context_relevance, context_relevance.Input(
        user_input="When was the Great Wall listed by UNESCO?",
        contexts=[EN_CONTEXT, "Bread rises when yeast releases gas into the dough."]))).ratings
    assert sum(ratings[0]) / 2 >= 1 > sum(ratings[1]) / 2


def test_br01_refusal_is_not_applicable_and_irrelevant(judge):
    results = score_sample(CASES["BR-01"]["input"], ["faithfulness", "answer_relevancy"], judge=judge)
    assert results["faithfulness"].status is Status.NOT_APPLICABLE
    assert results["faithfulness"].reason.startswith("no_factual_statements")
    assert results["answer_relevancy"].value <= CASES["BR-01"]["expected"]["answer_relevancy_max"]


def test_br03_chinese_answer_is_two_statements_fully_supported(judge):
    case = CASES["BR-03"]
    results = score_sample(case["input"], ["faithfulness", "context_recall", "answer_relevancy"], judge=judge)
    assert len(results["faithfulness"].details["statements"]) == case["expected"]["n_statements"]
    assert ruled(results["faithfulness"]) == case["expected"]["faithfulness"]
    recalled = results["context_recall"].details["statements"]
    assert case["expected"]["context_recall"] == 1.0 and all(s["support"] > 0.5 for s in recalled)
    assert results["context_recall"].value == pytest.approx(sum(s["support"] for s in recalled) / len(recalled))
    assert results["answer_relevancy"].status is Status.OK


def test_br07_context_precision_is_rank_aware(judge):
    case = CASES["BR-07"]["input"]
    sample = {"user_input": case["user_input"], "reference": case["reference"]}
    plain = score_sample(dict(sample, retrieved_contexts=case["retrieved_contexts"]), ["context_precision"], judge=judge)
    swapped = score_sample(dict(sample, retrieved_contexts=case["swapped_retrieved_contexts"]), ["context_precision"],
                           judge=judge)
    assert plain["context_precision"].value == CASES["BR-07"]["expected"]["context_precision"]
    assert swapped["context_precision"].value == CASES["BR-07"]["expected"]["context_precision_swapped"]


def test_br18_identical_inputs_score_identically(judge):
    sample = CASES["BR-18"]["input"]["sample"]
    first = evaluate([sample], judge=judge).results
    second = evaluate([sample], judge=OfflineJudge()).results
    assert first[["metric", "status", "value"]].equals(second[["metric", "status", "value"]])
    expected = ruled(score_sample(sample, ["faithfulness"], judge=OfflineJudge())["faithfulness"])
    assert expected == CASES["BR-18"]["expected"]["faithfulness"]


def test_forget_empties_what_the_judge_remembers_and_changes_no_result():
    """``OfflineJudge.forget`` (called when a version's scoring ends, so the summary's step has
    the memory): every memo, cached vector, token row and remembered ``support`` call goes, and
    the same row scores the same afterwards, evidence included."""
    import rag_eval.metrics.text
    from rag_eval.metrics.judges.encoder import _model

    judge = OfflineJudge()
    row = {"id": "w1", "user_input": "When was the Great Wall listed?", "response": "It was listed in 1987.",
           "retrieved_contexts": [EN_CONTEXT], "reference": "In 1987."}
    first = score_sample(row, ["faithfulness", "context_recall"], judge=judge)
    assert judge._encoder._vectors and judge._remembered_support.cache_info().currsize
    assert sum(memo.cache_info().currsize for memo in rag_eval.metrics.text.memos._MEMOS) > 0
    judge.forget()
    assert not judge._encoder._vectors and not _model(judge.threads)._rows and not _model(judge.threads)._x
    assert judge._remembered_support.cache_info().currsize == 0
    assert sum(memo.cache_info().currsize for memo in rag_eval.metrics.text.memos._MEMOS) == 0
    again = score_sample(row, ["faithfulness", "context_recall"], judge=judge)
    assert {n: (r.value, r.details) for n, r in again.items()} == {n: (r.value, r.details) for n, r in first.items()}
    assert ruled(first["faithfulness"]) == 1.0


def test_a_window_of_rows_is_encoded_in_a_few_model_calls_and_no_result_changes(monkeypatch):
    """The offline judge encodes at once the texts a window of rows will embed
    (``OfflineJudge.prefetch``, ``PREFETCH_ROWS`` rows): the 30 fiqa rows with the five core
    metrics call the model under a quarter as often as without it (62 calls against 277), and every result
    (status, value, reason, details) is the same."""
    from rag_eval.metrics.judges.encoder import _model

    model, calls = _model(1), []
    encode = model.encode
    monkeypatch.setattr(model, "encode", lambda texts: calls.append(len(texts)) or encode(texts))
    frames = {}
    for prefetch_rows in (None, OfflineJudge.prefetch_rows):
        judge = OfflineJudge()
        judge.prefetch_rows = prefetch_rows
        calls.clear()
        frames[prefetch_rows] = evaluate(Path(__file__).parents[2] / "examples" / "fiqa" / "samples.jsonl",
                                         judge=judge).results, len(calls)
    (lazy, lazy_calls), (ahead, ahead_calls) = frames.values()
    assert ahead_calls * 4 < lazy_calls
    assert ahead.equals(lazy) and len(ahead) == 150
