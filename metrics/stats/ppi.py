"""Prediction-powered inference: a judge's scores on every row, corrected by human labels on a few.

A judge (the offline one, a cheap model, an expensive one) scores all ``N`` rows of a version;
a person labels a random ``n`` of them. The labels alone give the classical estimate of the
labels' mean, with a wide interval; the judge's mean is narrow but biased by however far the
judge disagrees with people. Prediction-powered inference (Angelopoulos et al., *Science* 382,
2023) combines the two: the judge's mean over the unlabelled rows, corrected by the judge's
average error on the labelled rows. PPI++ (Angelopoulos, Duchi & Zrnic, arXiv:2311.01453)
weighs the judge's part with a power-tuning parameter ``lam`` in [0, 1] chosen from the data,
so the interval is never wider than the classical one (up to estimation noise): ``lam = 0`` is
the classical interval, ``lam = 1`` plain PPI. ARES (Saad-Falcon et al., NAACL 2024) uses this
for RAG judges.

The interval is valid whatever the judge's quality: a better judge only makes it narrower.
Its validity assumes the labelled rows are a uniformly random sample of the version's rows
(``rag-eval annotate export`` draws them so).

**Few labels.** The normal interval of PPI++ (as ppi-python computes it) needs the labelled
rows to show the judge's errors. A judge that disagrees with people on 5 % of the rows
shows no disagreement at all in 25 labels 28 % of the time; the rectifier's variance is then
estimated near 0 and the interval, centred on the judge's biased mean, misses (plain PPI++'s
coverage on the trust bench, ``bench/trust_bench.py``: docs/explanation/trust.md). As Agresti & Coull (1998) do for a proportion (z²/2
pseudo-successes and as many pseudo-failures) and Agresti & Min (2005) for matched pairs
(a pseudo-count in each cell of the 2×2 table), the labelled rows are joined by four
pseudo-rows of weight z²/4 each: a label at either end of the scale paired with a judge score
at either end of the judge's observed range. The rectifier's mean and variance are taken
over the ``n + z²`` weighted rows; with ``lam = 0`` this is exactly the Agresti–Coull
interval. ``pseudo=0`` gives plain PPI++, the formulas of ``ppi_py.ppi_mean_ci`` and
``ppi_mean_pointestimate`` (ppi-python 0.2.3, the authors' package) for a one-dimensional
mean with unit weights; the tests check this module against figures computed with that
package; ``pseudo=0.5`` at ``lam = 1`` is Agresti & Min's "Wald+2" interval for the
difference of matched proportions (*Statistics in Medicine* 24:729, 2005).

**Why z²/4, and the over-coverage it costs.** With a near-perfect judge and few labels the
interval over-covers. This is the price of staying valid for a judge
with rare one-sided errors, not a slack to tune away: when ``n`` labels happen to show none
of its errors, a judge wrong on a share ``e`` of the rows gives the same data as a perfect
judge of a population whose mean is higher by ``e``, so the interval drawn from those data
must reach ``e`` for the first to be covered, and is then far wider than the second needs.
A lighter weight was tried on the trust bench's *tuned* HaluEval cells and checked on the
held-out and RAGAS cells: Agresti–Min's ½ per row, and ½ at ``lam = 1`` moving linearly to
z²/4 at ``lam = 0``. Both brought the near-perfect judges closer to 95 % but let a lenient judge
fall below 93 % on tuned HaluEval cells, then further on the RAGAS answer_correctness cell
(the figures: docs/explanation/trust.md): a rule that gains on one set and loses on another is
not kept.
``bench/trust_bench.py --sweep`` shows the trade-off over the error rate ``e`` of a binary
judge with one-sided errors.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from statistics import NormalDist
from typing import Any

import numpy as np


@dataclass(frozen=True)
class MeanEstimate:
    """An estimate of a mean with its two-sided confidence interval.

    ``method`` is ``"ppi++"`` (judge scores corrected by labels) or ``"classical"`` (the
    labels alone); ``lam`` is PPI++'s power-tuning parameter (0 for classical); ``n`` the
    labelled rows, ``N`` the rows the judge scored without a label; ``se`` the standard error
    (the interval is ``estimate ± z * se``).
    """

    estimate: float
    ci_low: float
    ci_high: float
    se: float
    n: int
    N: int
    lam: float
    method: str
    confidence: float

    def to_dict(self, digits: int = 6) -> dict[str, Any]:
        """The fields as a JSON-ready dict, floats rounded to ``digits``."""
        return {k: round(v, digits) if isinstance(v, float) and math.isfinite(v) else v
                for k, v in asdict(self).items()}


def _as_vector(values: Any, name: str) -> np.ndarray:
    array = np.asarray(values, dtype=float).reshape(-1)
    if not np.isfinite(array).all():
        raise ValueError(f"{name}: every value must be a finite number")
    return array


def z_value(confidence: float) -> float:
    """The standard normal quantile of a two-sided interval at ``confidence`` (1.96 at 0.95): the
    interval is the estimate ± ``z_value(confidence)`` standard errors.

    Raises
    ------
    ValueError
        When ``confidence`` is not strictly between 0 and 1, naming it.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


