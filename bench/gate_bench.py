"""Is the regression gate trustworthy? False alarms under judge noise, and power, with trial counts.

    .venv/bin/python bench/gate_bench.py [--data bench/data] [--trials 40] [--llm-trials 40] [--power-trials 100]

Data: HaluEval QA rows 0-99 (`halueval_qa/` under `--data`, fetched by `tools/fetch_data.py`; MIT): the
question, its knowledge passage as the retrieved context, the right answer as the response and
the reference. Every gate is the default one (the five core metrics, margins 0.02, Holm across
them, 95 % paired bootstrap with 4,000 draws).

1. False alarms, offline judge: the version against itself with its rows in a shuffled order,
   re-judged for real on every trial (one judge: its encoder's memo of sentence vectors is kept, the
   verdicts are computed again). Bound: at most 5 % of trials fail.
2. False alarms, LLM judge: `rag-eval serve-judge-sim --verdict-p1 0.5` (no latency) judges the
   baseline with `--seed 1` and the candidate with `--seed 2`; trial t sends
   request seed 7 + t on both (the judge's `repeat`), so every trial is a new, independent
   re-judging of both versions under the server's sampling noise (verdicts are 1 with p 0.5, so
   this judge is all noise, the hardest case for false alarms). Bound: at most 5 %.
3. Power, offline judge, 100 rows: in each trial a random 20 % of the responses are replaced by
   HaluEval's hallucinated answer to the same question. The offline judge is deterministic and
   judges each row on its own, so each row's right and hallucinated answers are judged once and
   the trials are composed from these per-row scores: exactly the scores re-judging each trial's
   file would give (checked on the first trial by judging its file for real). Bound: at least
   95 % of trials fail on faithfulness.
4. Smallest degradation detected with 80 % power at 100 and 500 rows: the share of replaced
   responses is stepped up; a 500-row version is drawn with replacement from the 100 scored rows
   (the same per-row distribution, a larger sample), a fresh draw per trial.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
#: HaluEval QA rows 0-99, under ``--data`` (set by :func:`main`).
HALUEVAL = REPO / "bench" / "data" / "halueval_qa" / "halueval_qa_rows_000_099.jsonl"

from rag_eval.metrics.stats.compare import compare  # noqa: E402
from rag_eval.metrics.evaluate import evaluate  # noqa: E402
from rag_eval.metrics.judges.offline import OfflineJudge  # noqa: E402
from rag_eval.metrics.core.registry import CORE_METRICS  # noqa: E402
from rag_eval.orchestration.judge_sim_command import served  # noqa: E402


def rows(answer: str = "right_answer") -> list[dict]:
    data = [json.loads(line) for line in HALUEVAL.read_text(encoding="utf-8").splitlines()]
    return [{"id": d["id"], "user_input": d["question"], "retrieved_contexts": [d["knowledge"]],
             "response": d[answer], "reference": d["right_answer"]} for d in data]


def fails_on(result, metric: str | None = None) -> bool:
    return metric in [m for m, row in result.metrics.items() if row.verdict == "regressed"] if metric \
        else not result.passed


def false_alarms_offline(trials: int) -> tuple[int, int]:
    base = rows()
    judge = OfflineJudge()
    baseline = evaluate(base, judge=judge).results
    rng = np.random.default_rng(11)
    failed = 0
    for _ in range(trials):
        shuffled = [base[i] for i in rng.permutation(len(base))]
        candidate = evaluate(shuffled, judge=judge).results
        failed += fails_on(compare(baseline, candidate))
    return failed, trials


def false_alarms_llm(trials: int, n: int) -> tuple[int, int, dict]:
    from rag_eval.metrics.judges.llm import LLMConfig, LLMJudge

    base = rows()[:n]
    failed, spread = 0, {}
    per_repeat: list[pd.DataFrame] = []
    with contextlib.ExitStack() as stack:
        judges = []
        for seed in (1, 2):
            url = stack.enter_context(served("--verdict-p1", "0.5", "--seed", str(seed)))
            judges.append(LLMJudge(LLMConfig(base_url=url, api_key="bench", model="judge-sim", cache_path=None,
                                             embedding_model="judge-sim-embed", temperature=1.0, concurrency=32)))
            stack.callback(judges[-1].close)
        for t in range(trials):
            baseline, candidate = (evaluate(base, judge=j.with_options(repeat=t)).results for j in judges)
            failed += fails_on(compare(baseline, candidate))
            per_repeat.append(baseline.assign(repeat=t))
            if t % 10 == 9:
                print(f"  LLM trial {t + 1}/{trials}: {failed} failed so far", flush=True)
    everything = pd.concat(per_repeat, ignore_index=True)
    ok = everything[everything["status"] == "ok"]
    for metric, frame in ok.groupby("metric"):
        spread[metric] = round(float(np.sqrt(frame.groupby("sample_id")["value"].var(ddof=1).mean())), 3)
    return failed, trials, spread


def scored_pairs() -> tuple[pd.DataFrame, pd.DataFrame]:
    judge = OfflineJudge()
    return evaluate(rows(), judge=judge).results, evaluate(rows("hallucinated_answer"), judge=judge).results


def compose(right: pd.DataFrame, wrong: pd.DataFrame, chosen: np.ndarray, replaced: set[int]) -> tuple:
    """Baseline and candidate frames over the rows ``chosen`` (positions into the 100, repeats allowed,
    each occurrence its own id), the candidate's responses at the positions ``replaced`` hallucinated."""
    right = right.sort_values(["metric", "row"], ignore_index=True)
    wrong = wrong.sort_values(["metric", "row"], ignore_index=True)
    offsets = np.repeat(np.arange(right["metric"].nunique()) * 100, len(chosen))
    index = offsets + np.tile(chosen, right["metric"].nunique())
    ids = np.tile([f"{c}-{p}" for p, c in enumerate(chosen)], right["metric"].nunique())
    rows = np.tile(np.arange(len(chosen)), right["metric"].nunique())
    mask = np.tile(np.isin(np.arange(len(chosen)), list(replaced)), right["metric"].nunique())
    baseline = right.iloc[index].assign(sample_id=ids, row=rows).reset_index(drop=True)
    candidate = baseline.copy()
    candidate.loc[mask, ["status", "value", "reason"]] = wrong.iloc[index[mask]][["status", "value", "reason"]].values
    return baseline, candidate


