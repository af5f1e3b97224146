"""Concurrency through ``rag-eval``: two runs of overlapping versions at once (sharing the judgement
cache, ``out/`` and DAGSTER_HOME), ``register --replace`` of a version while it is evaluated, and
``rag-eval backfill`` while a ``rag-eval run`` evaluates one of its versions. The LLM judge is
the counting test server (replies take 0.2 s, so the runs overlap).

No mixed results (every version's tables and reports hold its own rows, once), no request paid
twice beyond those in flight (the claims of ``rag_eval.metrics.judges.cache``), and no wait for a lock
without a line saying who holds it.
"""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from rag_eval.metrics.core.samples import sample_from_dict
from tests.conftest import FIQA
from rag_eval.orchestration.judge_sim import JudgeServer, oracle
from tests.reliability.figures import fault_row

pytestmark = pytest.mark.slow  # the test server, Dagster runs

ROOT = Path(__file__).resolve().parents[2]
PER_ROW = 6  # the five core metrics: 5 chat + 1 embeddings request per row
LINES = FIQA.read_text(encoding="utf-8").splitlines(True)


@pytest.fixture
def server():
    running = JudgeServer().start()

    def slowly(seen):
        reply = oracle()(seen)
        reply.delay = 0.2
        return reply

    running.script = slowly
    yield running
    running.stop()


