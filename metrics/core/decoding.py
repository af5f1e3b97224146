"""Reading a record's JSON so that one line never sinks a file: numbers the reader cannot hold and
nesting deeper than a sample can be are the line's problem, named with their field.

Python converts at most ``sys.get_int_max_str_digits()`` (4,300) digits of an integer, and a float
literal beyond about 1.8e308 (``1e400``) becomes infinity. :func:`decode_json` reads such a number as a
:class:`Unreadable` marker instead of raising (or inventing ``inf``), and :func:`record_problem` finds
it (or an integer of too many digits built in Python) and names the field that holds it.
"""
from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from rag_eval.metrics.errors import InputError

#: Nesting deeper than this makes a line unreadable (deeper input cannot be a RAG sample).
MAX_DEPTH = 64
#: Why a record nested more than :data:`MAX_DEPTH` levels cannot be read.
TOO_DEEP = f"nested more than {MAX_DEPTH} levels deep"
#: How much of a key a problem quotes.
_KEY_CHARS = 80


class Unreadable:
    """A number of a JSON text that the reader cannot hold: :attr:`why` says what it is."""

    __slots__ = ("why",)

    def __init__(self, why: str) -> None:
        self.why = why

    def __repr__(self) -> str:
        return f"<{self.why}>"


def _limit() -> int:
    return sys.get_int_max_str_digits()


def _integer(text: str) -> int | Unreadable:
    digits = len(text.lstrip("-"))
    if _limit() and digits > _limit():
        return Unreadable(f"an integer of {digits:,} digits, more than the {_limit():,} this reader converts")
    return int(text)


def _float(text: str) -> float | Unreadable:
    value = float(text)
    if math.isinf(value):  # a finite literal out of a float's range (1e400), not the Infinity constant
        shown = text if len(text) <= 40 else f"{text[:40]}…"
        return Unreadable(f"the number {shown}, beyond the range of a float (about 1.8e308)")
    return value


def decode_json(text: str | bytes) -> Any:
    """``json.loads(text)`` with every integer of too many digits and every float literal out of
    range read as an :class:`Unreadable` marker (:func:`record_problem` names its field).

    Raises
    ------
    json.JSONDecodeError, RecursionError
        As ``json.loads`` (not JSON; nested deeper than the interpreter's stack).
    """
    return json.loads(text, parse_int=_integer, parse_float=_float)


def json_object(text: str | bytes) -> tuple[dict[str, Any] | None, str | None]:
    """A line of JSON as ``(record, None)``, or ``(None, why)`` when it is no record a reader can
    use: not UTF-8 (bytes), not JSON, nested more than :data:`MAX_DEPTH` levels (deeper than the
    interpreter's stack too), not an object, or holding a number the reader cannot hold
    (:func:`record_problem`, naming its field). Never raises for the line's content."""
    try:
        record = decode_json(text)
    except UnicodeDecodeError as exc:
        return None, f"not valid UTF-8 (byte {exc.start})"
    except json.JSONDecodeError as exc:
        return None, f"not valid JSON: {exc.msg} (column {exc.colno})"
    except RecursionError:
        return None, TOO_DEEP
    if not isinstance(record, dict):
        return None, f"a JSON {type(record).__name__}, not an object"
    problem = record_problem(record)
    return (None, problem) if problem else (record, None)


def _too_many_digits(value: int) -> bool:
    """Whether ``str(value)`` would exceed the conversion limit (by its bit length: no conversion)."""
    return bool(_limit()) and abs(value).bit_length() > _limit() * math.log2(10)


def field_problem(record: Mapping[str, Any]) -> tuple[str, str] | None:
    """The field (its key in the record, cut to 80 characters) that keeps the record from being
    read, and why: nested more than :data:`MAX_DEPTH` levels deep, or holding a number the reader
    cannot hold (an :class:`Unreadable` marker, or an integer of more digits than Python converts);
    else ``None``. Walks the record without recursion."""
    for key, value in record.items():
        name = str(key) if len(str(key)) <= _KEY_CHARS else f"{str(key)[:_KEY_CHARS]}…"
        stack = [(value, 2)]
        while stack:
            item, depth = stack.pop()
            if isinstance(item, (dict, list)):
                if depth > MAX_DEPTH:
                    return name, TOO_DEEP
                stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
            elif isinstance(item, Unreadable) or (isinstance(item, int) and _too_many_digits(item)):
                return name, item.why if isinstance(item, Unreadable) else \
                    f"an integer of more than the {_limit():,} digits this reader converts"
    return None


def record_problem(record: Mapping[str, Any]) -> str | None:
    """Why the record cannot be read as a sample (:func:`field_problem`: nested too deeply, or
    ``field '<key>': <why>`` for a number), else ``None``."""
    found = field_problem(record)
    if found is None:
        return None
    name, why = found
    return why if why == TOO_DEEP else f"field {name!r}: {why}"


def not_text(head: bytes) -> str | None:
    """What a file is, from its first bytes ``head``, when it is no UTF-8 text at all (said once for
    the file instead of "not valid UTF-8" on every line), with what to do; ``None`` otherwise:
    a gzip-compressed file, UTF-32 text with its byte-order mark, or UTF-16 text (with or without
    its byte-order mark)."""
    if head.startswith(b"\x1f\x8b\x08"):
        return "a gzip-compressed file, not JSON lines: decompress it first (gunzip), then pass the .jsonl file"
    if head.startswith((b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff")):  # before UTF-16: its LE mark starts so too
        return "UTF-32 text, not UTF-8: convert it first (iconv -f UTF-32 -t UTF-8, which reads the mark)"
    for mark, codec in ((b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be"), (b"", "utf-16-le"), (b"", "utf-16-be")):
        if not head.startswith(mark):
            continue
        body = head[len(mark):len(mark) + 32]
        try:
            text = body[:len(body) // 2 * 2].decode(codec)
        except UnicodeDecodeError:
            continue
        if b"\x00" in body and text.lstrip().startswith(("{", "[")):
            return f"{codec[:6].upper()} text, not UTF-8: convert it first (iconv -f {codec.upper()} -t UTF-8)"
    return None


def read_table(path: Path, suffix: str) -> list[Any]:
    """The records of a whole ``.json`` (a list of records, or a dict of columns as RAGAS and Hugging Face
    export), ``.csv`` (every cell text) or ``.parquet`` file.

    Raises
    ------
    InputError
        For another suffix, a JSON file of another shape, a CSV file without a table.
    ValueError, RecursionError
        For a file that is not what its suffix says (the caller names it).
    """
    if suffix == ".json":
        data = decode_json(path.read_text(encoding="utf-8"))
        if isinstance(data, dict) and all(isinstance(v, list) for v in data.values()):
            return pd.DataFrame(data).to_dict("records")  # column-oriented (RAGAS/HF export)
        if isinstance(data, list):
            return data
        raise InputError(f"{path}: expected a list of records or a dict of columns")
    if suffix == ".csv":
        try:
            # No type guessing ("8" stays text); a line of spaces is a record (pandas would drop it as blank).
            return pd.read_csv(path, dtype=str, skip_blank_lines=False).to_dict("records")
        except pd.errors.EmptyDataError:
            raise InputError(f"{path}: no CSV table in it (empty, or blank lines only)") from None
    if suffix == ".parquet":
        return pd.read_parquet(path).to_dict("records")
    raise InputError(f"{path}: unsupported file type {suffix!r} (use .jsonl, .json, .csv or .parquet)")
