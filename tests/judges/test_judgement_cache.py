"""The judgement cache never costs a run its answers, and never answers for another endpoint."""
import json
import socket
import sqlite3
import warnings
from pathlib import Path

import pytest

from rag_eval.metrics import Status, evaluate
from rag_eval.metrics.judges.cache import JudgementCache, cache_key
from rag_eval.metrics.judges.cache_file import CacheWarning
from rag_eval.metrics.judges.endpoint import EndpointError
from rag_eval.metrics.judges.llm import LLMJudge
from rag_eval.orchestration.judge_sim import JudgeServer

ROWS = [{"id": f"r{i}", "user_input": f"Where was person {i} born?", "response": f"Person {i} was born in Ulm.",
         "retrieved_contexts": [f"Person {i} was born in Ulm, Germany."], "reference": f"Person {i} was born in Ulm."}
        for i in range(3)]
PER_ROW = 6  # the five core metrics: 5 chat + 1 embeddings request per row (rag_eval.metrics.judges.llm)


@pytest.fixture
def judges(make_judge):
    """``make_judge`` on a server and a cache of the test's choosing."""
    return lambda base_url, cache_path, **options: make_judge(
        **{"base_url": base_url, "cache_path": str(cache_path), "api_key": "sk-test-cache", **options})


def run(judge, rows=ROWS) -> tuple[list[str], list[CacheWarning]]:
    """Statuses and cache warnings of evaluating ``rows`` with ``judge`` (or a judge factory)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = evaluate(rows, judge=judge if isinstance(judge, LLMJudge) else judge()).results
    return results["status"].tolist(), [w for w in caught if issubclass(w.category, CacheWarning)]


def test_a_file_that_is_not_a_database_is_named_set_aside_and_rebuilt(server, tmp_path, judges):
    cache = tmp_path / "cache.sqlite"
    cache.write_bytes(b"this is not an SQLite database\n" * 40)
    statuses, caught = run(lambda: judges(server.url, cache))
    assert statuses == [Status.OK.value] * 5 * len(ROWS)
    assert len(caught) == 1 and str(cache) in str(caught[0].message) and "set aside" in str(caught[0].message)
    aside = list(tmp_path.glob("cache.sqlite.unusable-*"))
    assert len(aside) == 1 and aside[0].read_bytes() == b"this is not an SQLite database\n" * 40
    sent = len(server.seen)
    assert sent == PER_ROW * len(ROWS)
    statuses, caught = run(judges(server.url, cache))  # the rebuilt cache holds this run's answers
    assert len(server.seen) == sent and not caught and statuses == [Status.OK.value] * 5 * len(ROWS)


def test_a_cache_that_cannot_be_created_warns_once_and_the_run_keeps_its_answers(server, tmp_path, judges):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder should be")
    statuses, caught = run(lambda: judges(server.url, blocker / "cache.sqlite"))
    assert statuses == [Status.OK.value] * 5 * len(ROWS)
    assert len(caught) == 1 and "memory only" in str(caught[0].message) and str(blocker) in str(caught[0].message)
    assert len(server.seen) == PER_ROW * len(ROWS)


def stored(path: Path) -> set[str]:
    return {key for (key,) in sqlite3.connect(path).execute("SELECT key FROM answers")}


def test_a_full_disk_mid_run_loses_no_answer_and_keeps_the_file(server, tmp_path, judges):
    run(judges(server.url, tmp_path / "clean" / "cache.sqlite"))
    expected = stored(tmp_path / "clean" / "cache.sqlite")
    server.seen.clear()
    cache = tmp_path / "cache.sqlite"
    judge = judges(server.url, cache)
    assert run(judge, ROWS[:1])[0] == [Status.OK.value] * 5
    paid = stored(cache)
    # SQLite's own "database or disk is full" (SQLITE_FULL), as on a full disk: no page may be added
    # (tests/reliability/test_storage_faults.py fills a real tmpfs).
    judge.cache._db.execute("PRAGMA max_page_count = 1")
    statuses, caught = run(judge, ROWS)
    assert statuses == [Status.OK.value] * 5 * len(ROWS)
    assert len(caught) == 1 and "full" in str(caught[0].message) and str(cache) in str(caught[0].message)
    assert len(server.seen) == PER_ROW * len(ROWS)  # row 1 from the cache, rows 2 and 3 asked once
    # A full disk is not a damaged file: nothing set aside, the answers paid for before are still the cache's,
    # and the answers of the full disk are written as soon as it takes them.
    assert not list(tmp_path.glob("cache.sqlite.unusable-*")) and paid <= stored(cache) < expected
    judge.cache._db.execute("PRAGMA max_page_count = 1000000")
    judge.cache.flush()
    assert stored(cache) == expected


def test_a_damaged_file_mid_run_is_set_aside_and_rebuilt(server, tmp_path, judges):
    cache = tmp_path / "cache.sqlite"
    judge = judges(server.url, cache)
    run(judge, ROWS[:1])
    judge.cache._db.close()  # the file is overwritten behind the open connection's back
    cache.write_bytes(b"\x00garbage" * 4096)
    judge.cache._db = sqlite3.connect(str(cache), check_same_thread=False, isolation_level=None)
    statuses, caught = run(judge, ROWS)
    assert statuses == [Status.OK.value] * 5 * len(ROWS)
    assert len(caught) == 1 and str(cache) in str(caught[0].message)
    assert len(list(tmp_path.glob("cache.sqlite.unusable-*Z"))) == 1


def dead_url() -> str:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def test_judgements_are_keyed_by_endpoint(server, tmp_path, judges):
    cache = tmp_path / "cache.sqlite"
    run(judges(server.url, cache))
    assert len(server.seen) == PER_ROW * len(ROWS)
    # Another provider serving a model of the same name is asked again, not answered from the cache.
    other = JudgeServer().start()
    try:
        statuses, _ = run(judges(other.url, cache))
        assert len(other.seen) == PER_ROW * len(ROWS) and statuses == [Status.OK.value] * 5 * len(ROWS)
        # Reuse across endpoints is an explicit option.
        third = JudgeServer().start()
        try:
            run(judges(third.url, cache, cache_across_endpoints=True))
            assert third.seen == []
        finally:
            third.stop()
    finally:
        other.stop()
    # A dead endpoint never reports another provider's cached answers as its own: its check stops the run.
    with pytest.raises(EndpointError, match="connection refused"):
        run(judges(dead_url(), cache, max_attempts=1))


def test_answers_of_a_cache_made_before_endpoint_keys_are_reused_only_across_endpoints(tmp_path):
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as old:  # the layout before endpoints were keyed: the key had no endpoint
        old.execute("CREATE TABLE judgements (key TEXT PRIMARY KEY, kind TEXT NOT NULL, value TEXT NOT NULL, "
                    "created TEXT DEFAULT CURRENT_TIMESTAMP)")
        key = cache_key("https://api.openai.com/v1", kind="entities", model="m", text="Ulm")
        old.execute("INSERT INTO judgements (key, kind, value) VALUES (?, 'entities', '{\"entities\": [\"Ulm\"]}')",
                    (key.shared,))
    assert JudgementCache(path).get(key) is None  # which endpoint answered is unknown
    assert JudgementCache(path, across_endpoints=True).get(key) == {"entities": ["Ulm"]}


def test_answers_the_cache_refuses_go_to_a_spill_file_as_they_arrive_and_cache_import_folds_it_in(
        server, tmp_path, judges, capsys, monkeypatch):
    from rag_eval.metrics.judges.spill import SpillSink, settle, spills_of
    from rag_eval.orchestration import cli

    run(judges(server.url, tmp_path / "clean" / "cache.sqlite"))
    expected = stored(tmp_path / "clean" / "cache.sqlite")  # every answer of the rows
    server.seen.clear()
    cache = tmp_path / "cache.sqlite"
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where the output folder should be")
    sink = SpillSink([blocker / "out", tmp_path / "tmp"])  # the first folder cannot be made
    judge = judges(server.url, cache)
    judge.cache.sink = sink  # the command's (rag-eval gives it as the judge is built)
    judge.cache._db.execute("PRAGMA max_page_count = 1")  # SQLITE_FULL from the first answer on, as a full disk
    statuses, caught = run(judge)
    assert statuses == [Status.OK.value] * 5 * len(ROWS) and len(caught) == 1
    # Before the run is settled (as a process killed now would leave it): every answer is in the spill file.
    [spill] = sink.files[str(cache)]
    assert spill.parent == tmp_path / "tmp" and spill.name.startswith("judgement-spill-")
    header, *lines = spill.read_text(encoding="utf-8").splitlines()
    assert json.loads(header) == {"format": "rag-eval judgement spill 1", "cache": str(cache)}
    spilled = {json.loads(line)["key"] for line in lines}
    assert spilled and not stored(cache) & spilled and stored(cache) | spilled == expected  # nothing paid is lost
    assert "sk-test-cache" not in spill.read_text(encoding="utf-8")
    assert settle(judge.cache, sink) == [spill]  # nothing was left in memory
    judge.close()
    sink.close()
    assert spills_of(cache, [tmp_path / "tmp"]) == [spill]
    assert spills_of(tmp_path / "other.sqlite", [tmp_path / "tmp"]) == []  # another cache's spill files are left
    not_spill = tmp_path / "notes.jsonl"
    not_spill.write_text('{"id": 1}\n', encoding="utf-8")
    assert cli.main(["cache", "import", str(not_spill), "--cache-path", str(cache)]) == 2
    assert capsys.readouterr().err == f"error: {not_spill}: not a judgement spill file (its first line is not a spill " \
                                      "header); name a judgement-spill-*.jsonl file a run wrote\n"
    monkeypatch.chdir(tmp_path / "tmp")  # the default cache would be ./.rag_eval_cache/: the header's cache is used
    assert cli.main(["cache", "import", str(spill)]) == 0
    assert capsys.readouterr().out == f"folded {len(lines)} judgements from {spill} into the judgement cache {cache}\n"
    assert len(stored(cache)) >= len(lines) and not spill.exists() and not (tmp_path / "tmp" / ".rag_eval_cache").exists()
    asked = len(server.seen)
    statuses, caught = run(judges(server.url, cache))
    assert statuses == [Status.OK.value] * 5 * len(ROWS) and not caught and len(server.seen) == asked  # nothing re-bought


def test_spill_folders_skip_what_is_not_this_users_regular_file_and_nesting_is_a_bad_line(tmp_path):
    import os

    from rag_eval.metrics.judges.cache import JudgementCache
    from rag_eval.metrics.judges.spill import import_spill, read_spill, spills_of

    cache = tmp_path / "cache.sqlite"
    header = json.dumps({"format": "rag-eval judgement spill 1", "cache": str(cache)})
    good = json.dumps({"key": "a" * 64, "shared": "b" * 64, "kind": "statement_support", "value": '{"verdicts": [1], "reasons": ["stated"]}'})
    spill = tmp_path / "judgement-spill-1.jsonl"
    spill.write_text(f"{header}\n{good}\n{'[' * 100_000}\n", encoding="utf-8")
    os.mkfifo(tmp_path / "judgement-spill-2.jsonl")  # opened, it would block the run
    (tmp_path / "judgement-spill-3.jsonl").symlink_to(spill)
    assert spills_of(cache, [tmp_path]) == [spill]
    _, entries, skipped = read_spill(spill)
    assert (len(entries), skipped) == (1, ["line 3: not a JSON object"])
    empty = tmp_path / "judgement-spill-4.jsonl"
    empty.write_text(f"{header}\nnot json\n", encoding="utf-8")
    assert import_spill(JudgementCache(str(cache)), empty) == (0, ["line 2: not a JSON object"]) and empty.exists()  # nothing folded: kept
