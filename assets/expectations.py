"""The great-expectations side of the data-quality suite (``assets.quality``), run in a
process of its own.

``import great_expectations`` takes about 4 s of CPU (scipy.stats and altair for a few
expectations, pyspark when it is installed), more than the rest of a 1,000-row run's
ingestion. So the suite runs in a worker process (:func:`serve`, started by
``assets.quality.start_worker``): ``rag-eval run`` starts it as it starts, and the import
happens on the machine's other core while the run's own start-up goes on, not on the
run's critical path. This module imports only great-expectations and pandas, so the worker
is ready as soon as possible; pyspark is kept out of GE's import (GE loads it only to
validate Spark frames, never done here: about 1 s).
"""
from __future__ import annotations

import os
import pickle
import select
import subprocess
import sys
import threading
import traceback
from collections.abc import Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

#: This process's worker (:func:`serve`) once started, and the process that started it (a
#: forked child starts its own: the pipes are its parent's).
_worker: tuple[int, subprocess.Popen] | None = None
_lock = threading.Lock()


def start_worker() -> subprocess.Popen:
    """Start this process's great-expectations worker (:func:`serve`) unless it runs, without
    waiting for it: it imports GE meanwhile. ``rag-eval run`` calls it as it starts,
    :func:`ask` otherwise."""
    global _worker
    with _lock:
        if _worker is None or _worker[0] != os.getpid() or _worker[1].poll() is not None:
            _worker = os.getpid(), subprocess.Popen([sys.executable, "-m", "assets.expectations"],
                                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        return _worker[1]


def running() -> bool:
    """Whether this process's worker is started and alive (``rag-eval run`` starts it as it starts)."""
    worker = _worker  # not under the lock, which an ask holds while GE works
    return worker is not None and worker[0] == os.getpid() and worker[1].poll() is None


def stop_worker() -> None:
    """Stop this process's worker if it runs (its ~300 MB back; the next :func:`ask` starts another)."""
    global _worker
    with _lock:
        if _worker is not None and _worker[0] == os.getpid():
            process = _worker[1]
            process.stdin.close()  # the worker ends at the end of its input
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        _worker = None


#: How long the worker may take to answer (its great-expectations import on a loaded machine
#: included) before it is given up for stuck and the suite runs in this process.
REPLY_TIMEOUT_S = 300


def ask(frame: pd.DataFrame, limits: Mapping[str, int], timeout: float = REPLY_TIMEOUT_S) -> dict[str, Any]:
    """:func:`verdicts` on ``frame`` and ``limits``, computed by the worker (started if need be);
    by this process itself when the worker dies or gives no answer within ``timeout`` seconds
    (it is killed; the next call starts another one).

    Raises
    ------
    RuntimeError
        When GE fails on the suite (with its traceback).
    """
    worker = start_worker()
    with _lock:
        try:
            pickle.dump((frame, dict(limits)), worker.stdin)
            worker.stdin.flush()
            if not select.select([worker.stdout], [], [], timeout)[0]:
                raise TimeoutError(f"no answer within {timeout:g} s")
            status, reply = pickle.load(worker.stdout)
        except (OSError, EOFError, pickle.UnpicklingError) as exc:  # TimeoutError is an OSError
            worker.kill()
            print(f"note: the great-expectations worker failed ({type(exc).__name__}: {exc}; exit status "
                  f"{worker.wait()}); validating in this process", file=sys.stderr)
            try:
                status, reply = "ok", verdicts(frame, limits)
            except Exception:  # noqa: BLE001 - raised below with its traceback
                status, reply = "error", traceback.format_exc()
    if status != "ok":
        raise RuntimeError(f"great-expectations failed on the quality suite:\n{reply}")
    return reply


def _import_great_expectations():
    """``great_expectations``, imported without pyspark unless pyspark is already loaded
    (GE's ``compatibility.pyspark`` then stands in its ``NotImported`` markers)."""
    blocked = [name for name in ("pyspark",) if name not in sys.modules]
    for name in blocked:
        sys.modules[name] = None  # an ImportError for GE's optional import
    try:
        import great_expectations as gx
    finally:
        for name in blocked:
            del sys.modules[name]
    return gx


@lru_cache(maxsize=1)
def _batch_definition():
    gx = _import_great_expectations()
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    return (context.data_sources.add_pandas("eval").add_dataframe_asset("samples")
            .add_batch_definition_whole_dataframe("whole"))


def build_suite(limits: Mapping[str, int]):
    """The expectation suite (a ``gx.ExpectationSuite``) for the fields of ``limits``
    (``{field: most characters, or contexts}``): every line usable by a selected metric,
    unique ids, and per field present, typed and within its bound."""
    gx = _import_great_expectations()
    expectations = [gx.expectations.ExpectColumnValuesToBeInSet(column="usable", value_set=[True]),
                    gx.expectations.ExpectColumnValuesToBeUnique(column="id")]
    for name, limit in limits.items():
        expectations.append(gx.expectations.ExpectColumnValuesToBeInSet(column=f"{name}_ok", value_set=[True]))
        expectations.append(gx.expectations.ExpectColumnValuesToBeBetween(column=f"{name}_size", max_value=limit))
    return gx.ExpectationSuite(name="eval_samples_suite", expectations=expectations)


def verdicts(frame: pd.DataFrame, limits: Mapping[str, int]) -> dict[str, Any]:
    """GE's verdicts on ``frame`` (``assets.quality.validation_frame``) under the suite of
    ``limits`` (:func:`build_suite`): the columns of failed expectations and its statistics."""
    result = _batch_definition().get_batch(batch_parameters={"dataframe": frame}).validate(build_suite(limits))
    statistics = {**{k: result.statistics[k] for k in ("evaluated_expectations", "successful_expectations",
                                                        "success_percent")},
                  "failed_expectations": sorted(r.expectation_config.type + f"[{r.expectation_config.kwargs['column']}]"
                                                for r in result.results if not r.success)}
    return {"failed": sorted({r.expectation_config.kwargs["column"] for r in result.results if not r.success}),
            "statistics": statistics}


def serve() -> None:
    """The worker: imports great-expectations, then answers each pickled ``(frame, limits)``
    read from stdin with the pickled ``("ok", verdicts)`` or ``("error", traceback)`` on
    stdout, until stdin ends (its parent closed it or exited). What GE prints goes to stderr.
    A parent gone before the answer (its run ended first) ends the worker quietly."""
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # GE's own prints cannot break the replies
    requests = sys.stdin.buffer
    _batch_definition()
    while True:
        try:
            frame, limits = pickle.load(requests)
        except EOFError:
            return
        try:
            reply = ("ok", verdicts(frame, limits))
        except Exception:  # noqa: BLE001 - told to the parent, which raises it
            reply = ("error", traceback.format_exc())
        try:
            pickle.dump(reply, replies)
            replies.flush()
        except BrokenPipeError:  # nobody reads the answer: nothing to say, nothing left to flush
            os._exit(0)


if __name__ == "__main__":
    serve()
