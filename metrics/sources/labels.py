"""Human labels as data: one label per (row, metric), read, validated and stored with a version.

A label says what a person thinks of one metric on one row of a version: a number on the
metric's own scale (``faithfulness`` 0-1, ``groundedness`` 1-5), or for a [0, 1] metric a
verdict word (``pass``/``fail``, ``accept``/``reject``, ``yes``/``no``, ``true``/``false``:
1 for a passing row, 0 for a failing one; turned for a lower-is-better metric, where a
passing row is low). Labels come from

* a CSV file (``rag-eval annotate export`` writes one to fill in a spreadsheet): a header
  row, then ``id`` (or ``sample_id``) and/or ``line`` (the row's line in the version's
  file, from 1), ``metric``, ``label``, optionally ``annotator``, ``notes`` and
  ``labelled_at``; other columns (the fields shown to the annotator) are ignored and an
  empty ``label`` is a row not labelled yet;
* a JSONL file, one object a line with the same keys;
* Label Studio's JSON export (tasks with ``data`` and ``annotations``, or its JSON-MIN
  flat records) of the tasks ``rag-eval annotate export`` wrote.

:func:`validate` checks every record against the version's rows and the metrics, naming
the file's line (counted from 1) or Label Studio task and the field of each bad one,
keeping the others. A version's labels are stored in ``<datasets>/<version>/labels.jsonl``
(:data:`LABELS_FILE`), merged by (line, metric): the newest label wins.
"""
from __future__ import annotations

import csv
import io
import itertools
import json
import math
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rag_eval.metrics.core.registry import Registry, given
from rag_eval.metrics.core.results import Direction
from rag_eval.metrics.errors import InputError, NotFoundError

#: A version's labels, beside its ``samples.jsonl``.
LABELS_FILE = "labels.jsonl"
#: Verdict words (case-insensitive) and whether the row passes.
VERDICTS = {"pass": True, "passed": True, "accept": True, "accepted": True, "yes": True, "true": True,
            "fail": False, "failed": False, "reject": False, "rejected": False, "no": False, "false": False}
_DECIMAL_COMMA = re.compile(r"[-+]?[0-9]+,[0-9]+")
#: A number as a person writes it in a sheet: ASCII digits, a point, an exponent.
_NUMBER = re.compile(r"[-+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?")
#: The keys of a stored label, in order.
STORED_KEYS = ("id", "line", "metric", "label", "annotator", "notes", "labelled_at", "source")


class LabelProblem(InputError):
    """A label record that cannot be used (a ``ValueError`` too): ``where`` (``labels.csv line 7``), the field, why."""

    def __init__(self, where: str, field: str, message: str) -> None:
        super().__init__(f"{where}: field '{field}': {message}")
        self.where, self.field = where, field


def is_ratio(metric: str, registry: Registry | None = None) -> bool:
    """Whether ``metric`` (of ``registry``, default the built-in metrics) is on [0, 1], the scale verdict
    words and binary labels belong to."""
    return tuple(given(registry)[metric].value_range) == (0.0, 1.0)


def verdict_value(passes: bool, metric: str, registry: Registry | None = None) -> float:
    """A verdict as a number on a [0, 1] metric's scale (``metric`` of ``registry``, default the built-in
    metrics): 1 passes (0 for a lower-is-better metric)."""
    higher = given(registry)[metric].direction is Direction.HIGHER
    return float(passes == higher)


def label_value(value: Any, metric: str, registry: Registry | None = None) -> float | None:
    """The label ``value`` of ``metric`` (of ``registry``, default the built-in metrics) as a number on the
    metric's scale; ``None`` for a blank one (a row not labelled yet).

    Raises
    ------
    ValueError
        For a value that is neither a number in the metric's range nor (on a [0, 1] metric)
        a verdict word.
    """
    if value is None or (isinstance(value, float) and math.isnan(value)) or \
            (isinstance(value, str) and not value.strip()):
        return None
    low, high = given(registry)[metric].value_range
    kind = f"a number in [{low:g}, {high:g}]" + (" or pass/fail" if is_ratio(metric, registry) else "")
    if isinstance(value, bool) or (isinstance(value, str) and value.strip().lower() in VERDICTS):
        if not is_ratio(metric, registry):
            raise ValueError(f"{value!r} is a verdict; {metric} takes {kind}")
        return verdict_value(value if isinstance(value, bool) else VERDICTS[value.strip().lower()], metric, registry)
    if isinstance(value, str) and _DECIMAL_COMMA.fullmatch(value.strip()):
        value = value.strip().replace(",", ".")  # a spreadsheet of a locale writing 0,5 for 0.5
    shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:40] + "…"
    try:
        if isinstance(value, str) and not _NUMBER.fullmatch(value.strip()):
            raise ValueError(value)  # float() also takes '4_0', '４', 'nan', 'infinity'
        number = float(value)
    except OverflowError:  # an integer beyond a float: out of any range
        number = math.inf
    except (TypeError, ValueError):
        raise ValueError(f"{shown} is not a label of {metric} ({kind})") from None
    if not math.isfinite(number) or not low <= number <= high:
        raise ValueError(f"{shown} lies outside {metric}'s range ({kind})")
    return number


