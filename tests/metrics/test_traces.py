"""Traces as input: OTLP/OpenInference span files, Langfuse exports, tables and SQL, each read
into samples with every unreadable line, span or row named (file, line from 1, field)."""
import base64
import json

import pandas as pd
import pytest

from rag_eval.metrics.sources.traces import Trace, TraceProblem, read_traces, to_sample
from rag_eval.metrics.sources.traces.parquet import table_traces, traces_table
from rag_eval.metrics.sources.traces.otlp_wire import hex_id, span_times

T0 = 1_793_491_200_000_000_000  # 2026-11-01T00:00:00Z in ns
MS = 1_000_000


def attr(key, value):
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    if isinstance(value, float):
        return {"key": key, "value": {"doubleValue": value}}
    return {"key": key, "value": {"stringValue": value}}


def span(trace, span_id, parent, start, end, **attributes):
    body = {"traceId": trace, "spanId": span_id, "name": f"s{span_id[-1]}", "kind": 1,
            "startTimeUnixNano": str(start), "endTimeUnixNano": str(end),
            "attributes": [attr(k.replace("__", "."), v) for k, v in attributes.items()]}
    if parent:
        body["parentSpanId"] = parent
    return body


def line(*spans, service="rag"):
    return json.dumps({"resourceSpans": [{"resource": {"attributes": [attr("service.name", service)]},
                                          "scopeSpans": [{"scope": {"name": "t"}, "spans": list(spans)}]}]},
                      ensure_ascii=False)


def rag_trace(trace="a" * 32, start=T0, question="What is BM25?", answer="A ranking function.",
              documents=(("d1", "BM25 is a ranking function.", 12.5), ("d2", "It weighs terms.", 7.25))):
    """Retriever and LLM spans first (they end first), the CHAIN root last, as a batch exporter writes them."""
    retriever = {"openinference__span__kind": "RETRIEVER", "input__value": question}
    for i, (doc_id, content, score) in enumerate(documents):
        retriever.update({f"retrieval__documents__{i}__document__id": doc_id,
                          f"retrieval__documents__{i}__document__content": content,
                          f"retrieval__documents__{i}__document__score": score})
    return [span(trace, "0000000000000002", "0000000000000001", start + 2 * MS, start + 20 * MS, **retriever),
            span(trace, "0000000000000003", "0000000000000001", start + 20 * MS, start + 900 * MS,
                 openinference__span__kind="LLM", output__value=answer, llm__token_count__prompt=120,
                 llm__token_count__completion=8, llm__token_count__total=128),
            span(trace, "0000000000000001", None, start, start + 1000 * MS, openinference__span__kind="CHAIN",
                 input__value=question, output__value=answer, session__id="s-1", user__id="u-42",
                 metadata=json.dumps({"route": "search"}))]


def test_an_openinference_trace_becomes_one_sample(tmp_path):
    path = tmp_path / "spans.jsonl"
    spans = rag_trace()
    path.write_text(line(*spans[:2]) + "\n" + line(spans[2]) + "\n", encoding="utf-8")
    [trace] = list(read_traces(path))
    assert trace == Trace(
        trace_id="a" * 32, start_ns=T0, end_ns=T0 + 1000 * MS, user_input="What is BM25?",
        response="A ranking function.", retrieved_contexts=["BM25 is a ranking function.", "It weighs terms."],
        retrieved_documents=[{"document_id": "d1", "relevance_score": 12.5},
                             {"document_id": "d2", "relevance_score": 7.25}],
        prompt_tokens=120, completion_tokens=8, total_tokens=128, route="search", session_id="s-1", user_id="u-42",
        source=f"{path}:1")
    assert trace.latency_ms == 1000.0
    sample = to_sample(trace, 0)
    assert (sample.id, sample.user_input, sample.retrieved_contexts, sample.problems) == \
        ("a" * 32, "What is BM25?", ["BM25 is a ranking function.", "It weighs terms."], {})
    # The samples frame holds the trace as it was read (session and user ids are metadata columns).
    assert table_traces(traces_table([trace])) == [trace]


