"""A target configuration file read and its keys' types checked, before anything is read from them
(``rag_eval.metrics.sources.targets.config.load_config`` builds the configurations), and the error every
problem of the file is (:class:`TargetConfigError`, naming the file and the key).
"""
from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rag_eval.metrics.core.bounded import MAX_QUOTE, clip, load_yaml, quote, read_bounded
from rag_eval.metrics.errors import SettingsError


class TargetConfigError(SettingsError):
    """A configuration file that cannot be used; the message names the file and the entry (a ``ValueError`` too)."""


def read_config_file(path: Path) -> dict[str, Any]:
    """The settings of the configuration file ``path``: TOML, or YAML with a ``.yaml``/``.yml`` suffix.

    Raises
    ------
    TargetConfigError
        For a file that is not there, cannot be parsed (the parser's message names the line), or
        does not hold a table at the top.
    """
    try:
        text = read_bounded(path)
    except FileNotFoundError:
        raise TargetConfigError(f"target configuration not found: {path}") from None
    try:
        if path.suffix.lower() in (".yaml", ".yml"):
            data = load_yaml(text, str(path))
        else:
            data = tomllib.loads(text)
    except Exception as exc:  # noqa: BLE001 - tomllib.TOMLDecodeError, yaml.YAMLError: both name the line
        message = "its values are nested too deeply to read" if isinstance(exc, RecursionError) else str(exc)
        raise TargetConfigError(message if message.startswith(f"{path}: ") else f"{path}: {clip(message, 2 * MAX_QUOTE)}") from None
    if not isinstance(data, dict):
        raise TargetConfigError(f"{path}: expected a table of settings at the top")
    return data


class _Call(BaseModel):
    """``[call]``'s keys and their types (``rag_eval.metrics.sources.targets.config.CallSettings``)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    concurrency: int = Field(4, ge=1)
    timeout: float = Field(30.0, gt=0, allow_inf_nan=False)
    max_attempts: int = Field(3, ge=1)
    cache_path: str = ".rag_eval_cache/targets.sqlite"


class _PartShape(BaseModel):
    """What a ``[<role>.NAME]`` table's typed keys hold (the rest: the part's own settings)."""

    model_config = ConfigDict(extra="allow", strict=True)
    requires_env: list[str] = []
    headers: dict[str, str] = {}


class _Shape(BaseModel):
    """The types of a configuration file's keys, checked before anything is read from them."""

    model_config = ConfigDict(extra="forbid", strict=True)
    questions: str
    metrics: list[str] = []
    metric_options: dict[str, dict[str, Any]] = {}
    sweep: dict[str, str | list[Any]] = {}
    call: _Call = _Call()
    retriever: dict[str, _PartShape] = {}
    generator: dict[str, _PartShape] = {}
    system: dict[str, _PartShape] = {}


def check_shape(path: Path, data: dict[str, Any]) -> None:
    """Refuse a key of the wrong type (or an unknown top-level key), naming the file and the key.

    Raises
    ------
    TargetConfigError
        The first key that does not fit :class:`_Shape`: ``<file>: <key.path>: <why>, got <value>``.
    """
    if not data.get("questions"):
        raise TargetConfigError(f"{path}: name the question set: questions = \"questions.jsonl\"")
    try:
        _Shape.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        key = ".".join(str(part) for part in error["loc"])
        raise TargetConfigError(f"{path}: {key}: {error['msg']}, got {clip(quote(error.get('input')), 60)}") from None
