"""The files of the suite's Data Docs site (``rag_eval.assets.expectations``) that a fault can leave
damaged, put right before great-expectations reads them: the stores' id files (:data:`STORE_ID`) and
validation results cut short (a full disk as GE wrote them).
"""
from __future__ import annotations

import json
import re
import shutil
import uuid
from pathlib import Path

#: GE's file naming a file store (``store_backend_id = <uuid>``), written once in each store's folder.
STORE_ID = ".ge_store_backend_id"
_STORE_ID = re.compile(r"store_backend_id = [0-9a-fA-F-]{36}\s*")


def repair_store_ids(site: Path) -> list[Path]:
    """Delete each store id file of the Data Docs ``site`` (the site's and its validation results')
    that a fault left empty or cut short (a full disk as GE wrote it): GE refuses such a file on every
    later run ("Invalid store configuration ... Expected 'store_backend_id = '") and writes a new one
    when there is none (the id names no result). The files deleted."""
    repaired = []
    for path in (site / STORE_ID, site / ".validation_results" / STORE_ID):
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            continue
        except (OSError, UnicodeDecodeError):
            text = ""
        if not _STORE_ID.fullmatch(text):
            path.unlink()
            repaired.append(path)
    return repaired


def write_store_id(site: Path) -> None:
    """Write the validation results store's id file of the Data Docs ``site`` when it is missing (after
    :func:`repair_store_ids`), before GE would: GE only logs "Invalid store configuration ... [Errno 28]"
    when it cannot write it (a full disk), and goes on. A file cut short by the fault is removed.

    Raises
    ------
    OSError
        Naming the file (``filename``) that could not be written, with the system's cause.
    """
    path = site / ".validation_results" / STORE_ID
    if path.exists():
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "x", encoding="utf-8") as handle:
            handle.write(f"store_backend_id = {uuid.uuid4()}\n")
    except OSError as exc:
        path.unlink(missing_ok=True)
        raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from None


def set_aside_damaged_results(site: Path) -> list[Path]:
    """Move each validation result of the Data Docs ``site`` that a fault left cut short (no JSON)
    to the same place under ``<site>.unusable/`` (kept for a look, out of GE's way: GE printed
    "Validation result not found ... skipping" for it on every later run, and its page stayed as
    the fault left it). The results moved, at their new places."""
    moved = []
    for path in sorted((site / ".validation_results").rglob("*.json")):
        try:
            json.loads(path.read_bytes())
        except (OSError, ValueError, RecursionError):
            aside = site.with_name(f"{site.name}.unusable") / path.relative_to(site)
            aside.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(path, aside)  # a rename, or a copy where the site is a disk of its own
            moved.append(aside)
    return moved
