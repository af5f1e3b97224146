"""A judgement paid for is written somewhere, or not bought: the cache's check before a command,
spill files, and what a command says when the cache and every spill folder refuse (issue 37)."""
import argparse
import json
import re
import signal
import sqlite3
import warnings
from pathlib import Path

import pytest

from rag_eval.metrics import Status, evaluate
from rag_eval.metrics.core.registry import builtin_registry
from rag_eval.metrics.errors import EXIT_SPILLED, EXIT_USER, StorageError
from rag_eval.metrics.judges.cache import JudgementCache, Key
from rag_eval.metrics.judges.kept import kept_problem
from rag_eval.metrics.judges.probe import RESERVE_BYTES, ROW_OVERHEAD, Expected, answer_bytes, cache_file, check_room, refusal
from rag_eval.metrics.judges.spill import SpillSink, import_spill, spills_of
from rag_eval.orchestration import cache_cli, cli
from tests.conftest import FIQA

ROWS = [{"id": f"r{i}", "user_input": f"Where was person {i} born?", "response": f"Person {i} was born in Ulm.",
         "retrieved_contexts": [f"Person {i} was born in Ulm, Germany."], "reference": f"Person {i} was born in Ulm."}
        for i in range(3)]
MANY = [{**ROWS[0], "id": f"m{i}", "response": f"Person {i} was born in Ulm."} for i in range(40)]
HEADER = '{"format": "rag-eval judgement spill 1", "cache": "%s"}\n'
#: Every command that sends judge requests (its parser sets ``judges=True``), with arguments.
JUDGING = [["run", str(FIQA)], ["backfill"], ["calibrate", "labels.jsonl"], ["align", "v1"], ["sweep", "target.toml"],
           ["traffic"], ["compare", "a.jsonl", "b.jsonl"], ["gate"], ["testset", "docs"]]


def test_the_probe_is_a_commit_to_the_cache_file_not_a_file_in_its_folder(tmp_path):
    cache = tmp_path / "cache.sqlite"
    JudgementCache(cache).close()
    (tmp_path / "cache.sqlite-wal").mkdir()  # the folder takes files, the file takes no commit (its WAL cannot be made)
    assert refusal(cache, tmp_path / "out") is not None
    (tmp_path / "cache.sqlite-wal").rmdir()
    assert refusal(cache, tmp_path / "out") is None
    with sqlite3.connect(cache) as db:  # the commit recorded where this run would spill
        assert db.execute("select folder from spill_folders").fetchall() == [(str(tmp_path / "out"),)]


