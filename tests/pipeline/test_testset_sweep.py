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
    # The README's offline command: offline even with an endpoint configured (here a dead one, never asked).
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "EMBEDDING_"))}
    env.update(OPENAI_API_KEY="sk-test-unused", OPENAI_BASE_URL="http://127.0.0.1:9/v1", PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "orchestration.cli", "testset", str(ROOT / "examples/testset/docs"),
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


def test_a_changed_corpus_re_runs_retrieval(tmp_path):
    # The same question twice; the second corpus moves the words it asks about to the other chunk.
    from metrics.testset import write_testset

    questions = [{"id": "ict-0001", "user_input": "How often should tubeless sealant be topped up?",
                  "retrieval_ground_truth": [{"document_id": "a#1", "query_relevance_label": 1}],
                  "reference_contexts": ["Tubeless sealant dries out."], "synthesizer_name": "inverse_cloze"}]
    sealant, chain = "Top up tubeless sealant twice a year, as it dries out.", "Wax chains stay clean for longer."
    report = {"method": "inverse_cloze", "kept": 1}
    ndcg, calls = [], []
    for first, second in ((sealant, chain), (chain, sealant)):
        write_testset(tmp_path, questions, [{"id": "a#1", "document": "a", "text": first},
                                            {"id": "b#1", "document": "b", "text": second}], report)
        done = sweep_cli(tmp_path, "--json", "t.json")
        assert done.returncode == 0, done.stderr
        [row] = json.loads((tmp_path / "t.json").read_text())["ranking"]
        calls.append(row["target_calls"])
        ndcg.append(row["metrics"]["ndcg"]["mean"])
    # Run 2 retrieves again (1 call); the generator's inputs, the same two texts in the same order, are cached.
    # a#1 first, then second of the two: NDCG@10 1, then 1 / log2(2 + 1) = 0.6309.
    assert calls == [2, 1] and ndcg == [1.0, 0.6309]
