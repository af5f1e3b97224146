"""rag-eval compare | gate | tag through the command line (subprocess): exit codes, reports, baselines."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
A, B, C = "20261101T000000Z-a", "20261102T000000Z-b", "20261103T000000Z-c"
IDS = [f"q{i:02d}" for i in range(20)]


def results(worse: float = 0.0) -> pd.DataFrame:
    """Faithfulness and context_recall of 20 rows; faithfulness ``worse`` lower on every row."""
    rows = []
    for i, sid in enumerate(IDS):
        for metric, value in (("faithfulness", 0.2 + 0.04 * i - worse), ("context_recall", 0.5)):
            rows.append({"sample_id": sid, "row": i, "metric": metric, "status": "ok", "value": value,
                         "passed": value >= 0.5, "threshold": 0.5, "direction": "higher_is_better",
                         "reason": f"{round(value * 5)}/5 statements supported", "chat_requests": 1,
                         "embedding_requests": 0, "prompt_tokens": 100, "completion_tokens": 20, "cache_hits": 0})
    return pd.DataFrame(rows)


def rag_eval(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env["DAGSTER_HOME"] = str(tmp_path / "dagster_home")
    return subprocess.run([sys.executable, "-m", "rag_eval.orchestration.cli", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def versions(tmp_path):
    """Three evaluated versions under out/: a, b (faithfulness 0.1 worse on every row), c (as a)."""
    for key, worse in ((A, 0.0), (B, 0.1), (C, 0.0)):
        (tmp_path / "out" / key).mkdir(parents=True)
        results(worse).to_parquet(tmp_path / "out" / key / "results.parquet")
    (tmp_path / "gate.toml").write_text('metrics = ["faithfulness", "context_recall"]\n', encoding="utf-8")
    return tmp_path


def test_compare_two_results_files_exits_4_on_a_regression_and_0_without(versions):
    base, cand = f"out/{A}/results.parquet", f"out/{B}/results.parquet"
    failed = rag_eval(versions, "compare", base, cand, "--config", "gate.toml", "--report-dir", "r1")
    assert failed.returncode == 4, failed.stderr
    assert "gate failed: faithfulness regressed: -0.100 [-0.100, -0.100] lies below -0.02" in failed.stderr
    report = (versions / "r1" / "report.md").read_text()
    assert report.splitlines()[0] == f"## Regression gate FAILED: `{cand}` vs baseline `{base}`"
    assert "| faithfulness | q00 | 0.2 → 0.1 | 0/5 statements supported |" in report
    body = json.loads((versions / "r1" / "comparison.json").read_text())
    assert body["passed"] is False and body["metrics"]["faithfulness"]["n"] == 20
    assert body["metrics"]["context_recall"]["verdict"] == "no change detected"
    html = (versions / "r1" / "report.html").read_text()
    # Self-contained: two inline SVG charts, nothing loaded at view time (no link, script, image or URL).
    assert html.count("<svg") == 2 and not re.search(r"<link|<script|<img|(src|href)=\"https?:", html)
    passed = rag_eval(versions, "compare", base, f"out/{C}/results.parquet", "--config", "gate.toml",
                      "--report-dir", "r2")
    assert passed.returncode == 0 and "gate passed" in passed.stdout


def test_gate_takes_the_previous_version_or_a_tag_as_its_baseline(versions):
    latest = rag_eval(versions, "gate", "--config", "gate.toml")  # c vs b: faithfulness improved
    assert latest.returncode == 0, latest.stderr
    assert json.loads((versions / "out" / C / "comparison.json").read_text())["baseline"] == B
    assert json.loads((versions / "out" / C / "comparison.json").read_text())["metrics"]["faithfulness"][
        "verdict"] == "improved"
    unset = rag_eval(versions, "gate", B, "--config", "gate.toml", "--baseline", "tag:production")
    assert unset.returncode == 2 and "baseline tag 'production' is not set" in unset.stderr
    assert rag_eval(versions, "tag", "production", C).returncode == 0
    assert json.loads((versions / "datasets" / "tags.json").read_text()) == {"production": C}
    assert rag_eval(versions, "gate", B, "--config", "gate.toml", "--baseline", "tag:production").returncode == 4
    first = rag_eval(versions, "gate", A, "--config", "gate.toml")
    assert first.returncode == 0 and "no earlier version" in first.stdout


def test_a_new_question_set_after_the_previous_one_is_no_decision_said_so_with_exit_0(versions):
    # d holds other questions (no id of c): the default baseline "previous" is c, nothing can be paired.
    D = "20261104T000000Z-d"
    other = results()
    other["sample_id"] = "new-" + other["sample_id"]
    (versions / "out" / D).mkdir()
    other.to_parquet(versions / "out" / D / "results.parquet")
    gate = rag_eval(versions, "gate", "--config", "gate.toml")
    assert gate.returncode == 0, gate.stderr
    verdict = f"no decision: the candidate shares no row id with baseline {C}; nothing was compared"
    assert verdict in gate.stdout and "gate passed" not in gate.stdout
    # The note says where the setting goes (it said `baseline = "tag:NAME" or a version key per dataset`: where?).
    assert ("note: compare versions of the same questions: name the question set's baseline with --baseline "
            '(tag:NAME or a version key), or set baseline = "tag:NAME" in [tool.rag_eval.gate] of pyproject.toml '
            "(or of the --config file)\n") in gate.stdout
    report = (versions / "out" / D / "report.md").read_text()
    assert report.splitlines()[0] == (f"## Regression gate: no decision: `{D}` shares no row id with baseline `{C}`; "
                                      "nothing was compared")
    body = json.loads((versions / "out" / D / "comparison.json").read_text())
    assert (body["passed"], body["verdict"]) == (True, verdict)
    assert "NO DECISION" in (versions / "out" / D / "report.html").read_text()


def test_a_bad_setting_is_refused_with_exit_2_naming_it(versions):
    (versions / "bad.toml").write_text('metrics = ["faithfulness"]\nmargin = 0.1\n', encoding="utf-8")
    bad = rag_eval(versions, "gate", "--config", "bad.toml")
    assert bad.returncode == 2 and "bad.toml: unknown gate setting(s) ['margin']" in bad.stderr
    # A file is no version: "previous" cannot be resolved for it (rather than taking the latest version).
    loose = rag_eval(versions, "gate", f"out/{B}/results.parquet", "--config", "gate.toml")
    assert loose.returncode == 2
    # The hint names the candidate: `gate --baseline VERSION` as printed would gate the latest version instead.
    assert "has no previous version: name its baseline: `" in loose.stderr
    assert f" gate out/{B}/results.parquet --baseline VERSION`" in loose.stderr


def test_bare_gate_takes_the_latest_registered_version_and_a_tag_names_an_evaluated_one(versions):
    # A sweep's target run ("<question set>.<configuration>") sorts after every time key but has no time:
    # the bare gate still takes c (latest by time) against b, and "previous" of the target run is none.
    sweep_run = "questions-1a2b3c4d.bm25-top_k3"
    (versions / "out" / sweep_run).mkdir()
    results(0.3).to_parquet(versions / "out" / sweep_run / "results.parquet")
    bare = rag_eval(versions, "gate", "--config", "gate.toml", "--report-dir", "r3")
    assert bare.returncode == 0, bare.stderr
    assert json.loads((versions / "r3" / "comparison.json").read_text())["baseline"] == B
    alone = rag_eval(versions, "gate", sweep_run, "--config", "gate.toml")
    assert alone.returncode == 0 and f"no baseline for {sweep_run}" in alone.stdout
    refused = rag_eval(versions, "tag", "production", "20261201T000000Z-nope-00000000")
    assert refused.returncode == 2 and "not an evaluated version" in refused.stderr
    assert not (versions / "datasets" / "tags.json").exists()
    assert rag_eval(versions, "tag", "production", A).returncode == 0


def test_a_long_verdict_is_wrapped_not_cut_at_80_columns(versions):
    only_faithfulness = results()
    only_faithfulness = only_faithfulness[only_faithfulness["metric"] == "faithfulness"]
    only_faithfulness.to_parquet(versions / "candidate-without-context-recall.parquet")
    done = rag_eval(versions, "compare", f"out/{A}/results.parquet", "candidate-without-context-recall.parquet",
                    "--config", "gate.toml", "--report-dir", "r")
    assert done.returncode == 4
    table = [line for line in done.stdout.splitlines() if line.startswith(" ")]
    assert max(len(line) for line in table) <= 80 and "…" not in done.stdout  # before: "not in candidate-w…"
    verdict = "".join("".join(line[65:].split()) for line in table)
    assert "notincandidate-without-context-recall.parquet" in verdict  # folded over lines, all of it


def test_versions_labelled_by_people_are_gated_on_their_ppi_estimates(versions):
    # The judge scores every row 0.5 in both versions (no change, paired differences 0); people accept 9 of 10
    # labelled rows of a and 2 of 10 of b. A constant judge gets lam 0: each estimate is its labels' Agresti-Coull
    # interval (rag_eval.metrics.stats.ppi's pseudo-rows): n~ = 10 + z² = 13.8415, p~ = (9 + z²/2) / n~ = 0.788987 (se
    # sqrt(p~(1 - p~) / n~) = 0.109673) and (2 + z²/2) / n~ = 0.283260 (0.121111). Difference -0.505727, se
    # 0.163389, interval [-0.825963, -0.185491], below -0.02: regressed, p = Phi(-0.485727 / 0.163389) = 0.0015.
    flat = results()
    flat["value"] = 0.5
    for key, accepted in ((A, 9), (B, 2)):
        flat.to_parquet(versions / "out" / key / "results.parquet")
        folder = versions / "datasets" / key
        folder.mkdir(parents=True)
        (folder / "labels.jsonl").write_text("".join(
            json.dumps({"id": IDS[i], "line": i + 1, "metric": "faithfulness", "label": int(i < accepted)}) + "\n"
            for i in range(10)), encoding="utf-8")
    gate = rag_eval(versions, "gate", B, "--config", "gate.toml")
    assert gate.returncode == 4, gate.stderr
    assert ("gate failed: faithfulness regressed: -0.506 [-0.826, -0.185] lies below -0.02 "
            "(ppi (n=10/20 vs 10/20), Holm p=0.0015)") in gate.stderr
    [row] = [line for line in gate.stdout.splitlines() if line.strip().startswith("faithfulness")]
    assert re.search(r"0\.789 +0\.283 +-0\.506 +-0\.826\.\.-0\.185", row)
    assert "regressed on ppi (n=10/20 vs 10/20) context_recall" in " ".join(gate.stdout.split())  # folded verdict
    body = json.loads((versions / "out" / B / "comparison.json").read_text())
    assert body["metrics"]["faithfulness"]["basis"] == "ppi (n=10/20 vs 10/20)"
    assert body["metrics"]["context_recall"]["basis"] == "judge"
    assert "Human labels" in (versions / "out" / B / "report.html").read_text()
    # Without the candidate's labels the judge decides: nothing moved.
    (versions / "datasets" / B / "labels.jsonl").unlink()
    judged = rag_eval(versions, "gate", B, "--config", "gate.toml")
    assert judged.returncode == 0 and "gate passed" in judged.stdout
    assert json.loads((versions / "out" / B / "comparison.json").read_text())["metrics"]["faithfulness"]["basis"] == "judge"


def test_compare_of_two_cascade_runs_decides_on_their_strong_judge_estimates(tmp_path):
    # tests/metrics/test_compare_cascade.py's versions: the cheap judge 0.5 on every row of both, the strong
    # judge's estimates 0.8 and 0.2 (se² 0.01 each): -0.600 [-0.877, -0.323], regressed on cascade.
    from tests.metrics.test_compare_cascade import BASELINE, CANDIDATE, cheap_only

    BASELINE.to_parquet(tmp_path / "base.parquet")
    CANDIDATE.to_parquet(tmp_path / "cand.parquet")
    cheap_only(CANDIDATE).to_parquet(tmp_path / "cheap.parquet")
    done = rag_eval(tmp_path, "compare", "base.parquet", "cand.parquet", "--metrics", "faithfulness", "--offline",
                    "--report-dir", "report")
    assert done.returncode == 4, done.stderr
    assert ("gate failed: faithfulness regressed: -0.600 [-0.877, -0.323] lies below -0.02 "
            "(cascade (n=10/20 vs 10/20), Holm p=0.0000)") in done.stderr
    assert "regressed on cascade (n=10/20 vs 10/20)" in " ".join(done.stdout.split())
    assert "Judge cascade" in (tmp_path / "report" / "report.html").read_text(encoding="utf-8")
    one_sided = rag_eval(tmp_path, "compare", "base.parquet", "cheap.parquet", "--metrics", "faithfulness",
                         "--offline", "--report-dir", "report")
    assert one_sided.returncode == 0 and "gate passed" in one_sided.stdout
    assert ("note: faithfulness: only base.parquet is a judge cascade: compared on the cheap judge's paired rows "
            "(basis judge)") in " ".join(one_sided.stdout.split())


def test_a_reference_free_file_gated_against_itself_passes_naming_the_metrics_not_applicable(tmp_path):
    # Issue 27 item 4: context_recall and context_precision need a reference; neither file has one.
    lines = [json.loads(line) for line in (ROOT / "examples" / "fiqa" / "samples.jsonl").read_text().splitlines()[:12]]
    for name in ("before.jsonl", "after.jsonl"):
        (tmp_path / name).write_text("".join(json.dumps({k: v for k, v in r.items() if k != "reference"}) + "\n"
                                             for r in lines), encoding="utf-8")
    gate = rag_eval(tmp_path, "gate", "after.jsonl", "--baseline", "before.jsonl", "--offline", "--report-dir", "r")
    assert gate.returncode == 0, gate.stderr
    assert ("gate passed (context_recall, context_precision: not applicable, no row scored ok in either version)"
            in gate.stdout)
    body = json.loads((tmp_path / "r" / "comparison.json").read_text())
    assert body["metrics"]["context_recall"]["verdict"] == "not applicable" and body["failures"] == []
    assert body["metrics"]["faithfulness"]["verdict"] == "no change detected"


def test_a_key_named_by_hand_has_no_previous_version_and_the_gate_says_what_to_pass(tmp_path, monkeypatch, capsys):
    """``previous`` follows registration times: for keys named by hand the line said "no version before … has
    results" though earlier versions had results; it names what to pass instead."""
    from rag_eval.metrics.errors import command
    from rag_eval.metrics.stats.gate import no_baseline
    from rag_eval.orchestration import cli

    monkeypatch.chdir(tmp_path)
    for key in ("alpha", "beta"):
        (tmp_path / "out" / key).mkdir(parents=True)
        (tmp_path / "out" / key / "results.parquet").write_bytes(b"")  # evaluated (the gate reads no result here)
    assert cli.main(["gate", "beta", "--out", "out"]) == 0
    out = capsys.readouterr().out
    assert out == (f"no baseline for beta (previous: {no_baseline('beta')}); nothing to compare, the gate passes\n")
    assert no_baseline("beta") == ("beta is a version key without a registration time (named by hand, or a target "
                                   "run), and `previous` follows the registration times of generated keys: name its "
                                   f"baseline with `{command('gate beta --baseline VERSION')}` (or tag:NAME), or set `baseline` "
                                   "in the gate settings")
    assert no_baseline("20261130T020000Z-fiqa-0123abcd") == "no version before 20261130T020000Z-fiqa-0123abcd has results"


