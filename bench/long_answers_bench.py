"""The offline judge's faithfulness against bag-of-words recall on long answers, tuning and held-out parts side by side.

Two labelled sets of long answers, each split before it was looked at:

* **tonic_validate's retriever sweep** (``tonic_sweep_tuning/samples.jsonl``, MIT): real chat-model
  answers over essays from 33 retriever configurations, rated by GPT-4 (``gpt4.answer_consistency``).
  Label 1 when GPT-4 finds every statement in the contexts (answer_consistency = 1). Tuning: questions
  at positions 0, 4 and 8; held out: positions 2 and 6. Figures: AUROC of faithfulness against the
  label, and the Spearman correlation over configurations (chunk size × top-k) of mean faithfulness
  with mean answer_consistency, the ranking a sweep would make.
* **FaithBench** (``faithbench/FaithBench.csv``, CC BY-NC-SA: read from ``--data`` only, never copied
  or trained on): LLM summaries with human labels; label 1 when the worst label is Consistent or
  Benign. Held out: rows whose ``sha256(source)`` starts with a hex digit 0-7; tuning: the rest.
  Chosen where detectors disagree: a check against regressions on long text, not a target.

``judge`` is offline faithfulness (the mean support of the answer's statements), ``0/1`` the share of its
statements whose verdict is supported (what groundedness_pro and the diagnostics count). On the sweep
also offline answer_correctness against token F1 (SQuAD's), each by its Spearman correlation over rows
with GPT-4's ``answer_similarity_score`` (0-5 against the dataset's reference answer).
Bag-of-words recall (``bow``): share of the response's words found in the contexts
(``rag_eval.metrics.judges.verifier.word_recall``). Intervals: percentile bootstrap 95 %, 1000
resamples over rows (AUROC) or configurations (Spearman).

Run from the repo root::

    .venv/bin/python bench/long_answers_bench.py --data DATA [--limit N] [--split both|tuning|heldout] [--verifier FILE]
"""
from __future__ import annotations

import argparse
import csv
import hashlib
import json
from collections import Counter
from pathlib import Path

import numpy as np
from scipy.stats import rankdata, spearmanr

from rag_eval.metrics import OfflineJudge, build_metrics, load_samples
from rag_eval.metrics.core.scoring import score_all
from rag_eval.metrics.judges.verifier import bow_tokens, word_recall

PARTS = ("tuning", "heldout")


def tonic(data: Path) -> list[dict]:
    """The sweep's rows with label, configuration and part (module docstring)."""
    rows = [json.loads(line) for line in (data / "tonic_sweep_tuning" / "samples.jsonl").read_text().splitlines()]
    return [{"id": r["id"], "user_input": r["user_input"], "response": r["response"],
             "retrieved_contexts": r["retrieved_contexts"], "label": float(r["gpt4"]["answer_consistency"] == 1),
             "rating": r["gpt4"]["answer_consistency"], "config": (r["chunk_size"], r["top_k"]),
             "reference": r["reference"], "similarity": r["gpt4"]["answer_similarity_score"],
             "part": "heldout" if r["question_index"] in (2, 6) else "tuning"} for r in rows]


def faithbench(data: Path) -> list[dict]:
    """FaithBench rows as RAG rows with label and part (module docstring)."""
    with (data / "faithbench" / "FaithBench.csv").open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    return [{"id": f"faithbench-{i}", "user_input": "Summarize the passage.", "response": r["summary"],
             "retrieved_contexts": [r["source"]], "label": float(r["worst-label"] in ("Consistent", "Benign")),
             "part": "heldout" if hashlib.sha256(r["source"].encode()).hexdigest()[0] in "01234567" else "tuning"}
            for i, r in enumerate(rows)]


def auroc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the ROC curve (ties count half), on [0, 1]."""
    ranks = rankdata(scores)
    positives = labels.sum()
    negatives = len(labels) - positives
    return float((ranks[labels == 1].sum() - positives * (positives + 1) / 2) / (positives * negatives))


def by_config(rows: list[dict], scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean score and mean GPT-4 rating per configuration."""
    configs = sorted({r["config"] for r in rows})
    mean = [float(np.mean([s for r, s in zip(rows, scores) if r["config"] == c])) for c in configs]
    rating = [float(np.mean([r["rating"] for r in rows if r["config"] == c])) for c in configs]
    return np.array(mean), np.array(rating)


