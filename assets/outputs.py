"""Folders the run writes under the output folder (``out/``), never through a symbolic link out of it.

A link planted anywhere the run writes (``out/<version>``, a file of it, ``out/tables/<asset>``,
``out/data_docs`` or a page of it, ``out/traffic/<partition>``) would have the run write, or
overwrite, files elsewhere. :func:`output_folder` is the one way a writer gets a folder under the
output folder: it refuses, in one line naming the link and the way out, a folder that leads out of
the output folder or holds an entry that does (a link that stays inside the output folder is a folder
or file of it). The files are then written inside the folder only; a write by rename (``os.replace``)
replaces a link in place and never follows it.
"""
from __future__ import annotations

import os
from pathlib import Path

from rag_eval.metrics.errors import StorageError

#: What to do about a link out of the output folder.
WAY_OUT = "rag-eval writes inside the output folder only: remove the link, then run again"


def _refuse_out(root: Path, inside: Path, path: Path) -> None:
    target = path.resolve()
    if not target.is_relative_to(inside):
        raise StorageError(path, f"a symbolic link out of the output folder {root} (to {target})", WAY_OUT)


def output_folder(root: str | Path, path: str | Path, tree: bool = False) -> Path:
    """The folder ``path`` under the output folder ``root``, created if needed, after checking that
    neither it nor an entry of it (with ``tree``, an entry at any depth: a site another library
    writes into) is a symbolic link leading out of ``root``.

    Raises
    ------
    StorageError
        Naming the first such link (dangling or not), its target and the way out; nothing is
        created through it.
    OSError
        When the folder cannot be created (full disk, read-only, permissions).
    """
    root, path = Path(root), Path(path)
    inside = root.resolve()
    _refuse_out(root, inside, path)
    path.mkdir(parents=True, exist_ok=True)
    for folder, folders, files in os.walk(path) if tree else [(str(path), [], os.listdir(path))]:
        for name in [*folders, *files]:
            entry = Path(folder) / name
            if entry.is_symlink():
                _refuse_out(root, inside, entry)
    return path


def output_file(root: str | Path, path: str | Path) -> Path:
    """The file ``path`` directly under the output folder ``root`` (``out/rag_eval.duckdb``), after
    checking that it is not a symbolic link leading out of ``root`` (a database opened through it
    would be created or written elsewhere).

    Raises
    ------
    StorageError
        Naming the link, its target and the way out.
    """
    root, path = Path(root), Path(path)
    if path.is_symlink():
        _refuse_out(root, root.resolve(), path)
    return path
