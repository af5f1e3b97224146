"""The commands that read data outside a run: ``rag-eval convert-trec`` (TREC files to a dataset) and
``rag-eval calibrate`` (a judge's agreement with human labels)."""
from __future__ import annotations

import argparse
import json
from pathlib import Path


def cmd_convert_trec(args: argparse.Namespace) -> int:
    """Write a JSONL dataset from TREC qrels and run files (for the document retrieval metrics)."""
    from rag_eval.metrics.errors import command
    from rag_eval.metrics.retrieval.trec import read_trec

    records = read_trec(args.qrels, args.run)
    Path(args.output).write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    print(f"wrote {len(records)} queries to {args.output}; evaluate with "
          f"`{command(f'run {args.output} --metrics document_retrieval')}`")
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    """Agreement of the configured judge (or the offline one) with human labels."""
    from rag_eval.metrics import OfflineJudge, calibrate
    from rag_eval.metrics.stats.calibrate import print_report
    from rag_eval.metrics.evaluate import default_judge

    judge = OfflineJudge() if args.offline else default_judge(args.spill)
    try:
        report = calibrate(args.labels, judge=judge, registry=args.registry)
    finally:
        if hasattr(judge, "close"):
            judge.close()
    print_report(report)
    if args.json:
        Path(args.json).write_text(json.dumps(report, ensure_ascii=False, indent=2, default=str), encoding="utf-8")
    return 0
