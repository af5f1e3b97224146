"""A judge cascade against a full strong run on the simulated endpoint (issue 38): requests and wall time.

For ``--rows`` rows (default 2,000: the repository's FiQA and amnesty_qa examples tiled, every copy
made distinct, as ``bench/pipeline_bench.py`` makes them) and the five core metrics, on one
``rag-eval serve-judge-sim`` (200 ± 50 ms a request, 70 % of verdicts "supported", by default), each path in a fresh project
(instance, datasets, reports, judgement cache):

* ``full``: ``rag-eval run`` with the LLM judge on every row (what the cascade estimates);
* ``cascade``: ``rag-eval run --strong-budget 0.1``: the offline judge on every row, the LLM judge
  on about a tenth of each metric's rows (active sampling, seed 0);
* ``raised``: the cascade's project again at ``--strong-budget 0.2``: requests for the added rows only
  (the smaller sample is inside the larger one; the judgement cache answers it).

It prints the chat and embedding requests each path sent, its wall time, the cascade's requests and
time as shares of the full run's, and per metric the full run's mean beside the cascade's estimate
and interval (whether the interval holds it). Run from the repo root::

    .venv/bin/python bench/cascade_run_bench.py --rows 2000 --concurrency 64
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

from pipeline_bench import main_job, make_rows, write_rows

from rag_eval.orchestration.judge_sim_command import served


def summary_of(project: Path) -> dict:
    return json.loads(next((project / "out").glob("*/summary.json")).read_text(encoding="utf-8"))


def line(name: str, run: dict, full: dict | None = None) -> str:
    shares = "" if full is None else (f"  ({(run['chat'] + run['embeddings']) / (full['chat'] + full['embeddings']):.1%}"
                                      f" of the full run's requests, {run['wall_s'] / full['wall_s']:.2f}× its time)")
    return (f"{name:<9}{run['chat']:>8,} chat {run['embeddings']:>7,} embeddings  {run['wall_s']:>7.1f} s  "
            f"load {os.getloadavg()[0]:.1f}{shares}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency-ms", default="200")
    parser.add_argument("--jitter-ms", default="50")
    parser.add_argument("--verdict-p1", default="0.7", help="the simulated judge's share of supported verdicts")
    parser.add_argument("--budget", default="0.1", help="the cascade's --strong-budget (default 0.1)")
    parser.add_argument("--raised", default="0.2", help="the budget of the second cascade run (default 0.2)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch, \
            served("--latency-ms", args.latency_ms, "--jitter-ms", args.jitter_ms, "--verdict-p1",
                   args.verdict_p1) as url:
        root = url.removesuffix("/v1")
        path = write_rows(make_rows(args.rows), Path(scratch) / "rows.jsonl")
        full_project, cascade_project = Path(scratch) / "full", Path(scratch) / "cascade"
        full = main_job(path, args.rows, args.concurrency, root, full_project)
        print(line("full", full))
        cascade = main_job(path, args.rows, args.concurrency, root, cascade_project, ["--strong-budget", args.budget])
        print(line("cascade", cascade, full))
        raised = main_job(path, args.rows, args.concurrency, root, cascade_project, ["--strong-budget", args.raised])
        print(line("raised", raised, full))
        means, estimated = summary_of(full_project)["metrics"], summary_of(cascade_project)["metrics"]
        print(f"{'metric':<20}{'full run':>9}{'cascade at ' + args.raised + ' [95 % CI]':>36}  n/N       holds")
        for metric, row in means.items():
            block = estimated[metric].get("cascade") or {}
            found = block.get("estimate")
            shown = f"{found['estimate']:.3f} [{found['ci_low']:.3f}, {found['ci_high']:.3f}]" if found else \
                block.get("note", "—")
            holds = found and found["ci_low"] <= row["mean"] <= found["ci_high"]
            print(f"{metric:<20}{row['mean']:>9.3f}{shown:>36}  {block.get('n')}/{block.get('rows')}  {holds}")


if __name__ == "__main__":
    main()