def boot(statistic, n: int, draws: int = 1000) -> tuple[float, float]:
    """Percentile bootstrap 95 % interval of ``statistic(indices)`` over ``n`` units."""
    rng = np.random.default_rng(0)
    values = [statistic(rng.integers(0, n, n)) for _ in range(draws)]
    return tuple(np.nanpercentile(values, [2.5, 97.5]))


def figures(rows: list[dict], scores: np.ndarray) -> dict[str, str]:
    """AUROC (and per-configuration Spearman where rows have configurations) with intervals."""
    labels = np.array([r["label"] for r in rows])
    out = {"AUROC": f"{auroc(scores, labels):.3f} [{'{:.3f}, {:.3f}'.format(*boot(lambda i: auroc(scores[i], labels[i]) if 0 < labels[i].sum() < len(i) else np.nan, len(rows)))}]"}
    if "config" in rows[0]:
        mean, rating = by_config(rows, scores)
        out["Spearman"] = (f"{spearmanr(mean, rating).statistic:.3f} "
                           f"[{'{:.3f}, {:.3f}'.format(*boot(lambda i: spearmanr(mean[i], rating[i]).statistic, len(mean)))}]")
    return out


def token_f1(response: str, reference: str) -> float:
    """SQuAD's token F1 of ``response`` against ``reference`` (:func:`bow_tokens`, counted with repeats)."""
    said, wanted = Counter(bow_tokens(response)), Counter(bow_tokens(reference))
    shared = sum((said & wanted).values())
    return 0.0 if not shared else 2 * shared / (sum(said.values()) + sum(wanted.values()))


def correctness(rows: list[dict], judge: OfflineJudge) -> None:
    """Offline answer_correctness and token F1 against GPT-4's answer_similarity_score (0-5 against the
    reference): Spearman over rows, with its interval."""
    samples = load_samples([{k: r[k] for k in ("id", "user_input", "response", "retrieved_contexts", "reference")}
                            for r in rows])
    results = score_all(samples, build_metrics(["answer_correctness"]), judge)
    similarity = np.array([r["similarity"] for r in rows])
    for label, scores in (("answer_correctness", np.array([r.value if r.value is not None else 0.0 for r in results])),
                          ("token F1", np.array([token_f1(r["response"], r["reference"]) for r in rows]))):
        low, high = boot(lambda i, s=scores: spearmanr(s[i], similarity[i]).statistic, len(rows))
        print(f"{'tonic sweep':<12} {rows[0]['part']:<8} n={len(rows):<4} {label:<18} Spearman with GPT-4 "
              f"answer_similarity {spearmanr(scores, similarity).statistic:.3f} [{low:.3f}, {high:.3f}]")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="folder holding tonic_sweep_tuning/ and faithbench/")
    parser.add_argument("--limit", type=int, default=None, help="use only the first N rows of each part")
    parser.add_argument("--split", choices=("both", *PARTS), default="both", help="which parts to score")
    parser.add_argument("--verifier", type=Path, default=None, help="weights to use (default: the shipped ones)")
    args = parser.parse_args()
    judge = OfflineJudge(verifier=args.verifier)
    print(f"judge: {judge.describe()['judge']} {judge.describe()['version']}, verifier {judge.verifier.version}")
    for name, rows in (("tonic sweep", tonic(args.data)), ("FaithBench", faithbench(args.data))):
        for part in PARTS if args.split == "both" else [args.split]:
            chosen = [r for r in rows if r["part"] == part][: args.limit]
            samples = load_samples([{k: r[k] for k in ("id", "user_input", "response", "retrieved_contexts")}
                                    for r in chosen])
            results = score_all(samples, build_metrics(["faithfulness"]), judge)
            judged = np.array([r.value if r.value is not None else 0.0 for r in results])
            bow = np.array([word_recall(r["response"], set(bow_tokens("\n".join(r["retrieved_contexts"]))))
                            for r in chosen])
            verdicts = np.array([np.mean([s["verdict"] for s in r.details["statements"]]) if r.value is not None
                                 else 0.0 for r in results])
            for label, scores in (("judge", judged), ("0/1", verdicts), ("bow", bow)):
                cells = "  ".join(f"{k} {v}" for k, v in figures(chosen, scores).items())
                print(f"{name:<12} {part:<8} n={len(chosen):<4} {label:<6} mean {scores.mean():.3f}  {cells}")
            if name == "tonic sweep":
                correctness(chosen, judge)


if __name__ == "__main__":
    main()
