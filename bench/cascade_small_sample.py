"""Coverage of the judge cascade's interval on small samples (``rag_eval.metrics.stats.cascade.cascade_mean``).

Synthetic versions of N rows: the strong judge's score is uniform on [0, 1] (continuous) or a pass with
probability 0.8 (binary); the cheap judge's is the strong one plus normal noise (sd 0.3), cut to [0, 1]. Each
draw samples actively at the budget and asks for the interval of the strong judge's mean over the N rows; the
bench prints, per cell, the draws given no estimate (fewer strong rows than an interval needs), the coverage of
the others and how many had zero width. Run from the repo root::

    .venv/bin/python bench/cascade_small_sample.py [--draws 2000] [--seed 0]
"""
from __future__ import annotations

import argparse

import numpy as np

from rag_eval.metrics.stats.cascade import StrongSample, cascade_mean, inclusion_probabilities, score_uncertainty

CELLS = ((30, 0.3), (30, 0.5), (100, 0.1), (100, 0.2), (200, 0.1), (1000, 0.02))


def trial(rng: np.random.Generator, rows: int, budget: float, binary: bool) -> tuple[bool, float] | None:
    """One version's (covered, width), or ``None`` when no estimate is given."""
    strong = (rng.random(rows) < 0.8).astype(float) if binary else rng.random(rows)
    cheap = np.clip(strong + rng.normal(0, 0.3, rows), 0, 1)
    pi = inclusion_probabilities(rows, budget, score_uncertainty(cheap))
    drawn = rng.random(rows) < pi
    try:
        found = cascade_mean(cheap, np.where(drawn, strong, np.nan), StrongSample(pi, drawn, "active")).estimate
    except ValueError:
        return None
    return found.ci_low <= strong.mean() <= found.ci_high, found.ci_high - found.ci_low


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    for rows, budget in CELLS:
        for binary in (False, True):
            out = [trial(rng, rows, budget, binary) for _ in range(args.draws)]
            given = [o for o in out if o is not None]
            print(f"N={rows:5} budget={budget:4} {'binary' if binary else 'continuous':10} no estimate={out.count(None):5} "
                  f"coverage={np.mean([o[0] for o in given]):.3f} zero-width={sum(o[1] == 0 for o in given)}")


if __name__ == "__main__":
    main()
