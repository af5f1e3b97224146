"""Requests of a backfill over two versions that share rows: one run after the other, then
both at once in two processes on one judgement cache (claims), against the shared
``judge_server.py`` (its ``/stats`` counts what the provider received).

Version 1 is rows ``[0, 2n/3)`` of the dataset, version 2 rows ``[n/3, n)``: a third of
the rows are in both. The two figures must be equal; the wall times show what running
at once gains. Run from the repo root, e.g.::

    .venv/bin/python bench/concurrent_backfill_bench.py examples/amnesty_qa/samples.jsonl \\
        --serve "--latency-ms 200 --jitter-ms 50"
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from llm_judge_bench import start_server, stats  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def child(base_url: str, cache: str, rows_path: str) -> None:
    """One version's run, as its own process: evaluate the rows, print the statuses."""
    sys.path.insert(0, str(REPO))
    from collections import Counter

    from metrics import evaluate
    from metrics.judges.llm import LLMConfig, LLMJudge

    judge = LLMJudge(LLMConfig(base_url=base_url, api_key="sk-bench", model="judge-sim",
                               embedding_model="judge-sim-embed", cache_path=cache, timeout=30, max_retry_wait=2.0))
    rows = [json.loads(line) for line in Path(rows_path).read_text(encoding="utf-8").splitlines()]
    print(json.dumps(dict(Counter(evaluate(rows, judge=judge).results["status"]))))
    judge.close()


def backfill(base_url: str, versions: list[Path], scratch: Path, at_once: bool) -> dict:
    stats(base_url, reset=True)
    cache = str(scratch / f"cache-{'at-once' if at_once else 'sequential'}.sqlite")
    command = [sys.executable, __file__, "--child", base_url, cache]
    start = time.perf_counter()
    if at_once:
        runs = [subprocess.Popen([*command, str(v)], stdout=subprocess.PIPE, text=True) for v in versions]
        statuses = [json.loads(run.communicate(timeout=1800)[0].splitlines()[-1]) for run in runs]
    else:
        statuses = [json.loads(subprocess.run([*command, str(v)], stdout=subprocess.PIPE, text=True, timeout=1800,
                                              check=True).stdout.splitlines()[-1]) for v in versions]
    wall = time.perf_counter() - start
    received = {k: v for k, v in stats(base_url).get("requests", {}).items() if k != "stats"}
    return {"mode": "at once" if at_once else "sequential", "requests": sum(received.values()),
            "by_endpoint": received, "wall_s": round(wall, 1), "statuses": statuses}


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        child(*sys.argv[2:5])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", help="JSONL path")
    parser.add_argument("--serve", default="--latency-ms 200 --jitter-ms 50",
                        help="arguments of shared/bench/judge_server.py")
    args = parser.parse_args()
    lines = [line for line in Path(args.dataset).read_text(encoding="utf-8").splitlines() if line.strip()]
    third = len(lines) // 3
    process, base_url = start_server(args.serve)
    try:
        with tempfile.TemporaryDirectory() as scratch:
            versions = [Path(scratch) / "v1.jsonl", Path(scratch) / "v2.jsonl"]
            versions[0].write_text("\n".join(lines[:2 * third]) + "\n", encoding="utf-8")
            versions[1].write_text("\n".join(lines[third:]) + "\n", encoding="utf-8")
            print(json.dumps({"dataset": args.dataset, "rows": len(lines), "shared_rows": third}))
            for at_once in (False, True):
                print(json.dumps(backfill(base_url, versions, Path(scratch), at_once)))
    finally:
        process.terminate()
        process.wait(timeout=10)


if __name__ == "__main__":
    main()
