"""The deployment path: processes the way Dagster starts them, not in-process materialization."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_suite_runs_where_main_has_no_file(tmp_path):
    """Dagster's run workers (multiprocessing spawn) and `python -c` have a __main__ without a
    file; great-expectations imports pyspark.sql.connect, which then exited the process with
    status 0 ("Skipping doctests") unless pyspark's connect requirements are installed."""
    fiqa = ROOT / "examples" / "fiqa" / "samples.jsonl"
    code = ("from pathlib import Path; from assets.expectations import profile, suite, validate; "
            "fields = ['user_input', 'response']; "
            f"frame = profile({str(fiqa)!r}, fields); "
            f"outcomes, page = validate(frame, suite(frame, fields, [0]), 'v1', 'run-1', Path({str(tmp_path)!r})); "
            "print('validated', len(frame), sum(not o['success'] for o in outcomes), page.is_file())")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert "Skipping doctests" not in done.stderr
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [line for line in done.stdout.splitlines() if line.startswith("validated")]
    rows = sum(1 for line in fiqa.read_text(encoding="utf-8").splitlines() if line.strip())
    assert lines == [f"validated {rows} 0 True"]  # FiQA's questions and responses pass every expectation


# --- The deployment: `dagster dev` (webserver, daemon, code server) on 127.0.0.1 -------------

import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import time  # noqa: E402
import urllib.request  # noqa: E402

import pytest  # noqa: E402

from tests.judge_server import JudgeServer  # noqa: E402

