"""How a user measures a custom metric's agreement with their own labels: `rag-eval calibrate`.

The two aspect critics the RAGAS docs' reviewers labelled (``helpfulness``, ``summary_accuracy``)
are defined in ``examples/custom_metrics/custom_metrics.yaml``; their 40 human labels are
``examples/custom_metrics/labels.jsonl``. This runs, as a user would, in a fresh process::

    rag-eval calibrate examples/custom_metrics/labels.jsonl \\
        --custom-metrics examples/custom_metrics/custom_metrics.yaml --json report.json

twice (the second answered from the judgement cache), and prints per metric the accuracy at
the threshold with its bootstrap interval, AUROC, the confusion table, and the requests sent
per metric per labelled row, counted by the endpoint.

The endpoint: the one the environment configures (``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` /
``OPENAI_MODEL``: a real model's agreement), else ``rag-eval serve-judge-sim`` on a free
127.0.0.1 port (random verdicts, p=0.5, and
``--malformed`` of its replies broken: a check that the path runs, re-asks and counts, not
a model's figure). Run from the repo root::

    .venv/bin/python bench/custom_metric_calibration.py [--malformed 0.1] [--json out.json]
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from rag_eval.orchestration.judge_sim_command import served

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "custom_metrics"


@contextlib.contextmanager
def endpoint(malformed: float):
    """``(base_url, note)``: the configured endpoint, else ``rag-eval serve-judge-sim`` (stopped after)."""
    if os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_KEY"):
        yield os.environ.get("OPENAI_BASE_URL"), "the configured endpoint"
        return
    with served("--verdict-p1", "0.5", "--seed", "1", "--malformed", str(malformed)) as url:
        yield url, f"rag-eval serve-judge-sim (random verdicts p=0.5, {malformed:g} malformed)"


def calibrate(base_url: str | None, folder: Path) -> tuple[dict, float]:
    """``rag-eval calibrate`` of the example labels in a fresh process in ``folder`` (its judgement
    cache too): its report and seconds."""
    env = {**os.environ, "DAGSTER_HOME": str(folder / "dagster_home")}
    if base_url:
        env.setdefault("OPENAI_API_KEY", "sk-bench")
        env["OPENAI_BASE_URL"] = base_url
        env.setdefault("OPENAI_MODEL", "judge-sim")
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "rag_eval.orchestration.cli", "calibrate", str(EXAMPLE / "labels.jsonl"),
                           "--custom-metrics", str(EXAMPLE / "custom_metrics.yaml"), "--json", str(folder / "report.json")],
                          cwd=folder, env={**env, "PYTHONPATH": str(REPO)}, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"rag-eval calibrate failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return json.loads((folder / "report.json").read_text(encoding="utf-8")), time.perf_counter() - start


def chat_requests(base_url: str | None, scripted: bool) -> int | None:
    """Chat requests the scripted server received so far (its ``/stats``); ``None`` for a configured endpoint."""
    if not scripted:
        return None
    with urllib.request.urlopen(base_url.removesuffix("/v1") + "/stats", timeout=10) as reply:
        return int(json.load(reply)["requests"].get("chat.completions", 0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--malformed", type=float, default=0.1, help="share of the scripted server's replies broken")
    parser.add_argument("--json", type=Path, help="write both reports to this file")
    args = parser.parse_args()
    labels = [json.loads(line) for line in (EXAMPLE / "labels.jsonl").read_text(encoding="utf-8").splitlines()]
    rows = {m: sum(r["metric"] == m for r in labels) for m in dict.fromkeys(r["metric"] for r in labels)}
    distinct = len({(r["metric"], json.dumps(r["sample"], sort_keys=True)) for r in labels})
    with tempfile.TemporaryDirectory() as tmp, endpoint(args.malformed) as (url, note):
        scripted = note.startswith("rag-eval serve-judge-sim")
        print(f"endpoint: {note}; {len(labels)} labels ({distinct} distinct rows): "
              + ", ".join(f"{m} {n}" for m, n in rows.items()))
        first, seconds = calibrate(url, Path(tmp))
        sent_first = chat_requests(url, scripted)
        second, seconds_cached = calibrate(url, Path(tmp))
        sent_second = chat_requests(url, scripted)
    for name, report in first["metrics"].items():
        c = report.get("confusion", {})
        print(f"{name} (n={report['n']}, unscored {report['unscored']}): accuracy {report.get('accuracy')} "
              f"{report.get('accuracy_ci95')} at threshold {report.get('threshold')}, AUROC {report.get('auroc')}, "
              f"confusion human accept/reject x judge pass/fail {c.get('human_accept_judge_pass')}/"
              f"{c.get('human_accept_judge_fail')}/{c.get('human_reject_judge_pass')}/{c.get('human_reject_judge_fail')}")
    if sent_first is not None:
        print(f"chat requests: {sent_first} for {distinct} distinct rows ({sent_first / distinct:.2f} per custom metric "
              f"per row, re-asks of malformed replies included); the second run {sent_second - sent_first} "
              f"(the judgement cache); {seconds:.1f} s, then {seconds_cached:.1f} s")
    same = all(first["metrics"][m].get("accuracy") == second["metrics"][m].get("accuracy") for m in first["metrics"])
    print(f"second run, from the cache, gives the same figures: {same}")
    if args.json:
        args.json.write_text(json.dumps({"first": first, "cached": second}, ensure_ascii=False, indent=2, default=str),
                             encoding="utf-8")


if __name__ == "__main__":
    main()
