"""Cascade bench: does the judge cascade's interval (``rag_eval.metrics.stats.cascade``) hold the strong
judge's mean over all rows, and how much narrower is it than the strong judge alone at the same cost?

Every draw builds a *version* as ``bench/trust_bench.py`` does: ``N`` rows (``--rows``, 2,000)
drawn i.i.d. from a pool of (human label, offline judge score) rows: HaluEval QA's *tuned*
(rows 0-99 and 300-399) and *held-out* (400-499) pools at right-answer shares 0.7 and 0.4, and
the RAGAS annotated metrics' rows, with the offline judge's scores from trust_bench's cache
(``--cache``). On each version the **cheap judge** is the offline judge (its score of every row)
and the **strong judge** is known on every row: the *labels* (a perfect strong judge) or a
*noisy* copy of them (each version row's label flipped with probability ``NOISE``, drawn anew
per version: an imperfect one). The truth is the strong judge's mean over the version's ``N``
rows: what a full strong run would publish.

Per budget (5, 10, 20, 50 % of the rows) and ``--draws`` versions (default 400; Monte-Carlo
standard error of a 95 % coverage ≈ 1.1 %), each version's rows drawn with the version's
number as seed: the cascade with **uniform** sampling, with **active** sampling (the cheap
judge's uncertainty ``sqrt(f (1 - f))``, floor ``--floor``), and the **classical** interval of
the strong judge alone on the uniform sample (the same estimator with ``lam = 0``: the sample's
mean with the finite-population variance). Reported: coverage of each 95 % interval, mean
widths, the cascade's width over the classical one (uniform and active), and the strong
requests (rows) used.

``--tune`` compares floors (0.1, 0.25, 0.5, 0.75, 0.9, 1 = uniform) on the *tuned* HaluEval pools only,
the rows the default floor (``rag_eval.metrics.stats.cascade.FLOOR``) was chosen on; the main table
reports the held-out pools and RAGAS apart from them.

Run from the repo root::

    .venv/bin/python bench/cascade_bench.py --data DIR [--draws 400] [--rows 2000] [--json out.json]
    .venv/bin/python bench/cascade_bench.py --data DIR --tune
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

from trust_bench import Pool, offline_scores, pools  # noqa: E402

from rag_eval.metrics.stats.cascade import (FLOOR, cascade_mean, inclusion_probabilities,  # noqa: E402
                                            row_uniforms, sample_of, score_uncertainty)

BUDGETS = (0.05, 0.1, 0.2, 0.5)
NOISE = 0.1
STRONG = ("labels", "noisy labels")
TUNE_FLOORS = (0.1, 0.25, 0.5, 0.75, 0.9, 1.0)
KINDS = ("uniform", "active", "classical")
BIASED = {"offline squashed", "offline lenient", "offline aligned"}  # trust_bench's variants of the offline judge


def configurations(data: Path, cache: Path) -> list[tuple[str, str, Pool]]:
    """(set and pool, cheap judge, Pool) of trust_bench's pools with the offline judge as cheap judge."""
    return [(f"{dataset} {pool_name}", judge, pool) for dataset, pool_name, judge, pool
            in pools(data, offline_scores(data, cache)) if judge.startswith("offline") and judge not in BIASED]


def simulate(pool: Pool, strong: str, budgets=BUDGETS, rows: int = 2000, draws: int = 400, seed: int = 0,
             floor: float = FLOOR) -> dict[float, dict]:
    """Coverage, widths and strong rows of the three intervals (uniform and active cascade, classical)
    per budget over ``draws`` versions of ``rows`` rows from ``pool``, with the strong judge ``strong``
    (``"labels"`` or ``"noisy labels"``). Per budget: ``<kind>_coverage``, ``<kind>_width`` (mean),
    ``<kind>_rows`` (mean strong rows) for kind in uniform, active, classical, and ``coverage_se``."""
    rng = np.random.default_rng(seed)
    ids = [str(i) for i in range(rows)]
    hits = {b: np.zeros((draws, 3), bool) for b in budgets}
    widths = {b: np.zeros((draws, 3)) for b in budgets}
    used = {b: np.zeros((draws, 3)) for b in budgets}
    for d in range(draws):
        index = rng.choice(len(pool.w), size=rows, p=pool.w)
        y, f = pool.y[index], pool.f[index]
        if strong == "noisy labels":
            y = np.where(rng.random(rows) < NOISE, 1.0 - y, y)
        truth = float(y.mean())
        uniforms = row_uniforms(ids, seed + d)
        uncertainty = score_uncertainty(f)
        for b in budgets:
            uniform = sample_of(uniforms, inclusion_probabilities(rows, b), "uniform")
            active = sample_of(uniforms, inclusion_probabilities(rows, b, uncertainty, floor), "active")
            estimates = (cascade_mean(f, y, uniform).estimate, cascade_mean(f, y, active).estimate,
                         cascade_mean(f, y, uniform, lam=0.0).estimate)
            for k, est in enumerate(estimates):
                hits[b][d, k] = est.ci_low <= truth <= est.ci_high
                widths[b][d, k] = est.ci_high - est.ci_low
                used[b][d, k] = est.n
    out = {}
    for b in budgets:
        cell: dict[str, float] = {}
        for k, kind in enumerate(KINDS):
            cell |= {f"{kind}_coverage": float(hits[b][:, k].mean()), f"{kind}_width": float(widths[b][:, k].mean()),
                     f"{kind}_rows": float(used[b][:, k].mean())}
        cell["coverage_se"] = float(np.sqrt(0.95 * 0.05 / draws))
        out[b] = cell
    return out


