"""A baseline RAG system over a corpus file: a BM25 retriever and an extractive generator.

Target callables (``rag_eval.metrics.sources.targets``; the ``sweep.toml`` that ``rag-eval testset`` writes
names them, and so does ``examples/rag_system``):

* :func:`bm25`: Okapi BM25 (the ``bm25s`` package of the ``testset`` extra, English stop words removed; runs of
  Chinese, Japanese or Korean characters indexed as character bigrams, since they have no
  spaces) over a JSONL corpus of ``{"id", "text"}`` lines;
* :func:`extractive`: the sentences of the retrieved passages sharing the most words with
  the question (no model).

The index of a corpus file is built once per process.
"""
from __future__ import annotations

import functools
import json
import re
from pathlib import Path

from rag_eval.metrics.core.extras import require
from rag_eval.metrics.errors import InputError

_CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]{2,}")


def _bigrams(text: str) -> str:
    """CJK runs as space-separated character bigrams (``长城很长`` → ``长城 城很 很长``); other text unchanged."""
    return _CJK_RUN.sub(lambda m: " " + " ".join(m[0][i:i + 2] for i in range(len(m[0]) - 1)) + " ", text)


@functools.cache
def load_corpus(corpus: str) -> tuple[list[str], list[str]]:
    """``(ids, texts)`` of a JSONL corpus file (``{"id", "text"}`` per line).

    Raises
    ------
    ValueError
        Naming the line (counted from 1) that is not such an object.
    """
    ids, texts = [], []
    for number, line in enumerate(Path(corpus).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        row = json.loads(line)
        if not isinstance(row, dict) or not isinstance(row.get("id"), str) or not isinstance(row.get("text"), str):
            raise InputError(f"{corpus} line {number}: expected {{\"id\": str, \"text\": str}}")
        ids.append(row["id"])
        texts.append(row["text"])
    return ids, texts


def _bm25s():
    """The ``bm25s`` package, or :class:`rag_eval.metrics.core.extras.MissingExtra` naming the ``testset`` extra."""
    return require("bm25s", "testset", "The BM25 baseline retriever")


@functools.cache
def _index(corpus: str):
    bm25s = _bm25s()
    index = bm25s.BM25()
    index.index(bm25s.tokenize([_bigrams(t) for t in load_corpus(corpus)[1]], stopwords="en", show_progress=False),
                show_progress=False)
    return index


def bm25(user_input: str, top_k: int = 5, corpus: str = "corpus.jsonl") -> list[dict]:
    """The ``top_k`` passages of ``corpus`` with the highest BM25 score (Robertson and Zaragoza
    2009, ``bm25s`` defaults k1 = 1.5, b = 0.75) for ``user_input``, best first, as
    ``[{"id", "text", "score"}]`` (scores ≥ 0, higher is better).

    Raises
    ------
    FileNotFoundError, ValueError
        For a missing or malformed corpus file.
    MissingExtra
        Without ``bm25s`` (the ``testset`` extra): a ``UserError``, one line naming the extra.
    """
    bm25s = _bm25s()
    ids, texts = load_corpus(str(Path(corpus).resolve()))
    found, scores = _index(str(Path(corpus).resolve())).retrieve(
        bm25s.tokenize([_bigrams(user_input)], stopwords="en", show_progress=False), k=min(top_k, len(ids)),
        show_progress=False)
    return [{"id": ids[i], "text": texts[i], "score": float(s)} for i, s in zip(found[0], scores[0])]


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if len(w) > 3}


def extractive(user_input: str, retrieved_contexts: list[str], sentences: int = 2) -> str:
    """The ``sentences`` sentences of the passages sharing the most words (over 3 letters)
    with the question, in the order they appear; "" when nothing was retrieved."""
    found = [s.strip() for c in retrieved_contexts for s in re.split(r"(?<=[.!?])\s+", c) if s.strip()]
    question = _words(user_input)
    ranked = sorted(range(len(found)), key=lambda i: (-len(question & _words(found[i])), i))[:sentences]
    return " ".join(found[i] for i in sorted(ranked))
