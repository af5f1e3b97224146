"""The learned verifier: its probability worked out by hand from a small weights file, the judge's
graded faithfulness as the mean of those probabilities, and the shipped weights on HaluEval rows
they were not trained on (rows 400-499, ``tests/data/halueval_qa/SOURCE.md``)."""
import asyncio
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import spearmanr

from rag_eval.metrics import OfflineJudge, score_sample
from rag_eval.metrics.core.registry import build_metrics
from rag_eval.metrics.core.samples import load_samples
from rag_eval.metrics.core.scoring import score_all
from rag_eval.metrics.errors import SettingsError, command
from rag_eval.metrics.judgements.statement_classification import StatementLists, statement_classification
from rag_eval.metrics.stats.agreement import auroc
from rag_eval.metrics.judges.examples import read_variant
from rag_eval.metrics.judges.verifier import FEATURES, Evidence, Verifier, bow_tokens, features, word_recall
from rag_eval.metrics.text import content_tokens

HELD_OUT = Path(__file__).parents[1] / "data" / "halueval_qa" / "rows_400_499.jsonl"
SWEEP_HELD_OUT = Path(__file__).parents[1] / "data" / "tonic_sweep" / "heldout.jsonl"


def sigmoid(z: float) -> float:
    return 1 / (1 + math.exp(-z))


@pytest.fixture
def handmade(tmp_path) -> Path:
    """Support from word recall alone, minus 3 per missing name: p = sigmoid(-1 + 2 recall - 3 missing)."""
    weights = dict.fromkeys(FEATURES, 0.0) | {"word_recall": 2.0, "missing_names": -3.0}
    path = tmp_path / "handmade.json"
    path.write_text(json.dumps({"name": "handmade", "version": "7", "bias": -1.0, "threshold": 0.6,
                                "features": weights}))
    return path


def evidence_of(context: str) -> Evidence:
    return Evidence.of([context], [content_tokens(context)], [content_tokens(context)])


def test_probability_by_hand(handmade):
    verifier = Verifier(handmade)
    name_in = lambda name, text: name.lower() in text  # noqa: E731
    # "paris", "is" of "Paris is big" are in the context, "big" is not: recall 2/3, no name missing.
    paris = features("Paris is big", 0, None, False, evidence_of("Paris is a city"), name_in)
    assert paris["word_recall"] == pytest.approx(2 / 3) and paris["missing_names"] == 0
    assert verifier.probability(paris) == pytest.approx(sigmoid(-1 + 4 / 3))  # 0.5826
    # "It is big in Rome": only "is" found (1/5) and its one name (a sentence's first word is none) is missing.
    rome = features("It is big in Rome", 0, None, False, evidence_of("Paris is a city"), name_in)
    assert rome["missing_names"] == 1
    assert verifier.probability(rome) == pytest.approx(sigmoid(-1 + 2 / 5 - 3))  # 0.0266
    assert verifier.deciding(rome, 2) == {"missing_names": 1.0, "word_recall": 0.2}


def test_a_denial_is_not_charged_for_the_names_it_denies():
    name_in = lambda name, text: name.lower() in text  # noqa: E731
    values = features("It is big in Rome", 0, None, False, evidence_of("Paris is a city"), name_in, denies=True)
    assert values["missing_names"] == 0 and values["missing_numbers"] == 0


def test_bag_of_words_tokens_en_zh():
    assert bow_tokens("Water boils at 100 °C.") == ["water", "boils", "at", "100", "c"]
    assert bow_tokens("长城很长 in 1987") == ["长城", "城很", "很长", "in", "1987"]
    assert word_recall("长城很长", {"长城", "很长"}) == pytest.approx(2 / 3)
    assert word_recall("", set()) == 1.0


def test_weights_file_with_other_features_is_refused(tmp_path):
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"name": "v", "version": "0", "bias": 0, "threshold": 0.5,
                                "features": {"cosine": 1.0}}))
    with pytest.raises(ValueError, match=r"old\.json: written for another verifier \(its features \['cosine'\] are "
                                         r"not .*\): run `" + re.escape(command("align")) + "` again"):
        Verifier(path)


