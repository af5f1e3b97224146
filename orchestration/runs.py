"""What every command that runs the pipeline in-process does around its runs: where start-up
ends (:func:`after_startup`), and one process at a time per dataset version (:func:`only_run_of`).
``rag_eval.orchestration.cli``, ``~.commands`` and ``~.annotate`` use them."""
from __future__ import annotations

import os
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path


def after_startup() -> AbstractContextManager[None]:
    """A context manager around a command's own work (a run executed, a dry run, a command other than
    ``run`` and ``backfill``):
    Python's cyclic garbage collector, paused while the command starts up (``rag_eval.orchestration.cli.main``),
    collects again, and what start-up built, which lives as long as the process, is left out of its
    collections (``gc.freeze``), which would otherwise traverse it again and again as the work's own
    objects come and go (its cost: docs/performance.md). On exit the collector is paused again, as for
    the start-up of a backfill's next version (``rag_eval.metrics.core.collector.collector``)."""
    from rag_eval.metrics.core.collector import collector  # not with this module: rag_eval.metrics is slow to import

    return collector(enabled=True, freeze=True)


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
