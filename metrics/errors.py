"""What a user can fix, told apart from a bug.

Every error a person can act on (bad input, a missing file, a wrong option or setting, storage that
cannot be written, a version another run holds) is a :class:`UserError`: the CLI prints its message
on one line and exits with :data:`EXIT_USER`. Any other exception reaching the CLI is a bug: it prints
"internal error", the traceback and a line asking for a bug report, and exits with
:data:`EXIT_INTERNAL`. Inside a metric's scorer an exception stays that row's error (its traceback in
the row's details); it never ends the run.

The classes keep the built-in base the code raised before (``ValueError``, ``OSError``,
``FileNotFoundError``, ``KeyError``), so a caller catching those still catches them.
"""
from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

#: The run did what it was asked, and what it measured passed.
EXIT_OK = 0
#: The command ran, and what it checked failed (a regression found by the gate, a version that failed).
EXIT_FAILED = 1
#: A :class:`UserError`: one line on stderr, nothing else.
EXIT_USER = 2
#: ``rag-eval run``: done, but some results are ``judge_error`` (the judge failed; reasons in results.parquet).
EXIT_JUDGE_ERRORS = 3
#: ``rag-eval compare|gate``: the regression gate failed (``rag_eval.orchestration.gate_cli.GATE_FAILED``).
#: A command that sends judge requests: done, but judgements paid for could not be written to the judgement
#: cache (its disk filled or turned read-only mid-run): they are in the spill file named on stderr, which the
#: next run folds into the cache (or ``rag-eval cache import FILE``); or no place took them either, and the
#: command stopped buying (the line says how many answers were lost).
EXIT_SPILLED = 5
#: A bug: "internal error", its traceback and where to report it (``EX_SOFTWARE`` of ``sysexits.h``).
EXIT_INTERNAL = 70


_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)


def redacted(text: str) -> str:
    """``text`` with the value of every environment variable named like a secret (``OPENAI_API_KEY``,
    ``*_TOKEN``, ``*_PASSWORD``...; values of 6 characters or more) replaced by ``[redacted]``: for
    what a bug's message or traceback may carry into the output."""
    for name, value in os.environ.items():
        if len(value) >= 6 and _SECRET_NAME.search(name):
            text = text.replace(value, "[redacted]")
    return text


def command(words: str) -> str:
    """The ``rag-eval`` command ``words`` (``"gate v1"``) as it can be typed here, for every hint a command or a
    run prints: ``rag-eval gate v1`` when ``PATH`` finds this installation's ``rag-eval`` (its virtual
    environment activated, or installed on ``PATH``), else that script's path, relative to the working folder
    when under it (``.venv/bin/rag-eval gate v1`` in the clone after ``make run``, as the docs write commands).
    Raises nothing."""
    script = Path(sys.executable).parent / "rag-eval"
    found = shutil.which("rag-eval")
    if found and Path(found).resolve() == script.resolve():
        return f"rag-eval {words}"
    try:
        return f"{script.relative_to(Path.cwd())} {words}"
    except (ValueError, OSError):  # outside the working folder (or it is gone): the whole path
        return f"{script} {words}"


class UserError(Exception):
    """Something the user can fix; its message says what, where, and how, in one line."""


class InputError(UserError, ValueError):
    """A dataset, label or trace file that cannot be read as given (a file-level problem: a line-level
    one is kept as that line's ``input_error`` row instead)."""


class SettingsError(UserError, ValueError):
    """A wrong command-line option, run configuration value or settings file (name the option or the
    file and key)."""


class StorageError(UserError, OSError):
    """A file or folder the run cannot write or read: full disk, read-only, permissions, a symlink out
    of the output folder. The message names the path, the cause and the way out."""

    def __init__(self, path: object, cause: str, way_out: str = "") -> None:
        self.path, self.cause, self.way_out = str(path), cause, way_out
        super().__init__(f"{self.path}: {cause}" + (f"; {way_out}" if way_out else ""))

    def __str__(self) -> str:
        return self.args[0]


def way_out(error: OSError) -> str:
    """What to do about a storage ``error``, by its errno (``""`` when its errno says nothing to do)."""
    import errno

    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        return "free space on that disk, then run the same command again (every judgement already answered is " \
               "kept in the judgement cache)"
    if error.errno == errno.EROFS:
        return "make that file system writable (or pass a folder elsewhere), then run the same command again"
    if error.errno in (errno.EACCES, errno.EPERM):
        return "give this user write access to it (or pass a folder elsewhere), then run the same command again"
    return ""


def storage_error(path: object, error: OSError) -> StorageError:
    """``error`` as a :class:`StorageError` naming its file (else ``path``, the folder being written),
    the system's cause without its errno number, and :func:`way_out`."""
    return StorageError(error.filename or path, error.strerror or str(error), way_out(error))


class BusyError(UserError, ValueError):
    """A dataset version (or another resource) another run holds right now."""


class NotFoundError(UserError, FileNotFoundError):
    """A file or folder the user named (a dataset, labels, traces, documents, results) that is not
    there; the message names it."""


class UnknownNameError(SettingsError, KeyError):
    """A name that is not among those known (a metric, a family, a setting's key); the message lists
    the known ones. A ``KeyError`` too, for callers catching that; shown without ``KeyError``'s quotes."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""
