"""What every command that runs the pipeline in-process does around its runs: where start-up
ends (:func:`end_of_startup`), and one process at a time per dataset version (:func:`only_run_of`).
``rag_eval.orchestration.commands``, ``~.annotate`` and ``~.traffic`` use them."""
from __future__ import annotations

import gc
import os
from contextlib import contextmanager
from pathlib import Path


def end_of_startup() -> None:
    """Start collecting cyclic garbage again (``rag_eval.orchestration.cli.main`` stops it while the command
    starts up), called as the command's own work begins (before a run is executed...). What
    start-up built lives as long as the process: it is left out of the collections to come
    (``gc.freeze``), which would otherwise traverse it again and again as the run's own
    objects come and go (its cost: docs/performance.md)."""
    if not gc.isenabled():  # once: a backfill's next version is not start-up
        gc.freeze()
        gc.enable()


@contextmanager
def only_run_of(version: str, out: Path):
    """Hold the version for this process: a second ``rag-eval`` evaluating the same
    version at the same time is refused with the first one's PID
    (:class:`rag_eval.metrics.errors.BusyError`)."""
    import fcntl

    from rag_eval.assets.outputs import output_folder
    from rag_eval.metrics.errors import BusyError

    with open(output_folder(out, out / ".locks") / f"{version}.lock", "a+", encoding="utf-8") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            raise BusyError(f"dataset version {version} is being evaluated right now by another rag-eval run "
                            f"({lock.read().strip() or 'PID unknown'}); wait for it to finish") from None
        lock.truncate(0)
        lock.write(f"PID {os.getpid()}")
        lock.flush()
        yield
