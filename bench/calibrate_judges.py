"""`rag_eval.metrics.stats.calibrate` on public labelled sets (``tools/fetch_data.py``), with each judge that applies.

* ``ragas_annotated`` (human accept/reject of an LLM judge's binary verdicts): the human label is
  the verdict when accepted, its opposite when rejected. ``answer_correctness`` maps to our
  ``answer_correctness``; ``helpfulness`` to ``answer_relevancy``; ``summary_accuracy`` to
  ``faithfulness`` of the summary to the text summarised (the user input as the context).
* HaluEval QA rows 0-99 and RGB en/zh (non-commercial: read here only), and RGB reversed
  (held out, see ``offline_judge_accuracy.py``) as pairwise faithfulness labels, the grounded
  answer preferred.

Next to each judge, the lexical baseline on the same labels: token overlap (the share of the
response's tokens found in the contexts; for answer_correctness in the reference, for
answer_relevancy in the question), as strict pairwise accuracy or as AUROC.

Judges: the offline one always; the LLM judge configured in the environment
(``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``), else the LLM judge against
``rag-eval serve-judge-sim --verdict-p1 0.5`` started here on a free 127.0.0.1 port (its verdicts
are random with p=0.5: a check that the LLM path runs end to end on these labels, not a
measurement of any model). ``--no-llm`` skips it. Run from the repo root::

    .venv/bin/python bench/calibrate_judges.py [--data bench/data] [--json calibration.json] [--no-llm]
"""
from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

from offline_judge_accuracy import bow_score, default_data, load_pairs  # noqa: E402

from rag_eval.metrics import OfflineJudge, calibrate  # noqa: E402
from rag_eval.metrics.stats.agreement import auroc, bootstrap  # noqa: E402
from rag_eval.metrics.stats.calibrate import print_report  # noqa: E402
from rag_eval.metrics.evaluate import default_judge  # noqa: E402
from rag_eval.metrics.judges.llm import LLMConfig, LLMJudge  # noqa: E402
from rag_eval.orchestration.judge_sim_command import served  # noqa: E402

RAGAS_FILES = {"edited_chain_runs.json": "answer_correctness", "annotated_data.json": "answer_relevancy",
               "sample_annotated_summary.json": "faithfulness"}


def ragas_labels(folder: Path) -> list[dict]:
    """Per-sample binary labels from the ragas annotated files (see the module docstring), with the
    LLM judge's recorded ``verdict`` and the metric's name in ragas (``ragas_metric``)."""
    labels = []
    for filename, metric in RAGAS_FILES.items():
        for name, records in json.loads((folder / filename).read_text(encoding="utf-8")).items():
            for record in records:
                sample = dict(record["metric_input"])
                if metric == "faithfulness":
                    sample["retrieved_contexts"] = [sample["user_input"]]
                human = record["metric_output"] if record["is_accepted"] else 1 - record["metric_output"]
                labels.append({"metric": metric, "sample": sample, "label": bool(human), "label_type": "binary",
                               "verdict": record["metric_output"], "ragas_metric": name})
    return labels


def pair_labels(data: Path) -> dict[str, list[dict]]:
    """Pairwise faithfulness labels from HaluEval and RGB: the grounded answer preferred."""
    return {name: [{"metric": "faithfulness", "preferred": "a",
                    "a": {"user_input": p["question"], "response": p["good"], "retrieved_contexts": p["contexts"]},
                    "b": {"user_input": p["question"], "response": p["bad"], "retrieved_contexts": p["contexts"]}}
                   for p in pairs] for name, pairs in load_pairs(data).items()}


def baseline_score(metric: str, sample: dict) -> float:
    """Token overlap of the response with what the metric compares it to (module docstring)."""
    against = {"answer_correctness": [sample.get("reference", "")], "answer_relevancy": [sample["user_input"]]}
    return bow_score(sample["response"], against.get(metric, sample.get("retrieved_contexts", [])))


def baseline(labels: list[dict]) -> dict[str, str]:
    """Per metric, the token-overlap baseline's strict pairwise accuracy or AUROC, with its 95 % interval."""
    out = {}
    for metric in dict.fromkeys(r["metric"] for r in labels):
        mine = [r for r in labels if r["metric"] == metric]
        if "preferred" in mine[0]:
            wins = np.array([float(baseline_score(metric, r["a"]) > baseline_score(metric, r["b"])) for r in mine])
            out[metric] = f"accuracy {wins.mean():.3f} {bootstrap(wins, np.mean)}"
        else:
            rows = np.array([[baseline_score(metric, r["sample"]), float(r["label"])] for r in mine])
            value = auroc(rows[:, 0], rows[:, 1])
            out[metric] = f"AUROC {value:.3f} {bootstrap(rows, lambda x: auroc(x[:, 0], x[:, 1]))}"
    return out


def headline(result: dict) -> str:
    """A metric's one figure from a calibration report: AUROC for binary per-sample labels,
    strict pairwise accuracy (ties wrong) for pairs, with the 95 % interval."""
    if "auroc" in result:
        return f"AUROC {result['auroc']:.3f} {result['auroc_ci95']}"
    return f"accuracy {result['accuracy']:.3f} {result['accuracy_ci95']}"


@contextlib.contextmanager
def scripted_llm_judge():
    """The LLM judge against ``rag-eval serve-judge-sim`` (random verdicts) on a free port, stopped afterwards."""
    with served("--verdict-p1", "0.5", "--seed", "1") as url, tempfile.TemporaryDirectory() as folder:
        judge = LLMJudge(LLMConfig(base_url=url, api_key="sk-bench", model="judge-sim",
                                   embedding_model="judge-sim-embed", cache_path=f"{folder}/cache.sqlite"))
        try:
            yield judge
        finally:
            judge.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=default_data())
    parser.add_argument("--json", type=Path, help="write every report to this file")
    parser.add_argument("--no-llm", action="store_true", help="the offline judge only")
    args = parser.parse_args()
    sets = {"ragas_annotated": ragas_labels(args.data / "ragas_annotated"), **pair_labels(args.data)}
    reports, figures = {}, []
    with contextlib.ExitStack() as stack:
        judges = [OfflineJudge()]
        configured = default_judge()
        if not isinstance(configured, OfflineJudge):
            judges.append(configured)
        elif not args.no_llm:
            judges.append(stack.enter_context(scripted_llm_judge()))
            print("LLM judge: rag-eval serve-judge-sim (random verdicts, p=0.5): a run check, not a model's figure")
        for name, labels in sets.items():
            print(f"\n== {name} ({len(labels)} labels)")
            lexical = baseline(labels)
            for metric, figure in lexical.items():
                print(f"token overlap (baseline) {metric}: {figure}")
            for judge in judges:
                reports[f"{judge.name}/{name}"] = report = calibrate(labels, judge=judge)
                print_report(report)
                figures += [(name, metric, judge.name, headline(result), lexical[metric])
                            for metric, result in report["metrics"].items()]
    print("\n== summary: each judge's agreement with the labels, next to the token-overlap baseline")
    print(f"{'labelled set':<19} {'metric':<19} {'judge':<18} {'judge [95% CI]':<32} baseline [95% CI]")
    for name, metric, judge_name, figure, lexical_figure in figures:
        print(f"{name:<19} {metric:<19} {judge_name:<18} {figure:<32} {lexical_figure}")
    if args.json:
        args.json.write_text(json.dumps(reports, ensure_ascii=False, indent=2, default=str), encoding="utf-8")


if __name__ == "__main__":
    main()
