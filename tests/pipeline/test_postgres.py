"""The production instance (deploy/postgres/dagster.yaml) on a database of its own, with a password,
of the tests' PostgreSQL server (the ``postgres`` fixture); the daemon's deployment on it is
tests/pipeline/test_deployment.py's PostgreSQL case."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
FIQA_LINES = (ROOT / "examples" / "fiqa" / "samples.jsonl").read_text(encoding="utf-8").splitlines()


def test_the_production_instance_differs_from_the_projects_by_its_storage_only():
    production = yaml.safe_load((ROOT / "deploy" / "postgres" / "dagster.yaml").read_text(encoding="utf-8"))
    local = yaml.safe_load((ROOT / "dagster_home" / "dagster.yaml").read_text(encoding="utf-8"))
    assert production.pop("storage") == {"postgres": {"postgres_url": {"env": "DAGSTER_POSTGRES_URL"}}}
    assert production == local


@pytest.fixture(scope="module")
def server(postgres):
    """The instance's database: ``.url`` (with the password) and ``.password``."""
    return postgres.database()


def test_rag_eval_run_on_the_postgres_instance_is_up_to_date_the_second_time(server, tmp_path):
    """`rag-eval run` materializes in its own process on the PostgreSQL instance, reads back what it
    recorded to find the version up to date, and writes the password nowhere."""
    (tmp_path / "home").mkdir()
    shutil.copyfile(ROOT / "deploy" / "postgres" / "dagster.yaml", tmp_path / "home" / "dagster.yaml")
    dataset = tmp_path / "tiny.jsonl"
    dataset.write_text("\n".join(FIQA_LINES[:3]) + "\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "DAGSTER_"))}
    env.update(DAGSTER_HOME=str(tmp_path / "home"), DAGSTER_POSTGRES_URL=server.url, PYTHONPATH=str(ROOT))
    command = [sys.executable, "-m", "rag_eval.orchestration.cli", "run", str(dataset), "--dataset-version", "tiny-v1"]
    first, second = (subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
                     for _ in range(2))
    assert first.returncode == 0, first.stderr[-3000:]
    assert "faithfulness" in first.stdout and "3/3" in first.stdout
    assert second.returncode == 0 and "dataset version tiny-v1 is up to date" in second.stderr, second.stderr[-3000:]
    assert not list((tmp_path / "home").rglob("*.db"))  # runs and events in PostgreSQL, no SQLite file
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert server.password not in first.stdout + first.stderr + second.stdout + second.stderr
    assert not [p for p in written if server.password.encode() in p.read_bytes()]
