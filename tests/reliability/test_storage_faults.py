"""Storage faults: the judgement cache, ``out/`` (its results store: one Parquet file per asset
partition under ``out/tables/``, and ``rag_eval.duckdb`` holding views over them) and
``DAGSTER_HOME``, each full, read-only and damaged, through the public entry points (``rag_eval.metrics.evaluate`` with an
LLM judge on the counting test server; ``rag-eval run`` with its ``--out``, ``--cache-path``
options and ``DAGSTER_HOME``).

Full and read-only are real: a tmpfs of a few megabytes in a private mount namespace
(``tests/small_disk.py``: ``unshare -m`` as root, CI's root inside ``unshare -rn`` included;
``unshare -rm`` otherwise), filled to the last byte or remounted read-only; where no tmpfs can
be mounted these tests are skipped, saying why, and ``tests/judges/test_judgement_cache.py``
still emulates a full cache with SQLite's ``max_page_count``. Damaged is bytes overwritten.

For each fault: what the user sees (one clear line, no traceback), what is kept, and that no
judgement paid for earlier is lost or made unusable (counted as requests the server receives).
Each test prints its row of issue 30's table (``tests/reliability/figures.py``; ``pytest -s``).
"""
import contextlib
import json
import os
import stat
import sqlite3
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from rag_eval.metrics import Status, evaluate
from rag_eval.metrics.errors import command
from rag_eval.metrics.reports.aggregate import USAGE_COLUMNS
from tests.conftest import FIQA
from tests.reliability.figures import fault_row
from tests.small_disk import SmallDisk

pytestmark = pytest.mark.slow  # the test server, Dagster runs

ROOT = Path(__file__).resolve().parents[2]
ROWS = [{"id": f"r{i}", "user_input": f"Where was person {i} born?", "response": f"Person {i} was born in Ulm.",
         "retrieved_contexts": [f"Person {i} was born in Ulm, Germany."], "reference": f"Person {i} was born in Ulm."}
        for i in range(6)]
PER_ROW = 6  # the five core metrics: 5 chat + 1 embeddings request per row (rag_eval.metrics.judges.llm)
# One evaluation through the Python API, in the small disk's namespace: statuses and cache warnings as
# JSON; with a go file, the judge is closed (its cache flushed) only once that file exists.
CHILD = """
import json, sys, time, warnings
from pathlib import Path
from rag_eval.metrics import evaluate
from rag_eval.metrics.judges.cache_file import CacheWarning
from rag_eval.metrics.judges.llm import LLMConfig, LLMJudge
url, cache, rows, go = sys.argv[1:]
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    judge = LLMJudge(LLMConfig(base_url=url, api_key="sk-test-disk", model="judge-test", embedding_model="embed-test",
                               cache_path=cache, timeout=30, max_retry_wait=0.05))
    statuses = evaluate(json.loads(rows), judge=judge).results["status"].tolist()
    print(json.dumps(statuses), flush=True)
    while go and not Path(go).exists():
        time.sleep(0.05)
    judge.close()
    print(json.dumps([str(w.message) for w in caught if issubclass(w.category, CacheWarning)]), flush=True)
"""
COUNT = "import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute('select count(*) from answers').fetchone()[0])"


@pytest.fixture
def disk(tmp_path):
    mounted = SmallDisk(tmp_path / "disk", "16m")
    yield mounted
    mounted.stop()


def child_env() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "EMBEDDING_", "RAG_EVAL_"))}
    return {**env, "PYTHONPATH": str(ROOT)}


def judged(disk: SmallDisk, server, rows: list[dict], go: Path | None = None) -> tuple[list[str], list[str]]:
    """Statuses and cache warnings of evaluating ``rows`` with the cache on the small disk."""
    done = disk.run([sys.executable, "-c", CHILD, server.url, str(disk.root / "cache.sqlite"), json.dumps(rows),
                     str(go or "")], cwd=ROOT, env=child_env())
    assert done.returncode == 0, done.stderr[-3000:]
    statuses, warned = (json.loads(line) for line in done.stdout.strip().splitlines()[-2:])
    return statuses, warned


def answers(disk: SmallDisk) -> int:
    done = disk.run([sys.executable, "-c", COUNT, str(disk.root / "cache.sqlite")], cwd=ROOT, env=child_env())
    assert done.returncode == 0, done.stderr
    return int(done.stdout)


