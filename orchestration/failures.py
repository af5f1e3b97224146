"""What ``rag-eval`` says when a command fails: one line for what the user can fix, a bug report for the rest.

A :class:`rag_eval.metrics.errors.UserError`, or an error of the system (an ``OSError`` carrying its errno:
a full disk, a read-only file system, a refused connection), is one ``error: ...`` line
(:func:`user_line`) and ``EXIT_USER`` (2). Any other exception is a bug (:func:`report_bug`):
``internal error: <type>: <message>``, its traceback and a line asking for a bug report, and
``EXIT_INTERNAL`` (70). A step of a Dagster run the command started fails the same two ways
(:func:`users_to_fix`): a step that failed with a bug is raised as :class:`StepBug`, which
:func:`report_bug` shows with the step's own traceback. Secrets (the values of environment variables
named like a key, token, secret or password: ``rag_eval.metrics.errors.redacted``) never appear in what
is printed.
"""
from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from typing import Any, TextIO

from rag_eval.orchestration.report import printable

#: The last line of a bug's report: what to send, and what never to.
BUG_REPORT = ("this is a bug in rag-eval, not a problem with your input or settings: please report it to the "
              "rag-eval-pipeline maintainers with the command you ran, the version (`pip show rag-eval-pipeline`) "
              "and the traceback above (leave out API keys and private data)")
_SYSTEM = re.compile(r"\[Errno \d+\] ")
#: Dagster's classes for a step that failed on purpose: a ``dagster.Failure`` the product raised to say what is
#: wrong, and a blocking asset check that failed (its verdict on the data is printed above the failure).
_VERDICTS = ("Failure", "DagsterAssetCheckFailedError")


class StepBug(Exception):
    """A Dagster run of the command whose steps (or the run itself) failed with a bug.

    ``failures`` are ``(where, error)`` pairs: ``"step <key>"`` or ``"run"``, and Dagster's account of
    the error (``cls_name``, ``message``, ``stack`` and ``cause``, as on a
    ``DagsterEventType.STEP_FAILURE`` event's ``step_failure_data.error``)."""

    def __init__(self, failures: list[tuple[str, Any]]) -> None:
        where, error = failures[0]
        super().__init__(f"{where} failed: {_root(error).message.strip()}")
        self.failures = failures


def _chain(error: Any) -> Iterator[Any]:
    """Dagster's error, then its cause (``raise ... from``), down to the root cause."""
    while error is not None:
        yield error
        error = error.cause


def _root(error: Any) -> Any:
    return list(_chain(error))[-1]


def _family() -> set[str]:
    """The class names of :class:`rag_eval.metrics.errors.UserError` and its subclasses (those imported)."""
    from rag_eval.metrics.errors import UserError

    names, todo = set(), [UserError]
    while todo:
        cls = todo.pop()
        names.add(cls.__name__)
        todo.extend(cls.__subclasses__())
    return names


def users_to_fix(error: Any) -> bool:
    """Whether a failed step's ``error`` (Dagster's account of it) is one the user can fix: somewhere
    in its chain a :class:`rag_eval.metrics.errors.UserError`, a ``dagster.Failure`` the product
    raised to say what is wrong, a blocking asset check that failed, or an error of the system (its
    message starts ``[Errno N]``)."""
    family = _family()
    return any(e.cls_name in family or e.cls_name in _VERDICTS or _SYSTEM.search(e.message)
               for e in _chain(error))


def raise_bugs(failures: list[tuple[str, Any]]) -> None:
    """Raise :class:`StepBug` for those of ``failures`` (``(where, error)`` pairs) that are bugs."""
    if bugs := [(where, error) for where, error in failures if not users_to_fix(error)]:
        raise StepBug(bugs)


