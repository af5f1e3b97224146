"""The user's offline path: `rag-eval testset DOCS` then `rag-eval sweep` of the sweep.toml it wrote → NDCG."""
import json
import math
import os
import subprocess
import sys
from pathlib import Path

from metrics.testset.baseline import bm25
from tests.pipeline.test_targets import sweep_cli

ROOT = Path(__file__).resolve().parents[2]


def test_inverse_cloze_set_of_the_example_folder_scores_the_bm25_baseline(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "EMBEDDING_"))}
    done = subprocess.run([sys.executable, "-m", "orchestration.cli", "testset", str(ROOT / "examples/testset/docs"),
                           "-n", "40", "--chunk-tokens", "128", "--out", "set"], cwd=tmp_path,
                          env={**env, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=120)
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
