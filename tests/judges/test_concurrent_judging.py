"""Two processes that need the same judgements at the same time send each request once."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rag_eval.orchestration.judge_sim import oracle

pytestmark = pytest.mark.slow  # the test server or the offline encoder, in every test

ROOT = Path(__file__).resolve().parents[2]
ROWS = [{"id": f"r{i}", "user_input": f"Where was person {i} born?", "response": f"Person {i} was born in Ulm.",
         "retrieved_contexts": [f"Person {i} was born in Ulm, Germany."], "reference": f"Person {i} was born in Ulm."}
        for i in range(3)]
PER_ROW = 6  # the five core metrics: 5 chat + 1 embeddings request per row (rag_eval.metrics.judges.llm)
# A run in its own process: it waits for the go file, evaluates its rows, prints the statuses.
CHILD = """
import json, sys, time
from pathlib import Path
from rag_eval.metrics import evaluate
from rag_eval.metrics.judges.llm import LLMConfig, LLMJudge
url, cache, rows, ready, go = sys.argv[1:]
judge = LLMJudge(LLMConfig(base_url=url, api_key="sk-test-claims", model="judge-test", embedding_model="embed-test",
                           cache_path=cache, timeout=60, max_retry_wait=0.05))
Path(ready).touch()
for _ in range(600):
    if Path(go).exists():
        break
    time.sleep(0.05)
results = evaluate([json.loads(line) for line in Path(rows).read_text().splitlines()], judge=judge).results
print(json.dumps(results["status"].tolist()))
judge.close()
"""


class Runs:
    """Child processes started in their own process group, all killed at the end."""

    def __init__(self, root: Path, url: str) -> None:
        self.root, self.url, self.children = root, url, []

    def start(self, name: str, rows: list[dict]) -> subprocess.Popen:
        (self.root / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        child = subprocess.Popen([sys.executable, "-c", CHILD, self.url, str(self.root / "cache.sqlite"),
                                  str(self.root / f"{name}.jsonl"), str(self.root / f"{name}.ready"),
                                  str(self.root / "go")], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True, start_new_session=True)
        self.children.append(child)
        return child

    def wait_ready(self, *names: str) -> None:
        deadline = time.monotonic() + 120
        while not all((self.root / f"{n}.ready").exists() for n in names):
            assert time.monotonic() < deadline, "the runs did not start"
            time.sleep(0.05)

    def go(self) -> None:
        (self.root / "go").touch()

    @staticmethod
    def statuses(child: subprocess.Popen, timeout: float = 120) -> list[str]:
        out, err = child.communicate(timeout=timeout)
        assert child.returncode == 0, err[-2000:]
        return json.loads(out.strip().splitlines()[-1])

    def stop(self) -> None:
        for child in self.children:
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait(timeout=10)


@pytest.fixture
def runs(server, tmp_path):
    server.script = slow(oracle(), 0.2)  # every answer takes a while, so the two runs overlap
    started = Runs(tmp_path, server.url)
    yield started
    started.stop()


def slow(script, delay: float):
    def answer(seen):
        reply = script(seen)
        reply.delay = delay
        return reply
    return answer


def test_two_runs_of_the_same_rows_at_once_send_each_request_once(server, runs):
    first, second = runs.start("a", ROWS), runs.start("b", ROWS)
    runs.wait_ready("a", "b")
    runs.go()
    assert runs.statuses(first) == runs.statuses(second) == ["ok"] * 5 * len(ROWS)
    # These rows' requests only (a duplicate of one still counts): a port handed out again can receive
    # a lingering client's request of another test. One CI run saw 23 requests; which was not recorded.
    asked = [json.dumps(s.body, sort_keys=True) for s in server.seen if "person " in json.dumps(s.body).lower()]
    assert len(asked) == PER_ROW * len(ROWS)  # one run's worth, not two
    assert len(set(asked)) == len(asked)


def test_a_concurrent_backfill_over_versions_sharing_rows_sends_the_sequential_requests(server, runs):
    # Sequential: version 1 (rows 0, 1) asks 12, version 2 (rows 1, 2) only row 2's 6.
    first, second = runs.start("v1", ROWS[:2]), runs.start("v2", ROWS[1:])
    runs.wait_ready("v1", "v2")
    runs.go()
    assert runs.statuses(first) == runs.statuses(second) == ["ok"] * 5 * 2
    assert len(server.seen) == PER_ROW * 3


def test_a_claimant_that_died_is_taken_over_at_once(server, runs):
    server.script = slow(oracle(), 600)  # the first run's requests hang
    first = runs.start("dies", ROWS[:1])
    runs.wait_ready("dies")
    runs.go()
    deadline = time.monotonic() + 60
    while len(server.seen) < PER_ROW - 1:  # it holds its claims (the embeddings wait for the questions)
        assert time.monotonic() < deadline
        time.sleep(0.05)
    second = runs.start("survives", ROWS[:1])
    runs.wait_ready("survives")
    time.sleep(1.0)  # the second run finds the live claims and waits
    assert len(server.seen) == PER_ROW - 1
    os.killpg(first.pid, signal.SIGKILL)
    first.wait(timeout=10)
    server.script = oracle()
    started = time.monotonic()
    assert runs.statuses(second, timeout=60) == ["ok"] * 5
    assert time.monotonic() - started < 30  # far below the claims' lease (10 minutes here)
    assert len(server.seen) == 2 * (PER_ROW - 1) + 1
