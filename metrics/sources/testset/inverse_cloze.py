"""An offline retrieval test set by the inverse cloze task: a sentence is the query, its chunk the relevant document.

The inverse cloze task (Lee, Chang and Toutanova 2019, "Latent Retrieval for Weakly
Supervised Open Domain Question Answering", ORQA) takes a sentence out of a passage and
asks for the passage it came from. Here each query is one sentence of a chunk (of at least
``MIN_QUERY_TOKENS`` content tokens: headings and fragments say too little), its
``retrieval_ground_truth`` that chunk (label 1; a sentence found in two chunks, such as
boilerplate, is never a query), and the corpus written beside it holds
every chunk with the chosen sentences taken out (ORQA masks 90 % of them; all here, so a
retriever must find the passage from the meaning around the sentence, not by matching the
sentence itself). One query per chunk at most, chunks taken round-robin over the documents
in a seeded order, so the set spreads over the folder. No model, no endpoint: the set
scores a retriever with the document retrieval metrics (``ndcg``, ``fidelity``...).
"""
from __future__ import annotations

import random
import re
from collections import Counter, defaultdict
from typing import Any

from rag_eval.metrics.sources.testset.documents import Chunk
from rag_eval.metrics.text import content_tokens, has_cjk, split_sentences
from rag_eval.metrics.errors import SettingsError

#: A sentence with fewer content tokens is not used as a query.
MIN_QUERY_TOKENS = 5


def _queries(chunk: Chunk, repeated: set[str]) -> list[str]:
    """The sentences of ``chunk`` that can be a query: none when it has a single sentence
    (taking it out would leave nothing to find), never one in ``repeated`` (a sentence found
    in two chunks, boilerplate: the other chunk would hold it verbatim)."""
    sentences = split_sentences(chunk.text)
    if len(sentences) < 2:
        return []
    return [s for s in sentences if len(content_tokens(s)) >= MIN_QUERY_TOKENS and s not in repeated]


def why_none(chunks: list[Chunk]) -> str:
    """Why :func:`inverse_cloze` finds no query in ``chunks`` (when it finds none)."""
    several = [split_sentences(c.text) for c in chunks if len(split_sentences(c.text)) > 1]
    if not several:
        return "every chunk is a single sentence (nothing would be left to find once it is out)"
    if not any(len(content_tokens(s)) >= MIN_QUERY_TOKENS for sentences in several for s in sentences):
        return f"no chunk of two sentences or more has a sentence of at least {MIN_QUERY_TOKENS} content words"
    return f"every sentence of at least {MIN_QUERY_TOKENS} content words is shared by another chunk"


def _without(text: str, sentence: str) -> str:
    """``text`` with ``sentence`` taken out (the sentences joined again if it is not there verbatim)."""
    if sentence in text:
        return re.sub(r"[ ]{2,}", " ", text.replace(sentence, "", 1)).strip()
    joiner = "" if has_cjk(sentence) else " "
    return joiner.join(s for s in split_sentences(text) if s != sentence)


def spread(chunks: list[Chunk], seed: int) -> list[Chunk]:
    """``chunks`` in a seeded order that takes one chunk of each document in turn."""
    rng = random.Random(seed)
    by_document: dict[str, list[Chunk]] = defaultdict(list)
    for chunk in chunks:
        by_document[chunk.document_id].append(chunk)
    queues = [rng.sample(items, len(items)) for items in by_document.values()]
    rng.shuffle(queues)
    ordered = []
    while any(queues):
        for queue in queues:
            if queue:
                ordered.append(queue.pop())
    return ordered


def inverse_cloze(chunks: list[Chunk], n: int, seed: int = 0) -> tuple[list[dict], list[dict]]:
    """A retrieval test set of up to ``n`` queries and its corpus (see the module docstring).

    Parameters
    ----------
    chunks : list of Chunk
        The folder's chunks (``rag_eval.metrics.sources.testset.documents.chunk_documents``).
    n : int
        Queries wanted, 1 or more; fewer come back when fewer chunks have a usable sentence.
    seed : int
        Seeds the choice of chunks and sentences: the same folder and seed give the same set.

    Returns
    -------
    (questions, corpus)
        ``questions``: ``{"id", "user_input", "retrieval_ground_truth": [{"document_id": <chunk
        id>, "query_relevance_label": 1}], "reference_contexts": [<chunk text>],
        "synthesizer_name": "inverse_cloze"}``; ``corpus``: ``{"id", "document", "text"}`` per
        chunk, the queries' sentences taken out.

    Raises
    ------
    ValueError
        For ``n`` below 1.
    """
    if n < 1:
        raise SettingsError(f"-n {n}: ask for 1 question or more")
    rng = random.Random(seed)
    seen = Counter(s for chunk in chunks for s in set(split_sentences(chunk.text)))
    repeated = {s for s, count in seen.items() if count > 1}
    questions: list[dict[str, Any]] = []
    masked: dict[str, str] = {}
    for chunk in spread(chunks, seed):
        if len(questions) == n:
            break
        candidates = _queries(chunk, repeated)
        if not candidates:
            continue
        sentence = rng.choice(candidates)
        masked[chunk.id] = _without(chunk.text, sentence)
        questions.append({"id": f"ict-{len(questions) + 1:04d}", "user_input": sentence,
                          "retrieval_ground_truth": [{"document_id": chunk.id, "query_relevance_label": 1}],
                          "reference_contexts": [chunk.text], "synthesizer_name": "inverse_cloze"})
    corpus = [{"id": c.id, "document": c.document_id, "text": masked.get(c.id, c.text)} for c in chunks]
    return questions, corpus