def test_a_full_cache_stays_the_cache_and_is_used_again_once_space_returns(disk, server, tmp_path):
    statuses, warned = judged(disk, server, ROWS[:3])
    assert statuses == [Status.OK.value] * 5 * 3 and warned == []
    paid = answers(disk)
    assert len(server.seen) == PER_ROW * 3 and paid > 0
    disk.fill()
    server.seen.clear()
    # On the full disk: rows 0-2 come from the cache, rows 3-5 are asked once and kept in memory; one line says so.
    go = tmp_path / "space-returned"

    def space_returns() -> None:  # once the run has asked for rows 3-5, before its judge is closed
        wait_for_requests(server, PER_ROW * 3)
        disk.free()
        go.touch()

    freeing = threading.Thread(target=space_returns)
    freeing.start()
    statuses, warned = judged(disk, server, ROWS, go)
    freeing.join()
    assert statuses == [Status.OK.value] * 5 * 6
    assert len(server.seen) == PER_ROW * 3  # nothing paid for earlier was asked again
    assert len(warned) == 1 and "no space left on the disk" in warned[0] and "kept as it is" in warned[0]
    full_warning = warned[0]
    assert not list(disk.view(disk.root).glob("cache.sqlite.unusable-*"))  # a full disk is not a damaged file
    # Space came back before the judge closed: the answers kept in memory are in the file now.
    assert answers(disk) > paid
    server.seen.clear()
    statuses, warned = judged(disk, server, ROWS)
    assert statuses == [Status.OK.value] * 5 * 6 and warned == [] and server.seen == []
    fault_row("judgement cache full", full_warning, 0, 0, 0, 0)


