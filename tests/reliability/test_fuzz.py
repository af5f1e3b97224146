"""Hostile input by fuzzing (hypothesis): the sample loader over every file format it reads
(JSONL, JSON, CSV, Parquet: ``rag_eval.metrics.core.samples.load_samples``) and every registered metric with
the offline judge (``rag_eval.metrics.evaluate``), on arbitrary unicode, control and bidi characters,
huge and empty fields, wrong types, deep nesting, NaN/inf, numbers no reader can hold (an integer of
5,000 digits, ``1e400``, in any field) and duplicate ids.

The properties: no exception escapes; every line is in every per-row output (the results, one row
per line and metric; RAGAS's table; the console's input-error lines) with its reason; what the
console prints of it never holds a raw control character (``rag_eval.orchestration.report.printable``).

Examples are derandomized (the same ones on every machine, no example database), at most
:data:`EXAMPLES` per target (the loader's formats) and :data:`METRIC_EXAMPLES` for the metrics,
each example several lines. ``pytest --hypothesis-show-statistics`` shows how many were tried.
"""
import io
import json
import math
import re
import string
from contextlib import redirect_stderr

import pandas as pd
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from rag_eval.metrics.reports.aggregate import input_error_lines
from rag_eval.metrics.core.results import Status
from rag_eval.metrics.core.field_values import MAX_CHARS
from rag_eval.metrics.core.samples import ALIASES, FIELDS, load_samples
from rag_eval.orchestration.report import print_input_errors, print_rejected