def _utf8(path: Path) -> str:
    """The text of ``path`` (a byte-order mark dropped).

    Raises
    ------
    ValueError
        Naming the file and the line of the first byte that is not UTF-8.
    """
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise InputError(f"{path} line {line}: not UTF-8 (byte {exc.start}); save it as UTF-8") from None


def _csv_records(path: Path) -> Iterator[tuple[int, str, dict[str, Any] | str]]:
    text = _utf8(path)
    if not text.strip():
        yield 1, f"{path.name} line 1", "empty file: expected a header row (id or line, metric, label)"
        return
    first = text.split("\n", 1)[0]
    delimiter = max(",;\t", key=first.count)  # a spreadsheet in some locales writes ';'
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    header = [h.strip().lower() for h in next(reader, [])]
    for sheet_row in itertools.count(2):
        line = reader.line_num + 1
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            yield line, f"{path.name} line {line}", f"not valid CSV: {exc}"
            return
        where = f"{path.name} line {line}" + (f" (sheet row {sheet_row})" if sheet_row != line else "")
        if any(c.strip() for c in cells):
            yield line, where, dict(zip(header, cells))


def _jsonl_records(path: Path) -> Iterator[tuple[int, str, dict[str, Any] | str]]:
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                text = raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                yield number, f"{path.name} line {number}", f"not UTF-8 (byte {exc.start} of the line)"
                continue
            if not text.strip():
                continue
            try:
                record = json.loads(text.rstrip("\r\n"))
            except json.JSONDecodeError as exc:
                yield number, f"{path.name} line {number}", f"not valid JSON: {exc.msg} (column {exc.colno})"
                continue
            except ValueError as exc:  # an integer of more than 4,300 digits
                yield number, f"{path.name} line {number}", f"not readable: {exc}"
                continue
            except RecursionError:
                yield number, f"{path.name} line {number}", "not readable: JSON nested too deeply"
                continue
            yield number, f"{path.name} line {number}", record if isinstance(record, dict) else \
                f"a JSON {type(record).__name__}, not an object"


def _label_studio(path: Path, tasks: Any) -> Iterator[tuple[int, str, dict[str, Any] | str]]:
    """Label Studio's JSON export (``tasks``, parsed): one record per annotation of a task (a
    cancelled one skipped; the choice, rating or number is the label, the ``notes`` text area
    the notes), or its JSON-MIN flat records; a task or annotation of another shape is its message."""
    if not isinstance(tasks, list):
        yield 1, path.name, "expected Label Studio's JSON export: a list of tasks"
        return
    for number, task in enumerate(tasks, start=1):
        where = f"{path.name} task {number}"
        if not isinstance(task, dict):
            yield number, where, f"a JSON {type(task).__name__}, not a task"
            continue
        if "data" not in task:  # JSON-MIN: the task's data and each control's value flat
            yield number, where, {**task, "labelled_at": task.get("updated_at") or task.get("created_at")}
            continue
        data = task["data"] if isinstance(task["data"], dict) else {}
        annotations = task.get("annotations") or []
        if not isinstance(annotations, list) or not all(isinstance(a, dict) for a in annotations):
            yield number, where, "annotations: expected a list of objects, as Label Studio exports them"
            continue
        for annotation in annotations:
            if annotation.get("was_cancelled"):
                continue
            record = {k: data.get(k) for k in ("sample_id", "id", "line", "metric", "version")}
            results = annotation.get("result") or []
            if not isinstance(results, list) or not all(isinstance(r, dict) for r in results):
                yield number, where, "annotations.result: expected a list of objects, as Label Studio exports them"
                break
            for item in results:
                value = item.get("value") if isinstance(item.get("value"), dict) else {}
                if "text" in value:
                    text = value["text"]
                    record["notes"] = " ".join(map(str, text)) if isinstance(text, list) else str(text)
                for control in ("choices", "rating", "number"):
                    if control in value:
                        chosen = value[control]
                        record["label"] = (chosen[0] if chosen else None) if isinstance(chosen, list) else chosen
            who = annotation.get("completed_by")
            record["annotator"] = who.get("email", who.get("id")) if isinstance(who, dict) else who
            record["labelled_at"] = annotation.get("updated_at") or annotation.get("created_at")
            yield number, where + (f" (Label Studio id {task['id']})" if "id" in task else ""), record


