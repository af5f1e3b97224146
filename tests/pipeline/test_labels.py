"""Human labels end to end (issue 26, first "Done when"): ``rag-eval annotate export`` on the FiQA example,
the sheet filled by a script standing in for a person, ``rag-eval annotate import``, ``rag-eval run`` (the
table shows the PPI estimate and interval beside the raw mean); ten more labels, and the next run
materializes only the label assets and sends no judge request: counted over HTTP on the project's test
server with the LLM judge, and read from the run's asset selection with the offline judge."""
import csv
import json
import re

import dagster as dg
import pandas as pd
import pytest

from rag_eval.metrics.sources.labels import read_stored
from rag_eval.metrics.stats.ppi import ppi_mean
from tests.conftest import FIQA, TEST_KEY
from rag_eval.orchestration.judge_sim import JudgeServer


def fill(sheet, count: int) -> int:
    """The stand-in annotator: the first ``count`` rows of the sheet, from the top as the export says,
    'pass' when most of the response's words stand in its contexts, else 'fail'; the others left blank."""
    with sheet.open(encoding="utf-8-sig", newline="") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows[:count]:
        words = set(re.findall(r"\w+", row["response"].lower()))
        shared = words & set(re.findall(r"\w+", row["retrieved_contexts"].lower()))
        row["label"] = "pass" if len(shared) > 0.6 * len(words) else "fail"
        row["annotator"] = "script"
    with sheet.open("w", encoding="utf-8-sig", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return len(rows)


def materialized(instance: dg.DagsterInstance, run_id: str) -> set[str]:
    records = instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION).records
    return {r.event_log_entry.dagster_event.asset_key.to_user_string() for r in records}


@pytest.fixture(params=["llm", "offline"])
def judged(request, tmp_path, monkeypatch):
    """The CLI's environment in ``tmp_path``: the LLM judge on the test server, or the offline judge."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL", "EMBEDDING_MODEL"):
        monkeypatch.delenv(name, raising=False)
    if request.param == "offline":
        yield None
        return
    server = JudgeServer().start()
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    monkeypatch.setenv("OPENAI_MODEL", "judge-test")
    monkeypatch.setenv("EMBEDDING_MODEL", "embed-test")
    yield server
    server.stop()


def test_labels_round_trip_then_ten_more_labels_re_estimate_without_judging(judged, tmp_path, capsys):
    from rag_eval.orchestration import cli

    assert cli.main(["annotate", "export", str(FIQA), "-n", "20"]) == 0
    said = capsys.readouterr()
    version = re.search(r"registered dataset version (\S+)", said.err)[1]
    sheet = tmp_path / "annotate" / f"{version}.csv"
    assert "drew 20 of 30 rows" in said.out and fill(sheet, 10) == 20
    assert cli.main(["annotate", "import", str(sheet)]) == 0
    assert f"{version}: stored 10 label(s)" in capsys.readouterr().out

    assert cli.main(["run", str(FIQA)]) == 0  # the judgement cache in tmp_path/.rag_eval_cache
    out = capsys.readouterr().out
    summary = json.loads((tmp_path / "out" / version / "summary.json").read_text(encoding="utf-8"))
    faithfulness = summary["metrics"]["faithfulness"]
    ppi, raw = faithfulness["ppi"], faithfulness["raw_mean"]
    assert (ppi["n"], ppi["N"], ppi["method"]) == (10, 20, "ppi++") and raw == pytest.approx(faithfulness["mean"], abs=1e-4)
    # The same figures from the run's own files: results.parquet's scores and the stored labels.
    results = pd.read_parquet(tmp_path / "out" / version / "results.parquet")
    scores = results[results["metric"] == "faithfulness"].set_index("row")["value"]
    labels = {r["line"] - 1: r["label"] for r in read_stored(tmp_path / "datasets" / version)}
    expected = ppi_mean(list(labels.values()), scores[list(labels)], scores.drop(list(labels)))
    assert (ppi["estimate"], ppi["ci_low"], ppi["ci_high"]) == pytest.approx(  # cut to faithfulness's [0, 1]
        (expected.estimate, max(expected.ci_low, 0.0), min(expected.ci_high, 1.0)), abs=1e-6)
    # The table: the PPI estimate and its interval beside the judge's raw mean, on one line of at most 80 columns.
    [line] = [line for line in out.splitlines() if line.startswith("faithfulness") and "/30" in line and "[" in line]
    assert f"{raw:.3f}" in line and f"{ppi['estimate']:.3f} [{ppi['ci_low']:.3f}, {ppi['ci_high']:.3f}]" in line
    assert "10/30" in line and len(line) <= 80
    instance = dg.DagsterInstance.get()
    sent = (len(judged.chat_requests()), len(judged.embedding_requests())) if judged else (0, 0)
    assert not judged or sent[0] > 0  # the first run judged every row with the LLM
    runs = len(instance.get_runs())

    # Ten more labels: the next rows of the same draw (the export leaves out the rows labelled already).
    assert cli.main(["annotate", "export", version, "-n", "20"]) == 0
    assert "10 to label" in capsys.readouterr().out
    fill(sheet, 10)
    before = sheet.read_bytes()  # filled, not imported: another export must not write over it
    assert cli.main(["annotate", "export", version, "-n", "20"]) == 2
    assert f"error: annotate/{version}.csv holds 10 filled label(s) not imported yet" in capsys.readouterr().err
    assert sheet.read_bytes() == before
    assert cli.main(["annotate", "import", str(sheet)]) == 0
    assert "labels now: faithfulness 20" in capsys.readouterr().out
    assert cli.main(["run", str(FIQA)]) == 0
    printed = capsys.readouterr()
    assert "labels.jsonl is changed: re-estimating from the labels" in printed.err
    [run] = instance.get_runs(limit=1)
    assert len(instance.get_runs()) == runs + 1
    # The labels, their estimates and the gate that decides on them (new labels re-decide it).
    assert {k.to_user_string() for k in run.asset_selection} == {"human_labels", "label_estimates",
                                                                 "baseline_comparison"}
    assert materialized(instance, run.run_id) == {"human_labels", "label_estimates", "baseline_comparison"}
    if judged:
        assert (len(judged.chat_requests()), len(judged.embedding_requests())) == sent  # 0 judge requests
    summary = json.loads((tmp_path / "out" / version / "summary.json").read_text(encoding="utf-8"))
    assert (summary["metrics"]["faithfulness"]["ppi"]["n"], summary["metrics"]["faithfulness"]["ppi"]["N"]) == (20, 10)
    assert "20/30" in printed.out
    # Unchanged since: up to date, nothing run.
    assert cli.main(["run", str(FIQA)]) == 0
    assert "is up to date" in capsys.readouterr().err and len(instance.get_runs()) == runs + 1
