"""Custom metrics (a YAML file) and plugin metrics (an installed entry point) on the user's path:
``rag-eval run`` / ``rag-eval calibrate`` in a fresh process, the code location the UI and the
daemon load, and the registry's discovery. The plugin is ``examples/plugin_metric``, made
installed by a real ``*.dist-info`` with its ``entry_points.txt`` on ``sys.path`` (what ``pip
install`` writes), so ``importlib.metadata`` finds it as it finds any installed package."""
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from rag_eval.metrics.core.registry import PLUGIN_GROUP, plugin_metrics
from rag_eval.metrics.text import normalise_rag_text
from rag_eval.orchestration.judge_sim import Reply, oracle

ROOT = Path(__file__).parents[2]
EXAMPLE = ROOT / "examples" / "custom_metrics"
PLUGIN = ROOT / "examples" / "plugin_metric"
DATA = Path(__file__).parents[1] / "data" / "ragas_annotated"
CUSTOM = ("helpfulness", "summary_accuracy", "politeness", "answer_kind", "padding")
ROWS = [{"id": "zh", "user_input": "你们几点关门？", "response": "我们晚上九点关门。",
         "retrieved_contexts": ["营业时间：早上八点到晚上九点。"]},
        {"id": "en", "user_input": "When do you close?", "response": "我们九点关门。",
         "retrieved_contexts": ["Open 8am to 9pm."]},
        {"id": "no-contexts", "user_input": "Where are you?", "response": "On Main Street."}]


def installed_plugin(site: Path) -> Path:
    """``site`` holding the example plugin's ``.dist-info`` (METADATA, entry_points.txt read from
    its pyproject.toml), as ``pip install`` leaves it; the package itself is its ``src``."""
    import tomllib

    project = tomllib.loads((PLUGIN / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    info = site / f"{project['name'].replace('-', '_')}-{project['version']}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n",
                                   encoding="utf-8")
    points = project["entry-points"][PLUGIN_GROUP]
    (info / "entry_points.txt").write_text(f"[{PLUGIN_GROUP}]\n" + "".join(f"{k} = {v}\n" for k, v in points.items()),
                                           encoding="utf-8")
    return site


def rag_eval(*args: str, cwd: Path, env: dict, module: str = "rag_eval.orchestration.cli") -> subprocess.CompletedProcess:
    """``rag-eval ARGS`` (or ``python -c``) in a fresh process, as a user runs it."""
    command = [sys.executable, "-c", args[0]] if module == "-c" else [sys.executable, "-m", module, *args]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture
def user(tmp_path):
    """A user's folder: the three rows above, a fresh instance, no endpoint, the plugin installed."""
    (tmp_path / "samples.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in ROWS),
                                            encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "EMBEDDING_", "RAG_EVAL_"))}
    site = installed_plugin(tmp_path / "site")
    env.update(DAGSTER_HOME=str(tmp_path / "dagster_home"),
               PYTHONPATH=os.pathsep.join([str(ROOT), str(site), str(PLUGIN / "src")]))
    return tmp_path, env


def test_the_entry_point_is_discovered_from_its_dist_info(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(PLUGIN / "src"))
    monkeypatch.syspath_prepend(str(installed_plugin(tmp_path / "site")))
    [cls] = plugin_metrics()
    assert (cls.name, cls.__module__, cls.family.value, cls.required_fields) == \
        ("language_match", "rag_eval_language", "plugin", ("user_input", "response"))


GROUP = ("from rag_eval.orchestration.definitions import defs; import dagster as dg; "
         "print(defs.resolve_asset_graph().get(dg.AssetKey('language_match')).group_name)")