def read_records(path: str | Path) -> Iterator[tuple[int, str, dict[str, Any] | str]]:
    """``(line, where, record)`` for each record of a label file (``.csv``, ``.jsonl``/``.ndjson``, or
    ``.json`` from Label Studio): ``line`` counted from 1 (CSV: the line the record starts on;
    Label Studio: the task), ``where`` naming the file and the line (and a CSV record's
    spreadsheet row when it differs, a task's Label Studio id); ``record`` is the line's message
    instead when it cannot be read.

    Raises
    ------
    NotFoundError
        For a missing file.
    ValueError
        For another file type, a ``.json`` file that is not JSON, or a CSV or JSON file that
        is not UTF-8 (naming the line).
    """
    path = Path(path)
    if not path.is_file():
        raise NotFoundError(f"label file not found: {path}")
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return _csv_records(path)
    if suffix in (".jsonl", ".ndjson"):
        return _jsonl_records(path)
    if suffix == ".json":
        text = _utf8(path)
        try:
            return _label_studio(path, json.loads(text))
        except json.JSONDecodeError as exc:
            raise InputError(f"{path} line {exc.lineno}: not valid JSON: {exc.msg}") from None
        except ValueError as exc:  # an integer of more than 4,300 digits
            raise InputError(f"{path}: not readable: {exc}") from None
        except RecursionError:
            raise InputError(f"{path}: not readable: JSON nested too deeply") from None
    raise InputError(f"{path}: unsupported label file type {suffix!r} (use .csv, .jsonl, or Label Studio's .json)")


def _text(value: Any) -> str | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    text = str(value).strip()
    return text or None


def validate(records: Iterable[tuple[int, str, dict[str, Any] | str]], ids: Iterable[tuple[int, str]],
             version: str | None = None,
             registry: Registry | None = None) -> tuple[list[dict[str, Any]], list[LabelProblem], int]:
    """Check label records against a version's rows; ``(labels, problems, blank)``.

    Parameters
    ----------
    records : iterable of (line, where, record)
        As :func:`read_records` yields them.
    ids : iterable of (int, str)
        The version's judged rows: ``(Sample.row, Sample.id)``, the row the line minus one (the turns of a
        conversation share their line, each with its id: a label names the turn by its id).
    version : str, optional
        The version the labels are for: a record naming another ``version`` is refused.
    registry : Registry, optional
        The metrics a label may name: default the built-in ones
        (``rag_eval.metrics.core.registry.builtin_registry``).

    Returns
    -------
    labels : list of dict
        The usable labels (:data:`STORED_KEYS`; ``label`` a float on the metric's scale).
    problems : list of LabelProblem
        One per refused record, naming its line and field: unreadable, no or an unknown
        ``metric``, neither ``id`` nor ``line``, an id not in the version (or held by several
        lines, without ``line``), a line outside it, an id and line that disagree, another
        version, a label out of range.
    blank : int
        Records without a label (rows not labelled yet): skipped, not a problem.
    """
    rows: dict[str, list[int]] = {}
    on_line: dict[int, list[str]] = {}
    for row, sample_id in ids:
        if sample_id not in on_line.setdefault(row, []):
            on_line[row].append(sample_id)
            rows.setdefault(sample_id, []).append(row)
    labels, problems, blank = [], [], 0
    for _, where, record in records:
        try:
            if isinstance(record, str):
                raise LabelProblem(where, "line", record)
            metric = _text(record.get("metric"))
            if metric is None or metric not in given(registry):
                raise LabelProblem(where, "metric", "missing" if metric is None else f"unknown metric {metric!r}")
            try:
                label = label_value(record.get("label"), metric, registry)
            except ValueError as exc:
                raise LabelProblem(where, "label", str(exc)) from None
            if label is None:
                blank += 1
                continue
            if version and _text(record.get("version")) not in (None, version):
                raise LabelProblem(where, "version", f"labels of {record['version']!r}, not of {version}")
            labels.append({**_where(where, record, on_line, rows), "metric": metric, "label": label,
                           "annotator": _text(record.get("annotator")), "notes": _text(record.get("notes")),
                           "labelled_at": _text(record.get("labelled_at")), "source": where})
        except LabelProblem as problem:
            problems.append(problem)
    return labels, problems, blank


