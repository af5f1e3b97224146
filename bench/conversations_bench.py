"""Conversations judged with and without their history: how each metric finds the faults of the example set.

The example conversations (``examples/conversations``: 34 chats, 93 turns) mark each turn's fault in
``turns.csv``: ``unsupported_claim`` (the answer says what its passages do not), ``wrong_referent`` (the
retriever resolved a follow-up to the wrong thing: the passages are about another referent),
``evasive``; and whether the turn's question needs the earlier turns (``needs_history``). The set is
scored twice by the same judge: as conversations (each turn judged with the turns before it) and as
the same turns on single-turn lines (no history). Per metric the bench prints

* the mean over turns, and over the turns that need the history, in each reading;
* per fault, the AUROC of the metric telling the faulty turns from the clean ones (a low value read as
  the fault; 0.5 is chance), in each reading;
* the conversation figures of the summary (the mean over conversations of their mean over turns, and
  of their worst turn).

Run from the repo root (the offline judge; with ``OPENAI_BASE_URL``/``OPENAI_API_KEY`` set, the LLM judge)::

    .venv/bin/python bench/conversations_bench.py [--data examples/conversations] [--metrics m1,m2]
"""
from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import rankdata

from rag_eval.metrics import evaluate

METRICS = ["faithfulness", "answer_relevancy", "context_relevancy", "context_precision", "context_recall"]
FAULTS = ("unsupported_claim", "wrong_referent", "evasive")


def single_turns(conversations: list[dict]) -> list[dict]:
    """The turns of ``conversations`` as single-turn records (id ``<conversation>/<turn>``), without history."""
    records = []
    for conversation in conversations:
        turn, question = 0, None
        for message in conversation["messages"]:
            if message["role"] == "user":
                question = message["content"]
                continue
            turn += 1
            records.append({"id": f"{conversation['id']}/{turn}", "user_input": question,
                            "response": message["content"], "retrieved_contexts": message["context"],
                            "reference": message["reference"]})
    return records


def auroc(scores: np.ndarray, faulty: np.ndarray) -> float | None:
    """The chance that a clean turn scores above a faulty one (ties half), or ``None`` without both kinds."""
    n_faulty, n_clean = int(faulty.sum()), int((~faulty).sum())
    if not n_faulty or not n_clean:
        return None
    ranks = rankdata(scores)
    return float((ranks[~faulty].sum() - n_clean * (n_clean + 1) / 2) / (n_faulty * n_clean))


def _cell(value: float | None) -> str:
    return "—" if value is None or value != value else f"{value:.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("examples/conversations"))
    parser.add_argument("--metrics", default=",".join(METRICS))
    args = parser.parse_args()
    metrics = args.metrics.split(",")
    conversations = [json.loads(line) for line in (args.data / "conversations.jsonl").read_text("utf-8").splitlines()
                     if line.strip()]
    with (args.data / "turns.csv").open(encoding="utf-8") as handle:
        turns = {f"{r['id']}/{r['turn']}": r for r in csv.DictReader(handle)}
    readings = {"with history": evaluate(conversations, metrics=metrics),
                "without": evaluate(single_turns(conversations), metrics=metrics)}
    print(f"{len(conversations)} conversations, {len(turns)} turns; judge "
          f"{readings['with history'].summary['judge'].get('judge')}")
    print(f"{'metric':<20} {'reading':<13} {'mean':>6} {'needs h.':>8} " + " ".join(f"{f[:12]:>12}" for f in FAULTS)
          + f" {'conv mean':>9} {'worst turn':>10}")
    for metric in metrics:
        for name, result in readings.items():
            frame = result.results[(result.results["metric"] == metric) & (result.results["status"] == "ok")]
            frame = frame.assign(fault=frame["sample_id"].map(lambda i: turns[i]["fault"]),
                                 needs=frame["sample_id"].map(lambda i: turns[i]["needs_history"] == "yes"))
            values = frame["value"].to_numpy(float)
            sign = 1.0 if frame["direction"].iloc[0] == "higher_is_better" else -1.0
            cells = [auroc(sign * values, (frame["fault"] == fault).to_numpy()) for fault in FAULTS]
            conv = (result.summary.get("conversations") or {}).get("metrics", {}).get(metric, {})
            print(f"{metric:<20} {name:<13} {_cell(frame['value'].mean()):>6} "
                  f"{_cell(frame.loc[frame['needs'], 'value'].mean()):>8} "
                  + " ".join(f"{_cell(c):>12}" for c in cells)
                  + f" {_cell(conv.get('mean')):>9} {_cell(conv.get('worst_turn_mean')):>10}")
    counts = pd.Series([t["fault"] or "clean" for t in turns.values()]).value_counts().to_dict()
    print(f"turns by fault: {counts}; AUROC: a clean turn scoring above a faulty one (0.5 chance)")


if __name__ == "__main__":
    main()
