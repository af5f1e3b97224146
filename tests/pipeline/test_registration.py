"""Registering dataset versions: one rule for the CLI and the sensor, safe under concurrency,
and files and stores that cannot be used refused with a message before anything is registered."""
import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from rag_eval.assets.registration import RegistrationError, register_version
from rag_eval.assets.resources import DatasetStore
from rag_eval.orchestration import cli
from rag_eval.orchestration.definitions import defs

ROOT = Path(__file__).resolve().parents[2]
FIQA_LINES = (ROOT / "examples" / "fiqa" / "samples.jsonl").read_text(encoding="utf-8").splitlines()


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A project folder as the working directory, with its own Dagster instance."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    return tmp_path


def write(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def partitions() -> list[str]:
    return dg.DagsterInstance.get().get_dynamic_partitions("dataset_version")


def test_two_files_of_the_same_name_get_keys_unique_per_content(home, capsys):
    first = write(home / "a" / "data.jsonl", FIQA_LINES[:1])
    second = write(home / "b" / "data.jsonl", FIQA_LINES[1:2])
    assert cli.main(["register", str(first)]) == 0 and cli.main(["register", str(second)]) == 0
    by_suffix = {key[-8:]: key for key in partitions()}
    assert len(by_suffix) == 2
    for source in (first, second):
        key = by_suffix[hashlib.sha256(source.read_bytes()).hexdigest()[:8]]
        assert key[8] == "T" and key[15:].startswith("Z-data-")  # <UTC time>-<name>-<content hash>
        assert (home / "datasets" / key / "samples.jsonl").read_bytes() == source.read_bytes()
    # The same content again is the same version.
    assert cli.main(["register", str(first)]) == 0
    assert "already registered" in capsys.readouterr().out and len(partitions()) == 2


def test_a_file_rewritten_within_one_mtime_tick_is_compared_by_its_bytes(home):
    """Content is compared byte for byte every time, in one long-lived process too: a file
    rewritten at the same size and modification time is other content (a comparison cached on
    size and mtime, as ``filecmp.cmp``'s, would call it the same and keep the old file)."""
    instance, store = dg.DagsterInstance.get(), DatasetStore(root=str(home / "datasets"))
    source = write(home / "data.jsonl", FIQA_LINES[:1])
    assert register_version(instance, store, source, "v1") == ("v1", True)
    assert register_version(instance, store, source, "v1") == ("v1", False)  # the same bytes: reused
    stat, text = source.stat(), source.read_text(encoding="utf-8")
    source.write_text(text[:-3] + ("x" if text[-3] != "x" else "y") + text[-2:], encoding="utf-8")  # one byte other
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert source.stat().st_size == stat.st_size and source.stat().st_mtime_ns == stat.st_mtime_ns
    with pytest.raises(RegistrationError, match="already exists with other content"):
        register_version(instance, store, source, "v1")
    assert register_version(instance, store, source, "v1", replace=True) == ("v1", False)
    assert store.samples_path("v1").read_bytes() == source.read_bytes()
    assert register_version(instance, store, source) == ("v1", False)  # without a key: the version with its bytes
    assert [p.name for p in (home / "datasets").iterdir()] == ["v1"]  # no staging folder left behind


def test_concurrent_registrations_of_one_key_are_atomic(home):
    instance = dg.DagsterInstance.get()
    store = DatasetStore(root=str(home / "datasets"))
    files = [write(home / f"in{i}" / "samples.jsonl", [FIQA_LINES[i]]) for i in range(6)]
    barrier, outcomes = threading.Barrier(len(files)), []

    def register(path: Path) -> None:
        barrier.wait()
        try:
            outcomes.append(("ok", path, register_version(instance, store, path, "shared-key")))
        except RegistrationError as exc:
            outcomes.append(("refused", path, str(exc)))

    threads = [threading.Thread(target=register, args=(f,)) for f in files]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    [winner] = [o for o in outcomes if o[0] == "ok"]
    assert winner[2] == ("shared-key", True)
    refused = [o for o in outcomes if o[0] == "refused"]
    assert len(refused) == len(files) - 1
    assert all("already exists with other content" in message for _, _, message in refused)
    assert store.samples_path("shared-key").read_bytes() == winner[1].read_bytes()
    assert partitions() == ["shared-key"] and store.versions() == ["shared-key"]


def test_unusable_datasets_and_out_are_usage_errors_that_register_nothing(home, capsys):
    empty = write(home / "empty.jsonl", ["", "   "])
    assert cli.main(["register", str(empty)]) == 2
    assert "is empty" in capsys.readouterr().err
    folder = home / "some-folder"
    folder.mkdir()
    assert cli.main(["register", str(folder)]) == 2
    err = capsys.readouterr().err
    assert "is a folder" in err and "not found" not in err
    dataset = write(home / "ok.jsonl", FIQA_LINES[:1])
    (home / "out-file").write_text("not a folder")
    assert cli.main(["run", str(dataset), "--out", str(home / "out-file")]) == 2
    err = capsys.readouterr().err
    assert "--out" in err and "is a file" in err
    assert partitions() == [] and DatasetStore().versions() == []
    # A folder holding samples.jsonl is a dataset.
    write(folder / "samples.jsonl", FIQA_LINES[:1])
    assert cli.main(["register", str(folder)]) == 0 and len(partitions()) == 1


def test_a_results_database_held_by_a_duckdb_session_neither_stops_a_run_nor_is_waited_for_table_by_table(home,
                                                                                                        capsys):
    """Runs never write rag_eval.duckdb but to add views: held by a user's DuckDB session, the run
    stores its results in their files, names the holder once, and the next run adds the views."""
    database = home / "out" / "rag_eval.duckdb"
    database.parent.mkdir()
    duckdb.connect(str(database)).close()
    holder = subprocess.Popen([sys.executable, "-c", "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); "
                               "print('held', flush=True); time.sleep(300)", str(database)],
                              stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert cli.main(["run", str(write(home / "a.jsonl", FIQA_LINES[:2])), "--dataset-version", "a"]) == 0
    finally:
        os.killpg(holder.pid, signal.SIGKILL)
        holder.wait(timeout=10)
    err = capsys.readouterr().err
    # Named once for the whole run (not waited for again at each of its 13 tables).
    assert err.count(f"results database {database} is held by PID {holder.pid}") == 1
    assert (home / "out" / "tables" / "faithfulness" / "a.parquet").is_file()
    assert cli.main(["run", str(write(home / "b.jsonl", FIQA_LINES[2:3])), "--dataset-version", "b"]) == 0
    with duckdb.connect(str(database), read_only=True) as connection:
        counts = connection.sql("select version, count(*) from eval.faithfulness group by 1 order by 1").fetchall()
    assert counts == [("a", 2), ("b", 1)]


def test_a_damaged_results_database_is_set_aside_named_and_made_again(home, capsys):
    database = home / "out" / "rag_eval.duckdb"
    database.parent.mkdir()
    database.write_bytes(b"not a duckdb file" * 100)
    assert cli.main(["run", str(write(home / "a.jsonl", FIQA_LINES[:1])), "--dataset-version", "a"]) == 0
    err = capsys.readouterr().err
    [aside] = database.parent.glob("rag_eval.duckdb.unusable-*Z")
    assert err.count(f"results database {database} is damaged (not a DuckDB file): set aside as {aside.name}") == 1
    assert aside.read_bytes() == b"not a duckdb file" * 100  # kept as it was, for whoever wants to look
    assert len(list((home / "out" / "tables").rglob("a.parquet"))) == 16  # 7 ingestion tables, 5 metrics, summary, labels, estimates, gate
    with duckdb.connect(str(database), read_only=True) as connection:  # made again, its views over the tables
        assert connection.sql("select count(*) from eval.faithfulness").fetchall() == [(1,)]


def test_meta_is_registered_and_shown_on_the_summary(home, capsys):
    dataset = write(home / "run1" / "samples.jsonl", FIQA_LINES[:2])
    (home / "run1" / "meta.json").write_text(json.dumps({"retriever": "bm25-v2", "generator": "gpt-4o-mini"}))
    assert cli.main(["register", str(dataset), "--dataset-version", "with-meta"]) == 0  # the meta.json beside it
    assert json.loads((home / "datasets" / "with-meta" / "meta.json").read_text())["retriever"] == "bm25-v2"
    other = write(home / "m.json", ['{"retriever": "dense-v3", "generator": "llama-3-8b"}'])
    assert cli.main(["register", str(dataset), "--dataset-version", "with-meta", "--meta", str(other)]) == 0
    assert cli.main(["run", str(dataset), "--dataset-version", "with-meta", "--metrics", "faithfulness",
                     "--meta", str(other)]) == 0
    record = dg.DagsterInstance.get().fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey("eval_summary"), asset_partitions=["with-meta"]), limit=1)
    metadata = record.records[0].asset_materialization.metadata
    assert metadata["retriever"].value == "dense-v3" and metadata["generator"].value == "llama-3-8b"
    bad = write(home / "bad.json", ["[1, 2]"])
    assert cli.main(["register", str(dataset), "--meta", str(bad)]) == 2
    assert "JSON object" in capsys.readouterr().err