def _where(where: str, record: Mapping[str, Any], on_line: Mapping[int, list[str]],
           rows: dict[str, list[int]]) -> dict[str, Any]:
    """``{"id", "line"}`` of the row a record names by its id, its line or both (``on_line``: the ids of
    each row; ``rows``: the rows of each id)."""
    sample_id = _text(record.get("sample_id")) or _text(record.get("id"))
    line_text = _text(record.get("line"))
    line = None
    if line_text is not None:
        whole = re.fullmatch(r"\+?([0-9]{1,12})(\.0*)?", line_text)  # a spreadsheet may write 2 as 2.0
        if whole is None:  # 2.5, nan, 1e308, 4_0, ４: not a line
            shown = repr(line_text) if len(line_text) <= 40 else repr(line_text[:40]) + "…"
            raise LabelProblem(where, "line", f"{shown} is not a line number")
        line = int(whole[1])
        if line - 1 not in on_line:
            raise LabelProblem(where, "line", f"{line} is not a line of the version's file "
                                              f"({len(on_line)} lines, 1 to {max(on_line, default=-1) + 1})")
    if sample_id is None:
        if line is None:
            raise LabelProblem(where, "id", "missing: give the row's id or its line")
        if len(turns := on_line[line - 1]) > 1:
            raise LabelProblem(where, "id", f"missing: line {line} holds a conversation of {len(turns)} turns "
                                            f"({', '.join(map(repr, turns[:3]))}{', …' if len(turns) > 3 else ''}): "
                                            "give the turn's id")
    else:
        found = rows.get(sample_id, [])
        if not found:
            raise LabelProblem(where, "id", f"{sample_id!r} is no row of the version")
        if line is not None and line - 1 not in found:
            raise LabelProblem(where, "line", f"line {line} holds another id than {sample_id!r}")
        if line is None and len(found) > 1:
            raise LabelProblem(where, "line", f"id {sample_id!r} is on lines "
                                              f"{', '.join(str(r + 1) for r in found)}: say which")
        line = line or found[0] + 1
    return {"id": sample_id or on_line[line - 1][0], "line": line}


def merge(stored: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``stored`` labels updated with ``new`` ones, by (line, id, metric): a new label replaces a
    stored one; among new ones, the later ``labelled_at`` (else the later record) wins.
    In line, id, then metric order."""
    merged = {(r["line"], str(r["id"]), r["metric"]): r for r in stored}
    for record in sorted(new, key=lambda r: r.get("labelled_at") or ""):  # stable: file order among equals
        merged[(record["line"], str(record["id"]), record["metric"])] = record
    return [merged[key] for key in sorted(merged)]


def read_stored(folder: str | Path) -> list[dict[str, Any]]:
    """The labels stored with a version (``<folder>/labels.jsonl``); ``[]`` without the file."""
    path = Path(folder) / LABELS_FILE
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def write_stored(folder: str | Path, labels: list[dict[str, Any]]) -> Path:
    """Write ``labels`` as the version's ``labels.jsonl`` (atomically: staged, then renamed)."""
    path = Path(folder) / LABELS_FILE
    staged = path.with_name(f".{LABELS_FILE}.{os.getpid()}.tmp")
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    staged.write_text("".join(json.dumps({k: r.get(k) for k in STORED_KEYS} | {"labelled_at": r.get("labelled_at")
                                                                                 or now}, ensure_ascii=False) + "\n"
                              for r in labels), encoding="utf-8")
    os.replace(staged, path)
    return path



def labels_frame(folder: str | Path, ids: Iterable[tuple[int, str]], version: str | None = None,
                 registry: Registry | None = None) -> tuple[Any, list[LabelProblem]]:
    """A version's stored labels (``<folder>/labels.jsonl``), checked again against its rows
    (``ids``: ``(row, sample id)`` pairs) and the metrics of ``registry`` (:func:`validate`), as a DataFrame of :data:`FRAME_COLUMNS`, with the problems of
    the lines refused (a file edited by hand); an empty frame without the file. Columns: :data:`STORED_KEYS`."""
    import pandas as pd

    path = Path(folder) / LABELS_FILE
    labels, problems, _ = validate(read_records(path), ids, version, registry) if path.exists() else ([], [], 0)
    return pd.DataFrame(labels, columns=list(STORED_KEYS)).astype({"line": "int64", "label": "float64"}), problems
