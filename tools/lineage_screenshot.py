"""Start `dagster dev` on 127.0.0.1, screenshot the asset lineage in headless Chromium, stop it.

Not part of CI. Needs Debian's Chromium (`apt-get install chromium`). Run from the repo
root after `make run`, so the instance has a materialized partition:

    .venv/bin/python tools/lineage_screenshot.py [--out docs/lineage.png] [--port 3333]

`dagster dev` started from a non-interactive shell inherits ignored SIGINT/SIGTERM, so it
is started in its own session with both signals reset, and stopped by its process group.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _reset_signals() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


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
        return json.load(response)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(REPO / "docs" / "lineage.png"))
    parser.add_argument("--port", type=int, default=3333)
    parser.add_argument("--page", default="/asset-groups")  # the global lineage, one box per group
    args = parser.parse_args()
    url = f"http://127.0.0.1:{args.port}"
    env = dict(os.environ, DAGSTER_HOME=str(REPO / "dagster_home"))
    server = subprocess.Popen([str(REPO / ".venv" / "bin" / "dagster"), "dev", "-w", "workspace.yaml", "-h",
                               "127.0.0.1", "-p", str(args.port)], cwd=REPO, env=env, start_new_session=True,
                              preexec_fn=_reset_signals, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_ready(url, 120)
        graphql(url, "mutation { setNuxSeen }")  # the "Join the community" modal, once per instance
        assets = graphql(url, "{ assetNodes { assetKey { path } } }")["data"]["assetNodes"]
        print("assets:", sorted("/".join(a["assetKey"]["path"]) for a in assets))
        subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                        "--disable-background-networking", "--disable-component-update", "--disable-sync",
                        f"--user-data-dir={Path(args.out).parent / '.chromium-profile'}", "--hide-scrollbars",
                        "--window-size=1500,1500", "--virtual-time-budget=25000", f"--screenshot={args.out}",
                        f"{url}{args.page}"], check=True, timeout=180, capture_output=True)
        print(f"screenshot: {args.out}")
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
