"""Screenshot a tour of the Dagster UI and the two HTML reports into docs/tour/ (docs/tour.md shows them).

Not part of CI. Needs Debian's Chromium (`apt-get install chromium`) and `make setup-dev`; about 5 minutes:

    .venv/bin/python tools/ui_tour.py [--port 3333]
    .venv/bin/python tools/ui_tour.py --page '/assets/faithfulness?view=lineage' --out docs/target_lineage.png

The project is prepared in a temporary copy of the repository's tracked files, so `dagster_home/`, `out/` and
`datasets/` are untouched: `rag-eval run` of the FiQA example, then of the gate's candidate (the gate has two
versions and fails), and two days of example traffic judged by `rag-eval traffic`. `dagster dev` is started on
127.0.0.1 in its own session (from a non-interactive shell it inherits ignored SIGINT/SIGTERM, so both are
reset), each page is loaded in headless Chromium, and the server is stopped by its process group. `--page`
and `--out` take one picture of one UI page instead of the tour.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = REPO / ".venv" / "bin"
# name -> the UI page (formatted with the candidate version and its evaluation_job run) or the report (a path in the project)
TOUR = {"lineage": "/asset-groups",
        "partition": "/assets/eval_summary?view=partitions&partition={version}",
        "checks": "/assets/baseline_comparison?view=checks&checkDetail=no_regression_vs_baseline",
        "automation": "/automation",
        "run": "/runs/{run}",
        "traffic_report": "out/traffic/report.html",
        "gate_report": "out/{version}/report.html"}


def _reset_signals() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def prepare(project: Path, env: dict) -> None:
    """Copy the tracked files into ``project`` and evaluate the examples there (a failed gate or drift exits 4)."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, check=True, capture_output=True, text=True)
    for name in filter(None, files.stdout.split("\0")):
        if (REPO / name).is_file():
            (project / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, project / name)
    for command, ok in ((["rag-eval", "run", "examples/fiqa/samples.jsonl"], {0}),
                        (["rag-eval", "run", "examples/gate/candidate/samples.jsonl"], {4}),
                        (["python", "examples/rag_system/traffic.py", "traces", "--days", "2", "--per-day", "100",
                          "--degrade-from", "2"], {0}),
                        (["rag-eval", "traffic", "traces", "--budget-rows", "60"], {4})):
        print("$", " ".join(command), flush=True)
        status = subprocess.run([str(BIN / command[0]), *command[1:]], cwd=project, env=env).returncode
        if status not in ok:
            raise SystemExit(f"{' '.join(command)} exited {status}, expected {sorted(ok)}")


def wait_ready(url: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/server_info", timeout=2):
                return
        except OSError:
            time.sleep(1)
    raise TimeoutError(f"dagster dev did not answer on {url} within {seconds:.0f} s")


def graphql(url: str, query: str) -> dict:
    request = urllib.request.Request(f"{url}/graphql", data=json.dumps({"query": query}).encode(),
                                     headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)["data"]


def screenshot(target: str, out: Path, profile: Path, window: str) -> None:
    subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    f"--user-data-dir={profile}", "--hide-scrollbars", f"--window-size={window}",
                    "--virtual-time-budget=25000", f"--screenshot={out}", target], check=True, timeout=180,
                   capture_output=True)
    print(f"{out}: {out.stat().st_size // 1024} KB", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=3333)
    parser.add_argument("--window-size", default="1400,900")
    parser.add_argument("--page", help="one UI page (with --out) instead of the tour")
    parser.add_argument("--out", type=Path, help="where --page's picture goes")
    args = parser.parse_args()
    if (args.page is None) != (args.out is None):
        parser.error("--page and --out go together")
    url = f"http://127.0.0.1:{args.port}"
    with tempfile.TemporaryDirectory() as tmp:
        project, profile = Path(tmp) / "project", Path(tmp) / "chromium-profile"
        env = dict(os.environ, DAGSTER_HOME=str(project / "dagster_home"))
        project.mkdir()
        prepare(project, env)
        server = subprocess.Popen([str(BIN / "dagster"), "dev", "-w", "workspace.yaml", "-h", "127.0.0.1", "-p",
                                   str(args.port)], cwd=project, env=env, start_new_session=True,
                                  preexec_fn=_reset_signals, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_ready(url, 180)
            graphql(url, "mutation { setNuxSeen }")  # the "Join the community" modal, once per instance
            if args.page:
                screenshot(url + args.page, args.out, profile, args.window_size)
                return 0
            run = graphql(url, '{ runsOrError(filter: {pipelineName: "evaluation_job"}, limit: 1) '
                               "{ ... on Runs { results { runId tags { key value } } } } }")["runsOrError"]["results"][0]
            version = next(t["value"] for t in run["tags"] if t["key"] == "dagster/partition")
            (REPO / "docs" / "tour").mkdir(exist_ok=True)
            for name, page in TOUR.items():
                page = page.format(version=version, run=run["runId"])
                target = url + page if page.startswith("/") else (project / page).as_uri()
                screenshot(target, REPO / "docs" / "tour" / f"{name}.png", profile, args.window_size)
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