@pytest.mark.parametrize("code, printed", [
    ("import rag_eval_language; print(rag_eval_language.LanguageMatch.name)", ["language_match"]),
    # Importing metrics loads no plugin (it used to: "partially initialized module 'rag_eval_language'").
    ("import rag_eval_language\nfrom rag_eval.metrics import build_registry\nfrom rag_eval.metrics.core.registry import resolve_names\n"
     "try:\n    resolve_names('language_match')\nexcept KeyError as exc:\n    print(exc.args[0].rsplit('; ', 1)[1])\n"
     "print(build_registry()['language_match'] is rag_eval_language.LanguageMatch)",
     ["custom and plugin metrics not loaded (rag_eval.metrics.build_registry())", "True"]),
    ("import rag_eval.metrics, rag_eval_language; print(list(rag_eval.metrics.build_registry().families['plugin']))",
     ["['language_match']"]),
    (f"import rag_eval_language; {GROUP}", ["plugin_metrics"]),
    (f"{GROUP}; import rag_eval_language; print(defs.resolve_asset_graph().get(dg.AssetKey('language_match')) "
     "is not None)", ["plugin_metrics", "True"]),
], ids=["alone", "then-the-registry", "after-metrics", "then-the-code-location", "after-the-code-location"])
def test_the_plugin_module_imports_first_and_in_any_order(code, printed, user):
    folder, env = user
    done = rag_eval(code, cwd=folder, env=env, module="-c")
    assert (done.returncode, done.stdout.splitlines()) == (0, printed), done.stderr


def test_custom_and_plugin_metrics_through_rag_eval_run_the_code_location_and_the_api(user, server):
    # Every verdict 1, every rubric score 4, every label partial_answer, every number 0.2.
    decide = {"verdict": 1, "score": 4, "label": "partial_answer", "value": 0.2}
    server.script = oracle(lambda field, key: decide.get(field, int(field != "noncommittal")))
    folder, env = user
    env.update(OPENAI_BASE_URL=server.url, OPENAI_API_KEY="sk-test-SECRET-custom", EMBEDDING_MODEL="embed-test")
    (folder / "custom_metrics.yaml").write_text((EXAMPLE / "custom_metrics.yaml").read_text(encoding="utf-8"),
                                                encoding="utf-8")  # found in the working directory
    # `rag-eval run`, the asset graph of the code location the UI and the daemon load
    # (workspace.yaml) and the Python API, in one fresh process.
    code = ("import json, sys; import dagster as dg; from rag_eval.orchestration.cli import main; "
            "status = main(['run', 'samples.jsonl', '--dataset-version', 'v1', '--metrics', "
            "'faithfulness,custom,plugin']); "
            "from rag_eval.orchestration.definitions import defs; g = defs.resolve_asset_graph(); "
            "from rag_eval.metrics import OfflineJudge, build_registry, evaluate; "
            "api = evaluate('samples.jsonl', metrics=['language_match'], judge=OfflineJudge(), registry=build_registry()); "
            "print(json.dumps({'status': status, 'api': list(api.results['value']), **{k: [g.get(dg.AssetKey(k))"
            ".group_name, sorted(p.to_user_string() for p in g.get(dg.AssetKey(k)).parent_keys), "
            "g.get(dg.AssetKey(k)).code_version] for k in ('language_match', 'helpfulness', 'politeness')}}))")
    done = rag_eval(code, cwd=folder, env=env, module="-c")
    assert done.returncode == 0, done.stderr
    graph = json.loads(done.stdout.strip().splitlines()[-1])
    assert graph["status"] == 0 and graph["api"] == [1.0, 0.0, 1.0]  # the Python API has the plugin too
    assert graph["language_match"][:2] == ["plugin_metrics", ["questions", "responses"]]
    assert graph["helpfulness"][:2] == ["custom_metrics", ["questions", "responses"]]
    assert graph["politeness"][1] == ["responses"] and graph["politeness"][2].startswith("m")
    # One request per custom metric per row (faithfulness cannot judge the row without contexts).
    sent = Counter(s.kind for s in server.chat_requests())
    assert {k: sent[f"custom_{k}"] for k in CUSTOM} == dict.fromkeys(CUSTOM, 3)
    summary = json.loads((folder / "out" / "v1" / "summary.json").read_text(encoding="utf-8"))
    means = {m: summary["metrics"][m]["mean"] for m in (*CUSTOM, "language_match")}
    assert means == {"helpfulness": 1.0, "summary_accuracy": 1.0, "politeness": 4.0, "answer_kind": 0.0,
                     "padding": 0.2, "language_match": round(2 / 3, 4)}  # zh/zh, en/zh, en/en
    assert summary["metrics"]["padding"]["pass_rate"] == 1.0  # 0.2 <= 0.3, lower is better
    assert (summary["coverage"]["politeness"]["ok"], summary["coverage"]["faithfulness"]["input_error"]) == (3, 1)
    results = pd.read_parquet(folder / "out" / "v1" / "results.parquet")
    language = results[results["metric"] == "language_match"].sort_values("row")
    assert language["reason"].iloc[1] == "question in LATIN script, response in CJK"
    table = pd.read_csv(folder / "out" / "v1" / "ragas_scores.csv")
    assert table["politeness"].tolist() == [4.0, 4.0, 4.0] and pd.isna(table["faithfulness"][2])
    assert table["unscored"][2].startswith("faithfulness: input_error")
    azure = [json.loads(line) for line in (folder / "out" / "v1" / "azure_results.jsonl").read_text().splitlines()]
    assert (azure[0]["answer_kind"], azure[0]["answer_kind_result"], azure[0]["politeness_threshold"],
            azure[1]["language_match_result"]) == (0.0, "fail", 4.0, "fail")
    with duckdb.connect(str(folder / "out" / "rag_eval.duckdb"), read_only=True) as db:
        stored = db.sql("select row, status, value from eval.politeness order by row").fetchall()
    assert stored == [(0, "ok", 4.0), (1, "ok", 4.0), (2, "ok", 4.0)]
    assert "sk-test-SECRET-custom" not in (folder / "out" / "v1" / "summary.json").read_text()


