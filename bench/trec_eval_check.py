"""DocumentRetrieval's NDCG against trec_eval's printed values (shared known answers).

Reads ``trec_eval_known_answers/as_document_retrieval_records.jsonl`` (trec_eval 9.0.8's
own test run and qrels, converted to Azure's field names) and
``expected_trec_eval_values.json`` from ``../shared/data`` (research-only licence: read
here, never copied into the repository), computes ``ndcg`` with linear gain and
trec_eval's tie-break (score descending, then document id descending) at every cut-off
trec_eval prints, rounds to 4 decimals and compares. Exit status 1 on any mismatch.

    .venv/bin/python bench/trec_eval_check.py [--data ../shared/data]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rag_eval.metrics.retrieval.document_retrieval import RankingSettings, document_retrieval  # noqa: E402
from rag_eval.metrics.samples import sample_from_dict  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    args = parser.parse_args()
    folder = args.data / "trec_eval_known_answers"
    expected = json.loads((folder / "expected_trec_eval_values.json").read_text())["per_query"]
    compared = mismatches = 0
    for line in (folder / "as_document_retrieval_records.jsonl").read_text().splitlines():
        record = json.loads(line)
        sample = sample_from_dict(record, 0)
        assert not sample.problems, sample.problems
        labels = [d["query_relevance_label"] for d in sample.retrieval_ground_truth]
        for measure, want in expected[record["query_id"]].items():
            if not measure.startswith("ndcg"):
                continue
            k = int(measure.split("_")[-1]) if measure != "ndcg" else len(sample.retrieved_documents)
            settings = RankingSettings(k=k, label_min=min(min(labels), 0), label_max=max(max(labels), 1),
                                       gain="linear", tie_break="docid_desc")
            got = round(document_retrieval(sample.retrieval_ground_truth, sample.retrieved_documents, settings)["ndcg"],
                        4)
            compared += 1
            mismatches += got != want
            print(f"{record['query_id']} {measure:<14} trec_eval {want:.4f}  ours {got:.4f}  "
                  f"{'ok' if got == want else 'MISMATCH'}")
    print(f"{compared - mismatches}/{compared} values equal to trec_eval's (4 decimals)")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