def tune(configs: list[tuple[str, str, Pool]], rows: int, draws: int, seed: int) -> None:
    """Per floor, on the tuned HaluEval pools only: the active interval's mean width over the uniform
    one's (geometric mean over pools and budgets, per strong judge and over both) and its coverage range."""
    tuned = [c for c in configs if "tuned" in c[0]]
    print("| floor | active width / uniform width: " + " · ".join(STRONG) + " · both | active coverage (%) |\n"
          "|---|---|---|")
    for floor in TUNE_FLOORS:
        ratios: dict[str, list[float]] = {strong: [] for strong in STRONG}
        coverages = []
        for k, (_, _, pool) in enumerate(tuned):
            for strong in STRONG:
                for r in simulate(pool, strong, rows=rows, draws=draws, seed=seed + k, floor=floor).values():
                    ratios[strong].append(r["active_width"] / r["uniform_width"])
                    coverages.append(r["active_coverage"])
        means = [float(np.exp(np.mean(np.log(v)))) for v in [*ratios.values(), np.concatenate(list(ratios.values()))]]
        print(f"| {floor} | {' · '.join(f'{m:.3f}' for m in means)} | "
              f"{100 * min(coverages):.1f}-{100 * max(coverages):.1f} |", flush=True)


def print_groups(results: list[dict]) -> None:
    """Per group of pools (tuned HaluEval, held-out HaluEval, RAGAS) and strong judge: the cascade's
    coverage range with the cells below 93 % and above 97 %, and the active width over the uniform one
    (geometric mean over pools and budgets)."""
    print("| pools | strong judge | coverage uniform, active (%) | cells < 93 · > 97 | active / uniform width |")
    print("|---|---|---|---|---|")
    for group in ("tuned", "held-out", "RAGAS"):
        for strong in STRONG:
            cells = [r for r in results if group in r["pool"] and r["strong"] == strong]
            covered = [r[f"{kind}_coverage"] for r in cells for kind in ("uniform", "active")]
            ratio = np.exp(np.mean([np.log(r["active_width"] / r["uniform_width"]) for r in cells]))
            print(f"| {group} | {strong} | {100 * min(covered):.1f}-{100 * max(covered):.1f} "
                  f"| {sum(c < 0.93 for c in covered)} · {sum(c > 0.97 for c in covered)} | {ratio:.3f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="folder holding halueval_qa/ and ragas_annotated/")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "rag-eval-trust-bench",
                        help="folder for the offline judge's scores (trust_bench's)")
    parser.add_argument("--draws", type=int, default=400, help="versions drawn per pool and strong judge")
    parser.add_argument("--rows", type=int, default=2000, help="rows of each version (N)")
    parser.add_argument("--floor", type=float, default=FLOOR, help="active sampling's floor (share of the uniform rate)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tune", action="store_true", help="compare floors on the tuned HaluEval pools")
    parser.add_argument("--json", type=Path, help="also write every figure to this file")
    args = parser.parse_args()
    configs = configurations(args.data, args.cache)
    start = time.perf_counter()
    if args.tune:
        tune(configs, args.rows, args.draws, args.seed)
        print(f"\n{time.perf_counter() - start:.0f} s")
        return
    print(f"N = {args.rows} rows per version, {args.draws} versions per line (coverage standard error ≈ "
          f"{100 * np.sqrt(0.95 * 0.05 / args.draws):.1f} %), active floor {args.floor}; coverage of the 95 % "
          "interval of the strong judge's mean over the N rows, in %; widths are means; ratio = cascade width / "
          "classical width (the strong judge alone on the uniform sample); rows = mean strong requests\n")
    print("| set, pool | strong judge | budget | coverage uniform · active · classical | classical width "
          "| uniform ratio | active ratio | rows uniform · active |")
    print("|---|---|---|---|---|---|---|---|")
    results = []
    for k, (pool_name, judge, pool) in enumerate(configs):
        for strong in STRONG:
            for budget, r in simulate(pool, strong, rows=args.rows, draws=args.draws, seed=args.seed + k,
                                      floor=args.floor).items():
                results.append({"pool": pool_name, "cheap": judge, "strong": strong, "budget": budget, **r})
                print(f"| {pool_name} | {strong} | {100 * budget:.0f} % | {100 * r['uniform_coverage']:.1f} · "
                      f"{100 * r['active_coverage']:.1f} · {100 * r['classical_coverage']:.1f} "
                      f"| {r['classical_width']:.3f} | {r['uniform_width'] / r['classical_width']:.2f} "
                      f"| {r['active_width'] / r['classical_width']:.2f} "
                      f"| {r['uniform_rows']:.0f} · {r['active_rows']:.0f} |", flush=True)
    print(f"\n{len(results)} lines in {time.perf_counter() - start:.0f} s.\n")
    print_groups(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
