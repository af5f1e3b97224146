"""The deployment path: processes the way Dagster starts them, not in-process materialization."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_quality_suite_runs_where_main_has_no_file():
    """Dagster's run workers (multiprocessing spawn) and `python -c` have a __main__ without a
    file; great-expectations imports pyspark.sql.connect, which then exited the process with
    status 0 ("Skipping doctests") unless pyspark's connect requirements are installed."""
    code = ("import pandas as pd; from assets.quality import validate; "
            "from metrics.samples import load_samples, samples_to_frame; "
            f"frame = samples_to_frame(load_samples({str(ROOT / 'examples' / 'fiqa' / 'samples.jsonl')!r})); "
            "failures, stats = validate(frame, ['user_input', 'response']); "
            "print('validated', len(frame), stats['success_percent'], len(failures))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert "Skipping doctests" not in done.stderr
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [line for line in done.stdout.splitlines() if line.startswith("validated")]
    rows = sum(1 for line in (ROOT / "examples" / "fiqa" / "samples.jsonl").read_text().splitlines() if line.strip())
    assert lines == [f"validated {rows} 100.0 0"]