def classical_mean(labels: Any, confidence: float = 0.95, pseudo: float | None = None,
                   scale: tuple[float, float] = (0.0, 1.0)) -> MeanEstimate:
    """The labels' mean with its interval: what the labels alone say.

    By default the Agresti–Coull interval (z²/2 pseudo-labels at either end of ``scale``
    joined to the labels; Agresti & Coull 1998); ``pseudo=0`` gives the plain normal (Wald)
    interval of the labels' mean. It is :func:`ppi_mean` with ``lam = 0``.

    Parameters
    ----------
    labels : array-like of float, shape (n,)
        Human labels (binary 0/1 or on the metric's scale), ``n >= 2``.
    confidence : float
        Two-sided coverage of the interval, in (0, 1).
    pseudo : float, optional
        Weight of each pseudo-row (see :func:`ppi_mean`); ``None`` is z²/4, 0 none.
    scale : (low, high)
        The labels' scale (the metric's value range), widened to the labels seen.

    Raises
    ------
    ValueError
        Fewer than two labels, a non-finite label, a negative ``pseudo`` or a confidence
        outside (0, 1).
    """
    y = _as_vector(labels, "labels")
    if len(y) < 2:
        raise ValueError(f"an interval needs at least 2 labels, got {len(y)}")
    z = z_value(confidence)
    mean, variance, weight = _rectifier(y, np.zeros_like(y), 0.0, _pseudo(pseudo, z), scale, (0.0, 0.0))
    se = math.sqrt(variance / weight)
    return MeanEstimate(mean, mean - z * se, mean + z * se, se, len(y), 0, 0.0, "classical", confidence)


def _pseudo(pseudo: float | None, z: float) -> float:
    if pseudo is None:
        return z * z / 4.0
    if not pseudo >= 0.0:
        raise ValueError(f"pseudo must be a weight >= 0, got {pseudo}")
    return float(pseudo)


def _rectifier(y: np.ndarray, f: np.ndarray, lam: float, pseudo: float, scale: tuple[float, float],
               judge_range: tuple[float, float]) -> tuple[float, float, float]:
    """Weighted mean and population variance of ``y - lam * f`` over the labelled rows and
    four pseudo-rows of weight ``pseudo`` (a label at either end of ``scale`` widened to the
    labels seen, with a score at either end of ``judge_range``), and the total weight."""
    residuals = y - lam * f
    if pseudo == 0.0:
        return float(residuals.mean()), float(residuals.var()), float(len(y))
    low, high = min(scale[0], float(y.min())), max(scale[1], float(y.max()))
    corners = np.array([label - lam * score for label in (low, high) for score in judge_range])
    weight = len(y) + 4.0 * pseudo
    mean = (float(residuals.sum()) + pseudo * float(corners.sum())) / weight
    variance = (float(((residuals - mean) ** 2).sum()) + pseudo * float(((corners - mean) ** 2).sum())) / weight
    return mean, variance, weight


def power_tuning(labels: np.ndarray, judged: np.ndarray, unlabelled: np.ndarray) -> float:
    """PPI++'s variance-minimising ``lam`` for a mean, clipped to [0, 1].

    ``cov(Y, f) / ((1 + n/N) var(f))``: the covariance over the labelled rows (divided by
    ``n``), the judge's variance over labelled and unlabelled rows together (divided by
    ``n + N - 1``), as ``ppi_py._calc_lam_glm`` computes it. A constant judge gives 0.
    """
    n, big_n = len(labels), len(unlabelled)
    covariance = float(np.mean((labels - labels.mean()) * (judged - judged.mean())))
    variance = float(np.var(np.concatenate([judged, unlabelled]), ddof=1))
    if variance == 0.0:
        return 0.0
    return float(np.clip(covariance / ((1.0 + n / big_n) * variance), 0.0, 1.0))


