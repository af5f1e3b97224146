"""A small RAG system to evaluate: two retrievers and an extractive generator over corpus.jsonl.

* ``bm25``: Okapi BM25 (the ``bm25s`` package, English stop words removed;
  ``rag_eval.metrics.sources.testset.baseline``, the baseline of generated test sets);
* ``dense``: cosine similarity of Universal Sentence Encoder Multilingual v3 embeddings,
  the encoder the offline judge ships (``rag_eval.metrics.judges.offline.OfflineJudge.embed``);
* ``extractive`` (``rag_eval.metrics.sources.testset.baseline``): the ``sentences`` sentences of the retrieved passages sharing the most
  words with the question, in passage order (no model).

Retrievers take ``user_input`` and ``top_k`` and return ``[{"id", "text", "score"}]``, best
first; the generator takes ``user_input`` and the passages and returns the response. The
indexes are built once per process.
"""
from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from rag_eval.metrics.sources.testset.baseline import bm25 as _bm25
from rag_eval.metrics.sources.testset.baseline import extractive, load_corpus

CORPUS = Path(__file__).resolve().parent / "corpus.jsonl"
__all__ = ["bm25", "dense", "extractive"]


@functools.cache
def _encoder():
    from rag_eval.metrics.judges.offline import OfflineJudge

    judge = OfflineJudge()
    return judge, judge.embed(load_corpus(str(CORPUS))[1])


def bm25(user_input: str, top_k: int = 5) -> list[dict]:
    """The ``top_k`` passages with the highest BM25 score for ``user_input``
    (``rag_eval.metrics.sources.testset.baseline.bm25`` over corpus.jsonl)."""
    return _bm25(user_input, top_k, str(CORPUS))


def dense(user_input: str, top_k: int = 5) -> list[dict]:
    """The ``top_k`` passages closest to ``user_input`` in embedding space (cosine)."""
    ids, texts = load_corpus(str(CORPUS))
    judge, matrix = _encoder()
    similarity = matrix @ judge.embed([user_input])[0]
    best = np.argsort(-similarity, kind="stable")[:top_k]
    return [{"id": ids[i], "text": texts[i], "score": float(similarity[i])} for i in best]
