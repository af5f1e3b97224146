"""`rag_eval.metrics.stats.calibrate` and `rag-eval calibrate`: agreement of a judge with human labels.
Statistics checked against values worked out by hand; the LLM judge over real HTTP
against the project's scripted server."""
import json
import math
from pathlib import Path

import numpy as np
import pytest

from rag_eval.metrics import OfflineJudge, calibrate
from rag_eval.metrics.stats.agreement import auroc, kendall, spearman
from rag_eval.metrics.stats.calibrate import read_labels
from rag_eval.orchestration.cli import main
from rag_eval.orchestration.judge_sim import oracle

ROOT = Path(__file__).parents[2]
EXAMPLE = ROOT / "examples" / "calibration" / "labels.jsonl"
DATA = Path(__file__).parents[1] / "data"


def test_statistics_by_hand():
    # Positives {0.9, 0.4} against negatives {0.4, 0.1}: 3 wins and one tie of 4 pairs.
    assert auroc(np.array([0.9, 0.4, 0.4, 0.1]), np.array([1, 1, 0, 0])) == 0.875
    # One swapped neighbour among 4: sum d^2 = 2, 1 - 6*2/(4*15) = 0.8; tau = (5 - 1)/6.
    assert spearman(np.array([1., 2, 3, 4]), np.array([1., 3, 2, 4])) == pytest.approx(0.8)
    assert kendall(np.array([1., 2, 3, 4]), np.array([1., 3, 2, 4])) == pytest.approx(2 / 3)
    assert math.isnan(kendall(np.array([1., 1, 1]), np.array([1., 2, 3])))


@pytest.mark.slow  # the offline encoder
def test_example_with_the_offline_judge_through_the_cli(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    out = tmp_path / "report.json"
    assert main(["calibrate", str(EXAMPLE), "--offline", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["judge"]["judge"] == "offline-heuristic" and report["judge"]["rule_version"] == "9"
    faithfulness = report["metrics"]["faithfulness"]
    assert (faithfulness["format"], faithfulness["n"], faithfulness["accuracy"], faithfulness["ties"]) == \
        ("pairwise", 3, 1.0, 0)
    grounded = report["metrics"]["groundedness_pro"]
    assert grounded["confusion"] == {"human_accept_judge_pass": 2, "human_accept_judge_fail": 0,
                                     "human_reject_judge_pass": 0, "human_reject_judge_fail": 2}
    assert (grounded["accuracy"], grounded["auroc"], grounded["best_threshold"]) == (1.0, 1.0, 1.0)
    relevancy = report["metrics"]["answer_relevancy"]
    assert relevancy["label_type"] == "grade" and {"spearman", "kendall", "spearman_ci95"} <= relevancy.keys()
    assert "faithfulness (pairwise, n=3): accuracy 1.000" in capsys.readouterr().out


@pytest.mark.slow  # the offline encoder
def test_a_tie_counts_as_a_disagreement_and_lists_the_reasons():
    same = {"user_input": "Where is the Louvre?", "response": "The Louvre is in Paris.",
            "retrieved_contexts": ["The Louvre is in Paris."]}
    report = calibrate([{"metric": "faithfulness", "a": same, "b": dict(same), "preferred": "a"}], judge=OfflineJudge())
    result = report["metrics"]["faithfulness"]
    assert (result["accuracy"], result["ties"]) == (0.0, 1)
    assert result["worst_disagreements"][0]["reason_preferred"].startswith("1/1 statements supported by the contexts (")


@pytest.mark.slow  # the offline encoder
def test_unreadable_label_line_names_line_and_field(tmp_path, monkeypatch, capsys):
    labels = tmp_path / "labels.jsonl"
    labels.write_text(EXAMPLE.read_text().splitlines()[0] + "\n" + json.dumps({"sample": {}, "label": 1}) + "\n")
    with pytest.raises(ValueError, match="line 2: field 'metric'"):
        read_labels(labels)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    assert main(["calibrate", str(labels), "--offline"]) == 2
    assert "line 2: field 'metric'" in capsys.readouterr().err


def ragas_answer_correctness() -> list[dict]:
    """The 18 human-reviewed answer_correctness verdicts as binary labels (all accepted:
    the human label is the verdict, 13 accept and 5 reject)."""
    [records] = json.loads((DATA / "ragas_annotated" / "edited_chain_runs.json").read_text()).values()
    return [{"metric": "answer_correctness", "sample": r["metric_input"],
             "label": bool(r["metric_output"] if r["is_accepted"] else 1 - r["metric_output"])} for r in records]


def test_ragas_annotated_with_the_llm_judge_through_the_cli(server, tmp_path, monkeypatch):
    # The scripted judge supports every statement: every answer scores at least 0.75 and passes,
    # so 13 human accepts agree and 5 human rejects disagree: accuracy 13/18.
    server.script = oracle()
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps(r) + "\n" for r in ragas_answer_correctness()))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-SECRET-calibrate")
    monkeypatch.setenv("EMBEDDING_MODEL", "embed-test")
    out = tmp_path / "report.json"
    assert main(["calibrate", str(labels), "--json", str(out)]) == 0
    text = out.read_text()
    assert "sk-test-SECRET-calibrate" not in text
    report = json.loads(text)
    assert report["judge"]["judge"] != "offline-heuristic" and "prompt_versions" in report["judge"]
    result = report["metrics"]["answer_correctness"]
    assert result["confusion"] == {"human_accept_judge_pass": 13, "human_accept_judge_fail": 0,
                                   "human_reject_judge_pass": 5, "human_reject_judge_fail": 0}
    assert result["accuracy"] == round(13 / 18, 4)
    assert server.chat_requests()


@pytest.mark.slow  # the offline encoder
def test_ragas_annotated_with_the_offline_judge():
    report = calibrate(ragas_answer_correctness(), judge=OfflineJudge())
    result = report["metrics"]["answer_correctness"]
    assert result["n"] == 18 and sum(result["confusion"].values()) == 18 - result["unscored"]
    assert 0.0 <= result["auroc"] <= 1.0 and len(result["auroc_ci95"]) == 2
