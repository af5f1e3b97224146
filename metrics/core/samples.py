"""The sample model: RAGAS field names, peer aliases, loading from files and frames.

A sample has the RAGAS fields ``user_input``, ``response``, ``retrieved_contexts``
(list of str) and ``reference``, plus an ``id``. Aliases of dingo, Azure AI
Evaluation, DeepEval and older RAGAS are accepted, and a user mapping (as in dingo's
``fields``) names any other column. A field that is absent or null is *missing*; a
field of the wrong type is *malformed* and recorded in ``Sample.problems`` (what each field's
value must be: ``rag_eval.metrics.core.field_values``). Neither raises: the metrics that need the
field report ``input_error`` naming row and field.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, overload

import pandas as pd

from rag_eval.metrics.core.conversation import distinct, is_conversation, turns, with_history
from rag_eval.metrics.core.decoding import json_object, not_text, read_table, record_problem
from rag_eval.metrics.core.field_values import is_null, normalise
from rag_eval.metrics.errors import InputError, NotFoundError, SettingsError

FIELDS = ("user_input", "response", "retrieved_contexts", "reference", "retrieval_ground_truth",
          "retrieved_documents")
ALIASES: dict[str, tuple[str, ...]] = {
    "user_input": ("prompt", "question", "query", "input"),
    "response": ("content", "answer", "actual_output"),
    "retrieved_contexts": ("context", "contexts", "retrieval_context"),
    "reference": ("expected_output", "ground_truth", "ground_truths"),
    "retrieval_ground_truth": ("qrels",),
    "retrieved_documents": ("run",),
}


@dataclass
class Sample:
    """One RAG interaction to evaluate.

    Attributes
    ----------
    id : str
        Taken from the input's ``id`` when present, else :func:`stable_id` (a hash of
        ``user_input`` and ``reference``, the same across dataset versions).
    row : int
        0-based position in the input, for error messages.
    user_input, response, reference : str or None
        ``None`` when missing or malformed. A ``reference`` given as a list of strings
        is joined with newlines.
    retrieval_ground_truth, retrieved_documents : list of dict or None
        Azure DocumentRetrieval's inputs: ``[{"document_id", "query_relevance_label"}]``
        (labels are ints) and ``[{"document_id", "relevance_score"}]``.
    retrieved_contexts : list of str or None
        ``None`` when missing or malformed; ``[]`` means retrieval returned nothing,
        which is a measurement, not an error. A single string is wrapped in a list.
    problems : dict
        ``{field: reason}`` for malformed fields (and ``row`` for unreadable rows).
    source : str or None
        The input line as read (at most :data:`MAX_SOURCE_CHARS` characters), so a
        rejected row can be shown with its bad value.
    conversation_id, turn, history : str, int and list of dict, or None
        A turn of a conversation (``rag_eval.metrics.core.conversation``): the conversation's id (the
        record's, ``<id>#<k>`` on the k-th line using one), the turn's number (from 1; the id is
        ``<conversation_id>/<turn>``) and the messages before its answer but its question as
        ``{"role", "content"}``, oldest first: the latest six, clipped, what a judge reads
        (``conversation.turns``). ``None`` for a single-turn record.
    """

    id: str
    row: int
    user_input: str | None = None
    response: str | None = None
    retrieved_contexts: list[str] | None = None
    reference: str | None = None
    retrieval_ground_truth: list[dict[str, Any]] | None = None
    retrieved_documents: list[dict[str, Any]] | None = None
    problems: dict[str, str] = field(default_factory=dict)
    source: str | None = None
    conversation_id: str | None = None
    turn: int | None = None
    history: list[dict[str, str]] | None = None

    @property
    def line(self) -> int:
        """The 1-based line (or record) number, as an editor counts."""
        return self.row + 1

    def missing(self, name: str) -> str | None:
        """Why field ``name`` cannot be used, or ``None`` when it is usable."""
        if "row" in self.problems:
            return self.problems["row"]
        if name in self.problems:
            return self.problems[name]
        if getattr(self, name) is None:
            return "missing"
        return None

    @overload
    def given(self, name: Literal["user_input", "response", "reference"]) -> str: ...
    @overload
    def given(self, name: Literal["retrieved_contexts"]) -> list[str]: ...
    @overload
    def given(self, name: Literal["retrieval_ground_truth", "retrieved_documents"]) -> list[dict[str, Any]]: ...

    def given(self, name: str) -> str | list[str] | list[dict[str, Any]]:
        """The value of field ``name`` (one of :data:`FIELDS`), which a metric's ``measure`` and
        ``asks`` read when the metric lists it in ``required_fields`` (a row lacking it is
        ``input_error`` before either runs).

        Raises
        ------
        LookupError
            When the field is ``None``: the metric reads a field it does not list as required
            (a bug of the metric; ``Metric.ascore`` makes it that row's ``judge_error``).
        """
        value = getattr(self, name)
        if value is None:
            raise LookupError(f"field {name!r} is missing: a metric reading it lists it in required_fields")
        return value

    def question(self) -> str:
        """The question a judge reads: ``user_input`` with the earlier turns of its conversation
        (``rag_eval.metrics.core.conversation.with_history``; ``user_input`` alone for a single turn).
        Raises ``LookupError`` as :meth:`given` does."""
        return with_history(self.given("user_input"), self.history)

    def to_record(self) -> dict[str, Any]:
        """A plain dict with ``id``, ``row``, the fields, ``problems`` and :data:`TURN_FIELDS`."""
        return {"id": self.id, "row": self.row, **{f: getattr(self, f) for f in FIELDS},
                "problems": dict(self.problems), **{c: getattr(self, c) for c in TURN_FIELDS}}


#: What a turn of a conversation adds to a sample.
TURN_FIELDS = ("conversation_id", "turn", "history")


def stable_id(fields: Mapping[str, Any]) -> str:
    """A 16-hex-digit SHA-256 of the test case: ``user_input`` and ``reference``.

    Responses and contexts are what the RAG system produced; leaving them out keeps a
    row's id the same across dataset versions made by other retrievers or generators.
    """
    payload = json.dumps({f: fields.get(f) for f in ("user_input", "reference")}, sort_keys=True,
                         ensure_ascii=True, default=str)
    return hashlib.sha256(payload.encode("ascii")).hexdigest()[:16]


def given_keys(raw: Mapping[str, Any], name: str, fields: Mapping[str, str] | None = None) -> list[str]:
    """The keys of record ``raw`` that give field ``name`` a value (not null), in the order they
    are tried: the user's column of ``fields`` when it names one, else ``name`` then its
    :data:`ALIASES`. :func:`sample_from_dict` reads the first."""
    candidates = (fields[name],) if fields and name in fields else (name, *ALIASES[name])
    return [c for c in candidates if c in raw and not is_null(raw[c])]


def sample_from_dict(raw: Mapping[str, Any], row: int, fields: Mapping[str, str] | None = None) -> Sample:
    """Build a :class:`Sample` from one input record.

    Parameters
    ----------
    raw : mapping
        One record with canonical names, aliases, or columns named in ``fields``.
    row : int
        Position of the record in its source.
    fields : mapping, optional
        User mapping ``{canonical_name: column_in_raw}``, like dingo's ``fields``.

    Raises
    ------
    ValueError
        If ``fields`` names a key that is not one of the canonical fields.
    """
    fields = dict(fields or {})
    unknown = set(fields) - set(FIELDS) - {"id"}
    if unknown:
        raise SettingsError(f"field mapping names unknown fields {sorted(unknown)}; known: {list(FIELDS)} and 'id'")
    values: dict[str, Any] = {}
    problems: dict[str, str] = {}
    for name in FIELDS:
        given = given_keys(raw, name, fields)
        if not given:
            values[name] = None
            continue
        value = raw[given[0]]
        conflicting = [c for c in given[1:] if raw[c] != value]
        if conflicting:
            values[name] = None
            problems[name] = f"given twice with different values, as {given[0]!r} and {conflicting[0]!r}"
            continue
        values[name], problem = normalise(name, value)
        if problem:
            problems[name] = problem
    errors = raw.get("target_error")
    if isinstance(errors, Mapping):  # fields the RAG system failed to produce (rag_eval.metrics.sources.targets)
        for name, cause in errors.items():
            if name in FIELDS:
                values[name], problems[name] = None, f"{TARGET_ERROR}: {cause}"
    return Sample(id=_record_id(raw, fields, values), row=row, problems=problems, **values)


def _record_id(raw: Mapping[str, Any], fields: Mapping[str, str] | None, values: Mapping[str, Any]) -> str:
    """The record's ``id`` (or the column ``fields`` names for it) as text, else :func:`stable_id` of ``values``."""
    raw_id = raw.get((fields or {}).get("id", "id"))
    found = str(raw_id) if not is_null(raw_id) and str(raw_id).strip() else stable_id(values)
    # A lone surrogate (valid JSON "\\ud800") cannot be written as UTF-8: the id keeps it as its escape.
    return found.encode("utf-8", "backslashreplace").decode("utf-8")


def record_samples(raw: Mapping[str, Any], row: int, fields: Mapping[str, str] | None = None) -> list[Sample]:
    """The samples of one record: one (:func:`sample_from_dict`), or one per assistant turn of a conversation
    (:func:`~rag_eval.metrics.core.conversation.is_conversation`), all with ``row``, ids ``<conversation_id>/<turn>``
    (the record's ``id``, else :func:`stable_id` of its questions); a malformed message makes the record one sample
    whose ``problems['row']`` names the message and field. Raises as :func:`sample_from_dict`."""
    if not is_conversation(raw):
        return [sample_from_dict(raw, row, fields)]
    found, problem = turns(raw)
    if problem:
        return [_unreadable(row, problem, None)]
    conversation = _record_id(raw, fields, {"user_input": [t["user_input"] for t in found]})
    samples = []
    for turn in found:
        sample = sample_from_dict({**{f: turn[f] for f in FIELDS if f in turn}, "id": f"{conversation}/{turn['turn']}"},
                                  row)
        sample.conversation_id, sample.turn, sample.history = conversation, turn["turn"], turn["history"]
        samples.append(sample)
    return samples


#: The prefix of a field's problem when the RAG system under evaluation failed to produce it
#: (a record's ``"target_error": {field: cause}``); such a line is not rejected, and the
#: metrics reading the field report status ``target_error``.
TARGET_ERROR = "target_error"


def is_target_error(problem: str | None) -> bool:
    """Whether a field problem is the target's failure (not bad input)."""
    return problem is not None and problem.startswith(f"{TARGET_ERROR}: ")


#: How much of a line :attr:`Sample.source` keeps.
MAX_SOURCE_CHARS = 20_000


def _clip(text: str) -> str:
    if len(text) <= MAX_SOURCE_CHARS:
        return text
    return text[:MAX_SOURCE_CHARS] + f"… ({len(text)} characters in all)"


def _unreadable(row: int, reason: str, source: str | None) -> Sample:
    return Sample(id=f"unreadable-line-{row + 1}", row=row, problems={"row": reason},
                  source=None if source is None else _clip(source))


def _read_jsonl(path: Path, fields: Mapping[str, str] | None) -> Iterator[Sample]:
    """The samples of a JSONL file, read line by line (:func:`iter_jsonl_records` without the records)."""
    return (sample for sample, _ in iter_jsonl_records(path, fields))


def iter_jsonl_records(path: str | Path, fields: Mapping[str, str] | None = None
                       ) -> Iterator[tuple[Sample, dict[str, Any] | None]]:
    """The samples of a JSONL file, read line by line, each with the JSON object of its line
    as read (``None`` for an unreadable line); the row of a record is its line number minus
    one, blank lines are skipped.

    Each line is decoded on its own, so a line that is not UTF-8, not JSON, not an
    object, nested more than 64 levels or holding a number the reader cannot
    hold (an integer of more than 4,300 digits, ``1e400``: the field named;
    ``rag_eval.metrics.core.decoding``) becomes a sample whose ``problems['row']`` says why,
    and the others still load.

    Raises
    ------
    OSError
        When the file cannot be read.
    InputError
        A file that is no UTF-8 text at all (gzip-compressed, UTF-16), said once, naming the file.
    """
    with Path(path).open("rb") as handle:
        kind = not_text(handle.peek(64)[:64]) if hasattr(handle, "peek") else None
        if kind:
            raise InputError(f"{path}: {kind}")
        for line_no, raw in enumerate(handle, start=1):
            row = line_no - 1
            try:
                line = raw.decode("utf-8-sig" if line_no == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                yield _unreadable(row, f"not valid UTF-8 (byte {exc.start})",
                                  raw.decode("utf-8", errors="backslashreplace").rstrip("\r\n")), None
                continue
            if not line.strip():
                continue
            line = line.rstrip("\r\n")
            record, problem = json_object(line)
            if record is None:
                yield _unreadable(row, str(problem), line), None
                continue
            for sample in record_samples(record, row, fields):
                sample.source = _clip(line)
                yield sample, record


def load_samples(source: str | Path | pd.DataFrame | Iterable[Mapping[str, Any]],
                 fields: Mapping[str, str] | None = None) -> list[Sample]:
    """Load samples from a file path, a DataFrame or an iterable of dicts.

    Every input row yields one :class:`Sample` (a conversation one per assistant turn, sharing the
    row: :func:`record_samples`), in order; unreadable rows
    (invalid UTF-8 or JSON, non-object lines) become samples whose ``problems['row']``
    says why. For JSONL, a sample's ``row`` is its line number minus one.

    Raises
    ------
    NotFoundError
        If ``source`` is a path that does not exist (a ``FileNotFoundError``).
    InputError, SettingsError
        For an unsupported file type, a file that is not what its suffix says, a CSV file without a table
        (``InputError``), or an unknown field in ``fields`` (``SettingsError``); both are a ``ValueError``.
    """
    return list(iter_samples(source, fields))


def iter_samples(source: str | Path | pd.DataFrame | Iterable[Mapping[str, Any]],
                 fields: Mapping[str, str] | None = None) -> Iterator[Sample]:
    """:func:`load_samples` one sample at a time: a JSONL file is read line by line, so its
    samples are never all in memory at once (other files are read whole first). Raises as
    :func:`load_samples` does, a bad ``fields`` mapping once the first sample is built."""
    if isinstance(source, (str, Path)):
        path = Path(source)
        if not path.exists():
            raise NotFoundError(f"dataset file not found: {path}")
        if path.suffix.lower() in (".jsonl", ".ndjson"):
            return distinct(_read_jsonl(path, fields))
        try:
            records = enumerate(read_table(path, path.suffix.lower()))
        except InputError:
            raise
        except (ValueError, RecursionError) as exc:  # JSON, CSV, Parquet or UTF-8 the file is not
            raise InputError(f"{path}: cannot be read as a {path.suffix.lower()} file: "
                             f"{type(exc).__name__}: {str(exc)[:300]}") from None
    elif isinstance(source, pd.DataFrame):
        records = enumerate(source.to_dict("records"))
    else:
        records = enumerate(source)
    return distinct(sample for row, record in records for sample in _record_samples(row, record, fields))



def _record_samples(row: int, record: Any, fields: Mapping[str, str] | None) -> list[Sample]:
    problem = record_problem(record) if isinstance(record, Mapping) else None
    if problem:
        return [_unreadable(row, problem, None)]
    if isinstance(record, Mapping):
        samples = record_samples(record, row, fields)
        source = _clip(json.dumps(record, ensure_ascii=False, default=str))
        for sample in samples:
            sample.source = source
        return samples
    return [_unreadable(row, f"a {type(record).__name__}, not a record", repr(record))]


def samples_to_frame(samples: Iterable[Sample]) -> pd.DataFrame:
    """One row per sample with columns ``id``, ``row``, every field of :data:`FIELDS`, ``problems`` and
    :data:`TURN_FIELDS`."""
    return pd.DataFrame([s.to_record() for s in samples],
                        columns=["id", "row", *FIELDS, "problems", *TURN_FIELDS])
