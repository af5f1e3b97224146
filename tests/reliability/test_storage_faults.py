"""Storage faults: the judgement cache, ``out/``, the DuckDB results file and ``DAGSTER_HOME``,
each full, read-only and damaged, through the public entry points (``metrics.evaluate`` with an
LLM judge on the counting test server; ``rag-eval run`` with its ``--out``, ``--cache-path``
options and ``DAGSTER_HOME``).

Full and read-only are real: a tmpfs of a few megabytes in a private mount namespace
(``tests/small_disk.py``: ``unshare -m`` as root, CI's root inside ``unshare -rn`` included;
``unshare -rm`` otherwise), filled to the last byte or remounted read-only; where no tmpfs can
be mounted these tests are skipped, saying why, and ``tests/judges/test_judgement_cache.py``
still emulates a full cache with SQLite's ``max_page_count``. Damaged is bytes overwritten.

For each fault: what the user sees (one clear line, no traceback), what is kept, and that no
judgement paid for earlier is lost or made unusable (counted as requests the server receives).
"""
import json
import os
import sqlite3
import sys
import threading
import time
from pathlib import Path

import pytest

from metrics import Status, evaluate
from tests.small_disk import SmallDisk

pytestmark = pytest.mark.slow  # the test server, Dagster runs

ROOT = Path(__file__).resolve().parents[2]
ROWS = [{"id": f"r{i}", "user_input": f"Where was person {i} born?", "response": f"Person {i} was born in Ulm.",
         "retrieved_contexts": [f"Person {i} was born in Ulm, Germany."], "reference": f"Person {i} was born in Ulm."}
        for i in range(6)]
PER_ROW = 6  # the five core metrics: 5 chat + 1 embeddings request per row (metrics.judges.llm)
# One evaluation through the Python API, in the small disk's namespace: statuses and cache warnings as
# JSON; with a go file, the judge is closed (its cache flushed) only once that file exists.
CHILD = """
import json, sys, time, warnings
from pathlib import Path
from metrics import evaluate
from metrics.judges.cache import CacheWarning
from metrics.judges.llm import LLMConfig, LLMJudge
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
    mounted = SmallDisk(tmp_path / "disk", "2m")
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
    assert not list(disk.view(disk.root).glob("cache.sqlite.unusable-*"))  # a full disk is not a damaged file
    # Space came back before the judge closed: the answers kept in memory are in the file now.
    assert answers(disk) > paid
    server.seen.clear()
    statuses, warned = judged(disk, server, ROWS)
    assert statuses == [Status.OK.value] * 5 * 6 and warned == [] and server.seen == []


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
    evaluate(many, metrics=["faithfulness"], judge=make_judge(cache_path=str(cache))).results
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
