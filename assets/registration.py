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
import math
import os
import re
import shutil
import uuid
from datetime import datetime, timezone
from pathlib import Path

import dagster as dg
from sqlalchemy.exc import IntegrityError

from rag_eval.assets.partitions import DATASET_VERSIONS
from rag_eval.assets.resources import SETTINGS_FILE, DatasetStore
from rag_eval.metrics.core.bounded import clip, quote
from rag_eval.metrics.core.decoding import TOO_DEEP, field_problem, not_text
from rag_eval.metrics.errors import InputError

#: The longest version key (it names a folder and a partition).
MAX_KEY_CHARS = 128
_KEY = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._-]{{0,{MAX_KEY_CHARS - 1}}}")
#: Keys that would name what out/ or datasets/ hold besides versions (the tables, the results database, the
#: Data Docs, the traffic results, the tags), or the gate's ``baseline = "previous"``.
RESERVED_KEYS = frozenset({"tables", "rag_eval.duckdb", "data_docs", "traffic", "tags.json", "previous"})
_TIMED_KEY = re.compile(r"\d{8}T\d{6}Z-.+")


class RegistrationError(InputError):
    """A dataset or a version key that cannot be registered (a usage error; a ``ValueError`` too)."""


def default_key(name: str, digest: str, now: datetime | None = None) -> str:
    """``<UTC time>-<name>-<first 8 hex of digest>`` (the content's SHA-256), at most 128 characters."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.")[:96] or "dataset"
    return f"{now or datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}-{name}-{digest[:8]}"


#: Bytes read at a time when a version's file is hashed, copied or compared: a version's
#: file is never whole in memory (docs/performance.md, Memory).
BLOCK = 1 << 20


def sha256_of(path: Path) -> str:
    """The SHA-256 of the file at ``path`` (hex), read a block at a time."""
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def same_content(a: Path, b: Path) -> bool:
    """Whether the files ``a`` and ``b`` hold the same bytes: sizes first, then block by block
    (not ``filecmp.cmp``, whose cache would answer for a file rewritten within one mtime tick)."""
    if a.stat().st_size != b.stat().st_size:
        return False
    with a.open("rb") as first, b.open("rb") as second:
        while (block := first.read(BLOCK)) == second.read(BLOCK):
            if not block:
                return True
    return False


def _snapshot(source: Path, copy: Path) -> str:
    """Copy ``source`` to ``copy`` a block at a time; the SHA-256 of what was copied (one
    pass: a file still being written gets a key that names the copy's content)."""
    digest = hashlib.sha256()
    with source.open("rb") as reading, copy.open("wb") as writing:
        while block := reading.read(BLOCK):
            digest.update(block)
            writing.write(block)
    return digest.hexdigest()


def dataset_file(path: Path) -> Path:
    """The samples file of ``path`` (a JSONL file, or a folder holding ``samples.jsonl``).

    Raises
    ------
    RegistrationError
        If ``path`` does not exist, is a folder without ``samples.jsonl``, is not a
        ``.jsonl``/``.ndjson`` file, is no UTF-8 text at all (gzip, UTF-16: said once, as what it
        is) or holds no JSON line (empty or blank lines only).
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
        kind = not_text(handle.read(64))
        if kind:
            raise RegistrationError(f"{path}: {kind}; nothing registered")
        handle.seek(0)
        if not any(line.strip() for line in handle):
            raise RegistrationError(f"{path} is empty (no JSON line): nothing to evaluate, nothing registered")
    return path


_META = 'meta.json holds a JSON object, like {"retriever": "bm25-v2", "generator": "gpt-4o-mini"}'


def read_meta(path: Path) -> dict:
    """A version's ``meta.json``: a JSON object (``retriever``, ``generator``, ...).

    Raises
    ------
    RegistrationError
        If the file does not exist, is not a JSON object, or is nested more than 64 levels deep (or
        deeper than the interpreter's stack), naming the file (and the field).
    """
    def finite_only(text: str) -> float:  # JSON has no NaN or Infinity (nor 1e999): summary.json must stay JSON
        number = float(text)
        if not math.isfinite(number):
            raise ValueError(f"{text} is not a finite number")
        return number

    try:
        meta = json.loads(path.read_text(encoding="utf-8"), parse_constant=finite_only, parse_float=finite_only)
    except FileNotFoundError:
        raise RegistrationError(f"meta file not found: {path}") from None
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError is a ValueError
        raise RegistrationError(f"{path}: not JSON ({clip(str(exc))})") from None
    except RecursionError:  # deeper than the interpreter's stack
        raise RegistrationError(f"{path}: {TOO_DEEP}; {_META}") from None
    if not isinstance(meta, dict):
        raise RegistrationError(f"{path}: {_META}")
    if found := field_problem(meta):  # summary.json and Dagster's metadata hold it: nothing deeper than a sample
        raise RegistrationError(f"{path}: field {found[0]!r}: {found[1]}; {_META}")
    return meta


def _add_partition(instance: dg.DagsterInstance, key: str) -> bool:
    """Add the partition; False if it existed (also when another process added it just now)."""
    if instance.has_dynamic_partition(DATASET_VERSIONS, key):
        return False
    try:
        instance.add_dynamic_partitions(DATASET_VERSIONS, [key])
    except IntegrityError:  # added by a concurrent registration between the check and the insert
        return False
    return True


def register_version(instance: dg.DagsterInstance, store: DatasetStore, dataset: Path, version: str | None = None,
                     meta: Path | None = None, replace: bool = False, settings: dict | None = None) -> tuple[str, bool]:
    """Register ``dataset`` (a JSONL file or a version folder) as a version: ``(key, new)``.

    Without ``version``, a version with the same content is reused, else a default key
    is made. ``meta`` defaults to the ``meta.json`` beside the dataset, if any. ``settings``
    (``{"max_rejected_share": 0.3}``) are kept with the version, over those it had
    (``rag_eval.assets.resources.DatasetStore.settings``), before its partition can be launched.

    Raises
    ------
    RegistrationError
        For a dataset :func:`dataset_file` refuses, a bad key or meta file, or a key
        holding other content (unless ``replace``), also when another registration
        took the key at the same moment.
    """
    source = dataset_file(dataset)
    if version is not None and len(version) > MAX_KEY_CHARS:
        raise RegistrationError(f"dataset version {quote(version[:60] + '…')} ({len(version):,} characters): at most "
                                f"{MAX_KEY_CHARS} characters (it names a folder and a partition)")
    if version is not None and not _KEY.fullmatch(version):
        raise RegistrationError(f"dataset version {quote(version)}: use letters, digits, '.', '_' and '-' only "
                                "(it names a folder and a partition)")
    if version is not None and version.lower() in RESERVED_KEYS:
        raise RegistrationError(f"dataset version {version!r}: a name out/ or datasets/ uses for itself, or the "
                                f"gate's word for the version before; reserved: {', '.join(sorted(RESERVED_KEYS))}")
    meta_path = meta or (source.parent / "meta.json" if (source.parent / "meta.json").is_file() else None)
    meta_text = json.dumps(read_meta(meta_path), ensure_ascii=False, indent=2) if meta_path else None
    root = Path(store.root)
    # The same content registered already (under any key, or under the key asked for): reused, nothing copied.
    candidates = store.versions() if version is None else [version] if store.samples_path(version).exists() else []
    same = next((v for v in candidates if same_content(store.samples_path(v), source)), None)
    if same is not None:
        return same, _reuse(instance, store, same, meta_text, settings)
    stage = root / f".staging-{uuid.uuid4().hex}"
    stage.mkdir(parents=True)
    try:  # one snapshot of the file: what is hashed, compared and renamed into place
        staged = stage / "samples.jsonl"
        digest = _snapshot(source, staged)
        version = version or default_key(source.parent.name if source.stem == "samples" else source.stem, digest)
        if store.samples_path(version).exists():
            return version, _update(instance, store, version, staged, meta_text, replace, settings)
        if meta_text is not None:
            (stage / "meta.json").write_text(meta_text, encoding="utf-8")
        if settings:
            (stage / SETTINGS_FILE).write_text(json.dumps(settings, indent=2), encoding="utf-8")
        added = _add_partition(instance, version)
        try:
            os.rename(stage, root / version)  # atomic; refused when the folder exists (non-empty)
        except OSError:
            if not store.samples_path(version).exists():
                if added:
                    instance.delete_dynamic_partition(DATASET_VERSIONS, version)
                raise
            return version, _update(instance, store, version, staged, meta_text, replace, settings)  # a twin won
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return version, True


def _update(instance: dg.DagsterInstance, store: DatasetStore, version: str, staged: Path, meta_text: str | None,
            replace: bool, settings: dict | None) -> bool:
    """An existing version and the ``staged`` copy of a file: the same content is reused; other
    content needs ``replace`` (the staged copy then takes the version's place, atomically)."""
    target = store.samples_path(version)
    if not same_content(target, staged):
        if not replace:
            raise RegistrationError(f"dataset version {version!r} already exists with other content ({target}); "
                                    "pass --replace to replace it, or choose another --dataset-version")
        os.replace(staged, target)
    return _reuse(instance, store, version, meta_text, settings)


def _reuse(instance: dg.DagsterInstance, store: DatasetStore, version: str, meta_text: str | None,
           settings: dict | None) -> bool:
    """An existing version kept (its meta file written when given, ``settings`` added to its own,
    its partition added if missing): ``False``."""
    if meta_text is not None:
        store.samples_path(version).with_name("meta.json").write_text(meta_text, encoding="utf-8")
    if settings:
        path = store.samples_path(version).with_name(SETTINGS_FILE)
        staged = path.with_name(f".{SETTINGS_FILE}.{uuid.uuid4().hex}")
        staged.write_text(json.dumps({**store.settings(version), **settings}, indent=2), encoding="utf-8")
        os.replace(staged, path)  # atomic: a run starting now reads the old settings or the new
    _add_partition(instance, version)
    return False


def unregister(instance: dg.DagsterInstance, store: DatasetStore, version: str) -> None:
    """Remove a version: its partition and its folder (for a first ingestion that failed)."""
    if instance.has_dynamic_partition(DATASET_VERSIONS, version):
        instance.delete_dynamic_partition(DATASET_VERSIONS, version)
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
    key = default_key(folder, sha256_of(store.samples_path(folder)))
    try:
        os.rename(Path(store.root) / folder, Path(store.root) / key)
    except OSError:
        if store.samples_path(key).exists() and same_content(store.samples_path(key), store.samples_path(folder)):
            shutil.rmtree(Path(store.root) / folder, ignore_errors=True)
        else:
            raise
    return key