BIN = Path(sys.executable).parent
FIQA = ROOT / "examples" / "fiqa" / "samples.jsonl"
CORE = ["faithfulness", "answer_relevancy", "context_relevancy", "context_recall", "context_precision"]
TERMINAL = {"SUCCESS", "FAILURE", "CANCELED"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _reset_signals() -> None:
    # A child of a non-interactive shell inherits SIGINT ignored, and `dagster dev` maps SIGTERM
    # to its SIGINT handler (shared/docs/dagster-notes.md §4): restore both before exec.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


class Deployment:
    """A project folder (workspace.yaml, datasets/), a DAGSTER_HOME with the project's
    dagster.yaml, and what `make dev` starts: `dagster dev` in its own process group and the
    Data Docs site served over HTTP (its URL in RAG_EVAL_DATA_DOCS_URL)."""

    def __init__(self, root: Path, judge_url: str) -> None:
        self.root, self.home = root / "project", root / "home"
        self.root.mkdir()
        self.home.mkdir()
        shutil.copyfile(ROOT / "workspace.yaml", self.root / "workspace.yaml")
        shutil.copyfile(ROOT / "dagster_home" / "dagster.yaml", self.home / "dagster.yaml")
        self.port, self.docs_port = _free_port(), _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "DAGSTER_", "RAG_EVAL_"))}
        self.env.update(DAGSTER_HOME=str(self.home), RAG_EVAL_CRON="* * * * *", RAG_EVAL_SENSOR_INTERVAL="5",
                        RAG_EVAL_DATA_DOCS_URL=f"http://127.0.0.1:{self.docs_port}",
                        OPENAI_BASE_URL=judge_url, OPENAI_API_KEY="sk-deployment-test", OPENAI_MODEL="judge-test")
        self.server: subprocess.Popen | None = None
        self.docs: subprocess.Popen | None = None

    def cli(self, *args: str, timeout: float = 240) -> str:
        """Run a command of the venv in the project folder, as a user would."""
        done = subprocess.run([str(BIN / args[0]), *args[1:]], cwd=self.root, env=self.env, capture_output=True,
                              text=True, timeout=timeout, start_new_session=True)
        assert done.returncode == 0, f"{args}: {done.stdout[-1500:]}\n{done.stderr[-3000:]}"
        return done.stdout

    def start(self) -> None:
        (self.root / "out" / "data_docs").mkdir(parents=True)  # as `make dev` serves it
        self.docs = subprocess.Popen([sys.executable, "-m", "http.server", str(self.docs_port), "--bind", "127.0.0.1",
                                      "--directory", str(self.root / "out" / "data_docs")],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.log = open(self.root / "dagster-dev.log", "w")
        self.server = subprocess.Popen([str(BIN / "dagster"), "dev", "-w", "workspace.yaml", "-h", "127.0.0.1",
                                        "-p", str(self.port)], cwd=self.root, env=self.env, stdout=self.log,
                                       stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=_reset_signals)

    def stop(self) -> None:
        if self.docs is not None:
            self.docs.terminate()
            self.docs.wait(timeout=30)
        if self.server is None:
            return
        group = self.server.pid  # its own session: the group id is its pid
        for sig, grace in ((signal.SIGTERM, 60), (signal.SIGKILL, 30)):  # SIGKILL: whatever is left in the group
            try:
                os.killpg(group, sig)
            except ProcessLookupError:
                break
            try:
                self.server.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                pass
        self.log.close()

    def graphql(self, query: str, **variables) -> dict:
        request = urllib.request.Request(f"{self.url}/graphql", headers={"content-type": "application/json"},
                                         data=json.dumps({"query": query, "variables": variables}).encode())
        with urllib.request.urlopen(request, timeout=60) as response:
            answer = json.load(response)
        assert "errors" not in answer, answer
        return answer["data"]

    def wait_until(self, what: str, condition, seconds: float):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            assert self.server.poll() is None, f"dagster dev exited: {(self.root / 'dagster-dev.log').read_text()[-3000:]}"
            try:
                value = condition()
            except OSError:
                value = None
            if value:
                return value
            time.sleep(2)
        raise AssertionError(f"timed out after {seconds:.0f} s waiting for {what}; runs: {self.runs()}; log: "
                             f"{(self.root / 'dagster-dev.log').read_text()[-3000:]}")

    def loaded(self) -> bool:
        data = self.graphql("{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus "
                            "locationOrLoadError { __typename } } } } }")
        entries = data["workspaceOrError"]["locationEntries"]
        return any(e["name"] == "rag_eval" and e["loadStatus"] == "LOADED"
                   and e["locationOrLoadError"]["__typename"] == "RepositoryLocation" for e in entries)

    def runs(self) -> list[dict]:
        data = self.graphql("{ runsOrError(limit: 100) { ... on Runs { results { runId jobName status "
                            "startTime endTime tags { key value } assetSelection { path } } } } }")
        runs = data["runsOrError"]["results"]
        for run in runs:
            run["tags"] = {t["key"]: t["value"] for t in run["tags"]}
            run["assets"] = sorted("/".join(a["path"]) for a in run["assetSelection"] or [])
        return runs

    def finished(self, count: int) -> list[dict] | None:
        runs = self.runs()
        return runs if len(runs) >= count and all(r["status"] in TERMINAL for r in runs) else None

    def stale(self, version: str) -> dict[str, str]:
        keys = [{"path": [a]} for a in [*CORE, "eval_summary"]]
        data = self.graphql("query($keys: [AssetKeyInput!], $p: String) { assetNodes(assetKeys: $keys) "
                            "{ assetKey { path } staleStatus(partition: $p) } }", keys=keys, p=version)
        return {n["assetKey"]["path"][0]: n["staleStatus"] for n in data["assetNodes"]}

    def gate_checks(self) -> dict[str, tuple[str, bool | None]]:
        """The UI's record of no_regression_vs_baseline: ``{partition: (status, passed)}``, and that the
        check is declared (blocking) on baseline_comparison."""
        key = {"path": ["baseline_comparison"]}
        data = self.graphql("query($k: AssetKeyInput!) { assetNodes(assetKeys: [$k]) { assetChecksOrError { "
                            "... on AssetChecks { checks { name blocking } } } } assetCheckExecutions(assetKey: $k, "
                            "checkName: \"no_regression_vs_baseline\", limit: 20) { partition status "
                            "evaluation { success } } }", k=key)
        [node] = data["assetNodes"]
        assert node["assetChecksOrError"]["checks"] == [{"name": "no_regression_vs_baseline", "blocking": True}]
        return {e["partition"]: (e["status"], (e["evaluation"] or {}).get("success"))
                for e in data["assetCheckExecutions"]}

    def data_docs(self, version: str) -> tuple[str, str]:
        """The UI's record of ids_unique for ``version``: its Data Docs link, and the page it opens."""
        data = self.graphql("query($k: AssetKeyInput!) { assetCheckExecutions(assetKey: $k, checkName: \"ids_unique\", "
                            "limit: 20) { partition evaluation { success metadataEntries { label "
                            "... on UrlMetadataEntry { url } } } } }", k={"path": ["rejected_samples"]})
        [link] = [m["url"] for e in data["assetCheckExecutions"] if e["partition"] == version
                  for m in e["evaluation"]["metadataEntries"] if m["label"] == "data_docs"]
        with urllib.request.urlopen(link, timeout=60) as response:
            return link, response.read().decode("utf-8")

    def schedule_dry_run(self) -> dict:
        data = self.graphql(
            "mutation($s: ScheduleSelector!, $t: Float) { scheduleDryRun(selectorData: $s, timestamp: $t) { "
            "... on DryRunInstigationTick { evaluationResult { skipReason error { message } "
            "runRequests { runKey assetSelection { path } } } } ... on PythonError { message } } }",
            s={"repositoryLocationName": "rag_eval", "repositoryName": "__repository__",
               "scheduleName": "nightly_evaluation"}, t=time.time())
        return data["scheduleDryRun"]["evaluationResult"]


def _most_at_once(runs: list[dict]) -> int:
    """The largest number of the runs in progress at one time (from their start and end times)."""
    edges = sorted([(r["startTime"], 1) for r in runs] + [(r["endTime"], -1) for r in runs], key=lambda e: (e[0], e[1]))
    running = most = 0
    for _, step in edges:
        running += step
        most = max(most, running)
    return most


def _write(folder: Path, rows: list[dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "samples.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.mark.deployment
def test_daemon_runs_backfill_sensor_and_schedule(tmp_path):
    """What a user does after `make dev`: register two versions, backfill them from the CLI,
    drop a new version folder for the sensor, let the schedule tick; every run the daemon
    launches succeeds and writes its summary, and the schedule re-runs exactly what the UI
    shows as Unsynced."""
    rows = [json.loads(line) for line in FIQA.read_text(encoding="utf-8").splitlines()[:4]]
    judge = JudgeServer().start()
    deployment = Deployment(tmp_path, judge.url)
    a, b = "20261101T000000Z-a", "20261102T000000Z-b"
    try:
        # Two versions sharing their questions, contexts and references; b has other responses. Registered
        # before `dagster dev` starts: two processes creating a new SQLite instance at once collide.
        staging = tmp_path / "staging"
        deployment.cli("rag-eval", "register", str(_write(staging / "a", rows)), "--dataset-version", a)
        deployment.cli("rag-eval", "register", str(_write(staging / "b", [dict(r, response=r["response"][:400])
                                                                           for r in rows])), "--dataset-version", b)
        deployment.start()
        deployment.wait_until("the code location", deployment.loaded, 300)

        # 1. The README's backfill command; the daemon dequeues and runs both partitions.
        deployment.cli("dagster", "job", "backfill", "-w", "workspace.yaml", "-l", "rag_eval", "-j", "evaluation_job",
                       "--partitions", f"{a},{b}", "--noprompt")
        runs = deployment.wait_until("the backfill's runs", lambda: deployment.finished(2), 600)
        assert sorted((r["tags"]["dagster/partition"], r["status"]) for r in runs) == [(a, "SUCCESS"), (b, "SUCCESS")]
        backfill_requests = len(judge.seen)
        for version in (a, b):
            summary = json.loads((deployment.root / "out" / version / "summary.json").read_text())
            assert sorted(summary["metrics"]) == sorted(CORE) and summary["total"] == 4
            assert deployment.stale(version) == dict.fromkeys([*CORE, "eval_summary"], "FRESH")
        assert deployment.schedule_dry_run()["skipReason"] == "every version is evaluated and fresh"
        # The regression gate's check ran in both runs and shows in the UI: passed (4 rows are too few to decide,
        # and b may have run before a had results).
        assert deployment.gate_checks() == {a: ("SUCCEEDED", True), b: ("SUCCEEDED", True)}
        # great-expectations' checks ran in both runs; the UI's Data Docs link opens the version's page.
        link, page = deployment.data_docs(a)
        assert link.startswith(f"http://127.0.0.1:{deployment.docs_port}/validations/rag_eval_samples/") and \
            link.endswith(f"-{a}.html")
        assert "Evaluated Expectations 16 Successful Expectations 16" in " ".join(
            re.sub(r"<[^>]+>", " ", page).split())

        # 2. The sensor: a new version folder (renamed to a key that sorts by time), new responses for a.
        os.utime(_write(deployment.root / "datasets" / "c", rows[:2]), (1793664000, 1793664000))  # 2026-11-03 UTC
        _write(deployment.root / "datasets" / a, [dict(r, response=f"Regenerated: {r['response']}") for r in rows])
        deployment.cli("dagster", "sensor", "start", "new_dataset_versions", "-w", "workspace.yaml")
        runs = deployment.wait_until("the sensor's runs", lambda: deployment.finished(4), 600)
        deployment.cli("dagster", "sensor", "stop", "new_dataset_versions", "-w", "workspace.yaml")
        sensed = sorted((r["jobName"], r["tags"]["dagster/partition"], r["status"]) for r in runs
                        if "dagster/sensor_name" in r["tags"])
        c = sensed[0][1]
        assert re.fullmatch(r"\d{8}T\d{6}Z-c-[0-9a-f]{8}", c)  # assets.registration: <UTC time>-<name>-<hash>
        assert sensed == [("evaluation_job", c, "SUCCESS"), ("ingestion_job", a, "SUCCESS")]
        assert (deployment.root / "out" / c / "summary.json").exists() and (deployment.root / "datasets" / c).is_dir()

        # 3. What the UI shows as Unsynced is what the schedule requests: a's response metrics and summary.
        changed = {"faithfulness": "STALE", "answer_relevancy": "STALE", "eval_summary": "STALE"}
        assert deployment.stale(a) == {**dict.fromkeys(CORE, "FRESH"), **changed}
        assert deployment.stale(b) == deployment.stale(c) == dict.fromkeys([*CORE, "eval_summary"], "FRESH")
        [planned] = deployment.schedule_dry_run()["runRequests"]
        assert planned["runKey"].startswith(a)
        # A re-run summary re-runs the regression gate and the label estimates it holds.
        rerun = sorted([*changed, "baseline_comparison", "label_estimates"])
        assert sorted(k["path"][0] for k in planned["assetSelection"]) == rerun

        # 4. The schedule ticks (cron every minute in this test) and the daemon runs the request.
        before = len(judge.seen)
        deployment.cli("dagster", "schedule", "start", "nightly_evaluation", "-w", "workspace.yaml")
        deployment.wait_until("the schedule's run", lambda: any(
            "dagster/schedule_name" in r["tags"] for r in deployment.runs()), 180)
        deployment.cli("dagster", "schedule", "stop", "nightly_evaluation", "-w", "workspace.yaml")
        runs = deployment.wait_until("the schedule's run to finish", lambda: deployment.finished(5), 300)
        [scheduled] = [r for r in runs if "dagster/schedule_name" in r["tags"]]
        assert (scheduled["tags"]["dagster/partition"], scheduled["status"]) == (a, "SUCCESS")
        assert scheduled["assets"] == rerun
        kinds = sorted(s.kind for s in judge.seen[before:] if s.path.endswith("/chat/completions"))
        assert kinds == ["answer_questions"] * 4 + ["statement_support"] * 4
        summary = json.loads((deployment.root / "out" / a / "summary.json").read_text())
        assert summary["total"] == 4 and sorted(summary["metrics"]) == sorted(CORE)
        # The next night: nothing is stale, nothing is requested.
        assert deployment.stale(a) == dict.fromkeys([*CORE, "eval_summary"], "FRESH")
        assert deployment.schedule_dry_run()["skipReason"] == "every version is evaluated and fresh"
        runs = deployment.runs()
        assert all(r["status"] == "SUCCESS" for r in runs)
        # The run queue of dagster.yaml: two runs at most at any time, never two of one version.
        assert _most_at_once(runs) <= 2
        assert all(_most_at_once([r for r in runs if r["tags"]["dagster/partition"] == v]) == 1 for v in (a, b, c))
        print(f"judge requests: backfill of 2 versions {backfill_requests}, schedule re-run {len(judge.seen) - before}")
    finally:
        deployment.stop()
        judge.stop()


def test_a_killed_rag_eval_run_is_marked_failed_by_the_next_command(tmp_path, monkeypatch):
    """`rag-eval run` executes its run in its own process; killed mid-run, the run would stay
    STARTED forever. The next rag-eval command marks it FAILURE, with the reason."""
    import dagster as dg

    from orchestration import cli

    dataset = _write(tmp_path / "in", [json.loads(line) for line in FIQA.read_text(encoding="utf-8").splitlines()])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "DAGSTER_"))}
    env["DAGSTER_HOME"] = str(tmp_path / "home")
    monkeypatch.setenv("DAGSTER_HOME", env["DAGSTER_HOME"])
    # The instance exists before the run (as after any earlier command): two processes creating one
    # SQLite storage at once collide, and this test reads it while `rag-eval run` writes.
    (tmp_path / "home").mkdir()
    shutil.copyfile(ROOT / "dagster_home" / "dagster.yaml", tmp_path / "home" / "dagster.yaml")
    with dg.DagsterInstance.get() as instance:
        assert instance.get_runs() == []
    process = subprocess.Popen([str(BIN / "rag-eval"), "run", str(dataset), "--dataset-version", "v1"], cwd=tmp_path,
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    monkeypatch.chdir(tmp_path)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and process.poll() is None:
            with dg.DagsterInstance.get() as instance:
                runs = instance.get_runs()
            if runs and runs[0].status == dg.DagsterRunStatus.STARTED:
                break
            time.sleep(1)
        assert process.poll() is None, "rag-eval run ended before it could be killed"
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    with dg.DagsterInstance.get() as instance:
        [run] = instance.get_runs()
        assert run.status == dg.DagsterRunStatus.STARTED  # what Dagster alone would keep forever
    assert cli.main(["register", str(dataset), "--dataset-version", "v1"]) == 0
    with dg.DagsterInstance.get() as instance:
        [run] = instance.get_runs()
        assert run.status == dg.DagsterRunStatus.FAILURE
        [failure] = instance.all_logs(run.run_id, of_type=dg.DagsterEventType.RUN_FAILURE)
        assert f"(pid {process.pid}) ended without finishing it" in failure.dagster_event.message
