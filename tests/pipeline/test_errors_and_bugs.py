"""What a user can fix is one ``error: ...`` line and exit status 2; a bug is "internal error", its
traceback and a line asking for a bug report, exit status 70 (``rag_eval.orchestration.failures``,
issue 36 part 4). A bug inside a metric's scorer stays that row's error, its traceback in the row's
details (tests/metrics/test_scoring.py)."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rag_eval.metrics.errors import EXIT_INTERNAL, EXIT_USER

ROOT = Path(__file__).resolve().parents[2]
FIQA = ROOT / "examples" / "fiqa" / "samples.jsonl"
SECRET = "sk-bug-report-must-not-show-this-key"


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A folder with a three-line dataset ``s.jsonl``, the working directory, its own DAGSTER_HOME."""
    (tmp_path / "s.jsonl").write_text("".join(FIQA.read_text(encoding="utf-8").splitlines(True)[:3]),
                                      encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("RAG_EVAL_CUSTOM_METRICS", raising=False)
    return tmp_path


def test_a_bug_in_the_summary_step_is_an_internal_error_with_its_traceback(project, server, monkeypatch, capsys):
    from rag_eval.assets import summary
    from rag_eval.orchestration import cli

    monkeypatch.setenv("OPENAI_API_KEY", SECRET)

    def broken(*args, **kwargs):
        settings = {"judge": "judge-test"}
        return settings[f"api_key {SECRET}"]  # a bug: a key that is not there (its message holds the key)

    monkeypatch.setattr(summary, "_summarize", broken)
    status = cli.main(["run", "s.jsonl", "--dataset-version", "v1", "--metrics", "faithfulness",
                       "--base-url", server.url, "--model", "judge-test"])
    err = capsys.readouterr().err
    assert status == EXIT_INTERNAL == 70
    lines = err.splitlines()
    head = next(line for line in lines if line.startswith("internal error: "))
    assert head == "internal error: KeyError: 'api_key [redacted]' (in step eval_summary)"
    assert "Traceback" in err or "File " in err  # Dagster's record of the step's stack
    assert 'in broken\n    return settings[f"api_key {SECRET}"]' in err  # the frame of the bug, as Dagster kept it
    assert lines[-1].startswith("this is a bug in rag-eval, not a problem with your input or settings: please "
                                "report it")
    assert SECRET not in err
    assert not [line for line in lines if line.startswith(("error:", "step eval_summary failed"))]
    # What was computed before the bug is kept: faithfulness's table of the version, its judgements in the cache.
    assert (project / "out" / "tables" / "faithfulness" / "v1.parquet").is_file()
    assert len(server.chat_requests()) > 0
    assert "dataset version v1 was not kept (its first run failed)" in err


def test_a_bug_outside_any_step_is_an_internal_error_with_its_traceback(project, monkeypatch, capsys):
    from rag_eval.orchestration import cli, commands

    def broken(settings):
        return {"out": settings.paths.out}["folder"]  # a bug in the command's own code

    monkeypatch.setattr(commands, "check_out", broken)
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    assert cli.main(["run", "s.jsonl", "--dataset-version", "v1"]) == EXIT_INTERNAL
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "internal error: KeyError: 'folder'"
    assert err[1] == "Traceback (most recent call last):"
    assert '    return {"out": settings.paths.out}["folder"]  # a bug in the command\'s own code' in err
    assert err[-2] == "KeyError: 'folder'" and err[-1].startswith("this is a bug in rag-eval")
    assert not (project / "datasets").exists()  # nothing registered


@pytest.mark.parametrize("argv, line", [
    (["run", "missing.jsonl"], "error: dataset file not found: missing.jsonl"),
    (["run", "s.jsonl", "--max-rejected-share", "1.5"],
     "error: --max-rejected-share 1.5: give a share between 0 and 1"),
    (["run", "s.jsonl", "--metrics", "faithfulness,helpfulness"],
     "error: unknown metric 'helpfulness'; known: "),
    (["run", "s.jsonl", "--custom-metrics", "bad.yaml"],
     "error: {root}/bad.yaml: metric 'helpfulness' (entry 1): field 'kind': missing (aspect_critic, rubric, discrete "
     "or numeric)"),
    (["run", "s.jsonl", "--custom-metrics", "absent.yaml"], "error: custom metrics file {root}/absent.yaml: not found"),
])
def test_a_user_error_is_one_line_and_status_2(argv, line, project):
    # A process of its own each (as a user runs it): a process loads one custom metrics file.
    (project / "bad.yaml").write_text("metrics:\n  - name: helpfulness\n    fields: [response]\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "RAG_EVAL_"))}
    done = subprocess.run([sys.executable, "-m", "rag_eval.orchestration.cli", *argv], cwd=project, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == EXIT_USER == 2, done.stderr[-3000:]
    assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith(line.format(root=project)), \
        done.stderr[-3000:]
    assert not (project / "datasets").exists()


@pytest.mark.parametrize("url, line", [
    (None, "error: the Dagster instance {home}/dagster.yaml: it reads the environment variable DAGSTER_POSTGRES_URL, "
           "which is not set"),
    ("not a url", "error: the Dagster instance {home}/dagster.yaml: its database cannot be used: Could not parse "
                  "SQLAlchemy URL from given URL string (check the URL it reads"),
    ("wrong password", "error: the Dagster instance {home}/dagster.yaml: its database cannot be used (after "),
    # The attack review's: the usual URL without the driver, a port that is no number, an unescaped @ in the
    # password (the driver takes what follows it for the host, and says so).
    ("postgresql://u:pw-4471@127.0.0.1:1/db", "error: the Dagster instance {home}/dagster.yaml: its database URL needs "
     "the driver psycopg, which is not installed: for PostgreSQL write postgresql+psycopg2://USER:PASSWORD@HOST/DB"),
    ("postgresql+psycopg2://u:pw-4471@[::1:1/db", "error: the Dagster instance {home}/dagster.yaml: its database URL "
     "cannot be read: "),
    ("postgresql+psycopg2://u:S3cret@PW-4471@nohost.invalid:5432/db", "error: the Dagster instance "
     "{home}/dagster.yaml: its database cannot be used (after "),
])
def test_postgresql_settings_that_cannot_work_are_one_line_and_status_2(url, line, project, postgres):
    """The production instance (deploy/postgres/dagster.yaml) with its variable unset, a URL that is not one, or a
    password the server refuses (after dagster-postgres' retries, which print nothing): one line, status 2, the
    password in it nowhere."""
    database = postgres.database()
    home = project / "home"
    home.mkdir()
    (home / "dagster.yaml").write_bytes((ROOT / "deploy" / "postgres" / "dagster.yaml").read_bytes())
    wrong = database.url.replace(database.password, "not-" + database.password)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "RAG_EVAL_", "DAGSTER_POSTGRES"))}
    env.update({} if url is None else {"DAGSTER_POSTGRES_URL": wrong if url == "wrong password" else url},
               DAGSTER_HOME=str(home))
    done = subprocess.run([sys.executable, "-m", "rag_eval.orchestration.cli", "register", "s.jsonl"], cwd=project,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == EXIT_USER, done.stderr[-3000:]
    assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith(line.format(home=home)), done.stderr[-3000:]
    if url == "wrong password":
        assert 'password authentication failed for user "' in done.stderr
    assert database.password not in done.stdout + done.stderr
    assert not {"pw-4471", "S3cret", "PW-4471"} & set(re.split(r"[\s:@\"/]+", done.stderr))
    assert not (project / "datasets").exists()
