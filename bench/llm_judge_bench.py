"""Requests per row and throughput of the LLM judge against an OpenAI-compatible server.

Scores a dataset with the five core metrics through ``LLMJudge`` and reads the server's
``GET /stats`` (``rag-eval serve-judge-sim`` counts every request) to print: rows,
chat and embedding requests per row, statuses, wall time, rows/s, and the bound
``concurrency / (latency x requests per row)`` in rows/s. With ``--repeat`` it scores
the same rows again on the same judgement cache and prints the requests of that run
(zero expected).

Datasets: a JSONL path, or ``rgb-en`` / ``rgb-zh``: RGB rows with their positive and
negative passages as contexts, keeping rows with 8-10 contexts (CC BY-NC-SA: read from
``--data`` at run time, never copied into the repository; ``tools/fetch_data.py`` fetches it).

Run from the repo root, e.g.::

    .venv/bin/python bench/llm_judge_bench.py examples/amnesty_qa/samples.jsonl \\
        --serve "--latency-ms 200 --jitter-ms 50" --concurrency 16 --repeat
"""
from __future__ import annotations

import argparse
import contextlib
import json
import shlex
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rag_eval.metrics import evaluate  # noqa: E402
from rag_eval.metrics.judges.llm import LLMConfig, LLMJudge  # noqa: E402
from rag_eval.orchestration.judge_sim_command import served  # noqa: E402


def rgb_rows(lang: str, data: Path) -> list[dict]:
    """RGB rows whose positive + negative passages number 8 to 10."""
    rows = []
    for line in (data / "rgb" / f"{lang}_fact.json").read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        answer = r["answer"] if isinstance(r["answer"], str) else ", ".join(
            a[0] if isinstance(a, list) else a for a in r["answer"])
        contexts = r["positive"] + r["negative"]
        if 8 <= len(contexts) <= 10:
            rows.append({"id": f"rgb-{lang}-{r['id']}", "user_input": r["query"], "response": answer,
                         "retrieved_contexts": contexts, "reference": answer})
    return rows


def load(dataset: str, data: Path) -> list[dict]:
    if dataset in ("rgb-en", "rgb-zh"):
        return rgb_rows(dataset[-2:], data)
    return [json.loads(line) for line in Path(dataset).read_text(encoding="utf-8").splitlines() if line.strip()]


def stats(base_url: str, reset: bool = False) -> dict:
    root = base_url.rsplit("/v1", 1)[0]
    request = urllib.request.Request(f"{root}/{'reset' if reset else 'stats'}", method="POST" if reset else "GET")
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)


def run(rows: list[dict], config: LLMConfig, base_url: str) -> dict:
    stats(base_url, reset=True)
    judge = LLMJudge(config)
    start = time.perf_counter()
    result = evaluate(rows, judge=judge)
    wall = time.perf_counter() - start
    judge.close()
    counted = stats(base_url)
    by_endpoint = counted.get("requests", {})
    chat = sum(v for k, v in by_endpoint.items() if "chat" in k)
    embeddings = sum(v for k, v in by_endpoint.items() if "embedding" in k)
    return {"rows": len(rows), "chat_per_row": chat / len(rows), "embeddings_per_row": embeddings / len(rows),
            "wall_s": round(wall, 2), "rows_per_s": round(len(rows) / wall, 2),
            "statuses": dict(Counter(result.results["status"])), "faults": counted.get("faults"),
            "judge_errors": result.results.loc[result.results["status"] == "judge_error", "reason"].str[:80]
            .value_counts().head(3).to_dict()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", help="JSONL path, or rgb-en / rgb-zh")
    parser.add_argument("--serve", help="start `rag-eval serve-judge-sim` with these arguments")
    parser.add_argument("--data", type=Path, default=REPO / "bench" / "data",
                        help="folder holding rgb/ (default bench/data, where tools/fetch_data.py writes)")
    parser.add_argument("--base-url", help="use a running server instead")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--latency-ms", type=float, default=200, help="server latency, for the bound")
    parser.add_argument("--rows", type=int, default=None)
    parser.add_argument("--response-format", default="json_schema", choices=("json_schema", "json_object"))
    parser.add_argument("--repeat", action="store_true", help="score again on the same cache")
    args = parser.parse_args()

    rows = load(args.dataset, args.data)[: args.rows]
    with contextlib.ExitStack() as stack, tempfile.TemporaryDirectory() as scratch:
        base_url = stack.enter_context(served(*shlex.split(args.serve))) if args.serve else args.base_url
        config = LLMConfig(base_url=base_url, api_key="sk-bench", model="judge-sim",
                           embedding_model="judge-sim-embed", concurrency=args.concurrency,
                           response_format=args.response_format, cache_path=f"{scratch}/cache.sqlite",
                           max_retry_wait=2.0, timeout=30)
        first = run(rows, config, base_url)
        per_row = first["chat_per_row"] + first["embeddings_per_row"]
        first["bound_rows_per_s"] = round(args.concurrency / (args.latency_ms / 1000 * per_row), 2)
        print(json.dumps({"dataset": args.dataset, "concurrency": args.concurrency, "run": "first", **first}))
        if args.repeat:
            print(json.dumps({"dataset": args.dataset, "run": "repeat (same cache)", **run(rows, config, base_url)}))

if __name__ == "__main__":
    main()
