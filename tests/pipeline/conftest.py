"""The pipeline tests' temporary project; every test here runs Dagster (marked ``pipeline``, ``slow``)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import duckdb
import pandas as pd
import pytest

from assets.resources import JudgeResource, build_resources
from orchestration.definitions import defs

ROOT = Path(__file__).resolve().parents[2]


def pytest_collection_modifyitems(items):
    for item in items:
        if "pipeline" in Path(item.fspath).parts:
            item.add_marker(pytest.mark.pipeline)
            item.add_marker(pytest.mark.slow)


class Project:
    """A temporary project: datasets/, out/ with the DuckDB file, an instance, resources."""

    def __init__(self, root: Path, instance: dg.DagsterInstance, judge: JudgeResource | None = None) -> None:
        self.datasets, self.out, self.instance = root / "datasets", root / "out", instance
        self.resources = build_resources(self.out, self.datasets, judge)
        self.database = self.out / "rag_eval.duckdb"

    def write(self, version: str, rows: list[dict], register: bool = True) -> None:
        folder = self.datasets / version
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "samples.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
        if register and not self.instance.has_dynamic_partition("dataset_version", version):
            self.instance.add_dynamic_partitions("dataset_version", [version])

    def run(self, version: str, job: str = "evaluation_job", **kwargs):
        return defs.resolve_job_def(job).execute_in_process(partition_key=version, instance=self.instance,
                                                            resources=self.resources, raise_on_error=False, **kwargs)

    def materialize(self, version: str, selection, **kwargs):
        from assets.evaluation import metric_assets
        from assets.gate import baseline_comparison
        from assets.ingestion import ingest_dataset
        from assets.labels import human_labels, label_estimates
        from assets.quality_check import great_expectations_suite
        from assets.summary import summary_asset

        return dg.materialize([ingest_dataset, great_expectations_suite, *metric_assets(), summary_asset(), human_labels,
                               label_estimates, baseline_comparison], selection=selection,
                              partition_key=version, instance=self.instance, resources=self.resources, **kwargs)

    def query(self, sql: str) -> pd.DataFrame:
        # The same connection settings as the IO manager: DuckDB refuses a second configuration in one process.
        with duckdb.connect(str(self.database), config={"custom_user_agent": "dagster",
                                                        "arrow_large_buffer_size": True}) as connection:
            return connection.sql(sql).df()


def materialized(result) -> set[str]:
    """The asset keys a run materialized."""
    return {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()}


def sweep_cli(folder: Path, *extra: str) -> subprocess.CompletedProcess:
    """``rag-eval sweep sweep.toml`` in ``folder``, offline, its own DAGSTER_HOME under ``folder``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "EMBEDDING_"))}
    env.update(DAGSTER_HOME=str(folder / "home"), PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "orchestration.cli", "sweep", "sweep.toml", *extra], cwd=folder,
                          env=env, capture_output=True, text=True, timeout=300)
