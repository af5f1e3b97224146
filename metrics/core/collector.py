"""Python's cyclic garbage collector switched for one block and put back after it (:func:`collector`): the one
place the project's code touches it (the CLI's start-up, the judging of a chunk of rows, the writing of traces)."""
from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector(*, enabled: bool | None = None, freeze: bool = False) -> Iterator[None]:
    """Run the block with the cyclic garbage collector ``enabled`` (``True``), paused (``False``) or as it
    is (``None``); with ``freeze``, the objects alive as the block starts are left out of the collections
    the block triggers (``gc.freeze``: they are not traversed again and again).

    On exit, error or not, the collector is on or off as it was before the block, and a freeze made
    here is undone (``gc.unfreeze``). Python keeps one set of frozen objects, so that also releases
    objects a caller froze before the block: they take part in collections again from then on.

    Nothing is raised here; an exception of the block passes through.
    """
    was_enabled = gc.isenabled()
    if freeze:
        gc.freeze()
    if enabled is not None:
        (gc.enable if enabled else gc.disable)()
    try:
        yield
    finally:
        if freeze:
            gc.unfreeze()
        (gc.enable if was_enabled else gc.disable)()