def ppi_mean(labels: Any, judged: Any, unlabelled: Any, confidence: float = 0.95,
             lam: float | None = None, pseudo: float | None = None,
             scale: tuple[float, float] = (0.0, 1.0)) -> MeanEstimate:
    """PPI++ estimate of the mean human label, with its confidence interval.

    ``estimate = lam * mean(f(unlabelled)) + mean(Y - lam * f(labelled))`` and
    ``se² = lam² var(f(unlabelled)) / N + var(Y - lam * f(labelled)) / n`` (population
    variances), the interval ``estimate ± z se`` (Angelopoulos, Duchi & Zrnic 2023, eq. 4),
    where the rectifier ``Y - lam * f``'s mean and variance are taken over the labelled rows
    and four pseudo-rows of weight ``pseudo`` each, ``n`` counting their weight (the
    module docstring says why).

    Parameters
    ----------
    labels : array-like of float, shape (n,)
        Human labels of the labelled rows (binary 0/1 or on the metric's scale), ``n >= 2``.
    judged : array-like of float, shape (n,)
        The judge's scores of the same rows, in the same order.
    unlabelled : array-like of float, shape (N,)
        The judge's scores of the rows without a label, ``N >= 1``.
    confidence : float
        Two-sided coverage of the interval, in (0, 1); 0.95 by default.
    lam : float, optional
        The power-tuning parameter; ``None`` picks it from the data (:func:`power_tuning`).
    pseudo : float, optional
        Weight of each pseudo-row: ``None`` is z²/4 (the Agresti–Coull interval at
        ``lam = 0``), 0 plain PPI++ (ppi-python's interval).
    scale : (low, high)
        The labels' scale (the metric's value range, (0, 1) by default), widened to the
        labels seen: the pseudo-rows' labels.

    Returns
    -------
    MeanEstimate
        With ``method="ppi++"``; higher or lower is better as the metric's direction says.

    Raises
    ------
    ValueError
        ``labels`` and ``judged`` of different lengths, fewer than two labels, no unlabelled
        row, a non-finite value, a negative ``pseudo`` or a confidence outside (0, 1).
    """
    y, f = _as_vector(labels, "labels"), _as_vector(judged, "judged")
    f_unlabelled = _as_vector(unlabelled, "unlabelled")
    if len(y) != len(f):
        raise ValueError(f"labels ({len(y)}) and judged ({len(f)}) must be of one length")
    if len(y) < 2:
        raise ValueError(f"an interval needs at least 2 labels, got {len(y)}")
    if not len(f_unlabelled):
        raise ValueError("no unlabelled row: use classical_mean when every row is labelled")
    if lam is None:
        lam = power_tuning(y, f, f_unlabelled)
    z = z_value(confidence)
    judge_range = (float(min(f.min(), f_unlabelled.min())), float(max(f.max(), f_unlabelled.max())))
    mean, variance, weight = _rectifier(y, f, lam, _pseudo(pseudo, z), scale, judge_range)
    estimate = float(lam * f_unlabelled.mean() + mean)
    se = math.sqrt(float((lam * f_unlabelled).std()) ** 2 / len(f_unlabelled) + variance / weight)
    return MeanEstimate(estimate, estimate - z * se, estimate + z * se, se, len(y), len(f_unlabelled),
                        float(lam), "ppi++", confidence)


def difference(baseline: MeanEstimate, candidate: MeanEstimate) -> MeanEstimate:
    """``candidate - baseline`` of two estimates from independent samples (two versions'
    rows and labels), with the normal interval of ``sqrt(se_b² + se_c²)`` at the candidate's
    confidence. ``n`` and ``N`` are the candidate's; ``lam`` is NaN (two were used).
    """
    se = math.hypot(baseline.se, candidate.se)
    z = z_value(candidate.confidence)
    value = candidate.estimate - baseline.estimate
    method = candidate.method if candidate.method == baseline.method else "mixed"
    return MeanEstimate(value, value - z * se, value + z * se, se, candidate.n, candidate.N, math.nan,
                        method, candidate.confidence)


def difference_test(baseline: MeanEstimate, candidate: MeanEstimate, sign: float,
                    margin: float) -> tuple[float, float, float, float, float]:
    """``(difference, low, high, p_regression, p_improvement)`` of two versions' estimates of a mean:
    :func:`difference` turned by ``sign`` (-1 for a lower-is-better metric) so that + is better, and the
    normal one-sided p-values ``Φ((d + margin) / se)`` of a drop beyond ``-margin`` and
    ``Φ((margin - d) / se)`` of a rise beyond ``+margin``; with ``se = 0`` (every score of both alike)
    they are 1 or 0 as the difference lies. Nothing raised."""
    diff = difference(baseline, candidate)
    value, low, high = sign * diff.estimate, *sorted((sign * diff.ci_low, sign * diff.ci_high))
    if diff.se > 0:
        normal = NormalDist()
        return value, low, high, normal.cdf((value + margin) / diff.se), normal.cdf((margin - value) / diff.se)
    return value, low, high, float(value >= -margin), float(value <= margin)


def estimate_basis(estimate: MeanEstimate, *others: MeanEstimate) -> str:
    """What estimates rest on, as comparisons name it: ``cascade (n=21/200)`` for a judge cascade's
    (``method`` ``cascade-…``: strong-judged rows / rows covered, its ``N``), ``ppi (n=10/30)`` for the
    human labels' (labelled rows / rows scored ``ok``, ``n + N``); with ``others`` (estimates of the same
    kind, e.g. the candidate's), theirs after ``vs``: ``cascade (n=21/200 vs 19/200)``."""
    cascade = estimate.method.startswith("cascade")
    counts = [f"{e.n}/{e.N if cascade else e.n + e.N}" for e in (estimate, *others)]
    return f"{'cascade' if cascade else 'ppi'} (n={' vs '.join(counts)})"