def test_calibrating_the_two_annotated_aspect_critics_through_rag_eval_calibrate(user, server):
    # The server replays the RAGAS judge's own verdicts on these rows; the human reviewers accepted
    # 16 of 21 helpfulness and 10 of 19 summary_accuracy verdicts, so those are the accuracies, and
    # the confusion tables follow from the (verdict, accepted) pairs of the source files.
    verdicts = {}
    for name in ("annotated_data.json", "sample_annotated_summary.json"):
        [records] = json.loads((DATA / name).read_text(encoding="utf-8")).values()
        verdicts.update({(r["metric_input"]["user_input"], normalise_rag_text(r["metric_input"]["response"])):
                         r["metric_output"] for r in records})

    def replay(seen):  # the question and the (normalised) response, as the prompt shows them
        question, rest = seen.prompt.removeprefix("Question:\n").split("\n\nResponse:\n", 1)
        return Reply(content=json.dumps({"reason": "replayed", "verdict": verdicts[question, rest.rsplit("\n\n", 2)[0]]}))

    server.script = replay
    folder, env = user
    env.update(OPENAI_BASE_URL=server.url, OPENAI_API_KEY="sk-test-SECRET-calibrate")
    done = rag_eval("calibrate", str(EXAMPLE / "labels.jsonl"), "--custom-metrics", str(EXAMPLE / "custom_metrics.yaml"),
                    "--json", "report.json", cwd=folder, env=env)
    assert done.returncode == 0, done.stderr
    report = json.loads((folder / "report.json").read_text(encoding="utf-8"))["metrics"]
    assert report["helpfulness"]["accuracy"] == round(16 / 21, 4)
    assert report["helpfulness"]["confusion"] == {"human_accept_judge_pass": 7, "human_accept_judge_fail": 3,
                                                  "human_reject_judge_pass": 2, "human_reject_judge_fail": 9}
    assert report["summary_accuracy"]["accuracy"] == round(10 / 19, 4)
    assert report["summary_accuracy"]["confusion"] == {"human_accept_judge_pass": 10, "human_accept_judge_fail": 2,
                                                       "human_reject_judge_pass": 7, "human_reject_judge_fail": 0}
    # One request per distinct row: two helpfulness rows repeat another (same question and response).
    assert Counter(s.kind for s in server.chat_requests()) == {"custom_helpfulness": 19, "custom_summary_accuracy": 19}


