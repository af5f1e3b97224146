"""Test sets from a user's own documents (no Dagster): read, chunk, and write questions with their sources.

* With an LLM judge: :func:`rag_eval.metrics.sources.testset.generate.agenerate` writes questions of three
  kinds (single-hop specific, multi-hop, abstract), each with a reference answer, its
  reference contexts and ``retrieval_ground_truth`` naming its source chunks, in the
  documents' language; near-duplicates removed, each question checked by a critic.
* Offline: :func:`rag_eval.metrics.sources.testset.inverse_cloze.inverse_cloze` writes a retrieval test set
  (a sentence as the query, its chunk as the relevant document).

:func:`write_testset` writes either as a question set for targets (``rag-eval sweep``):
``questions.jsonl``, the ``corpus.jsonl`` of chunks a retriever indexes, ``dropped.jsonl``
(every generated question not kept, with why), ``testset.json`` (counts, requests, tokens)
and ``sweep.toml``, the baseline RAG system (``rag_eval.metrics.sources.testset.baseline``: BM25 over the
corpus, the extractive generator) on the set, ready to run.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from rag_eval.metrics.sources.testset.documents import Chunk, Document, chunk_documents, read_documents
from rag_eval.metrics.sources.testset.inverse_cloze import inverse_cloze
from rag_eval.metrics.errors import SettingsError

__all__ = ["Chunk", "Document", "chunk_documents", "inverse_cloze", "read_documents", "write_testset"]

#: What the written sweep.toml scores and ranks on, by kind of set.
SWEEP_METRICS = {"inverse_cloze": ["ndcg", "fidelity"],
                 "llm": ["context_recall", "context_precision", "ndcg", "answer_correctness"]}


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    staged = path.with_name(f".{path.name}-{os.getpid()}")
    staged.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    os.replace(staged, path)


def sweep_text(corpus: Path, metrics: list[str]) -> str:
    """``sweep.toml`` of the baseline RAG system over ``corpus`` (an absolute path), scoring ``metrics``;
    the retriever's version carries the corpus's SHA-256 (12 hex digits), so a changed corpus re-runs retrieval."""
    digest = hashlib.sha256(corpus.read_bytes()).hexdigest()[:12]
    return (f"# The baseline RAG system on this test set (written by rag-eval testset): rag-eval sweep this file.\n"
            "# Put your own [retriever.NAME] / [generator.NAME] beside or instead of these (docs/tutorials/sweeps.md).\n"
            f"questions = \"questions.jsonl\"\nmetrics = {json.dumps(metrics)}\n"
            "metric_options = { ndcg = { k = 10 } }   # NDCG@10\n\n"
            "[retriever.bm25]\ncallable = \"rag_eval.metrics.sources.testset.baseline:bm25\"\n"
            f"version = \"1-{digest}\"   # 1, and the SHA-256 of corpus.jsonl: a new corpus re-runs retrieval\n"
            f"parameters = {{ top_k = 10, corpus = {json.dumps(str(corpus))} }}\n\n"
            "[generator.extractive]\ncallable = \"rag_eval.metrics.sources.testset.baseline:extractive\"\nversion = \"1\"\n"
            "parameters = { sentences = 2 }\n")


def write_testset(out: str | Path, questions: list[dict[str, Any]], corpus: list[dict[str, Any]],
                  report: dict[str, Any], dropped: list[dict[str, Any]] | None = None) -> list[Path]:
    """Write a test set into the folder ``out`` (created; files of an earlier set replaced, each atomically):
    ``questions.jsonl``, ``corpus.jsonl``, ``dropped.jsonl`` (when ``dropped`` is given),
    ``testset.json`` (``report``) and ``sweep.toml`` (metrics by ``report["method"]``,
    ``inverse_cloze`` or ``llm``). Returns the paths written.

    Raises
    ------
    ValueError
        When ``out`` is a file.
    """
    folder = Path(out)
    if folder.exists() and not folder.is_dir():
        raise SettingsError(f"--out {folder} is a file: give a folder for the test set")
    folder.mkdir(parents=True, exist_ok=True)
    written = [folder / "questions.jsonl", folder / "corpus.jsonl"]
    _jsonl(written[0], questions)
    _jsonl(written[1], corpus)
    if dropped is not None:
        written.append(folder / "dropped.jsonl")
        _jsonl(written[-1], dropped)
    written += [folder / "testset.json", folder / "sweep.toml"]
    written[-2].write_text(json.dumps(report, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    written[-1].write_text(sweep_text((folder / "corpus.jsonl").resolve(), SWEEP_METRICS[report["method"]]),
                           encoding="utf-8")
    return written
