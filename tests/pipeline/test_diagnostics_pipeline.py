"""RAGChecker's diagnostics as a user meets them: `rag-eval run --metrics diagnostics` (the groups and the
one-line diagnosis printed, summary.json, the assets in their own group), a sweep ranked by claim recall,
and `rag-eval compare` saying which diagnostic moved. Offline judge, fresh processes."""
import json
import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pandas as pd

from tests.pipeline.conftest import ROOT, sweep_cli

FIQA = ROOT / "examples" / "fiqa" / "samples.jsonl"


def rag_eval(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "EMBEDDING_", "RAG_EVAL_"))}
    env.update(DAGSTER_HOME=str(cwd / "home"), PYTHONPATH=str(ROOT))
    (cwd / "home").mkdir(exist_ok=True)
    return subprocess.run([sys.executable, "-m", "rag_eval.orchestration.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


def test_run_with_the_diagnostics_prints_the_groups_and_the_diagnosis(tmp_path):
    done = rag_eval("run", str(FIQA), "--metrics", "diagnostics", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.index("retriever:") < out.index("  claim_recall") < out.index("generator:") \
        < out.index("  hallucination") < out.index("overall:")
    [reading] = [line for line in out.splitlines() if line.startswith("diagnosis: ")]
    [version] = [p.name for p in (tmp_path / "out").iterdir() if (p / "summary.json").is_file()]
    summary = json.loads((tmp_path / "out" / version / "summary.json").read_text(encoding="utf-8"))
    diagnosis = summary["diagnosis"]
    assert reading == f"diagnosis: {diagnosis['reading']}"
    assert set(diagnosis["groups"]) == {"retriever", "generator", "overall"}
    assert set(summary["metrics"]) == {m for members in diagnosis["groups"].values() for m in members}
    # The worst rows' failed claims come from the stored results (the summary reads them without details).
    results = pd.read_parquet(tmp_path / "out" / version / "results.parquet")
    lead = next(g[diagnosis["lead"]] for g in diagnosis["groups"].values() if diagnosis["lead"] in g)
    worst = lead["worst_rows"][0]
    stored = results[(results["metric"] == diagnosis["lead"]) & (results["row"] == worst["line"] - 1)]
    assert worst["failed"] == json.loads(stored["details"].iloc[0])["failed"][:5] and worst["failed"]
    assert f"  worst rows for {diagnosis['lead']} (what failed):" in out
    # In Dagster: RAGChecker's assets in their own group, with the version's partitions, materialized.
    instance = dg.DagsterInstance.from_config(str(tmp_path / "home"))
    for metric in diagnosis["groups"]["retriever"]:
        record = instance.get_latest_materialization_event(dg.AssetKey(metric))
        assert record.asset_materialization.partition == version
    from rag_eval.orchestration.definitions import defs

    graph = defs.resolve_asset_graph()
    assert graph.get(dg.AssetKey("claim_recall")).group_name == "diagnostics_metrics"
    assert graph.get(dg.AssetKey("claim_recall")).partitions_def == graph.get(dg.AssetKey("faithfulness")).partitions_def


def test_a_retriever_sweep_ranked_by_claim_recall(tmp_path):
    (tmp_path / "tiny.py").write_text(
        "def rank(user_input, top_k=1):\n"
        "    docs = ['Apples are red.', 'Bananas are yellow.']\n"
        "    if 'banana' in user_input: docs = ['Cherries are dark red.', 'Bananas are yellow.']\n"
        "    return docs[:top_k]\n"
        "def echo(user_input, retrieved_contexts):\n"
        "    return retrieved_contexts[0]\n")
    (tmp_path / "q.jsonl").write_text(
        json.dumps({"user_input": "What colour are apples?", "reference": "Apples are red."}) + "\n" +
        json.dumps({"user_input": "What colour is a banana?", "reference": "Bananas are yellow."}) + "\n")
    (tmp_path / "sweep.toml").write_text(
        'questions = "q.jsonl"\nmetrics = ["claim_recall", "retriever_context_precision"]\n'
        '[retriever.rank]\ncallable = "tiny:rank"\n[generator.echo]\ncallable = "tiny:echo"\n'
        '[sweep]\n"retriever.top_k" = [1, 2]\n')
    done = sweep_cli(tmp_path, "--json", "t.json")
    assert done.returncode == 0, done.stderr
    table = json.loads((tmp_path / "t.json").read_text())["ranking"]
    # By hand: top_k 1 finds the apple claim only (the banana question gets the cherries): claim recall 1/2;
    # top_k 2 finds both: 1. Context precision is 1/2 for both (top_k 1: 1 and 0; top_k 2: 1/2 and 1/2):
    # claim recall, ranked first, decides.
    assert [r["configuration"] for r in table] == ["rank-echo-top_k2", "rank-echo-top_k1"]
    assert [r["metrics"]["claim_recall"]["mean"] for r in table] == [1.0, 0.5]
    assert [r["metrics"]["retriever_context_precision"]["mean"] for r in table] == [0.5, 0.5]
    assert done.stdout.splitlines()[0].startswith("judge offline-heuristic (rule version ")


def test_compare_says_which_diagnostic_moved(tmp_path):
    capitals = [("France", "Paris"), ("Japan", "Tokyo"), ("Italy", "Rome"), ("Spain", "Madrid"), ("Egypt", "Cairo"),
                ("Peru", "Lima"), ("Kenya", "Nairobi"), ("Norway", "Oslo"), ("Chile", "Santiago"),
                ("Ghana", "Accra"), ("Cuba", "Havana"), ("Nepal", "Kathmandu")]

    def rows(wrong_chunks: int) -> str:
        lines = []
        for i, (country, city) in enumerate(capitals):
            fact = f"The capital of {country} is {city}."
            chunk = "The museum opens at nine in the morning." if i < wrong_chunks else fact
            lines.append(json.dumps({"id": country, "user_input": f"What is the capital of {country}?",
                                     "response": fact, "reference": fact, "retrieved_contexts": [chunk]}))
        return "\n".join(lines) + "\n"

    (tmp_path / "base.jsonl").write_text(rows(0))
    (tmp_path / "cand.jsonl").write_text(rows(8))  # the candidate retriever misses 8 of 12 facts
    done = rag_eval("compare", "base.jsonl", "cand.jsonl", "--offline", "--metrics",
                    "claim_recall,hallucination,overall_precision", cwd=tmp_path)
    assert done.returncode == 4, done.stderr  # claim recall regressed: the gate fails
    # The responses are unchanged and right: no hallucination (they come from memory now: self-knowledge).
    assert "diagnostics moved: retriever: claim_recall regressed (-0.667); generator: nothing moved; " \
           "overall: nothing moved" in done.stdout
    assert "diagnosis of the candidate: the retrieved chunks miss claims the reference needs in 67 % of rows " \
           "(claim_recall < 0.5)" in done.stdout
    report = (tmp_path / "out" / "gate" / "report.md").read_text(encoding="utf-8")
    assert "### Diagnosis" in report and "claim\\_recall regressed" in report
    page = (tmp_path / "out" / "gate" / "report.html").read_text(encoding="utf-8")
    assert "Worst rows for claim_recall (the candidate)" in page and "The capital of France is Paris." in page
