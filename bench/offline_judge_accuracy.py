"""How well the offline judge separates grounded from ungrounded answers, against token overlap,
on a tuning part and a held-out part of every labelled set.

For every labelled pair (same question, same contexts, one grounded and one ungrounded
response) it scores Faithfulness, Groundedness and GroundednessPro of both responses with
``OfflineJudge`` (the question goes with each response, as in a real run, so a bare span
is judged as "Q: … A: …") and counts a *win* when the grounded one scores strictly higher.
Strict accuracy = wins / pairs (ties count wrong), with a percentile bootstrap 95 % interval;
``judge − bow`` is the paired difference with the offline judge's wins, its interval a
bootstrap over the pairs.

The split, fixed before any row outside the earlier rules' tuning rows was looked at
(issue 26): rules may be studied and changed on the *tuning* part; the *held-out* part is
only scored (``--show-losses`` prints the tuning part's losses, never a held-out row), and
no rule is changed after its figures are read.

* HaluEval QA (``halueval_qa/``, MIT / CC BY-SA): ``right_answer`` vs ``hallucinated_answer``,
  contexts=[knowledge]. Tuning: rows 0-99 and 300-399; held out: rows 400-499 (rows 100-299
  are the project's hidden check and are not in the data folder).
* RGB ``en_fact`` / ``zh_fact`` (``rgb/``, CC BY-NC-SA: read from ``--data`` only, never
  copied): ``answer`` vs ``fakeanswer``, contexts=``positive``; and *reversed*: the passages
  edited to support the counterfactual (``positive_wrong``) as contexts, so ``fakeanswer`` is
  the grounded answer. Tuning: the first 50 items of each file; held out: the last 50, forward
  and reversed alike. A list answer is a list of required parts, each part optionally a list of
  alternative spellings: the first spelling of every part is taken, the parts joined with ", ".

No other labelled set is used: ``ragas_annotated`` has no retrieved contexts but for its
summaries, and ``trulens_benchmark_corpus`` has five groundedness rows.

Baseline (``bow``): token overlap = share of the response's tokens (lower-cased ``\\w+`` words;
character bigrams for Chinese) found in the context's tokens, with the same strict counting.
A response with no checkable statement (``not_applicable``) scores below any measured value.

Then two checks of mean Faithfulness over every response of the tuning parts, each with a bound
of ±0.02: with a citation marker after every sentence and literal two-character ``\\n`` between
sentences (``[1]``, ``[ID:2]``, ``【3†source】``, ``^[4]``, ``(Source: doc5.pdf)``), and with every
context broken into paragraphs (a blank line in the middle of each sentence: a chunk that breaks
its lines elsewhere supports the same statements).

Run from the repo root::

    .venv/bin/python bench/offline_judge_accuracy.py --data DATA [--split both|tuning|heldout]
        [--limit N] [--show-losses] [--verifier FILE] [--only SET]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import time
from pathlib import Path

import numpy as np

from rag_eval.metrics import OfflineJudge, build_metrics, load_samples
from rag_eval.metrics.stats.agreement import bootstrap
from rag_eval.metrics.core.scoring import score_all
from rag_eval.metrics.judges.verifier import bow_tokens, word_recall
from rag_eval.metrics.text import split_sentences

REPO = Path(__file__).resolve().parents[1]
PARTS = ("tuning", "heldout")
METRICS = ("faithfulness", "groundedness", "groundedness_pro")


def as_text(answer) -> str:
    """RGB answers: a string, or a list of required parts whose items may list alternatives."""
    if isinstance(answer, str):
        return answer
    return ", ".join(part[0] if isinstance(part, list) else part for part in answer)


def bow_score(response: str, contexts: list[str]) -> float:
    """Share of the response's tokens (``verifier.bow_tokens``) found in the contexts' tokens, in [0, 1]."""
    return word_recall(response, set(bow_tokens("\n".join(contexts)))) if bow_tokens(response) else 0.0


def halueval_part(row_id: str) -> str:
    """``"heldout"`` for HaluEval rows 400-499, ``"tuning"`` for the others (0-99, 300-399)."""
    return "heldout" if 400 <= int(row_id.rsplit("-", 1)[1]) <= 499 else "tuning"


def load_pairs(data: Path) -> dict[str, list[dict]]:
    """Set name -> pairs of {id, question, good, bad, contexts, part} (the module docstring's split)."""
    def lines(path: Path) -> list[dict]:
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]

    rows = [r for path in sorted((data / "halueval_qa").glob("halueval_qa_rows_*.jsonl")) for r in lines(path)]
    sets = {"HaluEval QA": [
        {"id": r["id"], "question": r["question"], "good": r["right_answer"], "bad": r["hallucinated_answer"],
         "contexts": [r["knowledge"]], "part": halueval_part(r["id"])} for r in rows]}
    for lang in ("en", "zh"):
        items = lines(data / "rgb" / f"{lang}_fact.json")
        half = len(items) // 2
        sets[f"RGB {lang}_fact"] = [
            {"id": r["id"], "question": r["query"], "good": as_text(r["answer"]), "bad": as_text(r["fakeanswer"]),
             "contexts": r["positive"], "part": PARTS[i >= half]} for i, r in enumerate(items)]
        sets[f"RGB {lang} reversed"] = [
            {"id": r["id"], "question": r["query"], "good": as_text(r["fakeanswer"]), "bad": as_text(r["answer"]),
             "contexts": r["positive_wrong"], "part": PARTS[i >= half]}
            for i, r in enumerate(items) if r.get("positive_wrong")]
    return sets


