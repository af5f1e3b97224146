"""Bounded input in production traffic (issue 37): a trace whose id is an integer of 5,000 digits
(more than Python converts to text) or a line nested deeper than the interpreter's stack is that
line's named problem in every trace format, and the other traces are scored; a dataset's
``meta.json`` nested that deeply is one line naming the file."""
import json

import pytest

from rag_eval.metrics.sources.traces import Trace, TraceProblem, read_traces
from tests.metrics.test_traces import T0, line, rag_trace

HUGE = "7" * 5000
DEEP = "[" * 100_000 + "]" * 100_000  # json.loads: RecursionError
DIGITS = "an integer of 5,000 digits, more than the 4,300 this reader converts"


def read(path, format="otlp"):
    items = list(read_traces(path, format))
    return ([t.trace_id for t in items if isinstance(t, Trace)],
            [(p.line, p.field, p.reason) for p in items if isinstance(p, TraceProblem)])


def test_otlp_a_huge_trace_id_and_a_deep_line_are_their_lines_problems(tmp_path):
    path = tmp_path / "spans.jsonl"
    huge = line(*rag_trace(trace="b" * 32)).replace(json.dumps("b" * 32), HUGE)
    path.write_text("\n".join([line(*rag_trace()), huge, f'{{"resourceSpans": {DEEP}}}',
                               line(*rag_trace(trace="c" * 32, start=T0 + 10**9))]) + "\n", encoding="utf-8")
    traces, problems = read(path)
    assert traces == ["a" * 32, "c" * 32]
    assert problems == [(2, "traceId", f"{DIGITS} (span 's2')"), (2, "traceId", f"{DIGITS} (span 's3')"),
                        (2, "traceId", f"{DIGITS} (span 's1')"), (3, "line", "nested more than 64 levels deep")]


def test_langfuse_and_trace_tables_a_huge_id_and_a_deep_line_are_their_lines_problems(tmp_path):
    record = {"id": "t1", "timestamp": "2026-11-01T00:00:00Z", "input": "Why?", "output": "Because."}
    lines = [json.dumps(record), json.dumps({**record, "id": 0}).replace('"id": 0', f'"id": {HUGE}'),
             f'{{"id": "t3", "input": {DEEP}}}', json.dumps({**record, "id": "t4"})]
    (tmp_path / "lf.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert read(tmp_path / "lf.jsonl", "langfuse") == (
        ["t1", "t4"], [(2, "id", DIGITS), (3, "line", "nested more than 64 levels deep")])
    table = tmp_path / "table" / "rows.jsonl"
    table.parent.mkdir()
    row = {"trace_id": "t1", "start": "2026-11-01T00:00:00Z", "user_input": "Why?", "response": "Because."}
    table.write_text("\n".join([json.dumps(row), json.dumps({**row, "trace_id": 0}).replace(
        '"trace_id": 0', f'"trace_id": {HUGE}'), f'{{"trace_id": "t3", "user_input": {DEEP}}}',
        json.dumps({**row, "trace_id": "t4", "retrieved_contexts": f"[{HUGE}]"})]) + "\n", encoding="utf-8")
    traces, problems = read(table.parent, "table")
    assert traces == ["t1", "t4"]
    assert problems == [(2, "line", f"field 'trace_id': {DIGITS}"), (3, "line", "nested more than 64 levels deep")]


def test_rag_eval_traffic_scores_the_other_traces_and_names_the_bad_line(tmp_path, monkeypatch, capsys):
    from rag_eval.orchestration import cli

    source = tmp_path / "traces"
    source.mkdir()
    huge = line(*rag_trace(trace="b" * 32)).replace(json.dumps("b" * 32), HUGE)
    (source / "spans.jsonl").write_text("\n".join([line(*rag_trace()), huge, f'{{"resourceSpans": {DEEP}}}',
                                                   line(*rag_trace(trace="c" * 32, start=T0 + 10**9))]) + "\n",
                                        encoding="utf-8")
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    assert cli.main(["traffic", str(source), "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr()
    assert printed.out.startswith("2026-11-01: 2 traces, 2 judged, 4 unreadable; faithfulness ")
    assert f"  unreadable: {source / 'spans.jsonl'} line 2: traceId: {DIGITS} (span 's2')\n" in printed.err


@pytest.mark.parametrize("text, why", [
    (f'{{"retriever": {DEEP}}}', "nested more than 64 levels deep; "),
    ('{"retriever": ' + "[" * 70 + "]" * 70 + "}", "field 'retriever': nested more than 64 levels deep; ")])
def test_a_deeply_nested_meta_json_is_one_line_naming_the_file(tmp_path, monkeypatch, capsys, text, why):
    from rag_eval.orchestration import cli
    from tests.conftest import FIQA

    meta = tmp_path / "meta.json"
    meta.write_text(text, encoding="utf-8")
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    assert cli.main(["register", str(FIQA), "--meta", str(meta)]) == 2
    assert capsys.readouterr().err == (f"error: {meta}: {why}meta.json holds a JSON object, like "
                                       '{"retriever": "bm25-v2", "generator": "gpt-4o-mini"}\n')