def test_a_first_run_that_failed_leaves_no_version_behind(home, capsys):
    dataset = write(home / "broken.jsonl", ['"a string, not an object"', "[1, 2, 3]", "42"])
    assert cli.main(["run", str(dataset)]) == 1
    assert "was not kept" in capsys.readouterr().err
    assert partitions() == [] and DatasetStore().versions() == []


def test_sensor_gives_a_dropped_folder_a_key_that_sorts_by_time(tmp_path):
    store = DatasetStore(root=str(tmp_path / "datasets"))
    content = write(tmp_path / "datasets" / "fiqa-new" / "samples.jsonl", FIQA_LINES[:2]).read_bytes()
    write(tmp_path / "datasets" / ".staging-half-written" / "samples.jsonl", FIQA_LINES[:1])
    with dg.instance_for_test() as instance:
        context = dg.build_sensor_context(instance=instance, definitions=defs, resources={"dataset_store": store})
        outcome = defs.resolve_sensor_def("new_dataset_versions")(context)
    [request] = outcome.run_requests
    key = request.partition_key
    assert key.endswith("-fiqa-new-" + hashlib.sha256(content).hexdigest()[:8]) and key[8] == "T"
    assert outcome.dynamic_partitions_requests[0].partition_keys == [key]
    assert store.versions() == [key] and store.samples_path(key).read_bytes() == content