def default_data() -> Path:
    """``bench/data``: where ``tools/fetch_data.py`` writes the public datasets by default."""
    return REPO / "bench" / "data"


def score_pairs(judge: OfflineJudge, pairs: list[dict], metrics=METRICS) -> dict[str, list[tuple[float, float]]]:
    """Per metric, (good, bad) scores of every pair; unscored (not_applicable) is -1."""
    samples = [load_samples([{"id": f"{p['id']}-{k}", "user_input": p["question"], "response": p[k],
                              "retrieved_contexts": p["contexts"]}])[0] for p in pairs for k in ("good", "bad")]
    results = score_all(samples, build_metrics(list(metrics)), judge)
    out = {}
    for i, name in enumerate(metrics):
        values = [r.value if r.value is not None else -1.0 for r in results[i * len(samples):(i + 1) * len(samples)]]
        out[name] = list(zip(values[0::2], values[1::2]))
    return out


def strict(pairs_scores: list[tuple[float, float]]) -> np.ndarray:
    """1 per pair the grounded response wins strictly, else 0 (ties count wrong)."""
    return np.array([float(g > b) for g, b in pairs_scores])


def with_noise(text: str, i: int) -> str:
    """The same text as a production RAG system returns it: a citation marker after each
    sentence in one of the common forms, and literal two-character \\n between sentences."""
    forms = ["[{n}]", " [ID:{n}]", "【{n}†source】", " ^[{n}]", " (Source: doc{n}.pdf)"]
    sentences = split_sentences(text)
    return "\\n".join(s + forms[(i + k) % len(forms)].format(n=k + 1) for k, s in enumerate(sentences)) or text


def with_paragraphs(text: str) -> str:
    """``text`` with a blank line in the middle of each sentence (at the space nearest its middle;
    CJK text without spaces: at its middle character), as a chunker or a web page breaks lines."""
    broken = []
    for sentence in split_sentences(text):
        spaces = [m.start() for m in re.finditer(r" ", sentence)]
        cut = min(spaces, key=lambda s: abs(s - len(sentence) / 2)) if spaces else len(sentence) // 2
        broken.append(f"{sentence[:cut].rstrip()}\n\n{sentence[cut:].lstrip()}")
    return " ".join(broken) or text


def interval(values: np.ndarray, sign: str = "") -> str:
    """``mean [low, high]`` (percentile bootstrap 95 %), or ``-`` without rows; ``sign="+"``
    writes the sign of each figure (a difference)."""
    if not len(values):
        return "-"
    low, high = bootstrap(values, np.mean)
    return f"{values.mean():{sign}.2f} [{low:{sign}.2f}, {high:{sign}.2f}]"


def report(name: str, pairs: list[dict], judged: dict[str, list[tuple[float, float]]], parts: list[str],
           show_losses: bool) -> None:
    """One line per metric: per part, n, the judge's and bow's strict accuracy and their paired difference."""
    bow = strict([(bow_score(p["good"], p["contexts"]), bow_score(p["bad"], p["contexts"])) for p in pairs])
    for metric, scores in judged.items():
        wins = strict(scores)
        cells = []
        for part in parts:
            rows = np.array([p["part"] == part for p in pairs], dtype=bool)
            cells.append(f"{rows.sum():>4} {interval(wins[rows]):<18} {interval(bow[rows]):<18} "
                         f"{interval(wins[rows] - bow[rows], '+'):<21}")
        print(f"{name:<17} {metric:<17} " + " | ".join(cells))
        if show_losses and metric == "faithfulness":  # the tuning part's only: held-out rows are never shown
            for p, (g, b) in zip(pairs, scores):
                if p["part"] == "tuning" and g <= b:
                    print(f"    {'tie ' if g == b else 'loss'} {p['id']}: good={g:.2f} {p['good'][:60]!r} | "
                          f"bad={b:.2f} {p['bad'][:60]!r}")


