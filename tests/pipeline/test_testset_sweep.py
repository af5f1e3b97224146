"""The user's offline path: `rag-eval testset DOCS` then `rag-eval sweep` of the sweep.toml it wrote → NDCG."""
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

from rag_eval.metrics.sources.testset import write_testset
from rag_eval.metrics.sources.testset.baseline import bm25
from tests.pipeline.conftest import sweep_cli

ROOT = Path(__file__).resolve().parents[2]


def test_inverse_cloze_set_of_the_example_folder_scores_the_bm25_baseline(tmp_path):
    # The test-set tutorial's offline command: offline even with an endpoint configured (here a dead one, never asked).
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "EMBEDDING_"))}
    env.update(OPENAI_API_KEY="sk-test-unused", OPENAI_BASE_URL="http://127.0.0.1:9/v1", PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "rag_eval.orchestration.cli", "testset", str(ROOT / "examples/testset/docs"),
                           "-n", "40", "--chunk-tokens", "128", "--inverse-cloze", "--out", "set"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "32 questions of 40 asked" in done.stdout and "rag-eval sweep set/sweep.toml" in done.stdout
    folder = tmp_path / "set"
    done = sweep_cli(folder, "--json", "t.json")
    assert done.returncode == 0, done.stderr
    [row] = json.loads((folder / "t.json").read_text())["ranking"]
    # NDCG@10 by hand from the baseline's own ranking: one relevant chunk per query, 1 / log2(rank + 1).
    by_hand = []
    for line in (folder / "questions.jsonl").read_text(encoding="utf-8").splitlines():
        question = json.loads(line)
        ids = [h["id"] for h in bm25(question["user_input"], 10, str(folder / "corpus.jsonl"))]
        relevant = question["retrieval_ground_truth"][0]["document_id"]
        by_hand.append(1 / math.log2(ids.index(relevant) + 2) if relevant in ids else 0.0)
    assert row["configuration"] == "bm25-extractive" and row["target_calls"] == 64 and row["judge_requests"] == 0
    assert row["metrics"]["ndcg"]["mean"] == round(sum(by_hand) / len(by_hand), 4)
    first = row["metrics"]["ndcg"]["mean"]
    # A new corpus for the same questions (each chunk's text moved to the next id) is retrieved again, not reused.
    questions = [json.loads(line) for line in (folder / "questions.jsonl").read_text(encoding="utf-8").splitlines()]
    corpus = [json.loads(line) for line in (folder / "corpus.jsonl").read_text(encoding="utf-8").splitlines()]
    moved = [{**row, "text": corpus[n - 1]["text"]} for n, row in enumerate(corpus)]
    write_testset(folder, questions, moved, {"method": "inverse_cloze", "kept": len(questions)})
    shutil.copy(folder / "corpus.jsonl", folder / "moved.jsonl")  # bm25 here indexes a path once per process
    done = sweep_cli(folder, "--json", "t.json")
    assert done.returncode == 0, done.stderr
    [row] = json.loads((folder / "t.json").read_text())["ranking"]
    by_hand = []
    for question in questions:
        ids = [h["id"] for h in bm25(question["user_input"], 10, str(folder / "moved.jsonl"))]
        relevant = question["retrieval_ground_truth"][0]["document_id"]
        by_hand.append(1 / math.log2(ids.index(relevant) + 2) if relevant in ids else 0.0)
    assert row["target_calls"] >= 32 and row["metrics"]["ndcg"]["mean"] == round(sum(by_hand) / len(by_hand), 4)
    assert row["metrics"]["ndcg"]["mean"] < first - 0.2  # the stale results would have given `first` again