def wait_for_requests(server, count: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while len(server.seen) < count:
        assert time.monotonic() < deadline, f"{len(server.seen)} requests, waited for {count}"
        time.sleep(0.05)


def test_a_read_only_cache_is_read_and_left_as_it_is(disk, server):
    judged(disk, server, ROWS[:3])
    paid = answers(disk)
    before = disk.view(disk.root / "cache.sqlite").read_bytes()
    disk.read_only()
    server.seen.clear()
    statuses, warned = judged(disk, server, ROWS)
    assert statuses == [Status.OK.value] * 5 * 6
    assert len(server.seen) == PER_ROW * 3  # rows 0-2 read from the read-only cache
    assert len(warned) == 1 and "read-only file system" in warned[0] and "kept as it is" in warned[0]
    assert disk.view(disk.root / "cache.sqlite").read_bytes() == before
    disk.writable()
    server.seen.clear()
    judged(disk, server, ROWS)
    assert len(server.seen) == PER_ROW * 3 and answers(disk) > paid  # the cache took this run's answers again
    fault_row("judgement cache read-only", warned[0], 0, 0, 0, 0)


def damage_a_leaf(path: Path) -> None:
    """Overwrite with garbage a leaf page in the middle of the ``answers`` table of the SQLite file ``path``."""
    with sqlite3.connect(path) as db:
        db.execute("pragma wal_checkpoint(truncate)")
        size = db.execute("pragma page_size").fetchone()[0]
        leaves = [p for (p,) in db.execute("select pageno from dbstat where name = 'answers' and pagetype = 'leaf' "
                                           "order by pageno")]
    assert len(leaves) >= 3
    with open(path, "r+b") as handle:
        handle.seek((leaves[len(leaves) // 2] - 1) * size)
        handle.write(b"\xa5" * size)


def test_a_damaged_cache_is_set_aside_and_what_can_be_read_is_carried_over(make_judge, server, tmp_path):
    cache = tmp_path / "cache.sqlite"
    many = [{**ROWS[0], "id": f"m{i}", "response": f"Person {i} was born in Ulm."} for i in range(60)]
    evaluate(many, metrics=["faithfulness"], judge=make_judge(cache_path=str(cache)))  # pays for every judgement
    with sqlite3.connect(cache) as db:
        paid = db.execute("select count(*) from answers").fetchone()[0]
    assert paid == len(server.seen) == 60  # one statement_support request a row
    damage_a_leaf(cache)  # the rows on that page are lost, no others
    server.seen.clear()
    with pytest.warns(UserWarning) as caught:
        results = evaluate(many, metrics=["faithfulness"], judge=make_judge(cache_path=str(cache))).results
    assert results["status"].tolist() == [Status.OK.value] * 60
    [aside] = tmp_path.glob("cache.sqlite.unusable-*Z")
    [message] = [str(w.message) for w in caught if "judgement cache" in str(w.message)]
    carried = int(message.split(" answers that could still be read")[0].rsplit(" ", 1)[1])
    assert f"set aside as {aside}" in message and 0 < carried < paid
    assert len(server.seen) == paid - carried  # only the answers on the damaged page were asked again
    with sqlite3.connect(cache) as db:
        assert db.execute("select count(*) from answers").fetchone()[0] == paid
    # The answers on the overwritten page are gone with its bytes: asked again (counted as duplicates), all others kept.
    fault_row("judgement cache damaged (a leaf page overwritten)", message, 0, 0, len(server.seen), 0)


# ------------------------------------------------------------------ rag-eval run: out/, DuckDB, DAGSTER_HOME
class Project:
    """``rag-eval run`` with the LLM judge on the test server (by environment), ``--out`` and
    ``DAGSTER_HOME`` where the test puts them, the judgement cache beside (and ``TMPDIR``, when ``tmp`` is
    given); run in the small disk's namespace."""

    def __init__(self, root: Path, disk: SmallDisk, server, out: Path, home: Path, cache: Path | None = None,
                 tmp: Path | None = None) -> None:
        self.root, self.disk, self.server, self.out, self.home, self.tmp = root, disk, server, out, home, tmp
        self.cache = cache or root / "cache.sqlite"
        lines = FIQA.read_text(encoding="utf-8").splitlines(True)
        for name, part in (("a.jsonl", lines[:3]), ("b.jsonl", lines[3:6])):
            (root / name).write_text("".join(part), encoding="utf-8")

    def run(self, dataset: str, version: str) -> tuple[int, str]:
        return self.run_with(dataset, version)

    def run_with(self, dataset: str, version: str, *more: str) -> tuple[int, str]:
        env = {**child_env(), "DAGSTER_HOME": str(self.home), "OPENAI_BASE_URL": self.server.url,
               "OPENAI_API_KEY": "sk-test-disk", "OPENAI_MODEL": "judge-test", "EMBEDDING_MODEL": "embed-test",
               **({"TMPDIR": str(self.tmp)} if self.tmp else {})}
        done = self.disk.run([sys.executable, "-m", "rag_eval.orchestration.cli", "run", dataset, "--dataset-version", version,
                              "--out", str(self.out), "--cache-path", str(self.cache), *more],
                             cwd=self.root, env=env)
        assert "Traceback" not in done.stderr, done.stderr[-3000:]
        self.stdout = done.stdout
        return done.returncode, done.stderr

    def read(self, path: Path) -> bytes:
        return self.disk.view(path).read_bytes() if str(path).startswith(str(self.disk.root)) else path.read_bytes()


def errors(stderr: str) -> list[str]:
    """The lines saying what failed (progress and notes left out)."""
    return [line for line in stderr.splitlines() if line.startswith(("error:", "step ", "run failed"))]


@pytest.fixture
def on_disk(tmp_path, disk, server):
    """``--out`` on the small disk, DAGSTER_HOME beside the project."""
    return Project(tmp_path, disk, server, disk.root / "out", tmp_path / "home")


@pytest.fixture
def home_on_disk(tmp_path, disk, server):
    """DAGSTER_HOME on the small disk, ``--out`` beside the project."""
    return Project(tmp_path, disk, server, tmp_path / "out", disk.root / "home")


@pytest.fixture
def cache_on_disk(tmp_path, disk, server):
    """The judgement cache on the small disk; ``--out`` and DAGSTER_HOME beside the project."""
    return Project(tmp_path, disk, server, tmp_path / "out", tmp_path / "home", cache=disk.root / "cache.sqlite")


def fill_at_request(server, disk: SmallDisk, count: int) -> None:
    """The disk fills up as the server receives its request ``count``: judging is over, the results are not stored."""
    answer = server.script

    def script(seen):
        if len(server.seen) == count:
            disk.fill()
        return answer(seen)

    server.script = script


def cached(project: Project) -> int:
    """The answers in the project's judgement cache (beside the project, off the small disk)."""
    with sqlite3.connect(project.root / "cache.sqlite") as db:
        return db.execute("select count(*) from answers").fetchone()[0]


def tables(project: Project) -> dict[str, bytes]:
    """Every file under ``out/tables/`` (staged files included), by path from there, read off the small disk."""
    folder = project.disk.view(project.out / "tables")
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def rows(project: Project, table: str) -> dict[str, int]:
    """``{version: rows}`` of ``table``, read from its Parquet files."""
    folder = project.disk.view(project.out / "tables" / table)
    return {p.stem: len(pd.read_parquet(p)) for p in sorted(folder.glob("*.parquet"))}


def test_tables_full_or_read_only_lose_nothing_and_the_next_run_pays_for_nothing(on_disk, disk, server):
    status, _ = on_disk.run("a.jsonl", "v1")
    assert status == 0 and len(server.seen) == PER_ROW * 3
    kept = {**tables(on_disk), **{name: on_disk.read(on_disk.out / "v1" / name)
                                  for name in ("summary.json", "results.parquet")}}
    disk.read_only()  # refused before anything is registered or sent, in one line
    status, stderr = on_disk.run("b.jsonl", "v2")
    assert status == 2 and len(server.seen) == PER_ROW * 3
    [line] = errors(stderr)
    assert "Read-only file system" in line and str(on_disk.out) in line
    fault_row("out/ (tables/) read-only", line, 0, 0, 0, 0)
    disk.writable()
    fill_at_request(server, disk, PER_ROW * 6)  # out/ fills up as v2's judging ends
    status, stderr = on_disk.run("b.jsonl", "v2")
    assert status == 1 and len(server.seen) == PER_ROW * 6
    paid = cached(on_disk)
    assert paid >= PER_ROW * 6 - 3  # every answer of both versions (an embedding request may hold several texts)
    # One line a failed step: the store's names the file it could not write and what to do; GE's stores are in out/ too.
    [line] = [line for line in errors(stderr) if "results file" in line]
    table = on_disk.out / "tables" / "faithfulness" / "v2.parquet"
    assert line.startswith("step score_metrics failed: ") and \
        f"results file {table} could not be written (No space left on device)" in line and "free the disk" in line
    assert all("No space left on device" in other for other in errors(stderr)), stderr[-3000:]
    after = tables(on_disk)
    assert {name: after[name] for name in kept if name in after} == {n: b for n, b in kept.items() if n in after}
    assert set(kept) - set(after) == {"summary.json", "results.parquet"}  # the reports are out/v1's, read below
    assert {name: on_disk.read(on_disk.out / "v1" / name) for name in ("summary.json", "results.parquet")} == \
        {name: kept[name] for name in ("summary.json", "results.parquet")}  # v1's reports untouched
    assert not [name for name in after if "/." in name and ".views" not in name]  # no staged file left behind
    disk.free()
    status, stderr = on_disk.run("b.jsonl", "v2")
    assert status == 0, stderr[-3000:]
    assert len(server.seen) == PER_ROW * 6 and cached(on_disk) == paid  # every judgement paid for on the full disk was kept
    assert {name: tables(on_disk)[name] for name in kept if "v1." in name} == \
        {name: data for name, data in kept.items() if "v1." in name}  # v1's tables not written again
    for table in ("faithfulness", "context_recall", "answer_relevancy", "context_precision", "context_relevancy"):
        assert rows(on_disk, table) == {"v1": 3, "v2": 3}, table
    assert faithfulness_view(on_disk) == [["v1", 3], ["v2", 3]]  # the view over the files
    fault_row("out/ (tables/) full as judging ends", line, 0, 0, len(server.seen) - PER_ROW * 6, 0)


VIEW = ("import duckdb, json, sys; print(json.dumps(duckdb.connect(sys.argv[1], read_only=True).sql("
        "'select version, count(*) from eval.faithfulness group by version order by version').fetchall()))")


def faithfulness_view(project: Project) -> list[list]:
    """``[[version, rows]]`` of the view ``eval.faithfulness``, queried in the small disk's namespace
    (the view reads the files by their paths on the small disk)."""
    done = project.disk.run([sys.executable, "-c", VIEW, str(project.out / "rag_eval.duckdb")], cwd=project.root,
                            env=child_env())
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_a_damaged_report_file_is_written_again(on_disk, disk, server):
    assert on_disk.run("a.jsonl", "v1")[0] == 0
    summary = disk.view(on_disk.out / "v1" / "summary.json")
    whole = summary.read_text(encoding="utf-8")
    summary.write_text(whole[:100], encoding="utf-8")  # cut short (a crash, a full disk)
    server.seen.clear()
    status, stderr = on_disk.run("a.jsonl", "v1")
    assert status == 0 and errors(stderr) == [] and server.seen == []  # evaluated again from the cache
    means = [{m: (r["mean"], r["pass_rate"], r["measured"]) for m, r in json.loads(text)["metrics"].items()}
             for text in (summary.read_text(encoding="utf-8"), whole)]
    assert means[0] == means[1]


def damage_footer(path: Path) -> None:
    """Overwrite the last 64 bytes of a Parquet file (its footer and magic bytes)."""
    data = bytearray(path.read_bytes())
    data[-64:] = b"\xa5" * 64
    path.write_bytes(bytes(data))


def test_a_damaged_table_file_is_named_set_aside_and_written_again_from_the_cache(on_disk, disk, server):
    assert on_disk.run("a.jsonl", "v1")[0] == 0
    paid, before = cached(on_disk), tables(on_disk)
    table = on_disk.out / "tables" / "faithfulness" / "v1.parquet"
    whole = pd.read_parquet(disk.view(table))
    damage_footer(disk.view(table))
    server.seen.clear()
    status, stderr = on_disk.run("a.jsonl", "v1")  # not up to date: its file is damaged
    assert status == 0 and errors(stderr) == [] and server.seen == [], stderr[-3000:]
    [line] = [line for line in stderr.splitlines() if " is damaged " in line]
    [aside] = disk.view(table.parent).glob("v1.parquet.unusable-*Z")
    assert line.startswith(f"results file {table} is damaged (Parquet magic bytes not found in footer") and \
        f"set aside as {aside.name}; a run of its dataset version writes it again" in line
    assert aside.read_bytes() != before["faithfulness/v1.parquet"]  # the damaged bytes, kept for a look
    again = pd.read_parquet(disk.view(table))
    own = [c for c in again if c in {"run_id", *USAGE_COLUMNS}]
    pd.testing.assert_frame_equal(again.drop(columns=own), whole.drop(columns=own))
    assert cached(on_disk) == paid
    fault_row("a damaged table file (out/tables/<asset>/<version>.parquet)", line, 0, 0, len(server.seen), 0)
    # Met by a step instead (the summary reads every metric's table of its version): named, set aside, one line.
    other = on_disk.out / "tables" / "context_recall" / "v1.parquet"
    damage_footer(disk.view(other))
    status, stderr = on_disk.run_with("a.jsonl", "v1", "--metrics", "faithfulness")
    [line] = errors(stderr)
    assert status == 1 and line.startswith("step eval_summary failed: ") and f"results file {other} is damaged" in line
    assert list(disk.view(other.parent).glob("v1.parquet.unusable-*Z")) and server.seen == []
    status, stderr = on_disk.run("a.jsonl", "v1")  # the next full run writes it again, from the cache
    assert status == 0 and errors(stderr) == [] and server.seen == [] and cached(on_disk) == paid
    assert rows(on_disk, "context_recall") == {"v1": 3}
    fault_row("a damaged table file met by a step", line, 0, 0, len(server.seen), 0)


def damage_duckdb(on_disk, disk) -> None:
    database = disk.view(on_disk.out / "rag_eval.duckdb")
    data = bytearray(database.read_bytes())
    data[:4096] = b"\xa5" * 4096  # its header
    database.write_bytes(bytes(data))


def test_a_damaged_results_database_is_set_aside_and_its_views_made_again(on_disk, disk, server):
    assert on_disk.run("a.jsonl", "v1")[0] == 0
    damage_duckdb(on_disk, disk)
    status, stderr = on_disk.run("b.jsonl", "v2")
    assert status == 0 and errors(stderr) == [] and len(server.seen) == PER_ROW * 6, stderr[-3000:]
    [aside] = disk.view(on_disk.out).glob("rag_eval.duckdb.unusable-*Z")
    [line] = [line for line in stderr.splitlines() if " is damaged " in line]
    assert line == (f"results database {on_disk.out / 'rag_eval.duckdb'} is damaged (not a DuckDB file): set aside "
                    f"as {aside.name}; its views are made again over {on_disk.out / 'tables'}/")
    assert faithfulness_view(on_disk) == [["v1", 3], ["v2", 3]]
    fault_row("out/rag_eval.duckdb (views) damaged", line, 0, 0, len(server.seen) - PER_ROW * 6, 0)


def test_dagster_home_full_read_only_or_damaged_is_one_line_and_loses_no_judgement(home_on_disk, disk, server):
    assert home_on_disk.run("a.jsonl", "v1")[0] == 0
    disk.read_only()
    status, stderr = home_on_disk.run("b.jsonl", "v2")
    [line] = errors(stderr)
    assert status == 2 and "DAGSTER_HOME" in line and "read-only file system" in line and len(server.seen) == 18
    fault_row("DAGSTER_HOME read-only", line, 0, 0, 0, 0)
    disk.writable()
    fill_at_request(server, disk, PER_ROW * 6)  # the instance's disk fills up as v2's judging ends
    status, stderr = home_on_disk.run("b.jsonl", "v2")
    [line] = errors(stderr)
    assert status == 2 and "no space left on the disk" in line and "kept in the judgement cache" in line
    full = line
    disk.free()
    status, stderr = home_on_disk.run("b.jsonl", "v2")
    assert status == 0 and len(server.seen) == PER_ROW * 6  # nothing paid for was asked again
    assert "was left STARTED by a rag-eval process that is gone; marked failed" in stderr
    fault_row("DAGSTER_HOME full as judging ends", full, 0, 0, len(server.seen) - PER_ROW * 6, 0)
    runs = disk.view(home_on_disk.home / "history" / "runs.db")
    runs.write_bytes(b"not a database" * 512)
    status, stderr = home_on_disk.run("a.jsonl", "v1")
    [line] = errors(stderr)
    assert status == 2 and "not a database" in line and "move the folder aside" in line
    fault_row("DAGSTER_HOME damaged (runs.db overwritten)", line, 0, 0, len(server.seen) - PER_ROW * 6, 0)


def test_a_report_file_on_a_full_device_names_the_report_folder(tmp_path, monkeypatch, capsys):
    """A write that fails as the file is closed (no file name in the system's error: /dev/full)
    names the version's report folder, in one line without a class path; the tables are kept."""
    from rag_eval.orchestration import cli

    dataset = tmp_path / "s.jsonl"
    dataset.write_text("".join(FIQA.read_text(encoding="utf-8").splitlines(True)[:3]), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    for name in [n for n in os.environ if n.startswith(("OPENAI_", "EMBEDDING_"))]:
        monkeypatch.delenv(name)
    assert cli.main(["run", str(dataset), "--dataset-version", "v1", "--metrics", "faithfulness"]) == 0
    summary = tmp_path / "out" / "v1" / "summary.json"
    before = summary.read_bytes()
    try:  # where it is staged (written whole or not): /dev/full's device itself (a link out of out/ is refused)
        os.mknod(summary.parent / ".summary.json.partial", 0o666 | stat.S_IFCHR, os.stat("/dev/full").st_rdev)
    except PermissionError:
        pytest.skip("making a device node needs root (CI runs the suite as root)")
    capsys.readouterr()
    assert cli.main(["run", str(dataset), "--dataset-version", "v1", "--metrics", "faithfulness,context_recall"]) == 1
    [line] = [line for line in capsys.readouterr().err.splitlines() if "failed" in line]
    assert line == (f"step eval_summary failed: {tmp_path / 'out' / 'v1'}: the report files could not be written "
                    "(No space left on device); the version's tables are kept: free the disk and run again "
                    '[Error occurred while executing op "eval_summary"]')
    assert (tmp_path / "out" / "tables" / "context_recall" / "v1.parquet").exists()
    assert summary.read_bytes() == before and not (summary.parent / ".summary.json.partial").exists()
    fault_row("a report file on a full device (summary.json staged on /dev/full)", line, 0, 0, 0, 0)


def test_a_cache_that_cannot_take_writes_at_start_is_one_line_and_nothing_is_sent(cache_on_disk, disk, server):
    assert cache_on_disk.run("a.jsonl", "v1")[0] == 0 and len(server.seen) == PER_ROW * 3
    paid, seen = answers(disk), []
    for fault, make, undo, cause in (("full", disk.fill, disk.free, "no space left on the disk"),
                                     ("read-only", disk.read_only, disk.writable, "read-only file system")):
        make()
        status, stderr = cache_on_disk.run("b.jsonl", "v2")
        [line] = errors(stderr)
        assert status == 2 and len(server.seen) == PER_ROW * 3, stderr[-3000:]  # not one request, not registered
        assert line.startswith(f"error: {cache_on_disk.cache}: the judgement cache cannot take writes: {cause} ") and \
            line.endswith("; nothing was sent: free space on its disk (or make it writable), or put the cache on another "
                          "disk with --cache-path FILE, then run again"), line
        assert "CacheWarning" not in stderr and "dataset version" not in stderr
        undo()
        assert answers(disk) == paid
        seen.append((fault, line))
    assert cache_on_disk.run("b.jsonl", "v2")[0] == 0 and len(server.seen) == PER_ROW * 6
    status, _ = cache_on_disk.run_with("b.jsonl", "v2", "--force")  # every answer of v2 is in the cache
    assert status == 0 and len(server.seen) == PER_ROW * 6
    disk.read_only()  # a run that would send nothing (the dry run counts 0 requests) is not refused
    status, stderr = cache_on_disk.run_with("b.jsonl", "v2", "--force")
    assert status == 0 and errors(stderr) == [] and len(server.seen) == PER_ROW * 6, stderr[-3000:]
    disk.writable()
    seen.append(("read-only, every answer cached (0 requests to send),", "(ran: nothing to write)"))
    for table in ("faithfulness", "context_recall", "answer_relevancy", "context_precision", "context_relevancy"):
        assert rows(cache_on_disk, table) == {"v1": 3, "v2": 3}, table
    for fault, line in seen:
        fault_row(f"judgement cache {fault} at start", line, 0, 0, len(server.seen) - PER_ROW * 6, 0)


def test_a_cache_that_fills_mid_run_spills_and_the_next_run_folds_the_spill_in(cache_on_disk, disk, server):
    assert cache_on_disk.run("a.jsonl", "v1")[0] == 0
    fill_at_request(server, disk, PER_ROW * 3 + 9)  # the cache's disk fills half-way through v2's judging
    status, stderr = cache_on_disk.run("b.jsonl", "v2")
    [spill] = list(cache_on_disk.out.glob("judgement-spill-*.jsonl"))
    [line] = errors(stderr)
    assert status == 5 and len(server.seen) == PER_ROW * 6, stderr[-3000:]
    with contextlib.chdir(cache_on_disk.root):  # the hint as the child, run in that folder, types it
        typed = command(f"cache import {spill}")
    assert line == (f"error: the judgement cache {cache_on_disk.cache} could not take every judgement paid for "
                    f"({line.split(' paid for (')[1].split('): they are')[0]}): they are in the spill file {spill}; free "
                    "space on the cache's disk (or make it writable): the next run folds it into the cache, or "
                    f"`{typed}` does now") and "no space left on the disk" in line
    spilled = len(spill.read_text(encoding="utf-8").splitlines()) - 1
    assert spilled > 0
    for table in ("faithfulness", "context_recall", "answer_relevancy", "context_precision", "context_relevancy"):
        assert rows(cache_on_disk, table) == {"v1": 3, "v2": 3}, table  # the run's results are all there
    disk.free()
    before = answers(disk)
    status, stderr = cache_on_disk.run_with("b.jsonl", "v2", "--force")
    assert status == 0 and len(server.seen) == PER_ROW * 6, stderr[-3000:]  # nothing paid for is bought again
    assert f"note: {spilled} judgements paid for by an earlier run folded from the spill file {spill} into the " \
           f"judgement cache {cache_on_disk.cache}" in stderr and not spill.exists()
    assert answers(disk) == before + spilled
    fault_row("judgement cache fills mid-run, then space returns", line, 0, 0, len(server.seen) - PER_ROW * 6, 0)
