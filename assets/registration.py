"""Registering dataset versions: the one rule shared by ``rag-eval register|run`` and the sensor.

A version is a folder ``<datasets>/<key>/`` (``samples.jsonl``, optional ``meta.json``)
and a partition of ``dataset_version``. Default keys are ``<UTC time>-<name>-<first 8
hex of the content's SHA-256>`` (``20261201T033053Z-fiqa-1a2b3c4d``): they sort by
time, and two files of the same name registered in the same second get different keys.
Registration is atomic: the files are written to a hidden staging folder and renamed
into place in one step, after the partition exists, so neither a concurrent
registration nor the sensor ever sees a half-written version.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import uuid
from datetime import datetime, timezone
from pathlib import Path

import dagster as dg
from sqlalchemy.exc import IntegrityError

from assets.partitions import dataset_versions
from assets.resources import DatasetStore

_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_TIMED_KEY = re.compile(r"\d{8}T\d{6}Z-.+")


class RegistrationError(ValueError):
    """A dataset or a version key that cannot be registered (a usage error)."""


def default_key(name: str, content: bytes, now: datetime | None = None) -> str:
    """``<UTC time>-<name>-<8 hex of SHA-256(content)>``, at most 128 characters."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.")[:96] or "dataset"
    digest = hashlib.sha256(content).hexdigest()[:8]
    return f"{now or datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}-{name}-{digest}"


def dataset_file(path: Path) -> Path:
    """The samples file of ``path`` (a JSONL file, or a folder holding ``samples.jsonl``).

    Raises
    ------
    RegistrationError
        If ``path`` does not exist, is a folder without ``samples.jsonl``, is not a
        ``.jsonl``/``.ndjson`` file, or holds no JSON line (empty or blank lines only).
    """
    if path.is_dir():
        if not (path / "samples.jsonl").is_file():
            raise RegistrationError(f"{path} is a folder without samples.jsonl: pass a JSONL file (one JSON object "
                                    "a line) or a version folder holding samples.jsonl")
        path = path / "samples.jsonl"
    if not path.exists():
        raise RegistrationError(f"dataset file not found: {path}")
    if not path.is_file() or path.suffix.lower() not in (".jsonl", ".ndjson"):
        raise RegistrationError(f"{path}: a dataset version is a JSONL file (one JSON object a line)")
    with path.open("rb") as handle:
        if not any(line.strip() for line in handle):
            raise RegistrationError(f"{path} is empty (no JSON line): nothing to evaluate, nothing registered")
    return path


def read_meta(path: Path) -> dict:
    """A version's ``meta.json``: a JSON object (``retriever``, ``generator``, ...).

    Raises
    ------
    RegistrationError
        If the file does not exist or is not a JSON object.
    """
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RegistrationError(f"meta file not found: {path}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RegistrationError(f"{path}: not JSON ({exc})") from None
    if not isinstance(meta, dict):
        raise RegistrationError(f"{path}: meta.json holds a JSON object, like "
                                '{"retriever": "bm25-v2", "generator": "gpt-4o-mini"}')
    return meta


def _add_partition(instance: dg.DagsterInstance, key: str) -> bool:
    """Add the partition; False if it existed (also when another process added it just now)."""
    if instance.has_dynamic_partition(dataset_versions.name, key):
        return False
    try:
        instance.add_dynamic_partitions(dataset_versions.name, [key])
    except IntegrityError:  # added by a concurrent registration between the check and the insert
        return False
    return True


def register_version(instance: dg.DagsterInstance, store: DatasetStore, dataset: Path, version: str | None = None,
                     meta: Path | None = None, replace: bool = False) -> tuple[str, bool]:
    """Register ``dataset`` (a JSONL file or a version folder) as a version: ``(key, new)``.

    Without ``version``, a version with the same content is reused, else a default key
    is made. ``meta`` defaults to the ``meta.json`` beside the dataset, if any.

    Raises
    ------
    RegistrationError
        For a dataset :func:`dataset_file` refuses, a bad key or meta file, or a key
        holding other content (unless ``replace``), also when another registration
        took the key at the same moment.
    """
    source = dataset_file(dataset)
    content = source.read_bytes()
    meta_path = meta or (source.parent / "meta.json" if (source.parent / "meta.json").is_file() else None)
    meta_text = json.dumps(read_meta(meta_path), ensure_ascii=False, indent=2) if meta_path else None
    root = Path(store.root)
    if version is None:
        version = next((v for v in store.versions() if store.samples_path(v).read_bytes() == content), None) \
            or default_key(source.parent.name if source.stem == "samples" else source.stem, content)
    if not _KEY.fullmatch(version):
        raise RegistrationError(f"dataset version {version!r}: use letters, digits, '.', '_' and '-' only "
                                "(it names a folder and a partition)")
    target = root / version
    if store.samples_path(version).exists():
        return version, _update(instance, store, version, content, meta_text, replace)
    stage = root / f".staging-{uuid.uuid4().hex}"
    stage.mkdir(parents=True)
    try:
        (stage / "samples.jsonl").write_bytes(content)
        if meta_text is not None:
            (stage / "meta.json").write_text(meta_text, encoding="utf-8")
        added = _add_partition(instance, version)
        try:
            os.rename(stage, target)  # atomic; refused when the folder exists (non-empty)
        except OSError:
            if not store.samples_path(version).exists():
                if added:
                    instance.delete_dynamic_partition(dataset_versions.name, version)
                raise
            return version, _update(instance, store, version, content, meta_text, replace)  # a concurrent twin won
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return version, True


def _update(instance: dg.DagsterInstance, store: DatasetStore, version: str, content: bytes, meta_text: str | None,
            replace: bool) -> bool:
    """An existing version: the same content is reused; other content needs ``replace``."""
    target = store.samples_path(version)
    if target.read_bytes() != content:
        if not replace:
            raise RegistrationError(f"dataset version {version!r} already exists with other content ({target}); "
                                    "pass --replace to replace it, or choose another --dataset-version")
        staged = target.with_name(f".samples-{uuid.uuid4().hex}.jsonl")
        staged.write_bytes(content)
        os.replace(staged, target)
    if meta_text is not None:
        (target.parent / "meta.json").write_text(meta_text, encoding="utf-8")
    _add_partition(instance, version)
    return False


def unregister(instance: dg.DagsterInstance, store: DatasetStore, version: str) -> None:
    """Remove a version: its partition and its folder (for a first ingestion that failed)."""
    if instance.has_dynamic_partition(dataset_versions.name, version):
        instance.delete_dynamic_partition(dataset_versions.name, version)
    shutil.rmtree(Path(store.root) / version, ignore_errors=True)


def adopt_folder(store: DatasetStore, folder: str) -> str:
    """The key of a version folder dropped under the datasets root (for the sensor).

    A folder named like a default key keeps its name; any other folder is renamed to a
    default key made from its name and content, so sensor-made keys sort by time like
    registered ones. A folder whose content is already registered under that key is
    a copy, and removed.
    """
    if _TIMED_KEY.fullmatch(folder) and _KEY.fullmatch(folder):
        return folder
    content = store.samples_path(folder).read_bytes()
    key = default_key(folder, content)
    try:
        os.rename(Path(store.root) / folder, Path(store.root) / key)
    except OSError:
        if store.samples_path(key).exists() and store.samples_path(key).read_bytes() == content:
            shutil.rmtree(Path(store.root) / folder, ignore_errors=True)
        else:
            raise
    return key
