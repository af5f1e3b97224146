"""``rag-eval serve-judge-sim`` as a user runs it: the simulated provider in its own process on
127.0.0.1, and ``rag-eval run`` judging a few rows against it over HTTP through
``OPENAI_BASE_URL`` and ``OPENAI_API_KEY``."""
import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIQA = ROOT / "examples" / "fiqa" / "samples.jsonl"
RAG_EVAL = Path(sys.executable).parent / "rag-eval"


def test_rag_eval_run_against_the_served_simulator(tmp_path):
    dataset = tmp_path / "three.jsonl"
    dataset.write_text("\n".join(FIQA.read_text(encoding="utf-8").splitlines()[:3]) + "\n", encoding="utf-8")
    server = subprocess.Popen([str(RAG_EVAL), "serve-judge-sim", "--port", "0", "--latency-ms", "20", "--jitter-ms",
                               "10", "--fail-429", "0.5", "--retry-after-s", "0.01", "--seed", "4",
                               "--api-key", "sk-sim-key"], cwd=tmp_path, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline().strip()
        assert line.startswith("listening on http://127.0.0.1:") and line.endswith("/v1")
        url = line.removeprefix("listening on ")
        env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "home"), "OPENAI_BASE_URL": url,
               "OPENAI_API_KEY": "sk-sim-key"}
        run = subprocess.run([str(RAG_EVAL), "run", str(dataset), "--dataset-version", "v1", "--model", "judge-sim",
                              "--metrics", "faithfulness"], cwd=tmp_path, env=env, capture_output=True, text=True,
                             timeout=300)
        assert run.returncode == 0, run.stderr
        with urllib.request.urlopen(url.removesuffix("/v1") + "/stats", timeout=10) as reply:
            stats = json.load(reply)
    finally:
        server.send_signal(signal.SIGTERM)
        _, stopped = server.communicate(timeout=30)
    assert server.returncode == 0 and "serve-judge-sim: stopped" in stopped
    faithfulness = json.loads((tmp_path / "out" / "v1" / "summary.json").read_text(encoding="utf-8"))["metrics"][
        "faithfulness"]
    # Every verdict 1 (the default): each row's faithfulness is 1. Seed 4's fault draws 0.10, 0.07, 0.80, 0.54,
    # 0.11, 0.83 against --fail-429 0.5: the third answer is the sixth request, after three 429s that the judge
    # retried (whatever the order the rows' requests came in); the run counts the six requests it sent.
    assert (faithfulness["mean"], faithfulness["measured"], faithfulness["usage"]["chat_requests"]) == (1.0, 3, 6)
    assert {k: stats[k] for k in ("requests", "status", "faults")} == {
        "requests": {"chat.completions": 6, "models": 1}, "status": {"200": 3, "429": 3}, "faults": {"random_429": 3}}
