"""Chat sessions from traces: an OpenInference ``session.id`` or a Langfuse ``sessionId`` makes a
conversation record (turns in start order), a session crossing midnight stays with the day it
started, the budget takes whole conversations, and a malformed session id is named by line and field."""
import json

import pytest

from rag_eval.metrics.errors import SettingsError
from rag_eval.metrics.core.samples import sample_from_dict
from rag_eval.metrics.sources.traces import Trace, TraceProblem, read_traces, to_sample
from rag_eval.metrics.sources.traces.sessions import conversations, record
from rag_eval.metrics.sources.traffic import HOUR_NS, TraceIndex, TrafficConfig, read_window
from rag_eval.metrics.stats.sampling import Budget, select
from tests.metrics.test_traces import MS, T0, attr, line, rag_trace

MINUTE = 60 * 10 ** 9
DAY = 24 * HOUR_NS


def traced(trace_id, start, session, question="What is BM25?", answer="A ranking function.", document="BM25 ranks."):
    """rag_trace's spans with the root's ``session.id`` set to ``session`` (a str, or an int as an intValue;
    ``None``: no session attribute)."""
    spans = rag_trace(trace_id, start, question, answer, (("d1", document, 1.0),))
    root = spans[2]
    root["attributes"] = [a for a in root["attributes"] if a["key"] != "session.id"]
    if session is not None:
        root["attributes"].append(attr("session.id", session))
    return spans


def session_traces(tmp_path):
    """A session's two turns (a..., b...) and a trace without a session (c...), written out of start order."""
    path = tmp_path / "spans.jsonl"
    # The second turn is written first (exporters write by end time, files by arrival): start time orders the turns.
    path.write_text("\n".join([
        line(*traced("b" * 32, T0 + 2 * MINUTE, "chat-7", "And its parameters?", "k1 and b.", "BM25 has k1 and b.")),
        line(*traced("c" * 32, T0 + MINUTE, None, "What is a vector?", "An array.", "Vectors are arrays.")),
        line(*traced("a" * 32, T0, "chat-7", "What is BM25?", "A ranking function.", "BM25 ranks documents."))]) + "\n",
        encoding="utf-8")
    return [t for t in read_traces(path) if isinstance(t, Trace)]


def test_otlp_traces_of_one_session_are_one_conversation_in_start_order(tmp_path):
    traces = session_traces(tmp_path)
    assert [t.trace_id[0] for t in traces] == ["b", "c", "a"]
    groups = conversations(traces)
    assert groups == [[2, 0], [1]]
    assert record([traces[i] for i in groups[0]]) == {
        "id": "a" * 32,  # the first turn's trace id: the session id stays in traces.parquet
        "messages": [{"role": "user", "content": "What is BM25?"},
                     {"role": "assistant", "content": "A ranking function.", "context": ["BM25 ranks documents."]},
                     {"role": "user", "content": "And its parameters?"},
                     {"role": "assistant", "content": "k1 and b.", "context": ["BM25 has k1 and b."]}],
        "trace_ids": ["a" * 32, "b" * 32]}
    # A trace without a session is the single-turn record it was, and its sample is the one it was.
    single = record([traces[1]])
    assert single == {"id": "c" * 32, "user_input": "What is a vector?", "response": "An array.",
                      "retrieved_contexts": ["Vectors are arrays."],
                      "retrieved_documents": [{"document_id": "d1", "relevance_score": 1.0}]}
    assert sample_from_dict(single, 1) == to_sample(traces[1], 1)


