"""A small RAG system to evaluate: two retrievers and an extractive generator over corpus.jsonl.

* ``bm25``: Okapi BM25 (the ``bm25s`` package, English stop words removed);
* ``dense``: cosine similarity of Universal Sentence Encoder Multilingual v3 embeddings,
  the encoder the offline judge ships (``metrics.judges.offline.OfflineJudge.embed``);
* ``extractive``: the ``sentences`` sentences of the retrieved passages sharing the most
  words with the question, in passage order (no model).

Retrievers take ``user_input`` and ``top_k`` and return ``[{"id", "text", "score"}]``, best
first; the generator takes ``user_input`` and the passages and returns the response. The
indexes are built once per process.
"""
from __future__ import annotations

import functools
import json
import re
from pathlib import Path

import numpy as np

CORPUS = Path(__file__).resolve().parent / "corpus.jsonl"


@functools.cache
def _corpus() -> tuple[list[str], list[str]]:
    rows = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines()]
    return [r["id"] for r in rows], [r["text"] for r in rows]


@functools.cache
def _bm25():
    import bm25s

    index = bm25s.BM25()
    index.index(bm25s.tokenize(_corpus()[1], stopwords="en", show_progress=False), show_progress=False)
    return index


@functools.cache
def _encoder():
    from metrics.judges.offline import OfflineJudge

    judge = OfflineJudge()
    return judge, judge.embed(_corpus()[1])


def bm25(user_input: str, top_k: int = 5) -> list[dict]:
    """The ``top_k`` passages with the highest BM25 score for ``user_input``."""
    import bm25s

    ids, texts = _corpus()
    found, scores = _bm25().retrieve(bm25s.tokenize([user_input], stopwords="en", show_progress=False),
                                     k=min(top_k, len(ids)), show_progress=False)
    return [{"id": ids[i], "text": texts[i], "score": float(s)} for i, s in zip(found[0], scores[0])]


def dense(user_input: str, top_k: int = 5) -> list[dict]:
    """The ``top_k`` passages closest to ``user_input`` in embedding space (cosine)."""
    ids, texts = _corpus()
    judge, matrix = _encoder()
    similarity = matrix @ judge.embed([user_input])[0]
    best = np.argsort(-similarity, kind="stable")[:top_k]
    return [{"id": ids[i], "text": texts[i], "score": float(similarity[i])} for i in best]


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if len(w) > 3}


def extractive(user_input: str, retrieved_contexts: list[str], sentences: int = 2) -> str:
    """The ``sentences`` sentences of the passages sharing the most words (over 3 letters)
    with the question, in the order they appear; "" when nothing was retrieved."""
    found = [s.strip() for c in retrieved_contexts for s in re.split(r"(?<=[.!?])\s+", c) if s.strip()]
    question = _words(user_input)
    ranked = sorted(range(len(found)), key=lambda i: (-len(question & _words(found[i])), i))[:sentences]
    return " ".join(found[i] for i in sorted(ranked))
