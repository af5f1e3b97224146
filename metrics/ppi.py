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

The formulas are those of ``ppi_py.ppi_mean_ci`` and ``ppi_mean_pointestimate`` (ppi-python
0.2.3, the authors' package) for a one-dimensional mean with unit weights; the tests check
this module against figures computed with that package.
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


def _z(confidence: float) -> float:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


def classical_mean(labels: Any, confidence: float = 0.95) -> MeanEstimate:
    """The labels' mean with its normal (CLT) interval: what the labels alone say.

    Parameters
    ----------
    labels : array-like of float, shape (n,)
        Human labels (binary 0/1 or on the metric's scale), ``n >= 2``.
    confidence : float
        Two-sided coverage of the interval, in (0, 1).

    Raises
    ------
    ValueError
        Fewer than two labels, a non-finite label, or a confidence outside (0, 1).
    """
    y = _as_vector(labels, "labels")
    if len(y) < 2:
        raise ValueError(f"an interval needs at least 2 labels, got {len(y)}")
    z = _z(confidence)
    mean, se = float(y.mean()), float(y.std() / math.sqrt(len(y)))
    return MeanEstimate(mean, mean - z * se, mean + z * se, se, len(y), 0, 0.0, "classical", confidence)


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
             lam: float | None = None) -> MeanEstimate:
    """PPI++ estimate of the mean human label, with its confidence interval.

    ``estimate = lam * mean(f(unlabelled)) + mean(Y - lam * f(labelled))`` and
    ``se² = lam² var(f(unlabelled)) / N + var(Y - lam * f(labelled)) / n`` (population
    variances), the interval ``estimate ± z se`` (Angelopoulos, Duchi & Zrnic 2023, eq. 4).

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

    Returns
    -------
    MeanEstimate
        With ``method="ppi++"``; higher or lower is better as the metric's direction says.

    Raises
    ------
    ValueError
        ``labels`` and ``judged`` of different lengths, fewer than two labels, no unlabelled
        row, a non-finite value, or a confidence outside (0, 1).
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
    z = _z(confidence)
    rectifier = y - lam * f
    estimate = float(lam * f_unlabelled.mean() + rectifier.mean())
    se = math.sqrt(float((lam * f_unlabelled).std()) ** 2 / len(f_unlabelled)
                   + float(rectifier.std()) ** 2 / len(y))
    return MeanEstimate(estimate, estimate - z * se, estimate + z * se, se, len(y), len(f_unlabelled),
                        float(lam), "ppi++", confidence)


def difference(baseline: MeanEstimate, candidate: MeanEstimate) -> MeanEstimate:
    """``candidate - baseline`` of two estimates from independent samples (two versions'
    rows and labels), with the normal interval of ``sqrt(se_b² + se_c²)`` at the candidate's
    confidence. ``n`` and ``N`` are the candidate's; ``lam`` is NaN (two were used).
    """
    se = math.hypot(baseline.se, candidate.se)
    z = _z(candidate.confidence)
    value = candidate.estimate - baseline.estimate
    method = candidate.method if candidate.method == baseline.method else "mixed"
    return MeanEstimate(value, value - z * se, value + z * se, se, candidate.n, candidate.N, math.nan,
                        method, candidate.confidence)
