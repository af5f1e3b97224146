"""`metrics.calibrate` on the shared labelled sets, with each judge that applies.

* ``ragas_annotated`` (human accept/reject of an LLM judge's binary verdicts): the human label is
  the verdict when accepted, its opposite when rejected. ``answer_correctness`` maps to our
  ``answer_correctness``; ``helpfulness`` to ``answer_relevancy``; ``summary_accuracy`` to
  ``faithfulness`` of the summary to the text summarised (the user input as the context).
* HaluEval QA rows 0-99 and RGB en/zh (non-commercial: read here only) as pairwise
  faithfulness labels, the grounded answer preferred.

The offline judge always runs; the LLM judge runs when ``OPENAI_BASE_URL`` or
``OPENAI_API_KEY`` is set (``metrics.evaluate.default_judge``). Run from the repo root::

    .venv/bin/python bench/calibrate_judges.py [--data ../shared/data] [--json calibration.json]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

from offline_judge_accuracy import load_pairs  # noqa: E402

from metrics import OfflineJudge, calibrate  # noqa: E402
from metrics.calibrate import print_report  # noqa: E402
from metrics.evaluate import default_judge  # noqa: E402

RAGAS_FILES = {"edited_chain_runs.json": "answer_correctness", "annotated_data.json": "answer_relevancy",
               "sample_annotated_summary.json": "faithfulness"}


def ragas_labels(folder: Path) -> list[dict]:
    """Per-sample binary labels from the ragas annotated files (see the module docstring)."""
    labels = []
    for filename, metric in RAGAS_FILES.items():
        for records in json.loads((folder / filename).read_text(encoding="utf-8")).values():
            for record in records:
                sample = dict(record["metric_input"])
                if metric == "faithfulness":
                    sample["retrieved_contexts"] = [sample["user_input"]]
                human = record["metric_output"] if record["is_accepted"] else 1 - record["metric_output"]
                labels.append({"metric": metric, "sample": sample, "label": bool(human), "label_type": "binary"})
    return labels


def pair_labels(data: Path) -> dict[str, list[dict]]:
    """Pairwise faithfulness labels from HaluEval and RGB: the grounded answer preferred."""
    return {name: [{"metric": "faithfulness", "preferred": "a",
                    "a": {"user_input": p["question"], "response": p["good"], "retrieved_contexts": p["contexts"]},
                    "b": {"user_input": p["question"], "response": p["bad"], "retrieved_contexts": p["contexts"]}}
                   for p in pairs] for name, pairs in load_pairs(data).items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--json", type=Path, help="write every report to this file")
    args = parser.parse_args()
    sets = {"ragas_annotated": ragas_labels(args.data / "ragas_annotated"), **pair_labels(args.data)}
    judges = [OfflineJudge()]
    configured = default_judge()
    if not isinstance(configured, OfflineJudge):
        judges.append(configured)
    else:
        print("LLM judge: not configured (set OPENAI_BASE_URL / OPENAI_API_KEY to include it)")
    reports = {}
    for judge in judges:
        for name, labels in sets.items():
            print(f"\n== {name} ({len(labels)} labels)")
            reports[f"{judge.name}/{name}"] = report = calibrate(labels, judge=judge)
            print_report(report)
    if args.json:
        args.json.write_text(json.dumps(reports, ensure_ascii=False, indent=2, default=str), encoding="utf-8")


if __name__ == "__main__":
    main()
