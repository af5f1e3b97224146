"""How well the offline judge separates grounded from ungrounded answers, against token overlap.

For every labelled pair (same question, same contexts, one grounded and one ungrounded
response) it scores Faithfulness, Groundedness and GroundednessPro of both responses with
``OfflineJudge`` (the question goes with each response, as in a real run, so a bare span
is judged as "Q: … A: …") and counts a *win* when the grounded one scores strictly higher.
Strict accuracy = wins / pairs (ties count wrong), with a percentile bootstrap 95 % interval.

Datasets (read-only, under ``--data``, default ``<repo>/../shared/data``):

* HaluEval QA rows 0-99: ``right_answer`` vs ``hallucinated_answer``, contexts=[knowledge];
  also its two halves, 0-49 and 50-99, apart.
* RGB ``en_fact`` / ``zh_fact`` (non-commercial: read here only): ``answer`` vs
  ``fakeanswer``, contexts=``positive``. A list answer is a list of required parts, each
  part optionally a list of alternative spellings: the first spelling of every part is
  taken and the parts are joined with ", ".
* Held out (never looked at while the rules were set; rule version 5 was set on the sets
  above): RGB ``en_fact`` / ``zh_fact`` *reversed*: the passages edited to support the
  counterfactual (``positive_wrong``) as contexts, so ``fakeanswer`` is the grounded answer
  and ``answer`` the ungrounded one. HaluEval rows 100+ are the project's hidden holdout and
  are not in ``shared/data``.

Baseline: token overlap = share of the response's tokens (lower-cased ``\\w+`` words;
character bigrams for Chinese) found in the context's tokens, with the same strict counting.
A response with no checkable statement (``not_applicable``) scores below any measured value.

Then the normalisation check: mean Faithfulness of the same responses and contexts with a
citation marker after every sentence (``[1]``, ``[ID:2]``, ``【3†source】``, ``^[4]``,
``(Source: doc5.pdf)``) and literal two-character ``\\n`` between sentences, against the
clean text; the bound is ±0.02.

Run from the repo root::

    .venv/bin/python bench/offline_judge_accuracy.py [--data ../shared/data] [--limit N] [--show-losses]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import time
from pathlib import Path

import numpy as np

from metrics import OfflineJudge, build_metrics, load_samples
from metrics.agreement import bootstrap
from metrics.scoring import score_all
from metrics.text import has_cjk, split_sentences

REPO = Path(__file__).resolve().parents[1]
_CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")


def as_text(answer) -> str:
    """RGB answers: a string, or a list of required parts whose items may list alternatives."""
    if isinstance(answer, str):
        return answer
    return ", ".join(part[0] if isinstance(part, list) else part for part in answer)


def bow_tokens(text: str) -> list[str]:
    """Lower-case word tokens; for text with CJK characters, character bigrams of CJK runs too."""
    text = text.lower()
    tokens = [run[i:i + 2] for run in _CJK_RUN.findall(text) for i in range(max(1, len(run) - 1))]
    return tokens + re.findall(r"\w+", _CJK_RUN.sub(" ", text)) if has_cjk(text) else re.findall(r"\w+", text)


def bow_score(response: str, contexts: list[str]) -> float:
    tokens = bow_tokens(response)
    known = set(bow_tokens("\n".join(contexts)))
    return sum(t in known for t in tokens) / len(tokens) if tokens else 0.0


def load_pairs(data: Path) -> dict[str, list[dict]]:
    """Dataset name -> pairs of {question, good, bad, contexts}."""
    def lines(path: Path) -> list[dict]:
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]

    sets = {"HaluEval QA 0-99": [
        {"id": r["id"], "question": r["question"], "good": r["right_answer"], "bad": r["hallucinated_answer"],
         "contexts": [r["knowledge"]]} for r in lines(data / "halueval_qa" / "halueval_qa_rows_000_099.jsonl")]}
    for lang in ("en", "zh"):
        rows = lines(data / "rgb" / f"{lang}_fact.json")
        sets[f"RGB {lang}_fact"] = [
            {"id": r["id"], "question": r["query"], "good": as_text(r["answer"]), "bad": as_text(r["fakeanswer"]),
             "contexts": r["positive"]} for r in rows]
        sets[f"RGB {lang} reversed*"] = [
            {"id": r["id"], "question": r["query"], "good": as_text(r["fakeanswer"]), "bad": as_text(r["answer"]),
             "contexts": r["positive_wrong"]} for r in rows if r.get("positive_wrong")]
    return sets


def default_data() -> Path:
    """``../shared/data`` from the repo root (a checkout beside ``shared``), else from its parent
    (a worktree one level deeper)."""
    candidates = [REPO.parent / "shared" / "data", REPO.parent.parent / "shared" / "data"]
    return next((c for c in candidates if c.is_dir()), candidates[0])


METRICS = ("faithfulness", "groundedness", "groundedness_pro")


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=default_data(),
                        help="folder holding halueval_qa/ and rgb/ (default: ../shared/data from the repo root)")
    parser.add_argument("--limit", type=int, default=None, help="use only the first N pairs of each dataset")
    parser.add_argument("--show-losses", action="store_true", help="print every pair the judge ties or loses")
    args = parser.parse_args()

    judge = OfflineJudge()
    judge.embed(["warm-up"])  # load the encoder outside the timed loops
    print(f"judge: {judge.describe()}  ({os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f})")
    sets = {name: pairs[: args.limit] for name, pairs in load_pairs(args.data).items()}
    halves = sets["HaluEval QA 0-99"]
    sets["HaluEval QA 0-49"], sets["HaluEval QA 50-99"] = halves[:50], halves[50:]
    print(f"\n{'dataset':<19} {'n':>4} {'metric':<17} {'judge strict acc [95% CI]':<28} "
          f"{'token overlap [95% CI]':<26} {'judge t=1/2':>11} {'pairs/s':>8}")
    for name, pairs in sets.items():
        if not pairs:
            continue
        start = time.perf_counter()
        scores = score_pairs(judge, pairs)
        rate = len(pairs) / (time.perf_counter() - start)
        bow = strict([(bow_score(p["good"], p["contexts"]), bow_score(p["bad"], p["contexts"])) for p in pairs])
        for metric, judged in scores.items():
            wins = strict(judged)
            half = (wins.sum() + sum(g == b for g, b in judged) / 2) / len(judged)
            print(f"{name:<19} {len(pairs):>4} {metric:<17} {wins.mean():.2f} {bootstrap(wins, np.mean)!s:<23} "
                  f"{bow.mean():.2f} {bootstrap(bow, np.mean)!s:<21} {half:>11.3f} {rate:>8.1f}")
            if args.show_losses and metric == "faithfulness":
                for p, (g, b) in zip(pairs, judged):
                    if g <= b:
                        print(f"    {'tie ' if g == b else 'loss'} {p['id']}: good={g:.2f} {p['good'][:50]!r} | "
                              f"bad={b:.2f} {p['bad'][:50]!r}")
    print("strict acc = pairs where the grounded response scores strictly higher / pairs (ties count wrong); "
          "token overlap = share of the response's tokens in the contexts; 95% CI = percentile bootstrap, "
          "1000 resamples; pairs/s = judge, 3 metrics per pair (encoder loaded; the halves reuse the full set's "
          "vectors). HaluEval 0-49 and 50-99 are the two halves, reported apart as a check that no rule leans on "
          "one half. * = held out: not looked at while the rules were set (RGB on the passages edited to support "
          "the counterfactual answer, which is then the grounded one).")

    print("\nnormalisation: faithfulness with citation markers and literal \\n added to responses and contexts")
    for name in ("HaluEval QA 0-99", "RGB en_fact", "RGB zh_fact"):
        clean = [p for p in sets[name]]
        noisy = [dict(p, good=with_noise(p["good"], i), bad=with_noise(p["bad"], i + 1),
                      contexts=[with_noise(c, i + j) for j, c in enumerate(p["contexts"])]) for i, p in enumerate(clean)]
        means = []
        for pairs in (clean, noisy):
            values = [v for g, b in score_pairs(judge, pairs, ("faithfulness",))["faithfulness"] for v in (g, b) if v >= 0]
            means.append(float(np.mean(values)))
        print(f"{name:<18} clean {means[0]:.3f}  with markers and literal \\n {means[1]:.3f}  "
              f"difference {means[1] - means[0]:+.3f} (bound ±0.02: {'holds' if abs(means[1] - means[0]) <= 0.02 else 'FAILS'})")


if __name__ == "__main__":
    main()