def test_without_a_chain_span_the_retriever_query_and_llm_output_are_used(tmp_path):
    retriever, llm, _ = rag_trace(question="长城有多长？", answer="长城约两万公里。",
                                  documents=(("d1", "长城全长约21196公里。", 3.0),))
    llm["parentSpanId"] = ""  # the LLM span is the root here
    path = tmp_path / "spans.json"
    path.write_text(line(retriever, llm) + "\n", encoding="utf-8")
    [trace] = list(read_traces(tmp_path))
    assert (trace.user_input, trace.response, trace.retrieved_contexts, trace.route) == \
        ("长城有多长？", "长城约两万公里。", ["长城全长约21196公里。"], "rag")  # route: the service name


def test_bad_lines_and_spans_are_named_with_file_line_and_field(tmp_path):
    good = rag_trace()
    no_content = rag_trace(trace="b" * 32, start=T0 + 3600 * 10 ** 9)
    no_content[0]["attributes"] = [a for a in no_content[0]["attributes"]
                                   if a["key"] != "retrieval.documents.1.document.content"]
    bad_tokens = rag_trace(trace="c" * 32)
    bad_tokens[1]["attributes"].append({"key": "llm.token_count.prompt", "value": {"intValue": "many"}})
    no_trace = span("", "0000000000000009", None, T0, T0 + MS)
    path = tmp_path / "spans.jsonl"
    path.write_text("\n".join([line(*good), "{not json", json.dumps({"hello": 1}), line(*no_content),
                               line(*bad_tokens), line(no_trace), "\ufeff"[1:] + "[1, 2]",
                               json.dumps({"resourceSpans": "nope"})]) + "\n", encoding="utf-8")
    items = list(read_traces(path))
    problems = [(p.line, p.field, p.reason) for p in items if isinstance(p, TraceProblem)]
    assert problems == [
        (2, "line", "not valid JSON: Expecting property name enclosed in double quotes (column 2)"),
        (3, "resourceSpans", "missing: not an OTLP ExportTraceServiceRequest line"),
        (4, "retrieval.documents.1.document.content", "missing"),
        (5, "llm.token_count.prompt", "unreadable value: invalid literal for int() with base 10: 'many'"),
        (6, "traceId", "missing or not a 16-byte id: '' (span 's9')"),
        (7, "resourceSpans", "missing: not an OTLP ExportTraceServiceRequest line"),
        (8, "resourceSpans", "a str, not a list: not an OTLP ExportTraceServiceRequest line"),
    ]
    assert all(p.file == str(path) for p in items if isinstance(p, TraceProblem))
    traces = {t.trace_id: t for t in items if isinstance(t, Trace)}
    assert sorted(traces) == ["a" * 32, "b" * 32, "c" * 32]
    # The trace with a document without content keeps the reason on its contexts: metrics reading them say why.
    b = traces["b" * 32]
    assert b.retrieved_contexts is None and b.response == "A ranking function."
    assert b.problems == {"retrieved_contexts": f"{path}:4: retrieval.documents.1.document.content: missing"}
    assert to_sample(b, 0).missing("retrieved_contexts") == b.problems["retrieved_contexts"]
    assert traces["c" * 32].problems == {"llm.token_count.prompt": f"{path}:5: llm.token_count.prompt: invalid "
                                                                   "literal for int() with base 10: 'many'"}
    assert traces["c" * 32].prompt_tokens is None  # the unreadable count is not summed as 0


def test_a_span_of_another_shape_is_named_and_its_neighbours_read(tmp_path):
    """The one-pass decoding refuses the line; read again span by span, only the bad span is lost."""
    good = rag_trace()
    bad = span("b" * 32, "0000000000000005", None, T0, T0 + MS)
    bad["attributes"] = [{"key": 7, "value": {"stringValue": "x"}}]
    path = tmp_path / "spans.jsonl"
    path.write_text(line(bad, *good) + "\n", encoding="utf-8")
    items = list(read_traces(path))
    [problem] = [p for p in items if isinstance(p, TraceProblem)]
    assert (problem.line, problem.field, problem.reason, problem.trace_id) == \
        (1, "attributes[0].key", "Expected `str`, got `int` (span 's5')", "b" * 32)
    assert [t.trace_id for t in items if isinstance(t, Trace)] == ["a" * 32]


