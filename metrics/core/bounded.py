"""Bounded input: configuration YAML that cannot expand without limit, and values quoted in errors
at a bounded length.

YAML's anchors and aliases let a 1 KB file stand for billions of values (an "alias bomb"): loading
it is cheap (the aliases share one object), but anything that walks the value (a validation error
quoting it, a copy) expands it. :func:`load_yaml` is the one YAML loader of the project's
configuration files (custom metrics, target configurations): safe YAML (no Python objects) whose
values, aliases expanded, number at most :data:`MAX_YAML_VALUES` and hold at most :data:`MAX_YAML_CHARS`
characters (a few aliases of a long string would otherwise make an error message of hundreds of MB), in a
text of at most :data:`MAX_YAML_TEXT` characters (refused before it is parsed: PyYAML reads some
100 KB a second, and a 300,000-entry file took 46 s and 860 MB to be refused). :func:`read_bounded` reads
a configuration or settings file (YAML, TOML, JSON) without reading more than its limit: a regular file only
(a link to ``/dev/zero`` would otherwise be read until memory runs out). :func:`quote` is the ``repr`` an
error message gives of a value a user wrote: at most :data:`MAX_QUOTE` characters, however large
or deeply nested the value.
"""
from __future__ import annotations

import errno
import os
import reprlib
import stat
from pathlib import Path
from typing import Any

import yaml
from rag_eval.metrics.errors import InputError, SettingsError

#: Values (scalars, lists, mappings) a configuration file may hold with its aliases expanded.
MAX_YAML_VALUES = 100_000
#: Characters the values of a configuration file may hold with its aliases expanded (10 MB of text).
MAX_YAML_CHARS = 10_000_000
#: Characters a configuration file may hold (1 MB of text; these files are a few KB): bytes, read from a file.
MAX_YAML_TEXT = 1_000_000
#: What to do with a configuration file too large (:func:`load_yaml`, :func:`read_bounded`).
_KEEP_SHORT = "keep long data (questions, documents) in their own files"
#: Characters of a value an error message quotes at most.
MAX_QUOTE = 300

_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxlist, _REPR.maxdict, _REPR.maxtuple, _REPR.maxset = 4, 8, 8, 8, 8
_REPR.maxstring, _REPR.maxother = MAX_QUOTE, MAX_QUOTE


def quote(value: Any) -> str:
    """``repr(value)`` cut to :data:`MAX_QUOTE` characters (``…`` where cut), built without
    expanding more than a few items of each container."""
    return clip(_REPR.repr(value))


def clip(text: str, limit: int = MAX_QUOTE) -> str:
    """``text`` cut to ``limit`` characters (``…`` where cut): a library's message that may quote a whole line."""
    return text if len(text) <= limit else f"{text[:limit - 1]}…"


def read_bounded(path: str | Path, limit: int = MAX_YAML_TEXT, *, links: bool = True, fix: str = "") -> str:
    """The UTF-8 text of the file ``path``, reading at most ``limit`` + 1 bytes of it.

    ``links=False`` refuses a symbolic link (checked as the file is opened, ``O_NOFOLLOW``): for a file
    rag-eval writes itself. ``fix`` ends the message of a file refused (too large, not a regular file, a link);
    unset, a configuration file's (keep long data elsewhere; give a regular file).

    Raises
    ------
    SettingsError
        Naming ``path``: not a regular file (a folder, a device such as ``/dev/zero``, a pipe), a
        symbolic link when ``links`` is false, or more than ``limit`` bytes.
    FileNotFoundError, OSError
        As :func:`open` does, for a file that is not there or cannot be read.
    UnicodeDecodeError
        For a file that is not UTF-8.
    """
    try:  # O_NONBLOCK: opening a pipe no one writes to returns at once (it is refused below)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | (0 if links else os.O_NOFOLLOW))
    except OSError as exc:
        if exc.errno == errno.ELOOP and not links:
            raise SettingsError(f"{path}: a symbolic link, which rag-eval does not follow here: refused; {fix}") from None
        raise
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise SettingsError(f"{path}: not a regular file (a folder, a device or a pipe): refused; "
                            f"{fix or 'give a regular file'}")
    with os.fdopen(fd, "rb") as file:
        data = file.read(limit + 1)
    if len(data) > limit:
        raise SettingsError(f"{path}: {max(info.st_size, len(data)):,} bytes, more than a configuration file may "
                            f"hold ({limit:,}): refused; {fix or _KEEP_SHORT}")
    return data.decode("utf-8")


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return list(node.value) if isinstance(node, yaml.SequenceNode) else []


def _expanded(node: yaml.Node) -> tuple[int, int, bool]:
    """How many values ``node`` stands for with every alias expanded, and how many characters its
    scalars hold then, each counted no further than its limit + 1 (each node counted once: an
    alias is a shared node; a node holding itself is endless); and whether it holds an alias. No recursion."""
    limits = (MAX_YAML_VALUES + 1, MAX_YAML_CHARS + 1)
    counts: dict[int, tuple[int, int]] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(node, False)]
    shared = False
    while stack:
        item, closing = stack.pop()
        if closing:
            open_nodes.discard(id(item))
            children = [counts[id(child)] for child in _children(item)]
            own = (1, len(item.value) if isinstance(item, yaml.ScalarNode) else 0)
            counts[id(item)] = (min(limits[0], own[0] + sum(c[0] for c in children)),
                                min(limits[1], own[1] + sum(c[1] for c in children)))
        elif id(item) in open_nodes:
            return (*limits, True)  # an alias to a node it is inside of
        elif id(item) in counts:
            shared = True  # met again: an alias
        else:
            open_nodes.add(id(item))
            stack.append((item, True))
            stack.extend((child, False) for child in _children(item))
    return (*counts[id(node)], shared)


def load_yaml(text: str, where: str) -> Any:
    """The document of the YAML ``text`` (safe types only; ``None`` when empty).

    Raises
    ------
    yaml.YAMLError
        Not valid YAML, naming the line and column.
    ValueError
        A text of more than :data:`MAX_YAML_TEXT` characters (before it is parsed); more than
        :data:`MAX_YAML_VALUES` values or values of more than :data:`MAX_YAML_CHARS` characters (said to
        be an alias bomb only when aliases expand to them); or collections nested deeper than Python's
        recursion limit, naming ``where`` (the file).
    """
    if len(text) > MAX_YAML_TEXT:
        raise InputError(f"{where}: {len(text):,} characters, more than a configuration file may hold "
                         f"({MAX_YAML_TEXT:,}): refused; {_KEEP_SHORT}")
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        values, chars, aliased = _expanded(node)
        if values > MAX_YAML_VALUES or chars > MAX_YAML_CHARS:
            size = f"{MAX_YAML_VALUES:,} values" if values > MAX_YAML_VALUES else f"{MAX_YAML_CHARS:,} characters"
            raise InputError(f"{where}: its anchors and aliases expand to more than {size} (an alias bomb?): refused; "
                             "write the values out, or reuse fewer" if aliased else
                             f"{where}: it holds more than {size}, more than a configuration file may: refused")
        return loader.construct_document(node)
    except RecursionError:  # PyYAML composes and constructs nested collections by recursion
        raise InputError(f"{where}: its values are nested too deeply to read") from None
    finally:
        loader.dispose()