def robustness(judge: OfflineJudge, sets: dict[str, list[dict]]) -> None:
    """Mean Faithfulness of every response of the tuning parts, clean against changed (module docstring)."""
    print("\nrobustness: mean faithfulness of the tuning parts' responses, clean and changed (bound ±0.02)")
    for name in ("HaluEval QA", "RGB en_fact", "RGB zh_fact"):
        clean = [p for p in sets[name] if p["part"] == "tuning"]
        changes = {
            "citation markers and literal \\n": [
                dict(p, good=with_noise(p["good"], i), bad=with_noise(p["bad"], i + 1),
                     contexts=[with_noise(c, i + j) for j, c in enumerate(p["contexts"])])
                for i, p in enumerate(clean)],
            "contexts broken into paragraphs": [
                dict(p, contexts=[with_paragraphs(c) for c in p["contexts"]]) for p in clean]}
        means = {}
        for label, pairs in {"clean": clean, **changes}.items():
            scores = score_pairs(judge, pairs, ("faithfulness",))["faithfulness"]
            means[label] = float(np.mean([v for g, b in scores for v in (g, b) if v >= 0]))
        for label in changes:
            difference = means[label] - means["clean"]
            print(f"{name:<17} clean {means['clean']:.3f}  {label} {means[label]:.3f}  difference {difference:+.3f} "
                  f"({'holds' if abs(difference) <= 0.02 else 'FAILS'})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=default_data(),
                        help="folder holding halueval_qa/ and rgb/ (default bench/data, where tools/fetch_data.py writes)")
    parser.add_argument("--split", choices=("both", *PARTS), default="both",
                        help="which parts to score (default both, side by side)")
    parser.add_argument("--limit", type=int, default=None, help="use only the first N pairs of each part of each set")
    parser.add_argument("--show-losses", action="store_true",
                        help="print every tuning pair the judge ties or loses (never a held-out one)")
    parser.add_argument("--no-robustness", action="store_true", help="skip the markers and paragraphs checks")
    parser.add_argument("--verifier", type=Path, default=None, help="verifier weights (default: the shipped ones)")
    parser.add_argument("--only", default=None, help="score only the sets whose name starts with this")
    args = parser.parse_args()
    parts = list(PARTS) if args.split == "both" else [args.split]

    judge = OfflineJudge(verifier=args.verifier)
    judge.embed(["warm-up"])  # load the encoder outside the timed loops
    print(f"judge: {judge.describe()}  ({os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f})")
    sets = {name: [p for part in parts for p in [q for q in pairs if q["part"] == part][: args.limit]]
            for name, pairs in load_pairs(args.data).items() if name.startswith(args.only or "")}
    cell = f"{'n':>4} {'judge':<18} {'bow':<18} {'judge − bow':<21}"
    print(f"\n{'':<17} {'':<17} " + " | ".join(f"{part:<63}" for part in parts))
    print(f"{'set':<17} {'metric':<17} " + " | ".join(cell for _ in parts))
    elapsed, count = 0.0, 0
    for name, pairs in sets.items():
        started = time.perf_counter()
        judged = score_pairs(judge, pairs)
        elapsed, count = elapsed + time.perf_counter() - started, count + 2 * len(pairs)
        report(name, pairs, judged, parts, args.show_losses and "tuning" in parts)
    print(f"judge: {count / elapsed:.1f} responses/s, 3 metrics each (encoder loaded, vectors computed as they "
          "are needed)")
    print("strict accuracy = pairs where the grounded response scores strictly higher / pairs (ties count wrong); "
          "bow = token overlap, the share of the response's tokens in the contexts; judge − bow = paired "
          "difference of the wins; [95% interval] = percentile bootstrap, 1000 resamples.")
    if not args.no_robustness and "tuning" in parts:
        robustness(judge, sets)


if __name__ == "__main__":
    main()