def test_spans_of_a_trace_across_files_and_a_late_span(tmp_path):
    retriever, llm, root = rag_trace()
    (tmp_path / "1.jsonl").write_text(line(retriever) + "\n", encoding="utf-8")
    late = span("a" * 32, "0000000000000004", "0000000000000001", T0 + 5 * MS, T0 + 6 * MS)
    (tmp_path / "2.jsonl").write_text(line(llm) + "\n" + line(root) + "\n" + line(late) + "\n", encoding="utf-8")
    items = list(read_traces(tmp_path))
    assert [type(i).__name__ for i in items] == ["Trace", "TraceProblem"]
    assert items[0].retrieved_contexts == ["BM25 is a ranking function.", "It weighs terms."]
    assert (items[1].file, items[1].line, items[1].field) == (str(tmp_path / "2.jsonl"), 3, "spanId")
    assert "arrived after its trace's root span" in items[1].reason


def test_ids_in_base64_as_protobuf_json_writes_them():
    raw = bytes(range(1, 17))
    assert hex_id(base64.b64encode(raw).decode(), 32) == raw.hex()
    assert hex_id("0" * 32, 32) is None and hex_id("xyz", 32) is None and hex_id("AB" * 16, 32) == "ab" * 16


def test_span_times_are_found_without_parsing(tmp_path):
    path = tmp_path / "spans.jsonl"
    path.write_text("\n".join(line(*rag_trace(trace=f"{i:032x}", start=T0 + i * 10 ** 9)) for i in range(1, 4)),
                    encoding="utf-8")
    assert sorted(span_times(path)) == sorted(T0 + i * 10 ** 9 + offset for i in range(1, 4)
                                              for offset in (2 * MS, 20 * MS, 0))


def test_a_langfuse_trace_download_and_a_jsonl_export(tmp_path):
    trace = {"id": "lf-1", "timestamp": "2026-11-01T08:00:00.000Z", "name": "qa", "sessionId": "sess", "userId": 7,
             "input": {"question": "Who wrote it?"}, "output": {"role": "assistant", "content": "Ada wrote it."},
             "observations": [
                 {"type": "RETRIEVER", "name": "search", "startTime": "2026-11-01T08:00:00.100Z",
                  "endTime": "2026-11-01T08:00:00.300Z",
                  "output": [{"page_content": "Ada wrote the note.", "metadata": {"id": "n1", "score": 0.9}},
                             {"page_content": "Charles built the engine.", "metadata": {"id": "n2", "score": 0.4}}]},
                 {"type": "GENERATION", "name": "llm", "startTime": "2026-11-01T08:00:00.300Z",
                  "endTime": "2026-11-01T08:00:01.500Z", "usageDetails": {"input": 50, "output": 5, "total": 55}}],
             "scores": []}
    (tmp_path / "trace-lf-1.json").write_text(json.dumps(trace), encoding="utf-8")
    broken = dict(trace, id="lf-2", timestamp="yesterday")
    (tmp_path / "export.jsonl").write_text(json.dumps(broken) + "\n" + json.dumps(dict(trace, id="lf-3")) + "\n",
                                           encoding="utf-8")
    items = list(read_traces(tmp_path, "langfuse"))
    [problem] = [i for i in items if isinstance(i, TraceProblem)]
    assert (problem.file, problem.line, problem.field, problem.reason) == \
        (str(tmp_path / "export.jsonl"), 1, "timestamp", "missing or not an ISO 8601 time: 'yesterday'")
    first = next(i for i in items if isinstance(i, Trace) and i.trace_id == "lf-1")
    assert (first.user_input, first.response, first.retrieved_contexts, first.retrieved_documents) == \
        ("Who wrote it?", "Ada wrote it.", ["Ada wrote the note.", "Charles built the engine."],
         [{"document_id": "n1", "relevance_score": 0.9}, {"document_id": "n2", "relevance_score": 0.4}])
    assert (first.start_ns, first.latency_ms) == (1_793_520_000_000_000_000, 1500.0)
    assert (first.prompt_tokens, first.completion_tokens, first.total_tokens) == (50, 5, 55)
    assert (first.session_id, first.user_id, first.route) == ("sess", "7", "qa")