def test_a_file_edited_under_the_same_name_and_version_is_another_judge(handmade, tmp_path):
    edited = tmp_path / "edited.json"
    model = json.loads(handmade.read_text())
    edited.write_text(json.dumps(model | {"bias": -0.5}))
    first, second = Verifier(handmade), Verifier(edited)
    assert (first.name, second.name) == ("handmade", "handmade")
    assert first.version.startswith("7.") and second.version.startswith("7.") and first.version != second.version
    copy = tmp_path / "copy.json"
    copy.write_text(handmade.read_text())
    assert Verifier(copy).version == first.version  # the content names it, not the path
    assert Verifier().version == json.loads((Path(Verifier().path)).read_text())["version"]  # the shipped one


@pytest.mark.parametrize("change, message", [
    ({"bias": float("nan")}, "finite numbers"),
    ({"threshold": 7}, r"threshold 7 is not in \(0, 1\]"),
    ({"long_threshold": 0}, r"threshold 0 is not in \(0, 1\]"),
    ({"long_words": -1}, "long_words -1 is not a whole number"),
    ({"long_words": 12.5}, "long_words 12.5 is not a whole number"),
    ({"long_words": True}, "long_words True is not a whole number"),
    ({"name": True}, "name and version strings"),
    ({"features": "wrong sign"}, "weights of the wrong sign: word_recall"),
    ({"features": [1]}, "finite numbers"),
])
def test_weights_files_that_cannot_be_a_verifier_are_refused_naming_the_file(handmade, tmp_path, change, message):
    model = json.loads(handmade.read_text())
    if change.get("features") == "wrong sign":
        change = {"features": model["features"] | {"word_recall": -5.0}}
    elif change.get("features") == [1]:
        change = {"features": model["features"] | {"word_recall": [1]}}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(model | change))
    with pytest.raises(SettingsError, match=rf"bad\.json: .*{message}"):
        Verifier(bad)


def test_hostile_weights_files_are_one_settings_error_and_a_bom_is_read_past(handmade, tmp_path):
    model = json.loads(handmade.read_text())
    huge = tmp_path / "huge.json"  # an integer no float holds
    huge.write_text(json.dumps(model).replace('"word_recall": 2.0', '"word_recall": 1' + "0" * 400))
    nested = tmp_path / "nested.json"
    nested.write_text("[" * 100_000 + "]" * 100_000)
    for path in (huge, nested):
        with pytest.raises(SettingsError, match=rf"{path.name}: not a verifier weights file"):
            read_variant(path)
    bom = tmp_path / "bom.json"
    bom.write_bytes(b"\xef\xbb\xbf" + handmade.read_bytes())
    assert Verifier(bom).version == Verifier(handmade).version
    assert Verifier(handmade).shipped is False and Verifier().shipped is True
    assert OfflineJudge(verifier=handmade).name == f"offline-heuristic+handmade-{Verifier(handmade).version}"
    assert OfflineJudge().name == "offline-heuristic"


@pytest.mark.slow
def test_faithfulness_is_the_mean_support(handmade):
    judge = OfflineJudge(verifier=handmade)
    assert re.fullmatch(r"9\+handmade-7\.[0-9a-f]{8}", judge.describe()["version"])
    result = score_sample({"user_input": "What is Paris?", "response": "Paris is a city in France. Paris is big and old.",
                           "retrieved_contexts": ["Paris is a city in France."]}, ["faithfulness"], judge=judge)
    statements = result["faithfulness"].details["statements"]
    # Copied: recall 1 -> sigmoid(1) = 0.7311 (>= 0.6: supported); "paris", "is" of 5 words -> sigmoid(-0.2) = 0.4502.
    assert [s["support"] for s in statements] == [pytest.approx(0.7311, abs=1e-4), pytest.approx(0.4502, abs=1e-4)]
    assert [s["verdict"] for s in statements] == [1, 0]
    assert result["faithfulness"].value == pytest.approx((sigmoid(1) + sigmoid(-0.2)) / 2, abs=1e-4)