def power(right, wrong, n: int, share: float, trials: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(trials):
        chosen = np.arange(100) if n == 100 else rng.integers(0, 100, n)
        replaced = set(rng.choice(n, round(share * n), replace=False).tolist())
        hits += fails_on(compare(*compose(right, wrong, chosen, replaced)), "faithfulness")
    return hits / trials


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=REPO / "bench" / "data",
                        help="folder holding halueval_qa/ (default bench/data, where tools/fetch_data.py writes)")
    parser.add_argument("--trials", type=int, default=40, help="offline false-alarm and power trials (default 40)")
    parser.add_argument("--llm-trials", type=int, default=40, help="LLM judge false-alarm trials (default 40)")
    parser.add_argument("--llm-rows", type=int, default=100, help="rows per LLM trial (default 100)")
    parser.add_argument("--power-trials", type=int, default=100, help="trials per degradation step (default 100)")
    args = parser.parse_args()
    global HALUEVAL
    HALUEVAL = args.data / "halueval_qa" / "halueval_qa_rows_000_099.jsonl"
    started = time.monotonic()

    right, wrong = scored_pairs()
    # The composition check: the first power trial's candidate file, judged for real, gives the composed scores.
    rng = np.random.default_rng(3)
    replaced = set(rng.choice(100, 20, replace=False).tolist())
    real = evaluate([w if i in replaced else r for i, (r, w) in enumerate(zip(rows(), rows("hallucinated_answer")))],
                    judge=OfflineJudge()).results
    _, composed = compose(right, wrong, np.arange(100), replaced)
    both = real.merge(composed, on=["metric", "row"], suffixes=("_real", "_composed"))
    same_status = bool((both["status_real"] == both["status_composed"]).all())
    gap = float((both["value_real"] - both["value_composed"]).abs().max())
    print(f"composition check: the first trial's file judged for real vs composed from per-row scores: "
          f"{len(both)} results, statuses equal: {same_status}, max |value difference| = {gap:g}")

    failed, trials = false_alarms_offline(args.trials)
    print(f"1. false alarms, offline judge, shuffled row order, 100 rows: {failed}/{trials} trials failed "
          f"({failed / trials:.1%}; bound <= 5 %)", flush=True)

    hit = power(right, wrong, 100, 0.20, args.trials, seed=5)
    print(f"3. power, offline judge, 100 rows, 20 % responses hallucinated: {round(hit * args.trials)}/{args.trials} "
          f"trials fail on faithfulness ({hit:.1%}; bound >= 95 %)", flush=True)

    effect = right[right["metric"] == "faithfulness"]["value"].mean() - \
        wrong[wrong["metric"] == "faithfulness"]["value"].mean()
    print(f"   per replaced row, faithfulness drops by {effect:.3f} on average (right {right[right['metric'] == 'faithfulness']['value'].mean():.3f}"
          f" vs hallucinated {wrong[wrong['metric'] == 'faithfulness']['value'].mean():.3f})")
    for n in (100, 500):
        found = None
        for share in ((0.05, 0.08, 0.10, 0.12, 0.15, 0.20) if n == 100 else (0.02, 0.03, 0.04, 0.05, 0.06, 0.08)):
            p = power(right, wrong, n, share, args.power_trials, seed=int(share * 1000) + n)
            print(f"   {n} rows, {share:.0%} replaced (mean faithfulness drop ~{share * effect:.3f}): power "
                  f"{p:.0%} over {args.power_trials} trials", flush=True)
            if p >= 0.8:
                found = share
                break
        print(f"4. smallest degradation detected with >= 80 % power at {n} rows: "
              + (f"{found:.0%} of responses hallucinated (a faithfulness drop of about {found * effect:.3f})"
                 if found else "none of the steps tried"), flush=True)
    failed_llm, trials_llm, spread = false_alarms_llm(args.llm_trials, args.llm_rows)
    print(f"2. false alarms, LLM judge (judge server --seed 1 vs --seed 2, request seed per trial), "
          f"{args.llm_rows} rows: {failed_llm}/{trials_llm} trials failed ({failed_llm / trials_llm:.1%}; "
          f"bound <= 5 %)")
    print(f"   the judge server's test-retest SD per row (over {trials_llm} re-judgings): "
          + ", ".join(f"{m} {s}" for m, s in spread.items()), flush=True)

    print(f"total {time.monotonic() - started:.0f} s; metrics gated: {', '.join(CORE_METRICS)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