def test_values_beyond_what_a_timestamp_or_count_holds_are_problems_of_their_trace(tmp_path):
    """A time after 2262 (int64 nanoseconds), an infinite latency, a count of 10^30, a document rank of
    10^8: each is one named problem; the trace (or the rest of the day) is still read."""
    retriever, llm, chain = rag_trace()
    retriever["attributes"].append(attr("retrieval.documents.99999999.document.content", "far"))
    llm["attributes"] = [a for a in llm["attributes"] if a["key"] != "llm.token_count.total"] + \
        [attr("llm.token_count.total", 10 ** 30)]
    chain["endTimeUnixNano"] = "1" + "0" * 30
    (tmp_path / "spans.jsonl").write_text(line(retriever, llm, chain) + "\n", encoding="utf-8")
    items = list(read_traces(tmp_path / "spans.jsonl"))
    problems = [(p.field, p.reason) for p in items if isinstance(p, TraceProblem)]
    assert problems == [
        ("retrieval.documents.2", "missing: 99999997 of ranks 0..99999999 not given (ranks 0, 1, 99999999 given)"),
        ("llm.token_count.total", f"expected a whole number up to {2 ** 53} (summed over the trace's LLM spans), "
                                  f"got {10 ** 30}"),
        ("endTimeUnixNano", "missing or not a number of nanoseconds up to 2^63: '1" + "0" * 30 + "' (span 's1')")]
    [trace] = [t for t in items if isinstance(t, Trace)]
    assert (trace.end_ns, trace.total_tokens, trace.retrieved_contexts) == (T0 + 900 * MS, None, None)
    record = {"id": "lf", "timestamp": "2026-11-01T08:00:00Z", "latency": float("inf"),
              "observations": [{"type": "GENERATION", "endTime": "2300-01-01T00:00:00Z", "usage": {"input": 10 ** 30}}]}
    late = dict(record, id="lf-late", timestamp="2300-01-01T00:00:00Z")
    (tmp_path / "lf.jsonl").write_text(json.dumps(record) + "\n" + json.dumps(late) + "\n", encoding="utf-8")
    items = list(read_traces(tmp_path / "lf.jsonl", "langfuse"))
    assert [(p.line, p.field, p.reason) for p in items if isinstance(p, TraceProblem)] == [
        (1, "latency", "not a number of seconds within range: inf"),
        (1, "observations.usage.input", f"expected a whole number up to {2 ** 53}, got {10 ** 30}"),
        (2, "timestamp", "missing or not an ISO 8601 time: '2300-01-01T00:00:00Z'")]
    [trace] = [t for t in items if isinstance(t, Trace)]
    assert (trace.trace_id, trace.latency_ms, trace.prompt_tokens) == ("lf", 0.0, None)
    rows = [{"id": "t1", "time": 1e30, "latency": 5}, {"id": "t2", "time": 1_793_491_200, "latency": 1e300}]
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    items = list(read_traces(tmp_path / "rows.jsonl", "table"))
    assert [(p.line, p.field, p.reason) for p in items if isinstance(p, TraceProblem)] == [
        (1, "time", "not a time: 1e+30"), (2, "latency", "not a number within range: 1e+300")]
    assert [(t.trace_id, t.start_ns, t.end_ns) for t in items if isinstance(t, Trace)] == [("t2", T0, T0)]


