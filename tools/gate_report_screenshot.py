"""Build the regression gate's report.html for the examples and screenshot it in headless Chromium.

Not part of CI. Needs Debian's Chromium (`apt-get install chromium`). Offline: three versions of
`examples/gate` (the baseline, half of the candidate's damage, the candidate) are evaluated with the
offline judge into a temporary out/ folder, the candidate is gated against the baseline (tagged
`production`), and the page is loaded from the file with networking disabled:

    .venv/bin/python tools/gate_report_screenshot.py [--out docs/gate_report.png]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main() -> int:
    from rag_eval.metrics import evaluate
    from rag_eval.metrics.stats.gate import GateConfig, Version, history, run_comparison, write_reports
    from rag_eval.metrics.judges.offline import OfflineJudge

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(REPO / "docs" / "gate_report.png"))
    parser.add_argument("--window-size", default="1240,1850")
    args = parser.parse_args()
    base = [json.loads(line) for line in (REPO / "examples/gate/baseline/samples.jsonl").read_text().splitlines()]
    worse = [json.loads(line) for line in (REPO / "examples/gate/candidate/samples.jsonl").read_text().splitlines()]
    half = [w if i % 8 == 0 else b for i, (b, w) in enumerate(zip(base, worse))]
    judge = OfflineJudge()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        keys = ["20261101T020000Z-fiqa-3f0a9c21", "20261102T020000Z-fiqa-8b41d07e", "20261103T020000Z-fiqa-c95e2a14"]
        for key, rows in zip(keys, (base, half, worse)):
            (out / key).mkdir(parents=True)
            evaluate(rows, judge=judge).results.to_parquet(out / key / "results.parquet")
        import pandas as pd

        sides = [Version(k, pd.read_parquet(out / k / "results.parquet")) for k in (keys[0], keys[2])]
        config = GateConfig(baseline="tag:production")
        comparison, notes = run_comparison(*sides, config, judge)
        paths = write_reports(comparison, notes, out / keys[2], history(out, *sides))
        print(paths["md"].read_text())
        profile = Path(tmp) / "chromium-profile"
        subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                        "--disable-background-networking", "--disable-component-update", "--disable-sync",
                        f"--user-data-dir={profile}", "--hide-scrollbars", f"--window-size={args.window_size}",
                        f"--screenshot={args.out}", paths["html"].as_uri()], check=True, timeout=180,
                       capture_output=True)
    print(f"screenshot: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
