"""DocumentRetrieval's NDCG against trec_eval's printed values (trec_eval's own known answers).

Reads trec_eval 9.0.8's own test data from ``trec_eval_known_answers/`` under ``--data``
(``tools/fetch_data.py`` extracts it from the trec_eval tarball; research-only licence: read
here, never copied into the repository): its qrels and run (``qrels.test``, ``results.test``,
read as ``rag-eval convert-trec`` reads them) and the per-query values trec_eval printed for
them (``out.test.aq``, ``trec_eval -m all_trec -q``). Computes ``ndcg`` with linear gain and
trec_eval's tie-break (score descending, then document id descending) at every cut-off
trec_eval prints, rounds to 4 decimals and compares. Exit status 1 on any mismatch.

    .venv/bin/python bench/trec_eval_check.py [--data bench/data]
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from rag_eval.metrics.retrieval.document_retrieval import RankingSettings, document_retrieval
from rag_eval.metrics.retrieval.trec import read_trec
from rag_eval.metrics.core.samples import sample_from_dict

REPO = Path(__file__).resolve().parents[1]


def printed_ndcg(path: Path) -> dict[str, dict[str, float]]:
    """trec_eval's ``ndcg`` and ``ndcg_cut_K`` values per query from its ``-q`` output."""
    values: dict[str, dict[str, float]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        measure, query, value = line.split()
        if (measure == "ndcg" or re.fullmatch(r"ndcg_cut_\d+", measure)) and query != "all":
            values.setdefault(query, {})[measure] = float(value)
    return values


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=REPO / "bench" / "data",
                        help="folder holding trec_eval_known_answers/ (default bench/data, where "
                             "tools/fetch_data.py writes)")
    args = parser.parse_args()
    folder = args.data / "trec_eval_known_answers"
    expected = printed_ndcg(folder / "out.test.aq")
    compared = mismatches = 0
    for record in read_trec(folder / "qrels.test", folder / "results.test"):
        sample = sample_from_dict(record, 0)
        assert not sample.problems, sample.problems
        labels = [d["query_relevance_label"] for d in sample.retrieval_ground_truth]
        for measure, want in expected[record["id"]].items():
            k = int(measure.split("_")[-1]) if measure != "ndcg" else len(sample.retrieved_documents)
            settings = RankingSettings(k=k, label_min=min(min(labels), 0), label_max=max(max(labels), 1),
                                       gain="linear", tie_break="docid_desc")
            got = round(document_retrieval(sample.retrieval_ground_truth, sample.retrieved_documents, settings)["ndcg"],
                        4)
            compared += 1
            mismatches += got != want
            print(f"{record['id']} {measure:<14} trec_eval {want:.4f}  ours {got:.4f}  "
                  f"{'ok' if got == want else 'MISMATCH'}")
    print(f"{compared - mismatches}/{compared} values equal to trec_eval's (4 decimals)")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
