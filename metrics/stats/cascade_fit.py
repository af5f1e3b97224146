"""The fitted parts of a judge cascade's estimate (``rag_eval.metrics.stats.cascade.cascade_mean``): the cheap
score's power-tuned weight ``lam``, Student's t quantile of its interval, the rows' checks and the
judges' agreement."""
from __future__ import annotations

import numpy as np


def t_value(z: float, df: int) -> float:
    """Student's t quantile with ``df`` degrees of freedom at the normal quantile ``z`` (Cornish–Fisher
    expansion, Abramowitz & Stegun 26.7.5: within 0.003 of the exact value from ``df`` = 5 at z = 1.96)."""
    g1 = (z ** 3 + z) / 4
    g2 = (5 * z ** 5 + 16 * z ** 3 + 3 * z) / 96
    g3 = (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / 384
    return z + g1 / df + g2 / df ** 2 + g3 / df ** 3


def power_tuning(f: np.ndarray, y: np.ndarray, w: np.ndarray, intercept: float | None) -> float:
    """The ``lam`` minimising ``sum w (y - lam f - b)²`` over the drawn rows (``b`` fitted with it,
    or the ``intercept`` given), clipped to [0, 1] as PPI++ does; 0 for no row or a constant cheap judge."""
    if not len(w):
        return 0.0
    if intercept is None:
        f, y = f - np.average(f, weights=w), y - np.average(y, weights=w)
    else:
        y = y - intercept
    spread = float((w * f * f).sum())
    return float(np.clip((w * f * y).sum() / spread, 0.0, 1.0)) if spread > 0 else 0.0


def stream_variance(y: np.ndarray, pi: np.ndarray, theta: float) -> tuple[float, int]:
    """The variance of one row's strong score around ``theta`` and its degrees of freedom, from the drawn rows'
    scores ``y`` weighted by ``1 / pi`` (with the ``k / (k - 1)`` correction of ``k`` rows): what a sample of a
    stream adds when the estimate is of the stream's mean (production traffic), not of the rows sampled.

    Raises
    ------
    ValueError
        Fewer than two drawn rows: the spread cannot be estimated.
    """
    if len(y) < 2:
        raise ValueError(f"{len(y)} strong-judged row(s): the spread of the traffic's strong scores needs at least 2")
    return float(np.average((y - theta) ** 2, weights=1.0 / pi)) * len(y) / (len(y) - 1), len(y) - 1


def check_rows(f: np.ndarray, y: np.ndarray, pi: np.ndarray, drawn: np.ndarray) -> None:
    """The first bad row, as a one-line error naming its line (from 1) and field."""
    problems = (
        (drawn & ~np.isfinite(y), "strong: drawn for the strong judge but has no finite strong score"),
        (np.isinf(f), "cheap: the cheap score must be finite (NaN for none)"),
        (np.isnan(f) & (pi < 1.0), "cheap: no cheap score, so the row must be strong-judged for sure (pi = 1)"),
        (~(pi > 0.0) | (pi > 1.0), "pi: the inclusion probability must lie in (0, 1]: a row that can never be "
                                   "drawn would bias the estimate"),
    )
    for bad, message in problems:
        if bad.any():
            raise ValueError(f"line {int(np.argmax(bad)) + 1}: {message}")


def agreement_share(f: np.ndarray, y: np.ndarray, pi: np.ndarray, both: np.ndarray, threshold: float,
                    higher: bool) -> float | None:
    """Share of rows where the judges' pass/fail agree, from the rows ``both`` scored, weights ``1 / pi``."""
    if not both.any():
        return None
    sign = 1.0 if higher else -1.0
    same = (sign * f[both] >= sign * threshold) == (sign * y[both] >= sign * threshold)
    return float(np.average(same, weights=1.0 / pi[both]))
