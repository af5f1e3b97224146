"""How well the offline judge's Faithfulness separates grounded from ungrounded answers.

For every labelled pair (same question, same contexts, one grounded and one ungrounded
response) it scores Faithfulness of both responses with ``OfflineJudge`` and counts a
*win* when the grounded one scores strictly higher, a *tie* when equal, a *loss*
otherwise. Strict accuracy = wins / pairs (ties count as failures).

Datasets (read-only, under ``--data``, default ``<repo>/../shared/data``):

* HaluEval QA rows 0-99: ``right_answer`` vs ``hallucinated_answer``, contexts=[knowledge].
* RGB ``en_fact`` / ``zh_fact``: ``answer`` vs ``fakeanswer``, contexts=``positive``.
  A list answer is a list of required parts, each part optionally a list of alternative
  spellings: the first spelling of every part is taken and the parts are joined with ", ".

Baseline: bag-of-words overlap = share of the response's tokens (lower-cased ``\\w+``
words; character bigrams for Chinese) found in the context's tokens, with the same
win/tie/loss counting. The table also gives "ties = 1/2" accuracy ((wins + ties/2) / n),
which is how the often-quoted 0.90 for the baseline on HaluEval is obtained.

A response with no checkable statement (Faithfulness ``not_applicable``) scores below
any measured value, so it never wins. ``--with-question`` scores "question answer" (the question's "?" removed) instead of
the bare answer, for both the judge and the baseline, so that a fragment like "Delhi" or
"2006" becomes one statement together with its question.

Run from the repo root::

    .venv/bin/python bench/offline_judge_accuracy.py [--data ../shared/data] [--limit N] [--with-question] [--show-losses]
"""
from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path

from metrics import OfflineJudge, score_sample
from metrics.text import has_cjk

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
        sets[f"RGB {lang}_fact"] = [
            {"id": r["id"], "question": r["query"], "good": as_text(r["answer"]), "bad": as_text(r["fakeanswer"]),
             "contexts": r["positive"]} for r in lines(data / "rgb" / f"{lang}_fact.json")]
    return sets


def faithfulness(judge: OfflineJudge, question: str, response: str, contexts: list[str]) -> float:
    result = score_sample({"user_input": question, "response": response, "retrieved_contexts": contexts},
                          ["faithfulness"], judge=judge)["faithfulness"]
    return result.value if isinstance(result.value, float) and result.value == result.value else -1.0


def count(pairs_scores: list[tuple[float, float]]) -> tuple[int, int, int]:
    wins = sum(g > b for g, b in pairs_scores)
    ties = sum(g == b for g, b in pairs_scores)
    return wins, ties, len(pairs_scores) - wins - ties


def evaluate_set(judge: OfflineJudge, pairs: list[dict], show_losses: bool) -> dict:
    start = time.perf_counter()
    judged = [(faithfulness(judge, p["question"], p["good"], p["contexts"]),
               faithfulness(judge, p["question"], p["bad"], p["contexts"])) for p in pairs]
    seconds = time.perf_counter() - start
    bow = [(bow_score(p["good"], p["contexts"]), bow_score(p["bad"], p["contexts"])) for p in pairs]
    if show_losses:
        for p, (g, b) in zip(pairs, judged):
            if g <= b:
                print(f"  {'tie ' if g == b else 'loss'} {p['id']}: good={g:.2f} {p['good'][:60]!r} | "
                      f"bad={b:.2f} {p['bad'][:60]!r}")
    return {"n": len(pairs), "judge": count(judged), "bow": count(bow), "rate": len(pairs) / seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data",
                        help="folder holding halueval_qa/ and rgb/ (default: ../shared/data from the repo root)")
    parser.add_argument("--limit", type=int, default=None, help="use only the first N pairs of each dataset")
    parser.add_argument("--with-question", action="store_true", help='score "question answer", not the bare answer')
    parser.add_argument("--show-losses", action="store_true", help="print every pair the judge ties or loses")
    args = parser.parse_args()

    judge = OfflineJudge()
    judge.embed(["warm-up"])  # load the encoder outside the timed loops
    print(f"judge: {judge.describe()}")
    rows = []
    for name, pairs in load_pairs(args.data).items():
        if args.with_question:
            pairs = [dict(p, **{k: f"{p['question'].strip().rstrip('?？ ')} {p[k]}" for k in ("good", "bad")})
                     for p in pairs]
        if args.show_losses:
            print(name)
        rows.append((name, evaluate_set(judge, pairs[: args.limit], args.show_losses)))

    def acc(wtl: tuple[int, int, int], n: int) -> str:
        return f"{wtl[0] / n:.2f} ({wtl[0]}/{wtl[1]}/{wtl[2]})"

    print(f"\n{'dataset':<18} {'n':>4}  {'judge acc (W/T/L)':<19} {'bag-of-words (W/T/L)':<21} "
          f"{'judge t=1/2':>11} {'bow t=1/2':>9} {'pairs/s':>8}")
    for name, r in rows:
        n, (jw, jt, _), (bw, bt, _) = r["n"], r["judge"], r["bow"]
        print(f"{name:<18} {n:>4}  {acc(r['judge'], n):<19} {acc(r['bow'], n):<21} "
              f"{(jw + jt / 2) / n:>11.3f} {(bw + bt / 2) / n:>9.3f} {r['rate']:>8.1f}")
    print("acc = strict wins / pairs; t=1/2 counts a tie as half a win; pairs/s = judge only "
          "(2 Faithfulness scorings per pair, encoder already loaded)")


if __name__ == "__main__":
    main()