def test_the_second_attackers_values_are_problems_too(tmp_path):
    """Past the first fix: a finite latency whose nanoseconds overflow (1e300 s), a 401-digit integer,
    superscript digits, a score beyond a float or infinite, tokens summed past 2^53, text scores."""
    huge = int("1" + "0" * 400)
    retriever, llm, chain = rag_trace()
    retriever["attributes"] = [a for a in retriever["attributes"] if a["key"] != "retrieval.documents.0.document.score"]
    retriever["attributes"] += [{"key": "retrieval.documents.0.document.score", "value": {"intValue": str(huge)}},
                                {"key": "retrieval.documents.1.document.score", "value": {"doubleValue": "Infinity"}}]
    llm["attributes"] = [a for a in llm["attributes"] if a["key"] != "llm.token_count.total"] + \
        [attr("llm.token_count.total", 2 ** 53)]
    second = dict(llm, spanId="0000000000000004", startTimeUnixNano="\u00b9\u00b2\u00b3")
    (tmp_path / "spans.jsonl").write_text(line(retriever, llm, second, chain) + "\n", encoding="utf-8")
    items = list(read_traces(tmp_path / "spans.jsonl"))
    assert [(p.field, p.reason) for p in items if isinstance(p, TraceProblem)] == [
        ("retrieval.documents.0.document.score", f"expected a finite number, got {huge}"),
        ("retrieval.documents.1.document.score", "expected a finite number, got inf"),
        ("startTimeUnixNano", "missing or not a number of nanoseconds up to 2^63: '\u00b9\u00b2\u00b3' (span 's3')"),
        ("llm.token_count.total", f"expected a whole number up to {2 ** 53} (summed over the trace's LLM spans), "
                                  f"got {2 ** 53}")]
    [trace] = [t for t in items if isinstance(t, Trace)]
    assert (trace.retrieved_documents, trace.total_tokens, trace.start_ns) == (None, None, T0)
    record = {"id": "lf", "timestamp": "2026-11-01T08:00:00Z", "latency": 1e300,
              "observations": [{"type": "RETRIEVER", "output": [{"page_content": "x", "metadata": {"id": "d",
                                                                                                  "score": huge}}]}]}
    (tmp_path / "lf.jsonl").write_text(json.dumps(record) + "\n" + json.dumps(dict(record, latency=huge)) + "\n",
                                       encoding="utf-8")
    items = list(read_traces(tmp_path / "lf.jsonl", "langfuse"))
    assert [(p.line, p.field, p.reason) for p in items if isinstance(p, TraceProblem)] == [
        (1, "latency", "not a number of seconds within range: 1e+300"),
        (2, "latency", f"not a number of seconds within range: {str(huge)[:40]}…")]
    assert [(t.latency_ms, t.retrieved_contexts, t.retrieved_documents) for t in items if isinstance(t, Trace)] == \
        [(0.0, ["x"], None)] * 2  # a score beyond a float is no score
    rows = [{"id": "t1", "time": 1e300}, {"id": "t2", "time": huge}, {"id": "t3", "time": 1_793_491_200, "latency": 1e303},
            {"id": "t4", "time": 1_793_491_200, "doc_ids": ["x", "y"], "scores": ["high", [1]]},
            {"id": "t5", "time": 1_793_491_200, "doc_ids": ["x"], "scores": [10 ** 30]}]
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    mapping = {"document_ids": "doc_ids", "document_scores": "scores"}
    items = list(read_traces(tmp_path / "rows.jsonl", "table", mapping))
    assert [(p.line, p.field, p.reason) for p in items if isinstance(p, TraceProblem)] == [
        (1, "time", "not a time: 1e+300"), (2, "time", f"not a time: {huge!r}"),
        (3, "latency", "not a number within range: 1e+303"),
        (4, "scores", "item 0: relevance_score must be a number, got 'high'")]
    assert [(t.trace_id, t.retrieved_documents) for t in items if isinstance(t, Trace)] == \
        [("t3", None), ("t4", None), ("t5", [{"document_id": "x", "relevance_score": 1e30}])]


def test_a_table_with_a_column_mapping_jsonl_and_parquet(tmp_path):
    rows = [{"rid": "r1", "at": "2026-11-01T10:00:00Z", "q": "什么是RAG？", "a": "检索增强生成。",
             "ctx": ["RAG 是检索增强生成。"], "ms": 350},
            {"rid": "r2", "at": "not a time", "q": "x", "a": "y", "ctx": [], "ms": 1},
            {"rid": "r3", "at": "2026-11-01T11:00:00Z", "q": "Why?", "a": 5, "ctx": "one context", "ms": 10}]
    mapping = {"trace_id": "rid", "start": "at", "user_input": "q", "response": "a", "retrieved_contexts": "ctx",
               "latency_ms": "ms"}
    (tmp_path / "a.jsonl").write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n{oops\n",
                                      encoding="utf-8")
    pd.DataFrame(rows[:1]).assign(rid="r9").to_parquet(tmp_path / "b.parquet")
    items = list(read_traces(tmp_path, "table", mapping))
    problems = [(p.file.rsplit("/", 1)[1], p.line, p.field, p.reason) for p in items if isinstance(p, TraceProblem)]
    assert problems == [("a.jsonl", 2, "at", "not a time: 'not a time'"),
                        ("a.jsonl", 3, "a", "expected a string, got int"),
                        ("a.jsonl", 4, "line", "not valid JSON: Expecting property name enclosed in double quotes "
                                               "(column 2)")]
    traces = {t.trace_id: t for t in items if isinstance(t, Trace)}
    assert sorted(traces) == ["r1", "r3", "r9"]
    assert (traces["r1"].user_input, traces["r1"].retrieved_contexts, traces["r1"].latency_ms) == \
        ("什么是RAG？", ["RAG 是检索增强生成。"], 350.0)
    assert traces["r9"].retrieved_contexts == ["RAG 是检索增强生成。"]  # a Parquet list column
    assert traces["r3"].response is None and traces["r3"].retrieved_contexts == ["one context"]
    assert traces["r3"].problems == {"response": f"{tmp_path / 'a.jsonl'}:3: a: expected a string, got int"}
    with pytest.raises(ValueError, match="unknown field"):
        list(read_traces(tmp_path, "table", {"question": "q"}))
    # A mapped column no row has (a typo) is said once per file, naming the columns there are.
    items = list(read_traces(tmp_path / "b.parquet", "table", dict(mapping, user_input="question_text")))
    assert [(p.line, p.field, p.reason) for p in items if isinstance(p, TraceProblem)] == [
        (1, "question_text", "the mapping reads user_input from the column 'question_text', which no row has "
                             "(its columns: a, at, ctx, ms, q, rid)")]


