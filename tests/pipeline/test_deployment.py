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
    code = ("from pathlib import Path; from rag_eval.assets.expectations import profile, suite, validate; "
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

import duckdb  # noqa: E402

import pytest  # noqa: E402

from rag_eval.orchestration.judge_sim import JudgeServer  # noqa: E402

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
    # to its SIGINT handler: restore both before exec.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


class Deployment:
    """A project folder (workspace.yaml, datasets/), a DAGSTER_HOME with the instance's
    dagster.yaml (the project's SQLite one, or ``deploy/postgres/``'s with ``DAGSTER_POSTGRES_URL``
    in ``env``), and what `make dev` starts: `dagster dev` in its own process group and the Data
    Docs site served over HTTP (its URL in RAG_EVAL_DATA_DOCS_URL)."""

    def __init__(self, root: Path, judge_url: str, instance: Path = ROOT / "dagster_home" / "dagster.yaml",
                 env: dict | None = None) -> None:
        self.root, self.home = root / "project", root / "home"
        self.root.mkdir()
        self.home.mkdir()
        shutil.copyfile(ROOT / "workspace.yaml", self.root / "workspace.yaml")
        shutil.copyfile(instance, self.home / "dagster.yaml")
        self.port, self.docs_port = _free_port(), _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "DAGSTER_", "RAG_EVAL_"))}
        self.env.update(DAGSTER_HOME=str(self.home), RAG_EVAL_CRON="* * * * *", RAG_EVAL_SENSOR_INTERVAL="5",
                        RAG_EVAL_DATA_DOCS_URL=f"http://127.0.0.1:{self.docs_port}",
                        OPENAI_BASE_URL=judge_url, OPENAI_API_KEY="sk-deployment-test", OPENAI_MODEL="judge-test",
                        **(env or {}))
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
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=_reset_signals)
        self.log = open(self.root / "dagster-dev.log", "w")
        self.server = subprocess.Popen([str(BIN / "dagster"), "dev", "-w", "workspace.yaml", "-h", "127.0.0.1",
                                        "-p", str(self.port)], cwd=self.root, env=self.env, stdout=self.log,
                                       stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=_reset_signals)

    def stop(self) -> None:
        if self.docs is not None:  # a static file server: SIGKILL when SIGTERM did not end it (a loaded CI machine)
            self.docs.terminate()
            try:
                self.docs.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.docs.kill()
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

    def ticks(self, sensor: str) -> list[dict]:
        """The sensor's ticks, oldest first: ``timestamp``, ``status``, ``runIds``."""
        data = self.graphql("query($s: SensorSelector!) { sensorOrError(sensorSelector: $s) { ... on Sensor { "
                            "sensorState { ticks(limit: 100) { timestamp status runIds error { message } } } } } }",
                            s={"repositoryLocationName": "rag_eval", "repositoryName": "__repository__",
                               "sensorName": sensor})
        ticks = sorted(data["sensorOrError"]["sensorState"]["ticks"], key=lambda t: t["timestamp"])
        assert not [t["error"] for t in ticks if t["error"]], ticks
        return ticks

    def night_passed(self, since: float) -> list[dict] | None:
        """The automation sensor's ticks once one was evaluated after a tick of its cron (every minute
        here) that came after ``since`` (seconds since the epoch): that night's requests are in."""
        ticks = self.ticks("nightly_evaluation")
        night = (int(since) // 60 + 1) * 60
        return ticks if any(t["timestamp"] > night for t in ticks) else None


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


@pytest.fixture(params=["sqlite", "postgres"])
def instance(request) -> tuple[Path, dict]:
    """The instance the deployment runs on: the project's SQLite one, or the production one
    (deploy/postgres/dagster.yaml) on a database of its own, with a password, of the tests'
    PostgreSQL server (the ``postgres`` fixture)."""
    if request.param == "sqlite":
        return ROOT / "dagster_home" / "dagster.yaml", {}
    database = request.getfixturevalue("postgres").database()
    return ROOT / "deploy" / "postgres" / "dagster.yaml", {"DAGSTER_POSTGRES_URL": database.url,
                                                           "password": database.password}


@pytest.mark.deployment
def test_daemon_runs_backfill_sensor_and_nightly_automation(tmp_path, instance):
    """What a user does after `make dev`: register two versions, backfill them from the CLI (both
    judged at once), drop a new version folder and change another for the sensor, let the nightly
    automation tick; every run the daemon launches succeeds and writes its results, and the
    automation re-runs exactly what the UI shows as Unsynced, then nothing. On the PostgreSQL
    instance, the backfill part (the daemon's queue and runs on that storage)."""
    rows = [json.loads(line) for line in FIQA.read_text(encoding="utf-8").splitlines()[:4]]
    dagster_yaml, env = instance
    password = env.pop("password", None)
    judge = JudgeServer().start()
    deployment = Deployment(tmp_path, judge.url, dagster_yaml, env)
    a, b = "20261101T000000Z-a", "20261102T000000Z-b"
    try:
        # Two versions sharing their questions, contexts and references; b has other responses. Registered
        # before `dagster dev` starts: two processes creating a new SQLite instance at once collide. The
        # automation sensor (running by default) is stopped until the backfill is done.
        staging = tmp_path / "staging"
        deployment.cli("rag-eval", "register", str(_write(staging / "a", rows)), "--dataset-version", a)
        deployment.cli("rag-eval", "register", str(_write(staging / "b", [dict(r, response=r["response"][:400])
                                                                           for r in rows])), "--dataset-version", b)
        deployment.cli("dagster", "sensor", "stop", "nightly_evaluation", "-w", "workspace.yaml")
        deployment.start()
        deployment.wait_until("the code location", deployment.loaded, 300)

        # 1. The backfill command of docs/tutorials/nightly-dagster.md; the daemon dequeues both partitions and runs them at once, each
        #    storing its results in files of its own: both complete, nothing lost.
        deployment.cli("dagster", "job", "backfill", "-w", "workspace.yaml", "-l", "rag_eval", "-j", "evaluation_job",
                       "--partitions", f"{a},{b}", "--noprompt")
        runs = deployment.wait_until("the backfill's runs", lambda: deployment.finished(2), 600)
        assert sorted((r["tags"]["dagster/partition"], r["status"]) for r in runs) == [(a, "SUCCESS"), (b, "SUCCESS")]
        assert _most_at_once(runs) == 2
        backfill_requests = len(judge.seen)
        with duckdb.connect(str(deployment.root / "out" / "rag_eval.duckdb"), read_only=True) as connection:
            stored = connection.sql("select version, count(*) from eval.faithfulness group by 1 order by 1").fetchall()
        assert stored == [(a, 4), (b, 4)]
        for version in (a, b):
            summary = json.loads((deployment.root / "out" / version / "summary.json").read_text())
            assert sorted(summary["metrics"]) == sorted(CORE) and summary["total"] == 4
            assert deployment.stale(version) == dict.fromkeys([*CORE, "eval_summary"], "FRESH")
        # The regression gate's check ran in both runs and shows in the UI: passed (4 rows are too few to decide,
        # and b may have run before a had results).
        assert deployment.gate_checks() == {a: ("SUCCEEDED", True), b: ("SUCCEEDED", True)}
        # great-expectations' checks ran in both runs; the UI's Data Docs link opens the version's page.
        link, page = deployment.data_docs(a)
        assert link.startswith(f"http://127.0.0.1:{deployment.docs_port}/validations/rag_eval_samples/") and \
            link.endswith(f"-{a}.html")
        assert "Evaluated Expectations 16 Successful Expectations 16" in " ".join(
            re.sub(r"<[^>]+>", " ", page).split())
        if password is not None:
            # PostgreSQL: the daemon, its queue, two runs at once and the UI's reads are on this storage; the
            # sensor's and the automation's decisions below read the same instance API (the SQLite run has
            # them), ten minutes of ticks the suite's time limit cannot take twice. The production instance's
            # password is read from the environment, never written.
            written = [p for p in (*deployment.root.rglob("*"), *deployment.home.rglob("*")) if p.is_file()]
            assert not [p for p in written if password.encode() in p.read_bytes()]
            return

        # 2. The nightly automation on: its first night finds everything evaluated and fresh, and requests nothing.
        started = time.time()
        deployment.cli("dagster", "sensor", "start", "nightly_evaluation", "-w", "workspace.yaml")
        deployment.wait_until("a night of the automation", lambda: deployment.night_passed(started), 300)
        assert len(deployment.runs()) == 2

        # 3. The sensor: a new version folder (renamed to a key that sorts by time), new responses for a.
        os.utime(_write(deployment.root / "datasets" / "c", rows[:2]), (1793664000, 1793664000))  # 2026-11-03 UTC
        _write(deployment.root / "datasets" / a, [dict(r, response=f"Regenerated: {r['response']}") for r in rows])
        before = len(judge.seen)
        # The night waits while the sensor's runs run: a tick that starts between c's summary and its gate and
        # ends after the gate (a slow tick on a busy machine) reads the gate as stored but not yet updated, and
        # requests it once more (Dagster reads an asset's status fresh, its updates up to the tick's cursor).
        deployment.cli("dagster", "sensor", "stop", "nightly_evaluation", "-w", "workspace.yaml")
        deployment.cli("dagster", "sensor", "start", "new_dataset_versions", "-w", "workspace.yaml")
        runs = deployment.wait_until("the sensor's runs", lambda: deployment.finished(4), 600)
        deployment.cli("dagster", "sensor", "stop", "new_dataset_versions", "-w", "workspace.yaml")
        deployment.cli("dagster", "sensor", "start", "nightly_evaluation", "-w", "workspace.yaml")
        sensed = sorted((r["jobName"], r["tags"]["dagster/partition"], r["status"]) for r in runs
                        if r["tags"].get("dagster/sensor_name") == "new_dataset_versions")
        c = sensed[0][1]
        assert re.fullmatch(r"\d{8}T\d{6}Z-c-[0-9a-f]{8}", c)  # rag_eval.assets.registration: <UTC time>-<name>-<hash>
        assert sensed == [("evaluation_job", c, "SUCCESS"), ("ingestion_job", a, "SUCCESS")]
        assert (deployment.root / "out" / c / "summary.json").exists() and (deployment.root / "datasets" / c).is_dir()

        # 4. The next night re-runs exactly what changed: a's response metrics, its summary and its gate.
        runs = deployment.wait_until("the automation's run", lambda: deployment.finished(5), 600)
        nightly = [r for r in runs if r["tags"].get("dagster/sensor_name") == "nightly_evaluation"]
        assert len(nightly) == 1, [(r["jobName"], r["tags"].get("dagster/partition"), r["assets"], r["status"])
                                   for r in runs]
        [nightly] = nightly
        assert (nightly["tags"]["dagster/partition"], nightly["status"]) == (a, "SUCCESS")
        # label_estimates too: the backfill materialized it (no labels), and its summary is re-run.
        assert nightly["assets"] == ["answer_relevancy", "baseline_comparison", "eval_summary", "faithfulness",
                                     "label_estimates"]
        assert nightly["tags"]["rag_eval/summary_scope"] == "version"
        kinds = sorted(s.kind for s in judge.seen[before:] if s.path.endswith("/chat/completions"))
        # c's rows are a's first two, answered from the cache: what is sent is a's re-run, one of each per row.
        assert kinds == ["answer_questions"] * 4 + ["statement_support"] * 4
        summary = json.loads((deployment.root / "out" / a / "summary.json").read_text())
        assert summary["total"] == 4 and sorted(summary["metrics"]) == sorted(CORE)
        for version in (a, b, c):
            assert deployment.stale(version) == dict.fromkeys([*CORE, "eval_summary"], "FRESH")
        # The night after: nothing is stale, nothing is requested.
        finished = max(r["endTime"] for r in runs)
        deployment.wait_until("another night", lambda: deployment.night_passed(finished), 300)
        runs = deployment.runs()
        assert len(runs) == 5 and all(r["status"] == "SUCCESS" for r in runs)
        # The run queue of dagster.yaml: two runs at most at any time, never two of one version.
        assert _most_at_once(runs) <= 2
        assert all(_most_at_once([r for r in runs if r["tags"]["dagster/partition"] == v]) == 1 for v in (a, b, c))
        print(f"judge requests: backfill of 2 versions {backfill_requests}, "
              f"sensor and nightly {len(judge.seen) - before}")
    finally:
        deployment.stop()
        judge.stop()


def test_a_killed_rag_eval_run_is_marked_failed_by_the_next_command(tmp_path, monkeypatch):
    """`rag-eval run` executes its run in its own process; killed mid-run, the run would stay
    STARTED forever. The next rag-eval command marks it FAILURE, with the reason."""
    import dagster as dg

    from rag_eval.orchestration import cli

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


OTHER_LOCATION = '''import dagster as dg


@dg.asset
def orders() -> int:
    return 3


defs = dg.Definitions(assets=[orders])
'''


@pytest.mark.deployment
def test_the_code_location_loads_beside_another_in_an_existing_deployment(tmp_path):
    """The docs' recipe for an existing Dagster deployment: its workspace.yaml gains an entry
    ``python_module: rag_eval.orchestration.definitions`` beside its own code location; both load
    in one webserver, and ours brings its jobs, sensors and the evaluation assets."""
    deployment = Deployment(tmp_path, "http://127.0.0.1:9/v1")
    (deployment.root / "their_pipeline.py").write_text(OTHER_LOCATION, encoding="utf-8")
    (deployment.root / "workspace.yaml").write_text(
        "load_from:\n"
        "  - python_file:\n      relative_path: their_pipeline.py\n      location_name: their_pipeline\n"
        "  - python_module:\n      module_name: rag_eval.orchestration.definitions\n      location_name: rag_eval\n",
        encoding="utf-8")
    query = ("{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus locationOrLoadError { "
             "__typename ... on RepositoryLocation { repositories { jobs { name } sensors { name } "
             "assetNodes { assetKey { path } } } } ... on PythonError { message } } } } } }")
    try:
        deployment.start()

        def loaded():
            entries = deployment.graphql(query)["workspaceOrError"]["locationEntries"]
            return entries if entries and all(e["loadStatus"] == "LOADED" for e in entries) else None

        entries = {e["name"]: e["locationOrLoadError"] for e in deployment.wait_until("both locations", loaded, 240)}
    finally:
        deployment.stop()
    assert sorted(entries) == ["rag_eval", "their_pipeline"]
    assert {e["__typename"] for e in entries.values()} == {"RepositoryLocation"}, entries
    [theirs], [ours] = entries["their_pipeline"]["repositories"], entries["rag_eval"]["repositories"]
    assert [a["assetKey"]["path"] for a in theirs["assetNodes"]] == [["orders"]]
    assert {"evaluation_job", "traffic_job"} <= {j["name"] for j in ours["jobs"]}
    assert {"nightly_evaluation", "new_dataset_versions", "new_traffic"} <= {s["name"] for s in ours["sensors"]}
    assert {"faithfulness", "eval_summary", "human_labels"} <= {a["assetKey"]["path"][0] for a in ours["assetNodes"]}