def test_a_long_statement_is_supported_at_its_own_threshold(handmade, tmp_path):
    model = json.loads(handmade.read_text())
    longer = tmp_path / "longer.json"
    longer.write_text(json.dumps(model | {"long_words": 5, "long_threshold": 0.4}))
    plain, verifier = Verifier(handmade), Verifier(longer)
    # Without the two keys every statement is judged at the threshold, 0.6, however long.
    assert (plain.long_words, plain.long_threshold) == (0, 0.6)
    assert [plain.supported(p, n) for p, n in ((0.6, 3), (0.59, 3), (0.59, 30))] == [1, 0, 0]
    # With them: up to 5 words at 0.6, from 6 words on at 0.4 (each bound included).
    assert [verifier.supported(p, n) for p, n in ((0.59, 5), (0.6, 5), (0.4, 6), (0.39, 6))] == [0, 1, 1, 0]
    assert verifier.version != plain.version  # the verdict rule is part of what names the weights


@pytest.mark.slow
def test_the_judge_counts_the_words_its_verdict_read(handmade, tmp_path):
    longer = tmp_path / "longer.json"
    longer.write_text(json.dumps(json.loads(handmade.read_text()) | {"long_words": 4, "long_threshold": 0.4}))
    judge = OfflineJudge(verifier=longer)
    assert (judge.describe()["verifier_long_words"], judge.describe()["verifier_long_threshold"]) == (4, 0.4)
    statements = ["Paris is a city in France.", "Paris is big and old.", "Paris is big."]
    verdicts = asyncio.run(judge.support(statements, ["Paris is a city in France."]))
    # Word recalls 6/6, 2/5 and 2/3 (test_faithfulness_is_the_mean_support, test_probability_by_hand):
    # sigmoid(1) = 0.7311 >= 0.4 (6 words > 4); sigmoid(-0.2) = 0.4502 >= 0.4 (5 words > 4);
    # sigmoid(1/3) = 0.5826 < 0.6 (3 words: the threshold of short statements).
    assert [v.evidence["words"] for v in verdicts] == [6, 5, 3]
    assert [v.probability for v in verdicts] == [pytest.approx(sigmoid(z), abs=1e-4) for z in (1, -0.2, 1 / 3)]
    assert [v.verdict for v in verdicts] == [1, 1, 0]
    assert judge.support_words(statements, ["Paris is a city in France."]) == [6, 5, 3]


@pytest.mark.slow
def test_held_out_halueval_ranked_at_least_as_well_as_word_overlap():
    """Strict pairwise accuracy (right answer's faithfulness above the hallucinated one's; ties
    count wrong) on the 100 held-out rows: measured 0.91 for the shipped verifier's faithfulness, 0.85 for its
    0/1 verdicts (groundedness_pro: every statement supported; 0.86 at verifier 2's single threshold of 0.8),
    0.85 for the share of the answer's words found in the knowledge (bench/offline_judge_accuracy.py)."""
    rows = [json.loads(line) for line in HELD_OUT.read_text(encoding="utf-8").splitlines()]
    samples = load_samples([{"id": f"{r['id']}-{k}", "user_input": r["question"], "response": r[k],
                             "retrieved_contexts": [r["knowledge"]]}
                            for r in rows for k in ("right_answer", "hallucinated_answer")])
    results = score_all(samples, build_metrics(["faithfulness", "groundedness_pro"]), OfflineJudge())

    def wins(values: list[float]) -> float:
        return float(np.mean([good > bad for good, bad in zip(values[0::2], values[1::2])]))

    judged = {name: wins([r.value if r.value is not None else -1.0 for r in results if r.metric == name])
              for name in ("faithfulness", "groundedness_pro")}
    overlap_wins = wins([word_recall(s.response, set(bow_tokens(s.retrieved_contexts[0]))) for s in samples])
    assert overlap_wins == pytest.approx(0.85)
    assert judged["faithfulness"] >= 0.88 and judged["faithfulness"] >= overlap_wins
    assert judged["groundedness_pro"] >= overlap_wins