def test_a_cache_path_that_is_empty_or_a_folder_is_refused_and_a_link_is_followed(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(["run", str(FIQA), "--cache-path", ""])
    assert stop.value.code == 2 and "argument --cache-path: an empty file name" in capsys.readouterr().err
    with pytest.raises(ValueError, match="an empty file name"):
        cache_file("")
    folder = tmp_path / "caches"
    folder.mkdir()
    with pytest.raises(ValueError, match=rf"^--cache-path {folder} is a folder: name the judgement cache file"):
        cache_file(folder)
    target = tmp_path / "real" / "cache.sqlite"
    target.parent.mkdir()
    link = tmp_path / "link.sqlite"
    link.symlink_to(target)
    assert cache_file(link) == target
    assert refusal(cache_file(link), None) is None and target.is_file() and link.is_symlink()  # the target got the commit


@pytest.mark.parametrize("command", JUDGING)
def test_every_command_that_judges_checks_the_cache_before_anything_else(command, server, tmp_path, monkeypatch,
                                                                         capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-probe")
    (tmp_path / ".rag_eval_cache" / "judgements.sqlite").mkdir(parents=True)  # the default cache path, a folder
    assert cli.main(command) == 2
    assert capsys.readouterr().err == "error: --cache-path .rag_eval_cache/judgements.sqlite is a folder: name the " \
                                      "judgement cache file, e.g. .rag_eval_cache/judgements.sqlite/judgements.sqlite\n"
    assert server.seen == []


@pytest.mark.parametrize("command", JUDGING)
def test_the_refusal_names_only_options_the_command_takes(command, tmp_path, monkeypatch):
    """The way out of a cache that takes no writes names ``--cache-path`` only to commands that have it."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9")  # an LLM judge is configured; nothing is sent
    cache = tmp_path / ".rag_eval_cache" / "judgements.sqlite"  # the default cache: the only one a command without
    JudgementCache(cache).close()                              # --cache-path can use
    (tmp_path / ".rag_eval_cache" / "judgements.sqlite-wal").mkdir()  # its commits fail: it takes no writes
    [parser] = [action.choices[command[0]] for action in cli.build_parser()._subparsers._group_actions]
    args = parser.parse_args(command[1:])
    args.command, args.expected = command[0], lambda _: Expected(1, 0)  # a request to send: refused
    with pytest.raises(StorageError) as refused:
        cache_cli.before_run(args)
    line = str(refused.value)
    assert line.startswith(f"{cache}: the judgement cache cannot take writes: ") and \
        "; nothing was sent: free space on its disk (or make it writable), " in line and line.endswith("then run again")
    accepted = {option for action in parser._actions for option in action.option_strings}
    named = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", line.split("; nothing was sent: ")[1]))
    assert named <= accepted and ("--cache-path" in named) == ("--cache-path" in accepted), (named, accepted)


def test_the_room_check_sizes_answers_from_the_caches_rows(tmp_path):
    cache = tmp_path / "cache.sqlite"
    with sqlite3.connect(cache) as db:
        db.execute("create table answers (key text primary key, shared text, kind text not null, value text not null,"
                   " created text)")
        db.executemany("insert into answers (key, shared, kind, value) values (?, ?, ?, ?)",
                       [(f"{i:064x}", "b" * 64, "statement_support", "x" * 1000) for i in range(3)])
    # 64 + 64 + len("statement_support") + 1000 bytes, and the overhead of a row; no embedding: the default.
    assert answer_bytes(cache) == {"chat": 64 + 64 + 17 + 1000 + ROW_OVERHEAD, "embedding": 32 * 1024}
    check_room(cache, Expected(100, 10), str(cache), "way out")
    with pytest.raises(StorageError) as refused:
        check_room(cache, Expected(10**12, 0), str(cache), "way out")
    assert str(refused.value).startswith(f"{cache}: the judgement cache has too little room: ")
    assert str(refused.value).endswith(f"needs about {10**12 * (1145 + ROW_OVERHEAD) + RESERVE_BYTES:,} for "
                                       f"1,000,000,000,000 answers ({1145 + ROW_OVERHEAD:,} bytes a chat answer, "
                                       "32,768 an embedding, measured from its rows); way out")



def test_the_room_check_bounds_the_answers_without_planning_them_first(tmp_path):
    """The bound: lines × metrics × --max-row-requests, each as a chat answer and an embedding; a
    disk with room for it is not planned (the plan is asked for only when the bound does not fit)."""
    from rag_eval.orchestration import dry_run

    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")  # 3 lines, a newline each
    args = argparse.Namespace(command="run", dataset=str(data), metrics="faithfulness,context_recall",
                              max_row_requests=7, registry=builtin_registry())
    assert dry_run.most_answers(args) == Expected((3 + 1) * 2 * 7, (3 + 1) * 2 * 7)  # the last, empty line counted
    assert dry_run.most_answers(argparse.Namespace(**{**vars(args), "max_row_requests": 0})) is None  # no limit
    planned = []
    args = argparse.Namespace(**vars(args), cache_path=str(tmp_path / "cache.sqlite"), base_url="http://127.0.0.1:9/v1",
                              out=str(tmp_path / "out"), most=dry_run.most_answers,
                              expected=lambda a: planned.append(a) or Expected(1, 0))
    assert isinstance(cache_cli.before_run(args), SpillSink)  # the command's, for the caches it opens
    assert planned == []  # 112 answers fit: nothing planned
    args.max_row_requests = 10**15  # a bound of 8×10^15 answers fits no disk
    cache_cli.before_run(args)
    assert planned == [args]  # the bound did not fit: the requests were planned (1 answer: it fits)

def test_a_spill_import_never_replaces_a_cached_answer_and_names_the_lines_it_skips(tmp_path):
    cache = JudgementCache(tmp_path / "cache.sqlite")
    kept, new = Key("a" * 64, "b" * 64), Key("c" * 64, "d" * 64)
    cached, spilled, fresh = ({"verdicts": [v], "reasons": [why]} for v, why in ((1, "cached"), (0, "spilled"), (1, "new")))
    cache.put(kept, "statement_support", cached)
    lines = [{"key": kept.own, "shared": kept.shared, "kind": "statement_support", "value": json.dumps(spilled)},
             {"key": new.own, "shared": new.shared, "kind": "statement_support", "value": json.dumps(fresh)},
             {"key": "not-a-key", "shared": "d" * 64, "kind": "statement_support", "value": "{}"},
             {"key": "e" * 64, "shared": "d" * 64, "kind": "Bad Kind!", "value": "{}"},
             {"key": "e" * 64, "shared": "d" * 64, "kind": "statement_support", "value": "{not json"},
             {"key": "e" * 64, "shared": "d" * 64, "kind": "statement_support", "value": "NaN"}]
    spill = tmp_path / "judgement-spill-1.jsonl"
    spill.write_text(HEADER % (tmp_path / "cache.sqlite") + "".join(json.dumps(line) + "\n" for line in lines),
                     encoding="utf-8")
    assert import_spill(cache, spill) == (2, ["line 4: key: missing or not a cache key",
                                              "line 5: kind: missing or not a cache kind",
                                              "line 6: value: missing or not JSON text",
                                              "line 7: value: missing or not JSON text"])
    assert cache.get(kept) == cached and cache.get(new) == fresh
    assert cache.get(Key("e" * 64, "d" * 64)) is None
    cache.close()


def test_a_spilled_value_that_is_no_answer_of_its_kind_is_skipped_and_named(tmp_path):
    """Valid JSON is not enough: ``{}``, ``1e999`` (infinity) or a list where the kind keeps an object
    would break every row reading it; such lines are skipped and named, the good one folded."""
    cache = JudgementCache(tmp_path / "cache.sqlite")
    good = {"verdicts": [1, 0], "reasons": ["stated", "not stated"]}
    values = [("statement_support", "{}"), ("statement_support", "1e999"), ("context_relevance_a", "[0, 2]"),
              ("statement_support", '{"verdicts": [1e999], "reasons": ["x"]}'), ("embedding", '{"x": 1}'),
              ("statement_support", '{"verdicts": "1", "reasons": []}'), ("statement_support", json.dumps(good)),
              ("target.generator", '{"value": {"response": "Paris."}, "latency": 0.2}'),
              # Values a valid reply never has (the attack review's): a verdict 7, a rating 9, a reason missing,
              # nesting 600 deep (below json's limit, past Python's recursion one for a recursive check).
              ("statement_support", '{"verdicts": [7, 0], "reasons": ["a", "b"]}'),
              ("context_relevance_a", '{"ratings": [9]}'),
              ("statement_support", '{"verdicts": [1, 0], "reasons": ["a"]}'),
              ("entities", '{"entities": ' + "[" * 600 + "]" * 600 + "}")]
    lines = [{"key": f"{i:064x}", "shared": "d" * 64, "kind": kind, "value": value} for i, (kind, value) in enumerate(values)]
    spill = tmp_path / "judgement-spill-1.jsonl"
    spill.write_text(HEADER % (tmp_path / "cache.sqlite") + "".join(json.dumps(line) + "\n" for line in lines),
                     encoding="utf-8")
    assert import_spill(cache, spill) == (2, [
        "line 2: value: not an answer of kind statement_support (not an object with verdicts, reasons)",
        "line 3: value: not an answer of kind statement_support (a number that is not finite, or nested deeper "
        "than 8 levels)",
        "line 4: value: not an answer of kind context_relevance_a (not an object with ratings)",
        "line 5: value: not an answer of kind statement_support (a number that is not finite, or nested deeper "
        "than 8 levels)",
        "line 6: value: not an answer of kind embedding (not a non-empty list of numbers)",
        "line 7: value: not an answer of kind statement_support (verdicts: not a list of 0s and 1s)",
        "line 10: value: not an answer of kind statement_support (verdicts: not a list of 0s and 1s)",
        "line 11: value: not an answer of kind context_relevance_a (ratings: not a list of integers from 0 to 2)",
        "line 12: value: not an answer of kind statement_support (verdicts and reasons: not of the same length)",
        "line 13: value: not an answer of kind entities (a number that is not finite, or nested deeper than 8 "
        "levels)"])
    assert cache.get(Key(f"{6:064x}", "d" * 64)) == good
    # A target system's answer (rag-eval sweep's paid calls) is folded too.
    assert cache.get(Key(f"{7:064x}", "d" * 64)) == {"value": {"response": "Paris."}, "latency": 0.2}
    assert all(cache.get(Key(f"{i:064x}", "d" * 64)) is None for i in range(6))
    assert len(cache) == 2
    cache.close()


def test_a_cached_value_that_is_no_answer_of_its_kind_is_asked_again_and_overwritten(make_judge, server, tmp_path):
    """A cache entry of the wrong shape (written by an older import) is a miss: asked once more, replaced, and
    the row scores; the next run asks nothing."""
    path = tmp_path / "cache.sqlite"
    judge = make_judge(cache_path=str(path))
    first = evaluate(ROWS[:1], metrics=["faithfulness"], judge=judge).results
    asked = len(server.seen)
    assert first["status"].tolist() == [Status.OK.value] and asked >= 1
    judge.close()
    with sqlite3.connect(path) as db:
        good = dict(db.execute("select key, value from answers").fetchall())
        db.execute("update answers set value = '{}'")
    again = make_judge(cache_path=str(path))
    second = evaluate(ROWS[:1], metrics=["faithfulness"], judge=again).results
    assert second["status"].tolist() == [Status.OK.value] and len(server.seen) == 2 * asked
    assert second["value"].tolist() == first["value"].tolist() and second["cache_hits"].tolist() == [0]
    again.close()
    with sqlite3.connect(path) as db:
        assert dict(db.execute("select key, value from answers").fetchall()) == good  # overwritten with the answer
    third = make_judge(cache_path=str(path))
    assert evaluate(ROWS[:1], metrics=["faithfulness"], judge=third).results["status"].tolist() == [Status.OK.value]
    assert len(server.seen) == 2 * asked


def test_every_answer_the_judges_keep_passes_the_check_of_its_kind(make_judge, server, tmp_path):
    """The check knows each kind the metrics ask for: all of them, answered by the test server and cached, pass."""
    rows = [{**ROWS[0], "response": "Person 0 was born in Ulm. He liked cars.",
             "retrieved_contexts": ["Person 0 was born in Ulm, Germany.", "Cars are fast."]}]
    judge = make_judge(cache_path=str(tmp_path / "cache.sqlite"))
    evaluate(rows, metrics=["all"], judge=judge)
    judge.close()
    with sqlite3.connect(tmp_path / "cache.sqlite") as db:
        kept = db.execute("select kind, value from answers").fetchall()
    assert len({kind for kind, _ in kept}) >= 15 and "embedding" in {kind for kind, _ in kept}
    assert [(kind, kept_problem(kind, json.loads(value))) for kind, value in kept
            if kept_problem(kind, json.loads(value))] == []


def test_a_spill_under_another_output_folder_is_found_through_the_folder_the_cache_recorded(tmp_path):
    cache = tmp_path / "cache.sqlite"
    assert refusal(cache, tmp_path / "out-a") is None  # the run with --out out-a recorded it
    (tmp_path / "out-a").mkdir()
    spill = tmp_path / "out-a" / "judgement-spill-1.jsonl"
    spill.write_text(HEADER % cache, encoding="utf-8")
    assert spills_of(cache, [tmp_path / "out-b"]) == [spill]  # the next run has --out out-b


def test_with_no_place_for_answers_nothing_more_is_bought_and_the_command_says_so(make_judge, server, tmp_path,
                                                                                 capsys):
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where the folders should be")
    sink = SpillSink([blocker / "out", blocker / "tmp"])  # neither folder can be made
    judge = make_judge(cache_path=str(tmp_path / "cache.sqlite"), concurrency=1)
    judge.cache.sink = sink  # the command's (rag-eval gives it as the judge is built)
    judge.cache._db.execute("PRAGMA max_page_count = 1")  # SQLITE_FULL, as a full disk
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = evaluate(MANY, metrics=["faithfulness"], judge=judge).results
    # One request a row, one at a time; the file's free pages take the first answers, then the first answer that
    # could be written nowhere is the last request sent.
    sent = len(server.seen)
    assert 1 <= sent < len(MANY)
    assert results["status"].tolist() == [Status.OK.value] * sent + [Status.JUDGE_ERROR.value] * (len(MANY) - sent)
    assert all("not sent: the judgement cache" in reason and "no spill folder takes them either" in reason
               for reason in results["reason"].iloc[sent:])
    assert cache_cli.after_run(sink) == (EXIT_USER, ())
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"error: {judge.cache.path}: 1 judgements paid for could not be written to the cache (")
    assert line.endswith("they are lost: free space on one of these disks before the next run; no judgement was "
                         "bought after that (the rest are judge_error: not sent)")
    judge.close()


def test_the_spill_files_a_command_wrote_are_what_after_run_returns(make_judge, server, tmp_path, capsys):
    """The command owns the list of its spill files (``Settled.spills``, named by the stop line), no module list."""
    sink = SpillSink([tmp_path / "out"])
    judge = make_judge(cache_path=str(tmp_path / "cache.sqlite"), concurrency=1)
    judge.cache.sink = sink  # the command's (rag-eval gives it as the judge is built)
    judge.cache._db.execute("PRAGMA max_page_count = 1")  # SQLITE_FULL, as a full disk
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert evaluate(MANY[:20], metrics=["faithfulness"], judge=judge).results["status"].tolist() == \
            [Status.OK.value] * 20
    [spill] = (tmp_path / "out").glob("judgement-spill-*.jsonl")
    assert cache_cli.after_run(sink) == (EXIT_SPILLED, (spill,))
    assert f"they are in the spill file {spill}" in capsys.readouterr().err
    assert cache_cli.after_run(None) == (None, ())  # a command without a sink (the offline judge's) settles nothing
    judge.close()


def test_the_stop_line_names_the_spill_file_when_answers_went_there(tmp_path, monkeypatch, capsys):
    spill = tmp_path / "judgement-spill-1.jsonl"
    assert cli.stopped(bytes([signal.SIGTERM]), [spill]) == 143
    line = capsys.readouterr().err
    assert f"every judgement already answered is kept in the judgement cache and the spill file {spill} (the next " \
           "run folds it into the cache)" in line and "kept in the judgement cache and nothing" not in line


def test_a_spill_header_naming_no_judgement_cache_changes_no_file(tmp_path, capsys):
    """Without --cache-path the header's cache is used only when it is an existing judgement cache:
    a header naming another file, or no file, creates and changes nothing and says to name the cache."""
    text = tmp_path / "hosts"
    text.write_text("127.0.0.1 localhost\n", encoding="utf-8")
    for named in (text, tmp_path / "made" / "new.sqlite"):
        spill = tmp_path / "judgement-spill-9.jsonl"
        spill.write_text(HEADER % named, encoding="utf-8")
        assert cli.main(["cache", "import", str(spill)]) == 2
        assert capsys.readouterr().err == (f"error: {spill}: its header names '{named}', which is not an existing "
                                           "judgement cache; name the cache to fold it into with --cache-path FILE\n")
    assert text.read_text(encoding="utf-8") == "127.0.0.1 localhost\n" and sorted(p.name for p in tmp_path.iterdir()) \
        == ["hosts", "judgement-spill-9.jsonl"]


def test_cache_import_refuses_what_is_not_a_regular_file_without_reading_it(tmp_path, capsys):
    """A FIFO would block the import and a device never end (/dev/zero grew to gigabytes): refused unread."""
    import os

    fifo = tmp_path / "judgement-spill-1.jsonl"
    os.mkfifo(fifo)
    for named in (fifo, "/dev/zero"):
        assert cli.main(["cache", "import", str(named), "--cache-path", str(tmp_path / "c.sqlite")]) == 2
        assert capsys.readouterr().err == (f"error: {named}: not a regular file: name a judgement-spill-*.jsonl file "
                                           "a run wrote\n")
    assert not (tmp_path / "c.sqlite").exists()


def test_each_cache_spills_to_the_sink_it_was_given_and_one_without_keeps_its_answers(tmp_path):
    """The sink belongs to the cache (issue 36): two commands of one process spill to their own folders."""
    answer = {"verdicts": [1], "reasons": ["stated " * 2000]}  # longer than the file's free pages hold
    caches, sinks = [], [SpillSink([tmp_path / "out-a"]), SpillSink([tmp_path / "out-b"]), None]
    for name, sink in zip("abc", sinks):
        cache = JudgementCache(tmp_path / f"{name}.sqlite", sink=sink)
        cache._db.execute("PRAGMA max_page_count = 1")  # SQLITE_FULL, as a full disk
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cache.put(Key(name * 64, "f" * 64), "statement_support", answer)
        caches.append(cache)
    for name, sink in zip("ab", sinks):
        [spill] = (tmp_path / f"out-{name}").glob("judgement-spill-*.jsonl")
        assert sink.files == {str(tmp_path / f"{name}.sqlite"): [spill]}
        header, line = spill.read_text(encoding="utf-8").splitlines()
        assert json.loads(header)["cache"] == str(tmp_path / f"{name}.sqlite")
        assert json.loads(line)["key"] == name * 64
        sink.close()
    assert caches[2].take_unwritten() == [(Key("c" * 64, "f" * 64), "statement_support", json.dumps(answer))]
    assert caches[2].nowhere is None and caches[0].take_unwritten() == []  # kept in memory; a's is in its spill file
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["out-a", "out-b"]  # no folder of c's
    for cache in caches:
        cache.close()


def test_the_judge_resources_of_a_command_give_its_sink_to_every_cache_they_open(tmp_path):
    """``rag-eval`` sets ``args.built_judges`` (its spill sink) for a command that judges: the judge resources
    made of its arguments build judges, and open target-call caches, spilling to it; another resource's do not."""
    from rag_eval.assets.resources import JudgeResource
    from rag_eval.metrics.judges.built import BuiltJudges
    from rag_eval.orchestration.settings import judge_resource

    sink = SpillSink([tmp_path / "out"])
    args = cli.build_parser().parse_args(["run", str(FIQA), "--base-url", "http://127.0.0.1:9/v1",
                                          "--cache-path", str(tmp_path / "cache.sqlite")])
    args.built_judges = BuiltJudges(sink)
    resource = judge_resource(args)
    judge, other = resource.get_judge(), JudgeResource(base_url="http://127.0.0.1:9/v1",
                                                       cache_path=str(tmp_path / "other.sqlite")).get_judge()
    calls = resource.call_cache(tmp_path / "calls.sqlite")
    try:
        assert judge.cache.sink is sink and calls.sink is sink and other.cache.sink is None
        assert judge.with_options(temperature=0.5).cache.sink is sink  # a per-metric twin shares the cache
    finally:
        for closing in (judge, other, calls):
            closing.close()


def test_the_code_locations_judges_spill_to_its_output_folder_as_answers_arrive(tmp_path, monkeypatch):
    """A run the daemon launches has no command around it: the code location's judge and strong judge (its
    resources, whose copies in each run share what they built) spill what their caches refuse to ``out/`` of the folder it was
    loaded in, else the temporary folder, one answer at a time, so a run on a full disk keeps what it paid for."""
    import tempfile

    from rag_eval.orchestration.location import build_definitions

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # the LLM judge; its cache: .rag_eval_cache/
    definitions = build_definitions(builtin_registry())
    judge, strong = (definitions.resources[name].get_judge() for name in ("judge", "strong_judge"))
    try:
        sink = judge.cache.sink
        assert isinstance(sink, SpillSink) and strong is judge  # one judge per configuration, for both resources
        assert sink.folders == [tmp_path / "out", Path(tempfile.gettempdir())]
        judge.cache._db.execute("PRAGMA max_page_count = 1")  # SQLITE_FULL, as a full disk
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            judge.cache.put(Key("a" * 64, "f" * 64), "statement_support",
                            {"verdicts": [1], "reasons": ["stated " * 2000]})
        [spill] = (tmp_path / "out").glob("judgement-spill-*.jsonl")  # written and flushed as it arrived
        header, line = spill.read_text(encoding="utf-8").splitlines()
        assert json.loads(header)["cache"] == str((tmp_path / ".rag_eval_cache" / "judgements.sqlite").resolve())
        assert json.loads(line)["key"] == "a" * 64
    finally:
        judge.close()
        if judge.cache.sink is not None:
            judge.cache.sink.close()
