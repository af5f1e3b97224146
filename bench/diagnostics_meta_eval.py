"""Meta-evaluation of RAGChecker's diagnostics (``rag_eval.metrics.diagnostics``): agreement with labels known by
construction, offline judge, on a tuning and a held-out part of each labelled set; and what the
diagnostics send to an LLM judge (the project's test server, ``rag_eval.orchestration.judge_sim``).

Labelled sets, read from ``--data`` (never copied into the repository):

* HaluEval QA (``halueval_qa/``; MIT, its text from HotpotQA under CC BY-SA 4.0): question,
  knowledge K, right answer a, hallucinated answer h. Tuning part: rows 0-99 and 300-399; held out:
  rows 400-499 (the offline judge's rules were set on the tuning rows; rows 100-299 are the project's
  hidden check and are not in the data folder).
* RGB ``en_fact`` / ``zh_fact`` (``rgb/``; CC BY-NC-SA 4.0: measured here, never copied): query, answer A,
  counterfactual answer F, positive passages P (supporting A), the same edited to support F (W),
  negative passages N (on topic, without the answer). Tuning part: the first 50 items of each file;
  held out: the last 50.

The split is positional and was fixed before any row was read; this bench tunes nothing (the
diagnostics add no rule to the offline judge): the tuning part's figures are the ones the judge's
rules could lean on, the held-out part's the ones to quote.

Cases per item, each diagnostic's label by construction (1: the property holds). K' is the knowledge of
the next HaluEval item of the same part (another question's passage); RGB takes two passages of a list.

=============================  ================================================  =========================
diagnostic                     label 1                                           label 0
=============================  ================================================  =========================
claim_recall                   reference a / A, chunks [K] / P                   chunks [K'] / N
retriever_context_precision    per chunk of [K, K'] / [P1, N1, P2, N2]: K, P     K', N
generator_faithfulness         response a / A, chunks [K] / P                    response h / F
overall_precision, _recall,    response a / A (= the reference: trivially        response h / F
_f1                            right)
generator_context_utilization  response a / A, chunks [K] / P                    response h / F
hallucination                  response h / F, chunks [K] or [K'] / P            response a / A, chunks [K] / P
self_knowledge                 response a / A, chunks [K'] / N                   response a / A, chunks [K] / P
noise_sensitivity_relevant     RGB: response F, chunk P1 + W1 (one relevant      response A, chunks P; F with [P1, W1]
                               chunk saying both)
noise_sensitivity_irrelevant   RGB: response F, chunks [P1, W1] (W1 irrelevant)  response A, chunks P; F with P1 + W1
=============================  ================================================  =========================

A diagnostic's verdict on a case: ``value >= 0.5`` for the higher-is-better ones, ``value > 0`` (some
claim flagged) for the rates; a row it cannot score (``not_applicable``, an error) disagrees. Agreement
= agreeing cases / cases, with a percentile bootstrap 95 % interval, and apart per label.
Label noise: RGB's negative passages sometimes hold the answer; HaluEval's hallucinated answers
sometimes contain the right one.

Then the LLM path: the held-out HaluEval rows with the hallucinated answer, scored by the LLM judge
against ``rag_eval.orchestration.judge_sim`` on 127.0.0.1 (every verdict 1) with a fresh judgement cache each: chat
and embeddings requests of the core metrics, of the diagnostics, and of both together.

Run from the repo root::

    .venv/bin/python bench/diagnostics_meta_eval.py --data DATA [--limit N] [--skip-llm]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rag_eval.metrics import evaluate  # noqa: E402
from rag_eval.metrics.stats.calibrate import bootstrap  # noqa: E402
from rag_eval.metrics.reports.diagnosis import diagnostics_in  # noqa: E402
from rag_eval.metrics.judges.llm import LLMConfig, LLMJudge  # noqa: E402
from rag_eval.metrics.judges.offline import OfflineJudge  # noqa: E402
from rag_eval.metrics.core.registry import builtin_registry  # noqa: E402
from rag_eval.metrics.core.results import Direction  # noqa: E402
from rag_eval.orchestration.judge_sim import JudgeServer  # noqa: E402

#: RAGChecker's groups in order: retriever, generator, overall.
DIAGNOSTICS = [m for members in diagnostics_in(builtin_registry().families["diagnostics"]).values() for m in members]
CONTEXT_PRECISION = "retriever_context_precision"


def lines(path: Path) -> list[dict]:
    text = path.read_text(encoding="utf-8")
    return json.loads(text) if text.lstrip().startswith("[") else [json.loads(x) for x in text.splitlines() if x.strip()]


def as_text(answer) -> str:
    """RGB answers: a string, or a list of required parts whose items may list alternatives (the first)."""
    return answer if isinstance(answer, str) else ", ".join(p[0] if isinstance(p, list) else p for p in answer)


def halueval_cases(items: list[dict]) -> list[tuple[dict, dict]]:
    """(row, {diagnostic: label or per-chunk labels}) per HaluEval case (table in the module docstring)."""
    cases = []
    for i, r in enumerate(items):
        other = items[(i + 1) % len(items)]["knowledge"]
        q, k, a, h = r["question"], r["knowledge"], r["right_answer"], r["hallucinated_answer"]

        def row(tag, response, chunks, r=r, q=q, a=a):
            return {"id": f"{r['id']}-{tag}", "user_input": q, "response": response, "reference": a,
                    "retrieved_contexts": chunks}

        both = {"overall_precision": 1, "overall_recall": 1, "overall_f1": 1, "generator_context_utilization": 1}
        cases += [(row("a-K", a, [k]), {"claim_recall": 1, "generator_faithfulness": 1, "hallucination": 0,
                                        "self_knowledge": 0, **both}),
                  (row("h-K", h, [k]), {"generator_faithfulness": 0, "hallucination": 1,
                                        **dict.fromkeys(both, 0)}),
                  (row("a-K'", a, [other]), {"claim_recall": 0, "self_knowledge": 1}),
                  (row("h-K'", h, [other]), {"hallucination": 1}),
                  (row("a-KK'", a, [k, other]), {CONTEXT_PRECISION: [1, 0]})]
    return cases


def rgb_cases(items: list[dict]) -> list[tuple[dict, dict]]:
    """(row, labels) per RGB case (table in the module docstring); items lacking a passage list skip its cases."""
    cases = []
    for r in items:
        q, a, f = r["query"], as_text(r["answer"]), as_text(r["fakeanswer"])
        p, w, n = r.get("positive") or [], r.get("positive_wrong") or [], r.get("negative") or []

        def row(tag, response, chunks, r=r, q=q, a=a):
            return {"id": f"{r['id']}-{tag}", "user_input": q, "response": response, "reference": a,
                    "retrieved_contexts": chunks}

        if not p:
            continue
        both = {"overall_precision": 1, "overall_recall": 1, "overall_f1": 1, "generator_context_utilization": 1}
        cases += [(row("A-P", a, p[:2]), {"claim_recall": 1, "generator_faithfulness": 1, "hallucination": 0,
                                          "self_knowledge": 0, "noise_sensitivity_relevant": 0,
                                          "noise_sensitivity_irrelevant": 0, **both}),
                  (row("F-P", f, p[:2]), {"generator_faithfulness": 0, "hallucination": 1, **dict.fromkeys(both, 0)})]
        if n:
            cases.append((row("A-N", a, n[:2]), {"claim_recall": 0, "self_knowledge": 1}))
            mixed = [c for pair in zip(p[:2], n[:2]) for c in pair]
            cases.append((row("A-PN", a, mixed), {CONTEXT_PRECISION: [1, 0] * (len(mixed) // 2)}))
        if w:
            cases += [(row("F-P|W", f, [p[0], w[0]]), {"noise_sensitivity_irrelevant": 1, "noise_sensitivity_relevant": 0}),
                      (row("F-P+W", f, [f"{p[0]} {w[0]}"]), {"noise_sensitivity_relevant": 1,
                                                              "noise_sensitivity_irrelevant": 0})]
    return cases


def parts(data: Path, limit: int | None) -> dict[str, dict[str, list[tuple[dict, dict]]]]:
    """Dataset -> {"tuning": cases, "held out": cases}."""
    first = lines(data / "halueval_qa" / "halueval_qa_rows_000_099.jsonl")
    later = lines(data / "halueval_qa" / "halueval_qa_rows_300_499.jsonl")
    tuning, held = first + later[:100], later[100:]
    sets = {"HaluEval QA": {"tuning": halueval_cases(tuning[:limit]), "held out": halueval_cases(held[:limit])}}
    for lang in ("en", "zh"):
        items = lines(data / "rgb" / f"{lang}_fact.json")
        sets[f"RGB {lang}_fact"] = {"tuning": rgb_cases(items[:50][:limit]), "held out": rgb_cases(items[50:][:limit])}
    return sets


def verdicts(cases: list[tuple[dict, dict]], judge) -> dict[str, list[float]]:
    """Per diagnostic, 1.0 / 0.0 per labelled case (or chunk) the diagnostic agrees / disagrees with."""
    results = evaluate([row for row, _ in cases], DIAGNOSTICS, judge=judge).results.set_index(["sample_id", "metric"])
    agree: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for row, labels in cases:
        for metric, label in labels.items():
            result = results.loc[(row["id"], metric)]
            if metric == CONTEXT_PRECISION:
                chunks = json.loads(result["details"]).get("chunks", []) if result["status"] == "ok" else []
                relevant = [c["relevant"] for c in chunks] or [None] * len(label)
                agree[metric] += [(lab, float(rel == lab)) for lab, rel in zip(label, relevant)]
                continue
            if result["status"] != "ok":
                agree[metric].append((label, 0.0))
                continue
            higher = builtin_registry()[metric].direction is Direction.HIGHER
            said = result["value"] >= 0.5 if higher else result["value"] > 0
            agree[metric].append((label, float(int(said) == label)))
    return agree


def llm_requests(rows: list[dict]) -> dict[str, tuple[int, int]]:
    """Chat and embeddings requests the LLM judge sends for ``rows`` (fresh cache each) against the test server."""
    counts = {}
    server = JudgeServer().start()
    try:
        for name, selection in (("core", ["core"]), ("diagnostics", ["diagnostics"]),
                                ("core + diagnostics", ["core", "diagnostics"])):
            server.seen.clear()
            with tempfile.TemporaryDirectory() as folder:
                judge = LLMJudge(LLMConfig(base_url=server.url, api_key="sk-bench", model="judge-test",
                                           embedding_model="embed-test", cache_path=str(Path(folder) / "c.sqlite")))
                try:
                    evaluate(rows, selection, judge=judge)
                finally:
                    judge.close()
            counts[name] = (len(server.chat_requests()), len(server.embedding_requests()))
    finally:
        server.stop()
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="folder holding halueval_qa/ and rgb/")
    parser.add_argument("--limit", type=int, default=None, help="use only the first N items of each part")
    parser.add_argument("--skip-llm", action="store_true", help="leave out the request count of the LLM path")
    args = parser.parse_args()

    judge = OfflineJudge()
    print(f"judge: {judge.name} rule version {judge.version}  ({os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.1f})")
    print(f"\n{'dataset':<12} {'part':<8} {'diagnostic':<30} {'cases':>5}  {'agreement [95% CI]':<24} "
          f"{'label 1':>8} {'label 0':>8}")
    for name, split in parts(args.data, args.limit).items():
        for part, cases in split.items():
            start = time.perf_counter()
            agree = verdicts(cases, judge)
            seconds = time.perf_counter() - start
            for metric in DIAGNOSTICS:
                if metric not in agree:
                    continue
                marks = np.array([a for _, a in agree[metric]])
                by = {lab: np.mean([a for lab2, a in agree[metric] if lab2 == lab]) if any(
                    lab2 == lab for lab2, _ in agree[metric]) else float("nan") for lab in (1, 0)}
                print(f"{name:<12} {part:<8} {metric:<30} {len(marks):>5}  {marks.mean():.3f} "
                      f"{bootstrap(marks, np.mean)!s:<18} {by[1]:>8.3f} {by[0]:>8.3f}")
            print(f"{name:<12} {part:<8} ({len(cases)} rows, 11 metrics each, {len(cases) / seconds:.1f} rows/s)")
    print("agreement = cases where the diagnostic's verdict (value >= 0.5; for the rates, value > 0) matches the "
          "label / cases (a row not scored counts as a disagreement); label 1 / label 0 = the same apart per label; "
          "context precision per chunk. 95% CI = percentile bootstrap, 1000 resamples.")
    if args.skip_llm:
        return
    held = lines(args.data / "halueval_qa" / "halueval_qa_rows_300_499.jsonl")[100:][:args.limit]
    rows = [{"id": r["id"], "user_input": r["question"], "response": r["hallucinated_answer"],
             "reference": r["right_answer"], "retrieved_contexts": [r["knowledge"]]} for r in held]
    counts = llm_requests(rows)
    print(f"\nLLM judge against rag_eval.orchestration.judge_sim, {len(rows)} held-out HaluEval rows, fresh cache each:")
    for name, (chat, embeddings) in counts.items():
        print(f"  {name:<20} {chat:>5} chat ({chat / len(rows):.2f} a row) + {embeddings} embeddings requests")
    added = counts["core + diagnostics"][0] - counts["core"][0]
    print(f"  the diagnostics add {added} chat requests to the core metrics' ({added / len(rows):.2f} a row; the bound: "
          "one verdict batch per (claims, chunks) set and one per (response, reference), no extraction: 3 a row)")


if __name__ == "__main__":
    main()