def test_a_taken_name_or_a_broken_plugin_stops_rag_eval_naming_it(user):
    folder, env = user
    (folder / "mine.yaml").write_text("metrics:\n  - name: faithfulness\n    kind: aspect_critic\n"
                                      "    fields: [response]\n    prompt: Is it faithful?\n", encoding="utf-8")
    done = rag_eval("run", "samples.jsonl", "--custom-metrics", "mine.yaml", "--metrics", "faithfulness",
                    cwd=folder, env=env)
    assert done.returncode == 2
    assert f"error: {folder / 'mine.yaml'}: metric 'faithfulness': field 'name': 'faithfulness' is taken by a " \
           "built-in metric" in done.stderr
    broken = folder / "site" / "broken-1.0.dist-info"
    broken.mkdir()
    (broken / "METADATA").write_text("Metadata-Version: 2.1\nName: broken\nVersion: 1.0\n", encoding="utf-8")
    (broken / "entry_points.txt").write_text(f"[{PLUGIN_GROUP}]\nghost = no_such_module:Ghost\n", encoding="utf-8")
    done = rag_eval("run", "samples.jsonl", cwd=folder, env=env)
    assert done.returncode == 2
    assert "error: plugin entry point 'ghost = no_such_module:Ghost' of broken 1.0: cannot be loaded: " \
           "ModuleNotFoundError: No module named 'no_such_module'" in done.stderr


def one_metric(path: Path, name: str) -> Path:
    """A custom metrics file of one aspect critic, ``name``, on the response."""
    path.write_text(f"metrics:\n  - name: {name}\n    kind: aspect_critic\n    fields: [response]\n"
                    f"    prompt: Is the response {name}\n", encoding="utf-8")
    return path


