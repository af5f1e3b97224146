"""Judge requests of a backfill over two versions that share rows: sequential vs concurrent.

Versions a and b have the same questions, contexts and references (FiQA's first rows); b's
responses are a's cut to 400 characters. Each mode runs in a fresh project folder with a
fresh judgement cache against the project's test server (``rag_eval.orchestration.judge_sim``, an
OpenAI-compatible server on 127.0.0.1 that counts requests):

* sequential: ``rag-eval backfill`` (in-process, a then b);
* concurrent: two ``rag-eval run`` processes started together, one per version (what the
  daemon's run queue does with ``max_concurrent_runs: 2``).

Equal counts mean concurrent runs never pay twice for one judgement. Run from the repo root::

    .venv/bin/python bench/backfill_requests.py [--rows 4]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from rag_eval.orchestration.judge_sim import JudgeServer  # noqa: E402

BIN = Path(sys.executable).parent


def measure(mode: str, rows: list[dict]) -> tuple[int, int]:
    server = JudgeServer().start()
    try:
        with tempfile.TemporaryDirectory() as folder:
            root = Path(folder)
            env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "DAGSTER_"))}
            env.update(DAGSTER_HOME=str(root / "home"), OPENAI_BASE_URL=server.url, OPENAI_API_KEY="sk-bench",
                       OPENAI_MODEL="judge-test")
            files = {}
            for key, version_rows in (("20261101T000000Z-a", rows),
                                      ("20261102T000000Z-b", [dict(r, response=r["response"][:400]) for r in rows])):
                files[key] = root / f"{key}.jsonl"
                files[key].write_text("".join(json.dumps(r) + "\n" for r in version_rows), encoding="utf-8")
            if mode == "sequential":
                for key, path in files.items():
                    subprocess.run([str(BIN / "rag-eval"), "register", str(path), "--dataset-version", key],
                                   cwd=root, env=env, check=True, capture_output=True, timeout=300)
                subprocess.run([str(BIN / "rag-eval"), "backfill"], cwd=root, env=env, check=True,
                               capture_output=True, timeout=900)
            else:
                processes = [subprocess.Popen([str(BIN / "rag-eval"), "run", str(path), "--dataset-version", key],
                                              cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                             for key, path in files.items()]
                codes = [p.wait(timeout=900) for p in processes]
                assert codes == [0, 0], codes
        return len(server.chat_requests()), len(server.embedding_requests())
    finally:
        server.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4)
    args = parser.parse_args()
    lines = (ROOT / "examples" / "fiqa" / "samples.jsonl").read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines[:args.rows]]
    results = {mode: measure(mode, rows) for mode in ("sequential", "concurrent")}
    for mode, (chat, embeddings) in results.items():
        print(f"{mode:>10}: {chat} chat + {embeddings} embedding requests")
    equal = results["sequential"] == results["concurrent"]
    print("concurrent / sequential requests:", f"{sum(results['concurrent']) / sum(results['sequential']):.3f}",
          "(equal)" if equal else "(NOT equal: concurrent runs paid twice for some judgements)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