def user_line(error: BaseException, out: str = "out", datasets: str = "datasets") -> str | None:
    """The one ``error: ...`` line for an ``error`` the user can fix, else ``None`` (a bug). A
    system error naming no file is said to be in the folders the command writes (``out``,
    ``datasets``) when its errno has a way out (:func:`way_out`)."""
    from rag_eval.metrics.errors import UserError, storage_error, way_out

    if isinstance(error, UserError):
        return f"error: {error}"
    if not isinstance(error, OSError) or not error.strerror:
        return None
    if error.filename or way_out(error):  # "path: cause; way out"
        return f"error: {storage_error(f'writing its files (--out {out}, --datasets {datasets})', error)}"
    return f"error: {error}"


def report_bug(error: BaseException, stream: TextIO | None = None) -> int:
    """Print ``internal error: <type>: <message>``, the traceback (a :class:`StepBug`'s: each failed
    step's, as Dagster recorded it) and :data:`BUG_REPORT`, secrets redacted; ``EXIT_INTERNAL``."""
    import traceback

    from rag_eval.metrics.errors import EXIT_INTERNAL, redacted

    stream = stream or sys.stderr
    if isinstance(error, StepBug):
        where, first = error.failures[0]
        root = _root(first)
        said = (root.message.strip().splitlines() or [""])[0]  # "module.Class: message", as Python prints it
        prefix = re.compile(r"^[\w.]*" + re.escape(root.cls_name) + "(: |$)")
        head = f"{root.cls_name}: {prefix.sub('', said)} (in {where})"
        trace = "\n".join(f"{step}:\n{e.to_string().rstrip()}" for step, e in error.failures)
    else:
        lines = str(error).strip().splitlines()
        head = f"{type(error).__name__}: {lines[0] if lines else ''}"
        trace = "".join(traceback.format_exception(error)).rstrip()
    print(redacted(f"internal error: {head}"), file=stream)
    print(redacted(trace), file=stream)
    print(BUG_REPORT, file=stream)
    return EXIT_INTERNAL


def _one_line(message: str) -> str:
    """A multi-line message on one line, each line's control characters escaped."""
    return " ".join(printable(line.strip()) for line in message.strip().splitlines())


def _said(message: str) -> str:
    """An error's message (``module.Class: text``) on one line: the product's own and Dagster's
    without their class (the product's say all; Dagster's wrappers say what it was doing), others
    with the class's short name."""
    message = _one_line(message)
    if found := re.match(r"([A-Za-z_][\w.]*)\.(\w+): ", message):
        ours = found.group(1).split(".")[0] in ("rag_eval", "dagster")
        return message[found.end():] if ours else f"{found.group(2)}: {message[found.end():]}"
    return message


def run_failures(result) -> list[tuple[str, Any]]:
    """``(where, error)`` for each failed step of a run (``dagster.ExecuteInProcessResult``; where is
    ``step <key>``), or for the run itself when no step failed (e.g. a resource that failed; ``run``):
    Dagster's account of each error (``cls_name``, ``message``, ``stack``, ``cause``)."""
    failures = [event for event in result.all_events if event.is_step_failure] or \
        [event for event in result.all_events if event.is_run_failure
         and getattr(event.event_specific_data, "error", None) is not None]
    return [(f"step {event.step_key}" if event.step_key else "run", event.event_specific_data.error)
            for event in failures]


def print_run_failure(result, stream: TextIO | None = None) -> None:
    """Each failed step of a run, or the run itself when no step failed (e.g. a resource that
    failed), the user can fix in one line: the root cause, then in brackets what Dagster was doing
    when it came (the outermost error of the chain) when that is another error. Then, when any
    failed with a bug, raises :class:`StepBug` for them (the CLI prints
    their tracebacks and exits 70)."""
    stream = stream or sys.stderr
    failures = run_failures(result)
    for where, error in failures:
        if not users_to_fix(error):
            continue
        root = error
        while root.cause is not None:  # the chain down to the root cause
            root = root.cause
        context = f" [{_said(error.message.splitlines()[0]).rstrip(':')}]" if root is not error else ""
        print(f"{where} failed: {_said(root.message) + context}", file=stream)
    raise_bugs(failures)