def at_once(home: Path, env: dict, *arguments: list[str]) -> tuple[list[int], str]:
    """``rag-eval`` with each of ``arguments`` in ``home``, all started at once: their exit statuses and stderr."""
    runs = [subprocess.Popen([sys.executable, "-m", "rag_eval.orchestration.cli", *args], cwd=home, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
            for args in arguments]
    try:
        outputs = [run.communicate(timeout=600) for run in runs]
    finally:
        for run in runs:
            if run.poll() is None:
                os.killpg(run.pid, signal.SIGKILL)
    return [run.returncode for run in runs], "\n".join(err for _, err in outputs)


def test_two_runs_of_one_version_at_once_give_a_clear_message(home):
    dataset = write(home / "same.jsonl", FIQA_LINES[:3])
    env = {**os.environ, "DAGSTER_HOME": str(home / "home")}
    run = ["run", str(dataset), "--dataset-version", "v-same", "--metrics", "faithfulness"]
    codes, errors = at_once(home, env, run, run)
    codes = sorted(codes)
    assert "Traceback" not in errors and "IntegrityError" not in errors, errors[-3000:]
    assert codes == [0, 2], errors[-3000:]
    assert "is being evaluated right now by another rag-eval run (PID" in errors


def test_two_versions_judged_at_once_both_complete_and_lose_nothing(home):
    """Each run stores its versions' tables in files of its own: neither waits for the other
    (no "held by PID"), and every row of both versions is stored and queryable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "DAGSTER_"))}
    env["DAGSTER_HOME"] = str(home / "home")
    files = {version: write(home / f"{version}.jsonl", lines) for version, lines in
             (("v-first", FIQA_LINES[:6]), ("v-second", FIQA_LINES[6:10]))}
    for version, path in files.items():  # the instance exists before the runs (two creating it at once collide)
        assert cli.main(["register", str(path), "--dataset-version", version]) == 0
    codes, errors = at_once(home, env, *(["run", str(path), "--dataset-version", v] for v, path in files.items()))
    assert codes == [0, 0], errors[-3000:]
    assert "held by" not in errors and "Traceback" not in errors
    with duckdb.connect(str(home / "out" / "rag_eval.duckdb"), read_only=True) as connection:
        for table in ("faithfulness", "context_precision", "questions", "eval_summary"):
            counts = connection.sql(f"select version, count(*) from eval.{table} group by 1 order by 1").fetchall()
            assert counts == ([("v-first", 5), ("v-second", 5)] if table == "eval_summary"
                              else [("v-first", 6), ("v-second", 4)]), table


@pytest.mark.parametrize("key", ["tables", "rag_eval.duckdb", "data_docs", "traffic", "tags.json", "previous", "Tables"])
def test_a_key_naming_what_out_or_datasets_hold_besides_versions_is_refused(home, key):
    # The third attacker's: 'tables' wrote the report into out/tables/, 'rag_eval.duckdb' failed after judging.
    store = DatasetStore(root=str(home / "datasets"))
    with pytest.raises(RegistrationError, match=f"dataset version '{key}': a name out/ or datasets/ uses for itself"):
        register_version(dg.DagsterInstance.get(), store, write(home / "s.jsonl", FIQA_LINES[:1]), key)
    assert not (home / "datasets" / key).exists() and partitions() == []


@pytest.mark.parametrize("text", ['{"a": 1e999}', '{"a": NaN}', '{"a": -Infinity}'])
def test_a_meta_file_with_numbers_json_does_not_have_is_refused(home, text):
    # summary.json carries the meta: it held "Infinity", which strict JSON parsers refuse.
    from rag_eval.assets.registration import read_meta

    (home / "meta.json").write_text(text, encoding="utf-8")
    with pytest.raises(RegistrationError, match=r"meta\.json: not JSON \(.* is not a finite number\)"):
        read_meta(home / "meta.json")