class Project:
    """A user's folder: rag-eval commands started in it (in their own process groups, all killed at the end)."""

    def __init__(self, root: Path, url: str) -> None:
        self.root, self.started = root, []
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "EMBEDDING_", "RAG_EVAL_"))}
        self.env = {**env, "DAGSTER_HOME": str(root / "home"), "PYTHONPATH": str(ROOT), "OPENAI_BASE_URL": url,
                    "OPENAI_API_KEY": "sk-test-concurrent", "OPENAI_MODEL": "judge-test",
                    "EMBEDDING_MODEL": "embed-test"}

    def write(self, name: str, lines: list[str]) -> str:
        (self.root / name).write_text("".join(lines), encoding="utf-8")
        return name

    def start(self, *args: str) -> subprocess.Popen:
        process = subprocess.Popen([sys.executable, "-m", "rag_eval.orchestration.cli", *args], cwd=self.root, env=self.env,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.started.append(process)
        return process

    @staticmethod
    def finish(process: subprocess.Popen, timeout: float = 300) -> tuple[int, str, str]:
        out, err = process.communicate(timeout=timeout)
        assert "Traceback" not in err, err[-3000:]
        return process.returncode, out, err

    def rows(self, table: str) -> list[tuple]:
        """``(version, sample_id, row)`` of ``table``, read from its Parquet files (one a version);
        the view ``eval.<table>`` of rag_eval.duckdb must read the same."""
        files = sorted((self.root / "out" / "tables" / table).glob("*.parquet"))
        found = [(version, sample_id, row) for path in files
                 for version, sample_id, row in pd.read_parquet(path, columns=["version", "sample_id", "row"])
                 .sort_values("row").itertuples(index=False)]
        assert all(version == path.stem for path in files for version in pd.read_parquet(path)["version"])
        with duckdb.connect(str(self.root / "out" / "rag_eval.duckdb"), read_only=True) as db:
            assert db.sql(f"select version, sample_id, row from eval.{table} order by version, row").fetchall() == found
        return found

    def stop(self) -> None:
        for process in self.started:
            if process.poll() is None:
                os.killpg(process.pid, 9)
                process.wait(timeout=30)


@pytest.fixture
def project(tmp_path, server):
    made = Project(tmp_path, server.url)
    yield made
    made.stop()


def wait_for(condition, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "waited too long"
        time.sleep(0.02)


def ids(lines: list[str]) -> list[str]:
    """The rows' ids (FiQA's lines have none: a hash of the question and reference)."""
    return [sample_from_dict(json.loads(line), 0).id for line in lines]


def duplicates(server) -> int:
    """Requests the server received more than once (the same body)."""
    return len(server.seen) - len({json.dumps(seen.body, sort_keys=True) for seen in server.seen})


def lock_waits_are_said(err: str) -> None:
    """A wait for the results database names its holder (``rag_eval.assets.resources.check_database``)."""
    for line in err.splitlines():
        if "waiting" in line:
            assert "held by PID" in line or "locked by another process" in line, line


def test_two_runs_of_overlapping_versions_at_once_keep_their_own_results_and_pay_once(project, server):
    first = project.write("v1.jsonl", LINES[0:3])
    second = project.write("v2.jsonl", LINES[1:4])  # rows 1 and 2 in both
    runs = [project.start("run", first, "--dataset-version", "v1"),
            project.start("run", second, "--dataset-version", "v2")]
    done = [project.finish(run) for run in runs]
    assert [status for status, _, _ in done] == [0, 0], done
    for _, _, err in done:
        lock_waits_are_said(err)
    # Each shared row's judgements were asked once: the requests of one run after the other, 4 rows' worth.
    assert len(server.seen) == PER_ROW * 4
    assert len({json.dumps(s.body, sort_keys=True) for s in server.seen}) == len(server.seen)
    fault_row("two runs of overlapping versions at once", "both end 0", 0, 0, duplicates(server), 0)
    for table in ("faithfulness", "context_recall"):
        assert project.rows(table) == [("v1", i, n) for n, i in enumerate(ids(LINES[0:3]))] + \
            [("v2", i, n) for n, i in enumerate(ids(LINES[1:4]))]
    for version, lines in (("v1", LINES[0:3]), ("v2", LINES[1:4])):
        summary = json.loads((project.root / "out" / version / "summary.json").read_text(encoding="utf-8"))
        assert summary["total"] == 3 and summary["task_name"] == version
        results = pd.read_parquet(project.root / "out" / version / "results.parquet")
        assert sorted(set(results["sample_id"])) == sorted(ids(lines)) and len(results) == 15


def test_register_replace_during_a_run_never_mixes_the_two_contents(project, server):
    old, new = project.write("old.jsonl", LINES[0:3]), project.write("new.jsonl", LINES[3:7])
    run = project.start("run", old, "--dataset-version", "v1")
    wait_for(lambda: len(server.seen) >= 3)  # the run is judging the old content
    status, out, err = project.finish(project.start("register", new, "--dataset-version", "v1", "--replace"))
    assert status == 0 and "registered again" in out, err
    status, out, err = project.finish(run)
    lock_waits_are_said(err)
    results, saw = project.rows("faithfulness"), "the run ends 0 on the old content"
    if status == 0:  # it finished on what it read at its start: the old content, whole
        assert [sample_id for _, sample_id, _ in results] == ids(LINES[0:3])
    else:  # it saw the file change under it, said so in one line, and stored nothing of it
        [line] = [line for line in err.splitlines() if "failed" in line]
        assert "changed while it was being evaluated" in line or "registered again" in line, err
        saw = line
    status, out, err = project.finish(project.start("run", new, "--dataset-version", "v1"))
    assert status == 0, err
    assert [sample_id for _, sample_id, _ in project.rows("faithfulness")] == ids(LINES[3:7])
    summary = json.loads((project.root / "out" / "v1" / "summary.json").read_text(encoding="utf-8"))
    assert summary["total"] == 4
    fault_row("register --replace during a run", saw, 0, 0, duplicates(server), 0)


def test_a_backfill_during_a_run_evaluates_every_version_once_and_says_what_it_waits_for(project, server):
    first, second = project.write("a.jsonl", LINES[0:2]), project.write("b.jsonl", LINES[2:4])
    for name, version in ((first, "v1"), (second, "v2")):
        assert project.finish(project.start("register", name, "--dataset-version", version))[0] == 0
    run = project.start("run", first, "--dataset-version", "v1")
    wait_for(lambda: len(server.seen) >= 1)
    backfill = project.start("backfill")
    (run_status, _, run_err), (status, out, err) = project.finish(run), project.finish(backfill)
    assert run_status == 0, run_err
    lock_waits_are_said(err + run_err)
    # The backfill met v1 being evaluated by the run, or came after it: said so with its PID, went on with v2.
    assert f"v1: skipped: dataset version v1 is being evaluated right now by another rag-eval run (PID {run.pid})" \
        in err or "v1:" in out, (out, err)
    assert status == 0 and "v2:" in out, (out, err)
    assert len(server.seen) == PER_ROW * 4  # every row judged once over the run and the backfill
    fault_row("backfill during a run", next((x for x in err.splitlines() if "v1: skipped" in x), "v1 up to date"),
              0, 0, duplicates(server), 0)
    assert [(version, sample_id) for version, sample_id, _ in project.rows("faithfulness")] == \
        [("v1", i) for i in ids(LINES[0:2])] + [("v2", i) for i in ids(LINES[2:4])]
