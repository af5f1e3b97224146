"""Data-quality suite of a dataset version, with great-expectations 1.x.

The suite is derived from the metrics selected: every line can be used by at least one
of them (``usable``; the others are rejected), and for every field they read, the field
is present, of the right type and not empty (``<field>_ok``, from the sample model's
per-row problems: a line lacking it is an ``input_error`` of the metrics that read it,
not a rejection) and within length bounds; ids are unique (duplicates are reported). GE's expectations on
list-valued columns cannot be trusted (an empty list passes a length check), so the
suite runs on derived scalar columns.

Two parts: :class:`Validation` (ingestion) finds the rejected lines, the lines lacking
fields and the duplicate ids from the sample model's own rules, the same rules the suite's
expectations state, so the blocking check ``rejected_share_within_limit`` never waits for
great-expectations; :func:`suite_verdicts` (the non-blocking check ``quality_suite``,
``assets.quality_check``) is GE's verdict on the same frame. great-expectations takes about
4 s of CPU to import, so it runs in a worker process of its own (``assets.expectations``),
started as ``rag-eval run`` starts or on first use, never when the code location loads; its
verdicts are kept beside the version (``<version>/.quality/``, keyed by the validated frame,
the suite and GE's version): a version validated before (a re-run) does not ask it. In
``rag-eval run`` they are asked for as the ingestion ends and worked out while the metrics
are judged (:func:`settle`).
"""

import hashlib
import json
import os
import threading
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from importlib.metadata import version as installed_version
from pathlib import Path
from typing import Any

import pandas as pd

from assets import expectations
from metrics.samples import MAX_CHARS, MAX_CONTEXTS, Sample, field_problems, unusable


def validation_frame(samples: list[Sample], required: Mapping[str, Iterable[str]]) -> pd.DataFrame:
    """One row per sample: ``id``, ``row``, ``usable`` (some selected metric can use the
    line) and, per field read by ``required`` (``{metric: fields}``), ``<field>_ok`` and
    ``<field>_size`` (characters of a string, number of contexts of a list)."""
    frame = pd.DataFrame({"id": [str(s.id) for s in samples], "row": [s.row for s in samples],
                          "usable": [unusable(s, required) is None for s in samples]})
    for name in dict.fromkeys(f for fields in required.values() for f in fields):
        frame[f"{name}_ok"] = [s.missing(name) is None for s in samples]
        frame[f"{name}_size"] = [len(getattr(s, name)) if getattr(s, name) is not None else 0 for s in samples]
    return frame


def _verdicts(frame: pd.DataFrame, fields: list[str]) -> dict[str, Any]:
    """GE's verdicts on ``frame`` for ``fields`` (``assets.expectations.verdicts``, from the worker)."""
    return expectations.ask(frame, {name: MAX_CONTEXTS if name == "retrieved_contexts" else MAX_CHARS
                                    for name in fields})


def _kept_verdicts(frame: pd.DataFrame, fields: list[str], folder: Path | None) -> dict[str, Any]:
    """:func:`_verdicts`, kept in ``folder`` under a digest of everything they depend on."""
    if folder is None:
        return _verdicts(frame, fields)
    digest = hashlib.sha256(json.dumps([installed_version("great-expectations"), MAX_CHARS, MAX_CONTEXTS, fields,
                                        frame.to_dict("split")], default=str).encode()).hexdigest()
    path = folder / f"{digest[:32]}.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        pass
    verdicts = _verdicts(frame, fields)
    try:
        folder.mkdir(exist_ok=True)  # not its version's folder: a version removed meanwhile stays removed
        staged = path.with_suffix(f".{os.getpid()}.tmp")
        staged.write_text(json.dumps(verdicts), encoding="utf-8")
        staged.replace(path)  # whole or absent, also with two runs at once
    except OSError:
        pass  # a read-only dataset folder: validated again next time
    return verdicts


def validate(samples: list[Sample], required: Mapping[str, Iterable[str]]) -> dict[str, Any]:
    """The lines of the loaded samples that the suite's expectations for the selected metrics
    ``required`` (``{metric: fields}``) fail on, found by the sample model's own rules (the
    rules the expectations state: great-expectations is not asked, :func:`suite_verdicts` is).

    Returns
    -------
    dict
        ``rejected``: one ``{"row", "line", "id", "reason"}`` per line no selected metric
        can use (unreadable, or lacking a field of every metric); ``input_errors``: one
        ``{"row", "line", "id", "fields": {field: reason}, "metrics": [...]}`` per other line
        lacking a field some selected metric reads (those metrics report ``input_error``
        for it; a field usable on no line at all is left out: its metrics cannot run);
        ``duplicate_ids``: lines whose id another line has too (kept: results are told
        apart by line). Lines count from 1.
    """
    validation = Validation(required)
    validation.add(samples)
    return validation.report()


def suite_verdicts(frame: pd.DataFrame, required: Mapping[str, Iterable[str]], keep: Path | None = None) -> dict[str, Any]:
    """great-expectations' verdicts on ``frame`` (:func:`validation_frame` of the version's
    samples for ``required``) under the suite: ``failed``, the columns of failed
    expectations, and ``statistics`` (evaluated and successful expectations, success percent,
    the failing expectations). With ``keep``, a folder where they are kept and found again for
    the same frame.

    Raises
    ------
    RuntimeError
        When great-expectations fails on the suite (``assets.expectations.ask``).
    """
    return _kept_verdicts(frame, _fields(required), keep)


