"""Settings files: a ``[tool.rag_eval.<section>]`` table of ``pyproject.toml``, or a TOML file of the same keys."""
from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any
from rag_eval.metrics.errors import SettingsError

from rag_eval.metrics.core.bounded import quote, read_bounded


def tool_section(path: str | Path | None, section: str, known: set[str]) -> dict[str, Any]:
    """The settings of ``[tool.rag_eval.<section>]`` of ``path`` (default ``pyproject.toml`` in the
    working folder; absent, or without the table: ``{}``); a file given as ``path`` may also hold
    the keys at its top level.

    Raises
    ------
    FileNotFoundError
        If ``path`` is given and does not exist.
    ValueError
        For a file that is not UTF-8 TOML (or holds an integer too long to read), not a regular file or
        larger than :data:`rag_eval.metrics.core.bounded.MAX_YAML_TEXT` (refused before it is read whole),
        a ``tool``, ``tool.rag_eval`` or section that is not a table, or a key not in ``known`` (each named
        with the file).
    """
    source = Path(path) if path else Path("pyproject.toml")
    values: dict[str, Any] = {}
    if path or source.exists():
        try:
            document = tomllib.loads(read_bounded(source))
        except SettingsError:  # refused unread (too large, not a regular file)
            raise
        except UnicodeDecodeError as exc:
            raise SettingsError(f"{source}: not UTF-8 (byte {exc.start})") from None
        except tomllib.TOMLDecodeError as exc:
            raise SettingsError(f"{source}: not valid TOML: {exc}") from exc
        except ValueError as exc:  # an integer of more digits than Python converts (sys.get_int_max_str_digits)
            raise SettingsError(f"{source}: a value cannot be read: {str(exc).split(';')[0]}") from None
        except RecursionError:  # tomllib parses nested arrays and tables by recursion
            raise SettingsError(f"{source}: its values are nested too deeply to read") from None
        values = document
        keys = ("tool", "rag_eval", section)
        for depth, key in enumerate(keys, start=1):
            values = values.get(key, {})
            if not isinstance(values, dict):
                raise SettingsError(f"{source}: {'.'.join(keys[:depth])} must be a table, got {type(values).__name__}")
        if path and not values:
            values = {k: v for k, v in document.items() if k != "tool"}
    unknown = sorted(set(values) - known)
    if unknown:
        raise SettingsError(f"{source}: unknown {section} setting(s) {quote(unknown)}; known: {sorted(known)}")
    return dict(values)