def test_rag_eval_run_passes_its_custom_metrics_file_down_and_writes_no_environment(tmp_path, server, monkeypatch):
    # The CLI used to put --custom-metrics in $RAG_EVAL_CUSTOM_METRICS for Dagster's workers, and a second
    # file in the same process "needed a new process". Two runs of one process, each with its own file.
    from rag_eval.orchestration.cli import main

    (tmp_path / "samples.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in ROWS),
                                            encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-run")
    monkeypatch.delenv("RAG_EVAL_CUSTOM_METRICS", raising=False)
    server.script = lambda seen: Reply(content=json.dumps({"reason": "r", "verdict": int(seen.kind == "custom_polite")}))
    for version, name in (("v1", "polite"), ("v2", "terse")):
        assert main(["run", "samples.jsonl", "--dataset-version", version, "--metrics", "custom", "--custom-metrics",
                     str(one_metric(tmp_path / f"{name}.yaml", name)), "--base-url", server.url,
                     "--model", "judge-test"]) == 0
        assert "RAG_EVAL_CUSTOM_METRICS" not in os.environ
        summary = json.loads((tmp_path / "out" / version / "summary.json").read_text(encoding="utf-8"))
        assert {m: row["mean"] for m, row in summary["metrics"].items()} == {name: 1.0 if name == "polite" else 0.0}
    assert Counter(s.kind for s in server.chat_requests()) == {"custom_polite": 3, "custom_terse": 3}


def test_a_run_the_daemon_launches_loads_the_code_locations_custom_metrics_itself(user):
    # The daemon dequeues a launched run and starts a run worker (a new process) that loads the code location
    # (rag_eval.orchestration.definitions) again: the worker builds its registry from the same rule, the code
    # location's setting in ./pyproject.toml (no environment variable). No endpoint: the custom metric is
    # not_applicable, saying why.
    import time

    import dagster as dg

    folder, env = user
    one_metric(folder / "polite.yaml", "polite")
    (folder / "pyproject.toml").write_text('[tool.rag_eval.metrics]\ncustom_metrics = "polite.yaml"\n', encoding="utf-8")
    home = Path(env["DAGSTER_HOME"])
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n", encoding="utf-8")
    assert rag_eval("register", "samples.jsonl", "--dataset-version", "v1", cwd=folder, env=env).returncode == 0
    bin_dir = Path(sys.executable).parent
    location = ["-m", "rag_eval.orchestration.definitions"]
    launched = subprocess.run([str(bin_dir / "dagster"), "job", "launch", *location, "-j", "__ASSET_JOB",
                               "--op-selection", "ingest_dataset,score_metrics", "--tags", '{"dagster/partition": "v1"}'],
                              cwd=folder, env=env, capture_output=True, text=True, timeout=300)
    assert launched.returncode == 0, launched.stderr[-3000:]
    daemon = subprocess.Popen([str(bin_dir / "dagster-daemon"), "run", *location], cwd=folder, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with dg.DagsterInstance.from_config(str(home)) as instance:
            deadline = time.monotonic() + 240
            while not (run := instance.get_runs()[0]).is_finished and time.monotonic() < deadline:
                time.sleep(2)
            assert run.status == dg.DagsterRunStatus.SUCCESS
    finally:
        daemon.terminate()
        daemon.wait(timeout=60)
    why = ("polite is a custom aspect_critic metric: it needs an LLM judge endpoint (set OPENAI_BASE_URL or pass "
           "--base-url); the offline judge has no rule for it")
    with duckdb.connect(str(folder / "out" / "rag_eval.duckdb"), read_only=True) as db:
        assert db.sql("select row, status, reason from eval.polite order by row").fetchall() == \
            [(0, "not_applicable", why), (1, "not_applicable", why), (2, "not_applicable", why)]


def test_every_asset_that_is_not_a_metric_and_every_resource_has_its_name_reserved():
    from rag_eval.metrics.core.base import ASSET_NAMES, RESOURCE_NAMES
    from rag_eval.metrics.core.registry import builtin_registry
    from rag_eval.orchestration.definitions import defs

    keys = {key.to_user_string() for key in defs.resolve_asset_graph().get_all_asset_keys()}
    assert keys - set(builtin_registry()) == ASSET_NAMES  # a new asset must be added to ASSET_NAMES (and none kept stale)
    assert set(defs.resources) == RESOURCE_NAMES  # a metric `judge` was eval_summary's input loaded as a resource


def test_a_metric_named_like_an_asset_stops_the_cli_and_the_code_location_naming_it(user):
    # `questions` was a Dagster traceback (duplicate asset key); `retriever` broke the code location only.
    folder, env = user
    for name in ("questions", "retriever"):
        (folder / f"{name}.yaml").write_text(f"metrics:\n  - name: {name}\n    kind: aspect_critic\n"
                                             "    fields: [response]\n    prompt: Is it fine?\n", encoding="utf-8")
    done = rag_eval("run", "samples.jsonl", "--custom-metrics", "questions.yaml", "--metrics", "custom",
                    cwd=folder, env=env)
    assert (done.returncode, done.stderr.strip().splitlines()[-1]) == \
        (2, f"error: {folder / 'questions.yaml'}: metric 'questions' (entry 1): field 'name': 'questions' is taken "
            "by an asset")
    assert "Traceback" not in done.stderr
    (folder / "pyproject.toml").write_text('[tool.rag_eval.metrics]\ncustom_metrics = "retriever.yaml"\n',
                                          encoding="utf-8")
    located = rag_eval("import rag_eval.orchestration.definitions", cwd=folder, module="-c", env=env)
    assert located.returncode == 1 and located.stderr.strip().splitlines()[-1] == \
        f"rag_eval.metrics.errors.SettingsError: {folder / 'retriever.yaml'}: metric 'retriever' (entry 1): field " \
        "'name': 'retriever' is taken by an asset"


def plugin(site: Path, name: str, source: str) -> None:
    """An installed distribution ``name`` 1.0 whose entry point ``name`` is the class ``Plugin`` of
    the module ``source`` (written beside it)."""
    (site / f"{name}.py").write_text(source, encoding="utf-8")
    info = site / f"{name}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[{PLUGIN_GROUP}]\n{name} = {name}:Plugin\n", encoding="utf-8")


PLUGIN_SOURCE = """from rag_eval.metrics.core.base import Family, Measured, Metric
class Plugin(Metric):
    name, required_fields, family = {name!r}, ("response",), Family.PLUGIN
    async def measure(self, sample, judge):
        return {returned}
"""


@pytest.mark.parametrize("module, name, message", [
    ("spaced", "my metric; drop", "field 'name': 'my metric; drop' is not a metric name: a lower-case letter, then up "
                                  "to 47 of a-z, 0-9 and _"),
    ("cyclic", "eval_summary", "field 'name': 'eval_summary' is taken by an asset"),
    ("column", "response", "field 'name': 'response' is taken by a column of the per-row outputs"),
])
def test_a_plugins_name_is_checked_like_a_custom_metrics(module, name, message, tmp_path, monkeypatch):
    site = tmp_path / "site"
    site.mkdir()
    plugin(site, module, PLUGIN_SOURCE.format(name=name, returned="Measured(1.0, 'x')"))
    monkeypatch.syspath_prepend(str(site))
    with pytest.raises(ValueError) as caught:
        plugin_metrics()
    assert str(caught.value).startswith(f"plugin entry point '{module} = {module}:Plugin' of {module} 1.0: Plugin: "
                                        f"{message}")


def test_a_plugin_returning_a_bare_float_is_that_rows_judge_error_only(tmp_path, monkeypatch):
    # It used to fail the whole scoring (every metric of the run lost).
    from rag_eval.metrics import OfflineJudge, Status, evaluate

    site = tmp_path / "site"
    site.mkdir()
    plugin(site, "bare", PLUGIN_SOURCE.format(name="bare", returned="0.5 if sample.row == 0 else Measured('1', 'x')"))
    monkeypatch.syspath_prepend(str(site))
    [cls] = plugin_metrics()
    results = evaluate(ROWS[:2], metrics=[cls(), "faithfulness"], judge=OfflineJudge()).results
    mine = results[results["metric"] == "bare"].sort_values("row")
    assert list(mine["status"]) == [Status.JUDGE_ERROR.value] * 2
    assert list(mine["reason"]) == [
        "bare (bare.Plugin): measure returned float, not Measured or NotApplicable",
        "bare (bare.Plugin): measure returned Measured with a str value, not Measured or NotApplicable"]
    assert list(results[results["metric"] == "faithfulness"]["status"]) == [Status.OK.value] * 2


def test_a_plugin_clashing_with_a_custom_metric_says_which(user):
    folder, env = user
    plugin(folder / "site", "helpfulness", PLUGIN_SOURCE.format(name="helpfulness", returned="Measured(1.0, 'x')"))
    done = rag_eval("run", "samples.jsonl", "--custom-metrics", str(EXAMPLE / "custom_metrics.yaml"),
                    cwd=folder, env=env)
    assert (done.returncode, done.stderr.strip().splitlines()[-1]) == (2, (
        "error: plugin entry point 'helpfulness = helpfulness:Plugin' of helpfulness 1.0: Plugin: field 'name': "
        f"'helpfulness' is taken by the custom metric 'helpfulness' of {EXAMPLE / 'custom_metrics.yaml'}"))


def test_an_empty_family_and_an_unknown_metric_are_said_plainly(user):
    folder, env = user
    done = rag_eval("run", "samples.jsonl", "--metrics", "custom", cwd=folder, env=env)
    assert (done.returncode, done.stderr.strip().splitlines()[-1]) == (2, (
        "error: no metric selected: no custom metrics were read (no custom metrics file found: --custom-metrics FILE, "
        "[tool.rag_eval.metrics] custom_metrics of ./pyproject.toml or ./custom_metrics.yaml)"))
    (folder / "empty.yaml").write_text("metrics: []\n", encoding="utf-8")
    done = rag_eval("run", "samples.jsonl", "--metrics", "custom", "--custom-metrics", "empty.yaml",
                    cwd=folder, env=env)
    assert done.stderr.strip().splitlines()[-1] == \
        f"error: no metric selected: no custom metrics were read ({folder / 'empty.yaml'} defines none)"
    done = rag_eval("run", "samples.jsonl", "--metrics", "helpfulness", cwd=folder, env=env)
    assert done.returncode == 2 and done.stderr.strip().splitlines()[-1].startswith(
        "error: unknown metric 'helpfulness'; known: faithfulness, ")  # not wrapped in quotes


def test_offline_calibration_of_custom_metrics_says_why_nothing_was_scored(user):
    folder, env = user
    done = rag_eval("calibrate", str(EXAMPLE / "labels.jsonl"), "--offline", "--json", "report.json",
                    "--custom-metrics", str(EXAMPLE / "custom_metrics.yaml"), cwd=folder, env=env)
    assert done.returncode == 0, done.stderr
    why = ("not_applicable: helpfulness is a custom aspect_critic metric: it needs an LLM judge endpoint (set "
           "OPENAI_BASE_URL or pass --base-url); the offline judge has no rule for it")
    assert f"helpfulness (per-sample, n=21): no sample scored: 21 {why}" in done.stdout.splitlines()
    report = json.loads((folder / "report.json").read_text(encoding="utf-8"))["metrics"]["helpfulness"]
    assert (report["unscored"], report["unscored_reasons"]) == (21, {why: 21})


@pytest.mark.parametrize("name", ["config", "context", "type", "class", "lambda"])
def test_a_word_dagster_refuses_is_refused_at_load_time(name, tmp_path):
    # `config` or `class` loaded, then the code location failed: "not a valid name in Dagster".
    import dagster as dg

    from rag_eval.metrics.core.custom import load_custom_metrics

    with pytest.raises(dg.DagsterInvalidDefinitionError, match="not a valid name in Dagster"):
        dg.asset(name=name)(lambda: None)
    path = tmp_path / "custom_metrics.yaml"
    path.write_text(f"metrics:\n  - {{name: {name}, kind: aspect_critic, fields: [response], prompt: ok}}\n",
                    encoding="utf-8")
    with pytest.raises(ValueError) as caught:
        load_custom_metrics(path)
    assert str(caught.value) == f"{path}: metric '{name}' (entry 1): field 'name': '{name}' is a word Dagster " \
                                "reserves (its own or a Python keyword)"


def test_a_broken_custom_metrics_file_in_the_working_directory_says_where_it_was_found(user):
    folder, env = user
    (folder / "custom_metrics.yaml").write_text("metrics: [helpfulness]\n", encoding="utf-8")
    done = rag_eval("run", "samples.jsonl", cwd=folder, env=env)
    assert (done.returncode, done.stderr.strip().splitlines()[-1]) == (2, (
        f"error: {folder / 'custom_metrics.yaml'}: entry 1: expected a metric definition (name, kind, fields, "
        "prompt...), got 'helpfulness' (every rag-eval command reads ./custom_metrics.yaml when there is one: fix it, "
        "or name another file with --custom-metrics or [tool.rag_eval.metrics] custom_metrics in ./pyproject.toml)"))


def test_every_command_that_scores_takes_the_custom_metrics_file():
    from rag_eval.orchestration.cli import build_parser

    for command in (["run", "data.jsonl"], ["backfill"], ["calibrate", "labels.jsonl"], ["sweep", "sweep.toml"]):
        args = build_parser().parse_args([*command, "--custom-metrics", "mine.yaml"])
        assert args.custom_metrics == "mine.yaml", command


def test_an_offline_run_of_a_custom_metric_says_why_it_measured_nothing(user):
    folder, env = user
    done = rag_eval("run", "samples.jsonl", "--custom-metrics", str(EXAMPLE / "custom_metrics.yaml"),
                    "--metrics", "faithfulness,helpfulness", cwd=folder, env=env)
    assert done.returncode == 0, done.stderr
    notes = [line for line in done.stderr.splitlines() if line.startswith("note: ")]
    # Before: "helpfulness — — ≥ 0.5 0/3" in the table and not a word why.
    assert notes == ["note: helpfulness: not applicable on all 3 rows: helpfulness is a custom aspect_critic metric: "
                     "it needs an LLM judge endpoint (set OPENAI_BASE_URL or pass --base-url); the offline judge has "
                     "no rule for it"]
    assert "PreviewWarning" not in done.stderr