def test_a_sql_query_on_a_real_postgresql_server(postgres):
    import sqlalchemy

    from rag_eval.metrics.sources.traffic import window_queries
    from rag_eval.metrics.sources.traces.tables import read_sql, sql_times

    engine = sqlalchemy.create_engine(postgres.url)
    with engine.begin() as connection:
        connection.execute(sqlalchemy.text(
            "create table rag_log (request_id text, created_at timestamptz, question text, answer text, "
            "contexts jsonb, prompt_tokens integer, session text)"))
        connection.execute(sqlalchemy.text(
            "insert into rag_log values "
            "('q1', '2026-11-01 09:00:00+00', '长城有多长？', '约两万公里。', '[\"长城全长约21196公里。\"]', 40, 's1'), "
            "('q2', null, 'When?', 'Now.', '[]', 3, 's2'), "
            "('q3', '2026-11-02 09:00:00+00', 'Who?', 'Ada.', '[\"Ada wrote it.\"]', -1, 's3')"))
    engine.dispose()
    query = "select * from rag_log order by request_id"
    mapping = {"trace_id": "request_id", "start": "created_at", "retrieved_contexts": "contexts",
               "session_id": "session"}
    items = list(read_sql(postgres.url, query, mapping))
    where = postgres.url  # no password to hide
    problems = [(p.file, p.line, p.field, p.reason) for p in items if isinstance(p, TraceProblem)]
    assert problems == [(where, 2, "created_at", "missing"),
                        (where, 3, "prompt_tokens", "expected a whole number up to 9007199254740992, got -1")]
    traces = [t for t in items if isinstance(t, Trace)]
    assert [(t.trace_id, t.user_input, t.retrieved_contexts, t.prompt_tokens, t.session_id) for t in traces] == \
        [("q1", "长城有多长？", ["长城全长约21196公里。"], 40, "s1"), ("q3", "Who?", ["Ada wrote it."], None, "s3")]
    assert traces[0].start_ns == 1_793_523_600_000_000_000
    # The sensor's look (the start column only) and a window of one day (bound parameters).
    assert sorted(sql_times(postgres.url, query, "created_at")) == [1_793_523_600_000_000_000,
                                                                    1_793_610_000_000_000_000]
    windowed, _ = window_queries(query, mapping)
    from datetime import datetime, timezone
    day = {"window_start": datetime(2026, 11, 2, tzinfo=timezone.utc),
           "window_end": datetime(2026, 11, 3, tzinfo=timezone.utc)}
    assert [t.trace_id for t in read_sql(postgres.url, windowed, mapping, day) if isinstance(t, Trace)] == ["q3"]
    # What a traffic partition reads: the rows of its window only.
    from rag_eval.metrics.sources.traffic import TraceIndex, TrafficConfig, read_window

    config = TrafficConfig(source=postgres.url, format="sql", query=query, mapping=mapping, start="2026-11-01")
    window = list(read_window(config, TraceIndex("unused", "sql"), T0, T0 + 86_400 * 10 ** 9))
    assert [t.trace_id for t in window if isinstance(t, Trace)] == ["q1"]
    # The row without a start belongs to no window: every window reports it (never skipped silently).
    assert [(p.line, p.field, p.reason) for p in window if isinstance(p, TraceProblem)] == \
        [(1, "created_at", "missing")]


def test_a_database_error_names_the_database_without_its_password(postgres):
    from rag_eval.metrics.sources.traces.tables import read_sql

    url = postgres.url.replace("postgres@", "postgres:hunter2-secret@")
    with pytest.raises(ValueError) as raised:
        list(read_sql(url, "select * from no_such_table"))
    assert "hunter2-secret" not in str(raised.value)
    assert "no_such_table" in str(raised.value) and "***" in str(raised.value)
