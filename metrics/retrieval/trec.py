"""TREC qrels and run files as DocumentRetrieval samples."""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any
from rag_eval.metrics.errors import InputError


def read_trec(qrels: str | Path, run: str | Path) -> list[dict[str, Any]]:
    """One record per query of ``qrels`` (``qid iteration docno label``) and ``run``
    (``qid Q0 docno rank score tag``), in Azure's field names.

    Returns
    -------
    list of dict
        ``{"id": qid, "retrieval_ground_truth": [{"document_id", "query_relevance_label"}],
        "retrieved_documents": [{"document_id", "relevance_score"}]}``, queries sorted; a
        query of the qrels absent from the run gets an empty ``retrieved_documents``.

    Raises
    ------
    ValueError
        For a line with too few columns or a label or score that is not a number (the
        message names the file and the line).
    """
    truth: dict[str, list[dict[str, Any]]] = defaultdict(list)
    retrieved: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for path, columns, target in ((Path(qrels), 4, truth), (Path(run), 6, retrieved)):
        for line_no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) < columns:
                raise InputError(f"{path}:{line_no}: expected {columns} columns, got {len(parts)}")
            try:
                if target is truth:
                    target[parts[0]].append({"document_id": parts[2], "query_relevance_label": int(parts[3])})
                else:
                    target[parts[0]].append({"document_id": parts[2], "relevance_score": float(parts[4])})
            except ValueError as exc:
                raise InputError(f"{path}:{line_no}: {exc}") from exc
    return [{"id": qid, "retrieval_ground_truth": truth[qid], "retrieved_documents": retrieved.get(qid, [])}
            for qid in sorted(truth)]
