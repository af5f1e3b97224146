"""Bounded memos of the pure text functions (``rag_eval.metrics.text``) and the offline judge's rules.

Caches of pure functions, not state: what a memo holds never changes a result, only how soon it comes.
``_MEMOS`` lists them (each added as its module is imported) so that :func:`forget_memos` can empty them all."""
from __future__ import annotations

import functools
from collections.abc import Callable

#: Results each memo (:func:`memo`) of the text and offline-judge code keeps: a text's sentences,
#: statements, stems, passages... Every metric of a row is judged next to the others
#: (``rag_eval.metrics.core.scoring.score_chunks``), so what they share of a row is asked again within a few
#: rows; the rest keeps texts that many rows share (a passage retrieved for many questions).
#: Bounded, so a long version's memory stays flat.
MEMO_SIZE = 20_000
_MEMOS: list = []


def memo(function: Callable) -> Callable:
    """``function`` (pure, of hashable arguments) remembered for its last :data:`MEMO_SIZE`
    distinct calls (``functools.lru_cache``), and emptied by :func:`forget_memos`."""
    remembered = functools.lru_cache(maxsize=MEMO_SIZE)(function)
    _MEMOS.append(remembered)
    return remembered


def forget_memos() -> None:
    """Empty every :func:`memo` (what they hold never changes a result)."""
    for remembered in _MEMOS:
        remembered.cache_clear()
