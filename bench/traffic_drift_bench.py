"""Bench: the traffic drift check's false alarms on undegraded days and its detection of degraded ones.

Simulated production traffic of the example RAG system (examples/rag_system/traffic.py:
OpenTelemetry spans with OpenInference conventions, ``--per-day`` requests a day), read
with ``rag_eval.metrics.sources.traces``, sampled within ``--budget`` rows a day (``rag_eval.metrics.stats.sampling``,
stratified by route and score band), judged by the offline judge on the reference-free
metrics, and each day compared with its trailing ``--window`` days (``rag_eval.metrics.stats.drift``,
default margins, Holm across the metrics) — what ``traffic_summary``'s checks do.

* False alarms: ``--days`` undegraded days; every day with a trailing window is checked; a
  day fails when any metric's drift check fails. Bound: at most 5 % of the days.
* Detection: for each ``--degraded-share`` in turn, ``--degraded-days`` days whose answers are
  degraded with that probability (answered from a passage not retrieved), each checked against
  the last ``--window`` undegraded days.
* Budgets: the first day's traces sampled within ``--budget`` rows, and within cost budgets at
  gpt-4o-mini's prices (0.15 and 0.60 per million tokens) as the LLM judge's dry run plans each
  trace's requests (planning only: nothing is sent).

Needs the ``[traces]`` extra (the OpenTelemetry SDK).

    .venv/bin/python bench/traffic_drift_bench.py    # 20 undegraded days, 10 degraded at 0.5 and at 0.2
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples" / "rag_system"))

METRICS = ["faithfulness", "answer_relevancy", "context_relevancy"]


def judged_day(path: Path, budget: int, seed: int, judge):
    """Per-row results of one day's file: read, sampled within ``budget`` rows, judged."""
    from rag_eval.metrics.core.registry import build_metrics
    from rag_eval.metrics.stats.sampling import Budget, select
    from rag_eval.metrics.core.scoring import results_frame, score_all
    from rag_eval.metrics.sources.traces import Trace, read_traces, trace_samples
    from rag_eval.metrics.sources.traces.sessions import conversations

    traces = [t for t in read_traces(path) if isinstance(t, Trace)]
    chosen = select(traces, Budget(rows=budget), seed, groups=conversations(traces))  # whole conversations, as a day
    samples = trace_samples([traces[i] for i in chosen.rows])  # a session's traces as a conversation's turns
    return results_frame(score_all(samples, build_metrics(METRICS), judge))


def budgets(path: Path, rows: int, seed: int, price: tuple[float, float] = (0.15, 0.60)) -> None:
    """Print the traces sampled within ``rows``, and within three cost budgets (LLM judge, planned)."""
    from rag_eval.metrics.judges.llm import LLMConfig, LLMJudge
    from rag_eval.metrics.core.registry import build_metrics
    from rag_eval.metrics.stats.sampling import Budget, judging_cost, select
    from rag_eval.metrics.sources.traces import Trace, read_traces, trace_samples
    from rag_eval.metrics.sources.traces.sessions import conversations

    traces = [t for t in read_traces(path) if isinstance(t, Trace)]
    groups = conversations(traces)  # whole conversations, as a traffic day samples them
    chosen = select(traces, Budget(rows=rows), seed, groups=groups)
    print(f"rows budget {rows}: {len(chosen.rows)} of {len(traces)} traces sampled; per stratum "
          + ", ".join(f"{k} {v['sampled']}/{v['traces']}" for k, v in chosen.strata.items()))
    judge = LLMJudge(LLMConfig(base_url="http://127.0.0.1:9/v1", api_key="sk-plan-only", model="gpt-4o-mini",
                               cache_path=None))
    samples = trace_samples(traces)
    cost_of = judging_cost(samples, build_metrics(METRICS), judge, price)
    costs = [cost_of(i) for i in range(len(traces))]
    print(f"planned judging cost: {sum(costs) / len(costs):.6f} a trace ({len(METRICS)} metrics, gpt-4o-mini prices)")
    for budget in (0.005, 0.01, 0.02):
        chosen = select(traces, Budget(cost=budget, price=price), seed, cost_of=costs.__getitem__, groups=groups)
        print(f"cost budget {budget}: {len(chosen.rows)} traces sampled, planned cost {chosen.total_cost:.5f}")
    judge.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=20, help="undegraded days")
    parser.add_argument("--degraded-days", type=int, default=10, help="degraded days per share")
    parser.add_argument("--degraded-share", type=float, action="append", help="share of answers degraded "
                        "(repeatable; default 0.5 and 0.2)")
    parser.add_argument("--per-day", type=int, default=100)
    parser.add_argument("--budget", type=int, default=60, help="traces judged a day")
    parser.add_argument("--window", type=int, default=7)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    shares = args.degraded_share or [0.5, 0.2]

    import pandas as pd

    from rag_eval.metrics.stats.drift import DROP, drift
    from rag_eval.metrics.judges.offline import OfflineJudge
    from traffic import simulate

    judge, started = OfflineJudge(), time.perf_counter()
    first = date(2026, 1, 1)
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        days = simulate(folder / "normal", args.days, args.per_day, first.isoformat(), seed=args.seed)
        budgets(days[0], args.budget, args.seed)
        results = [judged_day(p, args.budget, args.seed, judge) for p in days]
        alarms = []
        for d in range(1, len(results)):
            window = pd.concat(results[max(0, d - args.window):d], ignore_index=True)
            found = drift(results[d], window, METRICS, seed=args.seed)
            failed = [m for m, r in found.items() if r.verdict == DROP]
            alarms.append(failed)
            if failed:
                print(f"false alarm on day {d + 1}: " + "; ".join(found[m].describe() for m in failed))
        false_days = sum(bool(a) for a in alarms)
        print(f"false alarms: {false_days}/{len(alarms)} undegraded days with a trailing window "
              f"({false_days / len(alarms):.1%}; bound 5 %); metric checks failed {sum(map(len, alarms))}/"
              f"{len(alarms) * len(METRICS)}")
        window = pd.concat(results[-args.window:], ignore_index=True)
        for k, share in enumerate(shares):
            start = first + timedelta(days=args.days + k * args.degraded_days)
            degraded = simulate(folder / f"degraded-{share}", args.degraded_days, args.per_day, start.isoformat(),
                                degrade_from=1, degraded_share=share, seed=args.seed + 1 + k)
            caught, drops = 0, {m: [] for m in METRICS}
            for path in degraded:
                found = drift(judged_day(path, args.budget, args.seed, judge), window, METRICS, seed=args.seed)
                caught += any(r.verdict == DROP for r in found.values())
                for m, r in found.items():
                    drops[m].append(r.difference)
            mean_drop = ", ".join(f"{m} {sum(v) / len(v):+.3f}" for m, v in drops.items())
            print(f"detection at {share:.0%} of answers degraded: {caught}/{len(degraded)} days "
                  f"({caught / len(degraded):.0%}); mean difference {mean_drop}")
    print(f"{args.per_day} requests a day, {args.budget} judged, window {args.window} days, offline judge; "
          f"{time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
