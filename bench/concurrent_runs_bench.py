"""Two dataset versions judged at once: do both complete, does either wait on a lock, is anything lost?

For two versions of ``--rows`` distinct rows each (the rows of ``pipeline_bench.make_rows``, the
second half of the tiling for the second version), in a fresh project folder (instance, datasets,
out), the bench registers both, then runs ``rag-eval run`` for each, one after the other
(``sequential``) and, in another fresh folder, both at once (``at once``), with the offline judge.
It reports each run's exit status and wall time, the lock waits the runs announced ("held by
PID"), and the rows stored per version in every metric table, read with the SQL a user runs on
``out/rag_eval.duckdb``. ``--repo`` runs another checkout's code (e.g. an export of main, to compare
with the results store it had) with this interpreter. Run from the repo root::

    .venv/bin/python bench/concurrent_runs_bench.py --rows 300
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pipeline_bench import make_rows, write_rows

REPO = Path(__file__).resolve().parents[1]
CORE = ["faithfulness", "answer_relevancy", "context_relevancy", "context_recall", "context_precision"]
VERSIONS = ["20261201T000000Z-first", "20261202T000000Z-second"]


def project(folder: Path, repo: Path, rows: int) -> tuple[dict, list[Path]]:
    """A fresh project in ``folder`` with both versions registered: the environment and the files."""
    folder.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "DAGSTER_", "EMBEDDING_"))}
    env.update(DAGSTER_HOME=str(folder / "home"), PYTHONPATH=str(repo))
    tiled = make_rows(2 * rows)
    files = [write_rows(tiled[i * rows:(i + 1) * rows], folder / f"{v}.jsonl") for i, v in enumerate(VERSIONS)]
    for version, path in zip(VERSIONS, files):  # one at a time: two processes creating one SQLite instance collide
        done = subprocess.run(command(path, version, "register"), cwd=folder, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-2000:]
    return env, files


def command(path: Path, version: str, verb: str = "run") -> list[str]:
    return [sys.executable, "-m", "rag_eval.orchestration.cli", verb, str(path), "--dataset-version", version]


def stored(folder: Path) -> dict[str, dict[str, int]]:
    """``{metric: {version: rows}}`` as a user's SQL on ``out/rag_eval.duckdb`` finds them."""
    import duckdb

    with duckdb.connect(str(folder / "out" / "rag_eval.duckdb"), read_only=True) as connection:
        return {metric: dict(connection.execute(f"select version, count(*) from eval.{metric} group by 1").fetchall())
                for metric in CORE}


def scenario(folder: Path, repo: Path, rows: int, at_once: bool) -> dict:
    env, files = project(folder, repo, rows)
    started, runs = time.perf_counter(), []
    for version, path in zip(VERSIONS, files):
        process = subprocess.Popen(command(path, version), cwd=folder, env=env, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, text=True, start_new_session=True)
        runs.append((process, time.perf_counter()))
        if not at_once:
            runs[-1] = (process, runs[-1][1], process.communicate()[1], time.perf_counter())
    if at_once:
        runs = [(p, start, p.communicate()[1], time.perf_counter()) for p, start in runs]
    wall = time.perf_counter() - started
    return {"wall_s": round(wall, 1), "exit": [p.returncode for p, *_ in runs],
            "run_s": [round(end - start, 1) for _, start, _, end in runs],
            "lock_waits": sum(err.count("is held by PID") for _, _, err, _ in runs),
            "stored": stored(folder), "load": round(os.getloadavg()[0], 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=300, help="distinct rows per version (default 300)")
    parser.add_argument("--repo", type=Path, default=REPO, help="the checkout whose code runs (default this one)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rag-eval-concurrent-") as scratch:
        for name, at_once in (("sequential", False), ("at once", True)):
            result = scenario(Path(scratch) / name.replace(" ", "-"), args.repo.resolve(), args.rows, at_once)
            complete = all(result["stored"][m] == dict.fromkeys(VERSIONS, args.rows) for m in CORE)
            print(f"{name}: {json.dumps(result)}; every row of both versions stored in every metric table: "
                  f"{complete}", flush=True)


if __name__ == "__main__":
    main()