EXAMPLES = 60
METRIC_EXAMPLES = 40
FUZZ = settings(derandomize=True, database=None, deadline=None, max_examples=EXAMPLES,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
#: What a terminal acts on: C0 (but the newline between printed lines), DEL, C1, line separators, bidi controls.
RAW_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")

HOSTILE = ["", " ", "\x1b[31mred\x1b[0m", "\x1b]0;title\x07", "\u202eevil\u202c", "\u2066isolate\u2069", "a\rb",
           "\x00nul", "line\u2028sep", "第一章：引言 [1]", "ﷺ" * 50, "\ud800", "x" * (MAX_CHARS + 1), "\x9bc1",
           "😀" * 30, "NaN", "[\"a\"]", "{}", "null"]
text = st.one_of(st.sampled_from(HOSTILE), st.text(max_size=40),
                 st.text(alphabet=st.characters(codec="utf-8", categories=["Cc", "Cf", "Zl", "Zp"]), max_size=8))
number = st.one_of(st.integers(), st.floats(allow_nan=True, allow_infinity=True), st.booleans())
scalar = st.one_of(st.none(), number, text)


def nested(depth: int):
    """A list nested ``depth`` levels (64 is the loader's limit)."""
    value = []
    for _ in range(depth):
        value = [value]
    return value


value = st.one_of(scalar, st.lists(text, max_size=4),
                  st.recursive(scalar, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
                               max_leaves=6),
                  st.integers(60, 70).map(nested),
                  st.lists(st.fixed_dictionaries({"document_id": scalar, "query_relevance_label": number,
                                                  "relevance_score": number}), max_size=3))
names = st.sampled_from([*FIELDS, *(a for aliases in ALIASES.values() for a in aliases), "id", "target_error"])
record = st.dictionaries(st.one_of(names, text), value, max_size=8)
ids = st.sampled_from(["q1", "q1", "q2", "\x1b[2J", None])  # duplicates, an escape sequence, none
rows = st.lists(st.builds(lambda r, i: {**r, "id": i} if i is not None else r, record, ids), min_size=1, max_size=4)


def jsonl_line(row: dict) -> bytes:
    return json.dumps(row, allow_nan=True).encode()


raw_line = st.one_of(st.binary(max_size=20).filter(lambda b: b"\n" not in b and b"\r" not in b),
                     st.sampled_from([b"not json", b"[1, 2]", b'"text"', b"{\"a\": ", b"\xff\xfe", b"{}",
                                      json.dumps(nested(80)).encode(), b"\xef\xbb\xbf{\"id\": \"bom\"}"]))


#: Numbers no reader holds as given, as JSON text: more digits than Python converts (4,300), beyond a float's range.
HUGE = ["9" * 5000, "-" + "1" * 4301, "12345678901234567890" * 300, "1e400", "-2.5E+999", "1.5e309"]
#: Where a field holds the number: as its value, in a list, in an object in a list.
PLACES = ["{}", "[{}]", '[{{"document_id": "d", "relevance_score": {}}}]']
_MARK = "\u0001huge\u0001"


def with_huge(record: dict, name: str, literal: str, place: str) -> tuple[bytes, str]:
    """``record`` as a JSON line whose field ``name`` holds the number ``literal`` (raw JSON text, at ``place``),
    and ``name``."""
    line = json.dumps({**record, name: _MARK}, allow_nan=True)
    return line.replace(json.dumps(_MARK), place.format(literal)).encode(), name


huge_line = st.builds(with_huge, record, st.one_of(names, text), st.sampled_from(HUGE), st.sampled_from(PLACES))


def check_samples(samples, count: int) -> None:
    """One sample per record, in order, each readable or saying why not."""
    assert len(samples) == count
    assert [s.row for s in samples] == sorted(s.row for s in samples)
    for sample in samples:
        assert isinstance(sample.id, str)
        assert all(isinstance(k, str) and isinstance(v, str) and v for k, v in sample.problems.items())
        for name in FIELDS:
            why = sample.missing(name)
            assert why is None or (isinstance(why, str) and why)


@FUZZ
@given(st.lists(st.one_of(rows.map(lambda r: [(jsonl_line(x), None) for x in r]), raw_line.map(lambda b: [(b, None)]),
                          huge_line.map(lambda pair: [pair])),
                min_size=1, max_size=6).map(lambda parts: [pair for part in parts for pair in part]))
def test_jsonl_every_line_loads_or_says_why(tmp_path_factory, pairs):
    lines = [line for line, _ in pairs]
    path = tmp_path_factory.mktemp("jsonl") / "samples.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    samples = load_samples(path)
    check_samples(samples, sum(map(is_a_line, lines, range(len(lines)))))
    assert all(is_a_line(lines[s.row], s.row) for s in samples)
    for sample in samples:  # a number no reader holds: that line's problem, its field named (or its nesting said first)
        name = pairs[sample.row][1]
        if name is not None:
            event("a huge number")
            assert sample.id == f"unreadable-line-{sample.row + 1}" and list(sample.problems) == ["row"]
            why = sample.problems["row"]
            assert (why.startswith(f"field {name!r}: ") and ("digits" in why or "range of a float" in why)) or \
                why == "nested more than 64 levels deep", why


def is_a_line(raw: bytes, row: int) -> bool:
    """Whether a JSONL line is a record (docs/tutorials/own-data.md, "The input file"): anything but a blank line, not-UTF-8 included."""
    try:
        return bool(raw.decode("utf-8-sig" if row == 0 else "utf-8").strip())
    except UnicodeDecodeError:
        return True


@FUZZ
@given(st.lists(st.one_of(record, scalar), min_size=1, max_size=6))
def test_json_every_record_loads_or_says_why(tmp_path_factory, records):
    path = tmp_path_factory.mktemp("json") / "samples.json"
    path.write_text(json.dumps(records, allow_nan=True), encoding="utf-8", errors="surrogatepass")
    try:
        samples = load_samples(path)
    except ValueError as exc:  # a file that is no JSON at all (a lone surrogate written raw): said, with the file
        assert str(path) in str(exc) or "JSON" in str(exc) or "utf-8" in str(exc)
        return
    check_samples(samples, len(records))
    assert all("row" in s.problems for s, r in zip(samples, records) if not isinstance(r, dict))


flat = st.dictionaries(st.one_of(names, st.text(alphabet=string.ascii_letters, min_size=1, max_size=8)),
                       st.one_of(st.none(), text.filter(lambda t: "\ud800" not in t)), max_size=6)


@FUZZ
@given(st.lists(flat, min_size=1, max_size=6))
def test_csv_every_row_loads_or_says_why(tmp_path_factory, records):
    path = tmp_path_factory.mktemp("csv") / "samples.csv"
    pd.DataFrame(records).to_csv(path, index=False, lineterminator="\r\n")  # RFC 4180: a field with \r is quoted
    if not any(records):  # no column at all: a file of blank lines, no table
        with pytest.raises(ValueError, match="no CSV table"):
            load_samples(path)
        return
    check_samples(load_samples(path), len(records))


columnar = st.fixed_dictionaries({name: st.one_of(st.none(), text.filter(lambda t: "\ud800" not in t))
                                  for name in ("id", "user_input", "response", "reference")},
                                 optional={"retrieved_contexts": st.one_of(st.none(), st.lists(
                                     text.filter(lambda t: "\ud800" not in t), max_size=3))})


@FUZZ
@given(st.lists(columnar, min_size=1, max_size=6))
def test_parquet_every_row_loads_or_says_why(tmp_path_factory, records):
    path = tmp_path_factory.mktemp("parquet") / "samples.parquet"
    pd.DataFrame(records).to_parquet(path, index=False)
    check_samples(load_samples(path), len(records))


@FUZZ
@given(st.lists(st.fixed_dictionaries({"line": st.integers(1, 10 ** 6), "id": text, "reason": text}), max_size=7),
       st.lists(st.fixed_dictionaries({"line": st.integers(1, 10 ** 6), "id": text,
                                       "fields": st.dictionaries(st.sampled_from([*FIELDS, "line"]), text, max_size=3),
                                       # metric names are the registry's (rag_eval.metrics.core.base.NAME_PATTERN), not data
                                       "metrics": st.lists(st.sampled_from(["faithfulness", "ndcg"]), max_size=3)}),
                max_size=7))
def test_the_console_never_prints_a_raw_control_character(rejected, errors):
    printed = io.StringIO()
    with redirect_stderr(printed):
        print_rejected(rejected, len(rejected), max(len(rejected), 1), 0.05)
        print_input_errors(errors, len(errors))
    assert not RAW_CONTROL.search(printed.getvalue().replace("\n", "")), repr(printed.getvalue())


#: A row every field of which is of the right type, each text hostile: the metrics measure it.
well_formed = st.fixed_dictionaries({
    "user_input": text, "response": text, "reference": text, "retrieved_contexts": st.lists(text, max_size=4),
    "retrieval_ground_truth": st.lists(st.fixed_dictionaries({"document_id": text,
                                                              "query_relevance_label": st.integers(-2, 5)}), max_size=3),
    "retrieved_documents": st.lists(st.fixed_dictionaries({"document_id": text, "relevance_score": st.floats(
        allow_nan=False, allow_infinity=False)}), max_size=3)})


@pytest.fixture(scope="module")
def offline():
    from rag_eval.metrics import OfflineJudge
    from rag_eval.metrics.core.registry import builtin_registry

    return OfflineJudge(), list(builtin_registry())


@pytest.mark.slow  # the offline encoder
@settings(FUZZ, max_examples=METRIC_EXAMPLES)
@given(st.lists(st.builds(lambda r, i: {**r, "id": i} if i is not None else r, st.one_of(well_formed, record), ids),
                min_size=1, max_size=3))
def test_every_metric_scores_every_line_or_says_why(offline, records):
    from rag_eval.metrics import evaluate
    from rag_eval.metrics.core.registry import builtin_registry

    judge, names = offline
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "cannot run" warnings: said, and the rows are input_error
        result = evaluate(records, metrics=names, judge=judge)
    results = result.results
    assert len(results) == len(records) * len(names)  # every line, every metric
    assert set(zip(results["row"], results["metric"])) == {(r, m) for r in range(len(records)) for m in names}
    for row in results.itertuples():
        assert row.status in {s.value for s in Status} and isinstance(row.reason, str) and row.reason.strip()
        if row.status == Status.OK.value:
            low, high = builtin_registry()[row.metric].value_range
            assert math.isfinite(row.value) and low <= row.value <= high and row.passed in (True, False)
        else:
            assert pd.isna(row.value)
        if row.status == Status.INPUT_ERROR.value:
            assert f"line {row.row + 1}" in row.reason, row.reason
    event(f"some result measured: {bool((results['status'] == Status.OK.value).any())}")
    assert len(result.ragas_table()) == len(records)  # RAGAS's table: a row a line, unscored cells said
    printed = io.StringIO()
    with redirect_stderr(printed):
        print_input_errors(input_error_lines(results), len(input_error_lines(results)))
    assert not RAW_CONTROL.search(printed.getvalue().replace("\n", ""))


GOOD = [{"id": f"r{i}", "user_input": f"Where was person {i} born?", "response": f"Person {i} was born in Ulm.",
         "retrieved_contexts": [f"Person {i} was born in Ulm, Germany."], "reference": f"Person {i} was born in Ulm."}
        for i in range(4)]


def test_a_python_integer_of_too_many_digits_is_that_records_problem():
    samples = load_samples([GOOD[0], {**GOOD[1], "id": 10 ** 5000}, {**GOOD[2], "retrieved_contexts": [-(7 ** 6000)]}])
    assert [s.id for s in samples] == ["r0", "unreadable-line-2", "unreadable-line-3"] and samples[0].problems == {}
    assert samples[1].problems == {"row": "field 'id': an integer of more than the 4,300 digits this reader converts"}
    assert samples[2].problems == {"row": "field 'retrieved_contexts': an integer of more than the 4,300 digits this "
                                          "reader converts"}


@pytest.mark.slow  # the offline judge's verifier
@settings(FUZZ, max_examples=24)
@given(st.integers(0, len(GOOD) - 1), st.sampled_from([*FIELDS, "id", "question", "answer", "note"]),
       st.sampled_from(HUGE), st.sampled_from(PLACES), st.sampled_from([".jsonl", ".json"]))
def test_a_huge_number_in_any_field_is_a_named_bad_line_and_every_other_line_is_scored(
        offline, tmp_path_factory, bad, name, literal, place, suffix):
    from rag_eval.metrics import evaluate

    lines = [jsonl_line(r) for r in GOOD]
    lines[bad] = with_huge(GOOD[bad], name, literal, place)[0]
    path = tmp_path_factory.mktemp("huge") / f"samples{suffix}"
    path.write_bytes(b"\n".join(lines) + b"\n" if suffix == ".jsonl" else b"[" + b",\n".join(lines) + b"]")
    results = evaluate(str(path), metrics=["faithfulness"], judge=offline[0]).results
    assert results["status"].tolist() == [Status.INPUT_ERROR.value if row == bad else Status.OK.value
                                          for row in range(len(GOOD))]
    assert results["sample_id"].tolist() == [f"unreadable-line-{bad + 1}" if row == bad else f"r{row}"
                                             for row in range(len(GOOD))]
    [reason] = results.loc[results["row"] == bad, "reason"]
    assert reason.startswith(f"line {bad + 1}: unreadable: field {name!r}: "), reason