@pytest.mark.slow
def test_answer_correctness_classifies_by_the_rules_not_the_verifiers_threshold():
    # A paraphrase the rules find in the reference ("finished" for "completed"), whose probability of support
    # is below the verifier's threshold: answer_correctness counts it as a true positive, faithfulness grades it.
    judge = OfflineJudge()
    reference = ("The Eiffel Tower was completed in 1889 and stands in Paris, where Gustave Eiffel's company "
                 "designed and built it.")
    statement = "The Eiffel Tower was finished in 1889 in Paris."
    verdict = asyncio.run(judge.support([statement], [reference]))[0]
    assert verdict.evidence["rule_verdict"] == 1 and verdict.verdict == 0
    assert verdict.probability < judge.verifier.threshold
    classified = asyncio.run(statement_classification.offline(judge, StatementLists(
        response_statements=[statement], reference_statements=[reference], response=statement, reference=reference)))
    assert classified.supported == [1]


def paired_interval(statistic, judge: np.ndarray, baseline: np.ndarray, draws: int = 1000) -> tuple[float, float]:
    """Percentile bootstrap 95 % interval of ``statistic(judge[i]) - statistic(baseline[i])`` over rows."""
    rng = np.random.default_rng(0)
    differences = []
    for _ in range(draws):
        i = rng.integers(0, len(judge), len(judge))
        differences.append(statistic(judge[i], i) - statistic(baseline[i], i))
    return tuple(np.nanpercentile(differences, [2.5, 97.5]))


@pytest.mark.slow
def test_held_out_long_answers_not_behind_word_overlap_nor_token_f1():
    """The tonic_validate sweep's 66 held-out answers (tests/data/tonic_sweep): offline faithfulness against
    GPT-4's "fully consistent" (AUROC; measured 0.898, word overlap 0.896) and offline answer_correctness
    against GPT-4's answer_similarity_score (Spearman; 0.255, token F1 0.285, bench/long_answers_bench.py):
    neither is behind its baseline by more than the bootstrap interval of the difference."""
    rows = [json.loads(line) for line in SWEEP_HELD_OUT.read_text(encoding="utf-8").splitlines()]
    samples = load_samples([{k: r[k] for k in ("id", "user_input", "response", "retrieved_contexts", "reference")}
                            for r in rows])
    faithfulness, correctness = (np.array([r.value for r in results]) for results in (
        score_all(samples, build_metrics([name]), OfflineJudge()) for name in ("faithfulness", "answer_correctness")))
    consistent = np.array([float(r["gpt4"]["answer_consistency"] == 1) for r in rows])
    similarity = np.array([r["gpt4"]["answer_similarity_score"] for r in rows])
    overlap = np.array([word_recall(r["response"], set(bow_tokens("\n".join(r["retrieved_contexts"])))) for r in rows])

    def f1(response: str, reference: str) -> float:
        said, wanted = bow_tokens(response), bow_tokens(reference)
        shared = sum(min(said.count(t), wanted.count(t)) for t in set(said))
        return 2 * shared / (len(said) + len(wanted)) if shared else 0.0

    token_f1 = np.array([f1(r["response"], r["reference"]) for r in rows])
    assert auroc(overlap, consistent) == pytest.approx(0.896, abs=5e-4)
    assert spearmanr(token_f1, similarity).statistic == pytest.approx(0.285, abs=5e-4)
    ranks = lambda scores, i: auroc(scores, consistent[i]) if 0 < consistent[i].sum() < len(i) else np.nan  # noqa: E731
    assert paired_interval(ranks, faithfulness, overlap)[1] >= 0
    agrees = lambda scores, i: spearmanr(scores, similarity[i]).statistic  # noqa: E731
    assert paired_interval(agrees, correctness, token_f1)[1] >= 0
