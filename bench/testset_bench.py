"""What `rag-eval testset` costs and what its offline set measures, on examples/testset/docs.

1. Offline: the inverse-cloze set (``-n 40 --chunk-tokens 128``) and NDCG@10 of the baseline
   BM25 retriever on it, with the query sentences taken out of the corpus (what
   ``rag-eval testset`` writes) and, for comparison, left in.
2. The dry run's plan for ``-n 20``: requests and estimated tokens per question.
3. A real run of ``rag-eval testset -n 20`` against ``rag-eval serve-judge-sim --verdict-p1 0.5``
   (random critic verdicts: each is 1 with p = 1/2, so a question passes both with p = 1/4;
   questions built from the prompt's words; 5 % malformed replies): kept, dropped by cause, requests and tokens per kept question as the server counted them. The
   server is no model: this measures the generator's accounting and its handling of
   rejects, duplicates and malformed output, not question quality.

    .venv/bin/python bench/testset_bench.py
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from llm_judge_bench import stats  # noqa: E402

from rag_eval.metrics.judges.llm import LLMConfig, LLMJudge  # noqa: E402
from rag_eval.metrics.sources.testset import chunk_documents, inverse_cloze, read_documents  # noqa: E402
from rag_eval.metrics.sources.testset.baseline import bm25  # noqa: E402
from rag_eval.metrics.sources.testset.generate import aplan  # noqa: E402
from rag_eval.orchestration.judge_sim_command import served  # noqa: E402

DOCS = REPO / "examples" / "testset" / "docs"


def ndcg_at_10(questions: list[dict], corpus: list[dict], folder: Path) -> float:
    path = folder / "corpus.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in corpus), encoding="utf-8")
    total = 0.0
    for question in questions:
        ids = [h["id"] for h in bm25(question["user_input"], 10, str(path))]
        relevant = question["retrieval_ground_truth"][0]["document_id"]
        total += 1 / math.log2(ids.index(relevant) + 2) if relevant in ids else 0.0
    return total / len(questions)


def main() -> None:
    chunks = chunk_documents(read_documents(DOCS)[0], 128)
    questions, corpus = inverse_cloze(chunks, 40)
    with tempfile.TemporaryDirectory() as tmp:
        masked_dir, kept_dir = Path(tmp, "masked"), Path(tmp, "kept")
        masked_dir.mkdir()
        kept_dir.mkdir()
        masked = ndcg_at_10(questions, corpus, masked_dir)
        unmasked = ndcg_at_10(questions, [{"id": c.id, "text": c.text} for c in chunks], kept_dir)
    print(f"1. inverse cloze: {len(questions)} queries over {len(chunks)} chunks; BM25 NDCG@10 {masked:.4f} with the "
          f"sentences taken out of the corpus, {unmasked:.4f} with them left in")

    judge = LLMJudge(LLMConfig(base_url="http://127.0.0.1:9/v1", api_key="unused", cache_path=None))
    try:
        plans = judge.run(aplan(judge, chunk_documents(read_documents(DOCS)[0]), 20))
    finally:
        judge.close()
    for kind, plan in plans.items():
        tokens = sum(r.prompt_tokens + r.completion_tokens for r in plan.requests)
        print(f"2. dry run -n 20 (chunks of 256 tokens): {kind}: {len(plan.requests)} requests, ~{tokens:,} tokens, "
              f"{len(plan.requests) / 20:.2f} requests and ~{tokens / 20:,.0f} tokens per question")

    with served("--latency-ms", "50", "--jitter-ms", "10", "--malformed", "0.05", "--verdict-p1", "0.5",
                "--seed", "3") as url:
        with tempfile.TemporaryDirectory() as tmp:
            env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "EMBEDDING_"))}
            env.update(OPENAI_BASE_URL=url, OPENAI_API_KEY="bench", OPENAI_MODEL="judge-sim")
            stats(url, reset=True)
            done = subprocess.run([str(REPO / ".venv" / "bin" / "rag-eval"), "testset", str(DOCS), "-n", "20",
                                   "--out", f"{tmp}/set", "--cache-path", f"{tmp}/cache.sqlite"],
                                  env=env, capture_output=True, text=True, timeout=600)
            print(done.stdout, done.stderr[-2000:], sep="\n")
            for line in Path(tmp, "set", "dropped.jsonl").read_text(encoding="utf-8").splitlines()[:6]:
                row = json.loads(line)
                print(f"   dropped {row['synthesizer_name']}: {row['user_input']!r}: {row['dropped']}: {row['reason']}")
            report = json.loads(Path(tmp, "set", "testset.json").read_text(encoding="utf-8"))
            counted = stats(url)
        chat = sum(v for k, v in counted.get("requests", {}).items() if "chat" in k)
        print(f"3. rag-eval serve-judge-sim: kept {report['kept']} of {report['asked']} ({report['kept_by_kind']}), "
              f"dropped {report['dropped']} {report['dropped_by_cause']}; {report['requests_per_kept_question']} "
              f"requests and {report['tokens_per_kept_question']} tokens per kept question; the server counted "
              f"{chat} chat requests, faults {counted.get('faults')}")


if __name__ == "__main__":
    main()