def _fields(required: Mapping[str, Iterable[str]]) -> list[str]:
    """The fields the metrics of ``required`` (``{metric: fields}``) read, in order."""
    return list(dict.fromkeys(f for fields in required.values() for f in fields))


#: Lines from which a version's verdicts are settled as its ingestion ends and its worker then stopped (:func:`settle`).
LONG_VERSION_LINES = 10_000

#: Verdicts :func:`settle` has asked for, for the run's ``quality_suite`` check: ``{(run_id, keep): future}``.
_settling: dict[tuple[str, Path], Future] = {}


def settle(frame: pd.DataFrame, required: Mapping[str, Iterable[str]], keep: Path, run_id: str) -> None:
    """As a version's ingestion ends, with its blocking check passed (so the run's ``quality_suite``
    check will ask for them), have GE's verdicts on its ``frame`` worked out for that check
    (:func:`settled`), kept in ``keep``:

    * a long version (:data:`LONG_VERSION_LINES` lines or more): now, then the worker stopped, so
      its memory (~300 MB) is not held beside the version's judging and summary;
    * else, when this process's worker runs (``rag-eval run`` started it as it started): in a
      thread of this process that waits for the worker's answer while the metrics are judged;
    * else not: the check asks the worker itself (a Dagster step process starts it then).

    In-process, the check then neither rebuilds the frame from the stored fields (43 s at
    100,000 lines) nor waits for GE. A failure is left for the check, which asks again."""
    for key in [key for key in _settling if key[0] != run_id]:  # an earlier run's, its check never ran
        del _settling[key]
    if len(frame) >= LONG_VERSION_LINES:
        try:
            verdicts = suite_verdicts(frame, required, keep)
        except RuntimeError:
            return
        expectations.stop_worker()
        _settling[(run_id, keep)] = Future()
        _settling[(run_id, keep)].set_result(verdicts)
    elif expectations.running():
        _settling[(run_id, keep)] = _in_background(suite_verdicts, frame, required, keep)


def _in_background(work: Callable[..., Any], *args: Any) -> Future:
    """``work(*args)`` in a daemon thread (a process ending, or a test session, does not wait for
    it: nobody then reads its result), as a future."""
    future: Future = Future()

    def run() -> None:
        if future.set_running_or_notify_cancel():
            try:
                future.set_result(work(*args))
            except BaseException as exc:  # noqa: BLE001 - raised where the result is read
                future.set_exception(exc)

    threading.Thread(target=run, name="quality-suite", daemon=True).start()
    return future


def settled(run_id: str, keep: Path) -> dict[str, Any] | None:
    """:func:`suite_verdicts` as :func:`settle` worked them out for this run's ingestion of the
    version kept in ``keep`` (waiting for them if need be); ``None`` when it did not.

    Raises
    ------
    RuntimeError
        When great-expectations failed on the suite.
    """
    future = _settling.pop((run_id, keep), None)
    return None if future is None else future.result()


class Validation:
    """:func:`validate` on a version read in chunks: :meth:`add` each chunk of samples (in
    row order), then :meth:`report`. What is kept of a line is its row of
    :func:`validation_frame` and, for a line lacking a field, its problems, not the sample."""

    def __init__(self, required: Mapping[str, Iterable[str]]) -> None:
        self.required = {metric: tuple(fields) for metric, fields in required.items()}
        self.fields = _fields(self.required)
        self._frames: list[pd.DataFrame] = []
        self._lacking: list[tuple[int, str, str | None, dict[str, str]]] = []  # (row, id, unusable, problems)

    def add(self, samples: list[Sample]) -> None:
        """Take in the next chunk of samples."""
        frame = validation_frame(samples, self.required)
        self._frames.append(frame)
        for sample, usable in zip(samples, frame["usable"]):
            problems = field_problems(sample, self.fields)
            if problems or not usable:
                self._lacking.append((sample.row, str(sample.id), None if usable else unusable(sample, self.required),
                                      problems))

    def frame(self) -> pd.DataFrame:
        """:func:`validation_frame` of every sample added."""
        return pd.concat(self._frames, ignore_index=True) if self._frames else validation_frame([], self.required)

    def report(self) -> dict[str, Any]:
        """The report of :func:`validate` on every sample added."""
        frame = self.frame()
        absent = {f for f in self.fields if not frame[f"{f}_ok"].any()}  # reported once, as metrics that cannot run
        rejected, input_errors = [], []
        for row, sample_id, reason, problems in self._lacking:
            entry = {"row": row, "line": row + 1, "id": sample_id}
            if reason is not None:
                rejected.append({**entry, "reason": reason})
            elif problems := {f: why for f, why in problems.items() if f not in absent}:
                input_errors.append({**entry, "fields": problems, "metrics": [
                    m for m, needs in self.required.items() if set(needs) & set(problems)]})
        duplicates = frame[frame["id"].duplicated(keep=False)]
        return {"rejected": rejected, "input_errors": input_errors,
                "duplicate_ids": [{"line": int(r) + 1, "id": i} for r, i in zip(duplicates["row"], duplicates["id"])]}
