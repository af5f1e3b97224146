"""The pipeline tests' temporary project; every test here runs Dagster (marked ``pipeline``, ``slow``)."""
import functools
import json
import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import dagster as dg
import duckdb
import pandas as pd
import pytest

from rag_eval.assets.resources import JudgeResource, build_resources
from rag_eval.assets.summary import SCOPE_TAG
from rag_eval.orchestration.definitions import defs

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
        from rag_eval.assets.graph import asset_graph
        from rag_eval.metrics.core.registry import builtin_registry

        return dg.materialize(asset_graph(builtin_registry()), selection=selection, partition_key=version, instance=self.instance,
                              resources=self.resources, **kwargs)

    def query(self, sql: str) -> pd.DataFrame:
        """``sql`` on the views of the results database, as a user runs it."""
        with duckdb.connect(str(self.database), read_only=True) as connection:
            return connection.sql(sql).df()


class Nights:
    """The daemon's automation condition sensor, evaluated just after each night's tick of the
    default cron (``0 2 * * *`` UTC), from tomorrow on: :meth:`next` gives what the night
    requests, :meth:`run` runs it as the sensor's run would (tagged summary scope ``version``)."""

    def __init__(self, instance: dg.DagsterInstance) -> None:
        self.instance, self.cursor = instance, None
        self.night = datetime.now(timezone.utc).replace(hour=2, minute=0, second=30, microsecond=0)

    def next(self, definitions: dg.Definitions = defs) -> dict[str, set[str]]:
        """``{version: assets requested}`` by the next night's evaluation of ``definitions``' conditions."""
        self.night += timedelta(days=1)
        # Dagster's tester writes its cursor reading the dynamic partitions again for each subset (4,000 queries,
        # ~50 s here; the daemon's sensor reads them once a tick): read once for the evaluation, as the sensor does.
        self.instance.get_dynamic_partitions = functools.cache(type(self.instance).get_dynamic_partitions.__get__(
            self.instance))
        try:
            result = dg.evaluate_automation_conditions(defs=definitions, instance=self.instance, cursor=self.cursor,
                                                       evaluation_time=self.night)
        finally:
            del self.instance.get_dynamic_partitions
        self.cursor, requested = result.cursor, {}
        for spec in definitions.resolve_all_asset_specs():
            for version in result.get_requested_partitions(spec.key):
                requested.setdefault(version, set()).add(spec.key.to_user_string())
        return requested

    def run(self, project: "Project", version: str, assets: set[str]):
        return project.materialize(version, sorted(assets), tags={SCOPE_TAG: "version"}, raise_on_error=False)


def materialized(result) -> set[str]:
    """The asset keys a run materialized."""
    return {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()}


def sweep_cli(folder: Path, *extra: str) -> subprocess.CompletedProcess:
    """``rag-eval sweep sweep.toml`` in ``folder``, offline, its own DAGSTER_HOME under ``folder``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "EMBEDDING_"))}
    env.update(DAGSTER_HOME=str(folder / "home"), PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "rag_eval.orchestration.cli", "sweep", "sweep.toml", *extra], cwd=folder,
                          env=env, capture_output=True, text=True, timeout=300)