def test_a_printed_hint_is_the_command_as_it_can_be_typed_here(tmp_path, monkeypatch, capsys):
    """After `make run`, `rag-eval` is not on PATH: a hint says `.venv/bin/rag-eval …`, as the docs write commands;
    with the environment activated (its bin/ on PATH) plain `rag-eval …`; from another folder, the script's path."""
    from rag_eval.orchestration import cli

    bin_folder = Path(sys.executable).parent  # .venv/bin of the checkout running the tests
    clone = bin_folder.parent.parent
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.chdir(clone)
    empty = tmp_path / "out"
    empty.mkdir()
    said = "error: no evaluated version under {}/: run `{} run` first, or name a candidate\n"
    assert cli.main(["gate", "--out", str(empty)]) == 2
    assert capsys.readouterr().err == said.format(empty, f"{bin_folder.parent.name}/bin/rag-eval")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["gate", "--out", str(empty)]) == 2
    assert capsys.readouterr().err == said.format(empty, bin_folder / "rag-eval")
    monkeypatch.setenv("PATH", f"{bin_folder}:/usr/bin:/bin")  # `source .venv/bin/activate`
    assert cli.main(["gate", "--out", str(empty)]) == 2
    assert capsys.readouterr().err == said.format(empty, "rag-eval")