def test_langfuse_traces_of_one_session_are_one_conversation(tmp_path):
    def trace(trace_id, minute, session, question, answer):
        return {"id": trace_id, "timestamp": f"2026-11-01T08:{minute:02d}:00.000Z", "sessionId": session,
                "input": question, "output": answer,
                "observations": [{"type": "RETRIEVER", "name": "search", "startTime": f"2026-11-01T08:{minute:02d}:00Z",
                                  "output": [f"passage for {question}"]}]}

    rows = [trace("lf-3", 9, "s-2", "Who built it?", "Charles."), trace("lf-1", 1, "s-2", "Who wrote it?", "Ada."),
            trace("lf-2", 5, None, "When?", "1843.")]
    (tmp_path / "export.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    traces = [t for t in read_traces(tmp_path, "langfuse") if isinstance(t, Trace)]
    assert [(t.trace_id, t.session_id) for t in traces] == [("lf-3", "s-2"), ("lf-1", "s-2"), ("lf-2", None)]
    assert [[traces[i].trace_id for i in g] for g in conversations(traces)] == [["lf-1", "lf-3"], ["lf-2"]]
    assert record([traces[1], traces[0]]) == {
        "id": "lf-1", "trace_ids": ["lf-1", "lf-3"],
        "messages": [{"role": "user", "content": "Who wrote it?"},
                     {"role": "assistant", "content": "Ada.", "context": ["passage for Who wrote it?"]},
                     {"role": "user", "content": "Who built it?"},
                     {"role": "assistant", "content": "Charles.", "context": ["passage for Who built it?"]}]}


def test_a_session_crossing_midnight_is_read_with_the_day_it_started(tmp_path):
    """Session ``late`` starts at 23:50 on day 1 and goes on at 00:05 on day 2 (in the next day's file):
    both turns are day 1's. ``early``'s turns on day 2 are day 2's; a turn of ``late`` 8 hours after
    its first (beyond session_hours, 6) starts a part of its own on day 2."""
    source = tmp_path / "traces"
    source.mkdir()
    midnight = T0 + DAY
    (source / "day1.jsonl").write_text(line(*traced("a" * 32, midnight - 10 * MINUTE, "late")) + "\n"
                                       + line(*traced("b" * 32, T0 + HOUR_NS, None)) + "\n", encoding="utf-8")
    (source / "day2.jsonl").write_text("\n".join([
        line(*traced("c" * 32, midnight + 5 * MINUTE, "late")),
        line(*traced("d" * 32, midnight + 7 * MINUTE, None)),
        line(*traced("e" * 32, midnight + HOUR_NS, "early")),
        line(*traced("f" * 32, midnight + HOUR_NS + 2 * MINUTE, "early")),
        line(*traced("9" * 32, midnight + 8 * HOUR_NS - 10 * MINUTE, "late"))]) + "\n", encoding="utf-8")
    index = TraceIndex(tmp_path / "out", "otlp")

    def day(start, hours=6):
        config = TrafficConfig(source=str(source), session_hours=hours)
        return [t.trace_id[0] for t in read_window(config, index, start, start + DAY) if isinstance(t, Trace)]

    assert day(T0) == ["b", "a", "c"]  # the trace without a session as read; then the session's turns in order
    assert day(midnight) == ["d", "9", "e", "f"]  # sessions in the order they were first read
    assert day(T0 + 2 * DAY) == []
    # session_hours = 0 cuts every session at the partition boundaries.
    assert (day(T0, 0), day(midnight, 0)) == (["b", "a"], ["d", "c", "9", "e", "f"])
    with pytest.raises(SettingsError, match=r"^traffic config: session_hours must be a whole number, 0 or more, "
                                            r"got -1$"):
        TrafficConfig(session_hours=-1)


def test_the_budget_takes_whole_conversations_counted_in_turns():
    def trace(trace_id, minute, session, route="search"):
        return Trace(trace_id, T0 + minute * MINUTE, T0 + minute * MINUTE + MS, route=route, session_id=session)

    # Session A (3 turns, given out of order), session B (2 turns), a single trace S.
    traces = [trace("a2", 5, "A", "chat"), trace("b1", 1, "B"), trace("a1", 0, "A", "chat"), trace("s", 2, None),
              trace("b2", 3, "B"), trace("a3", 9, "A")]
    groups = conversations(traces)
    assert groups == [[2, 0, 5], [1, 4], [3]]
    # One turn: only the single trace fits (no conversation is cut); two: only B, its turns in order.
    assert select(traces, Budget(rows=1), groups=groups, by=[]).rows == [3]
    assert select(traces, Budget(rows=2), groups=groups, by=[]).rows == [1, 4]
    everything = select(traces, Budget(rows=6), groups=groups, by=["route"])
    assert sorted(everything.rows) == list(range(6))
    assert [everything.rows[i:i + 3] for i in range(6) if everything.rows[i] == 2] == [[2, 0, 5]]
    # A conversation is in its first turn's stratum; its turns count in it.
    assert everything.strata == {"chat": {"traces": 3, "sampled": 3}, "search": {"traces": 3, "sampled": 3}}
    assert everything.stratum[everything.rows.index(5)] == "chat"
    # A cost budget sums a conversation's turns: 2.5 at 1 a turn never takes A (3), and of B (2) and S (1) only
    # the first in the order (both are 3).
    chosen = select(traces, Budget(cost=2.5, price=(1.0, 1.0)), by=[], cost_of=lambda i: 1.0, groups=groups)
    assert chosen.rows in ([1, 4], [3]) and chosen.total_cost == len(chosen.rows)
    # Without sessions the groups are single traces: the sample is the traces' own.
    alone = [trace(f"t{i}", i, None, ["chat", "search"][i % 2]) for i in range(8)]
    assert select(alone, Budget(rows=3), 4, groups=conversations(alone)) == select(alone, Budget(rows=3), 4)


def test_a_malformed_session_id_is_named_by_line_and_field_and_the_trace_judged_alone(tmp_path):
    path = tmp_path / "spans.jsonl"
    path.write_text(line(*traced("a" * 32, T0, "chat-1")) + "\n" + line(*traced("b" * 32, T0 + MINUTE, 4711)) + "\n"
                    + line(*traced("c" * 32, T0 + 2 * MINUTE, "")) + "\n", encoding="utf-8")
    items = list(read_traces(path))
    problems = [(p.line, p.field, p.reason, p.trace_id) for p in items if isinstance(p, TraceProblem)]
    assert problems == [
        (2, "session.id", "expected a non-empty string, got a value of type int: the trace is judged as a single turn",
         "b" * 32),
        (3, "session.id", "expected a non-empty string, got an empty string: the trace is judged as a single turn",
         "c" * 32)]
    b = next(t for t in items if isinstance(t, Trace) and t.trace_id == "b" * 32)
    assert b.session_id is None and b.problems == {"session_id": f"{path}:2: session.id: {problems[0][2]}"}
    # Kept with its reason in its record (the value, metadata, is never shown).
    assert record([b])["problems"] == b.problems and "4711" not in json.dumps(record([b]))
    langfuse = tmp_path / "export.jsonl"
    langfuse.write_text(json.dumps({"id": "lf-1", "timestamp": "2026-11-01T08:00:00Z", "input": "Q?", "output": "A.",
                                    "sessionId": "s"}) + "\n"
                        + json.dumps({"id": "lf-2", "timestamp": "2026-11-01T08:01:00Z", "input": "Q?", "output": "A.",
                                      "sessionId": {"id": "secret-session"}}) + "\n", encoding="utf-8")
    items = list(read_traces(langfuse, "langfuse"))
    [problem] = [p for p in items if isinstance(p, TraceProblem)]
    assert (problem.line, problem.field, problem.trace_id) == (2, "sessionId", "lf-2")
    assert problem.reason == ("expected a non-empty string, got a value of type dict: the trace is judged as a "
                              "single turn")
    assert [t.session_id for t in items if isinstance(t, Trace)] == ["s", None]


def test_the_day_report_counts_conversations_and_turns(monkeypatch):
    """Two sessions (of 2 and 1 traces) and two traces alone are 4 conversations of 5 turns; a summary written
    before conversations were counted shows each trace as one."""
    import sys

    import pandas as pd

    from rag_eval.metrics.reports.traffic_report import conversation_count, traffic_html

    assert conversation_count(pd.DataFrame({"session_id": ["s", "s", None, "t", None]})) == 4
    assert conversation_count(pd.DataFrame({"trace_id": ["a", "b"]})) == 2

    def summary(partition, traces, sampled, **counted):
        return {"partition": partition, "traces": traces, "sampled": sampled, "problems": 0, "latency_ms": {},
                "system_tokens": {}, "judging_cost": {}, "worst_rows": {}, "metrics": {}, "drift": {}, **counted}

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # the tables only
    page = traffic_html([summary("2026-11-01", 10, 6),
                         summary("2026-11-02", 5, 3, conversations=4, sampled_conversations=2)], "2026-11-02")
    assert "<p>5 traces in 4 conversations, 3 judged in 2 conversations, 0 unreadable spans or rows</p>" in page
    assert "<td>2026-11-02</td><td>5</td><td>3</td><td>0</td><td>0</td><td>0</td><td>0</td><td>4</td><td>2</td>" in page
    assert "<td>2026-11-01</td><td>10</td><td>6</td><td>0</td><td>0</td><td>0</td><td>0</td><td>10</td><td>6</td>" in page


def test_a_sql_session_crossing_midnight_is_read_with_the_day_it_started(postgres):
    """A SQL source's window is widened by session_hours on its start column: the 00:05 turn of a session
    begun at 23:50 is the first day's; the next day reads it and leaves it."""
    import sqlalchemy

    engine = sqlalchemy.create_engine(postgres.url)
    with engine.begin() as connection:
        connection.execute(sqlalchemy.text("create table chat_log (id text, at timestamptz, q text, sid text)"))
        connection.execute(sqlalchemy.text(
            "insert into chat_log values ('m2', '2026-11-02 00:05:00+00', 'And then?', 'x'), "
            "('m1', '2026-11-01 23:50:00+00', 'What?', 'x'), ('m3', '2026-11-02 00:10:00+00', 'Who?', null)"))
    engine.dispose()
    config = TrafficConfig(source=postgres.url, format="sql", query="select * from chat_log order by id",
                           mapping={"trace_id": "id", "start": "at", "user_input": "q", "session_id": "sid"},
                           start="2026-11-01")

    def day(start):
        return [t.trace_id for t in read_window(config, TraceIndex("unused", "sql"), start, start + DAY)
                if isinstance(t, Trace)]

    assert (day(T0), day(T0 + DAY)) == (["m1", "m2"], ["m3"])


def test_a_sessions_traces_are_judged_as_its_turns_with_the_earlier_ones(tmp_path):
    from rag_eval.metrics.sources.traces import trace_samples

    traces = session_traces(tmp_path)
    later, single, first = trace_samples(traces)  # one per trace, in the traces' order (rows 0, 1, 2)
    assert [s.row for s in (later, single, first)] == [0, 1, 2]
    assert (first.id, first.conversation_id, first.turn, first.history) == ("a" * 32 + "/1", "a" * 32, 1, [])
    assert (later.id, later.conversation_id, later.turn) == ("a" * 32 + "/2", "a" * 32, 2)
    assert later.history == [{"role": "user", "content": "What is BM25?"},
                             {"role": "assistant", "content": "A ranking function."}]
    assert later.question().startswith("And its parameters?\n\nEarlier in this conversation") and \
        "User: What is BM25?" in later.question()
    assert single == to_sample(traces[1], 1) and single.turn is None
