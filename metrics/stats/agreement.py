"""How far a judge's scores agree with human labels: the statistics, in one place.

``rag-eval calibrate`` (``rag_eval.metrics.stats.calibrate``), the prediction-powered estimates of a
version's labelled rows (``rag_eval.metrics.stats.estimates``) and the benches use these. Every figure is
in [0, 1] or [-1, 1], higher is better (more agreement); NaN when undefined (one class only,
a constant side).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd


def bootstrap(values: np.ndarray, statistic, rounds: int = 1000, seed: int = 0) -> list[float]:
    """A percentile bootstrap 95 % interval of ``statistic`` over the rows of ``values``
    (Efron & Tibshirani 1993); ``[nan, nan]`` for fewer than two rows."""
    if len(values) < 2:
        return [math.nan, math.nan]
    rng = np.random.default_rng(seed)
    stats = [statistic(values[rng.integers(0, len(values), len(values))]) for _ in range(rounds)]
    low, high = np.nanpercentile(np.array(stats, dtype=float), [2.5, 97.5])
    return [round(float(low), 4), round(float(high), 4)]


def auroc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the ROC curve (Mann-Whitney: chance that a positive outscores a negative,
    ties half); NaN without both classes. 0.5 is chance, 1 perfect."""
    positive, negative = scores[labels == 1], scores[labels == 0]
    if not len(positive) or not len(negative):
        return math.nan
    wins = (positive[:, None] > negative[None, :]).sum() + 0.5 * (positive[:, None] == negative[None, :]).sum()
    return float(wins / (len(positive) * len(negative)))


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rank correlation (Pearson of average ranks); NaN when one side is constant."""
    rx, ry = pd.Series(x).rank().to_numpy(), pd.Series(y).rank().to_numpy()
    if rx.std() == 0 or ry.std() == 0:
        return math.nan
    return float(np.corrcoef(rx, ry)[0, 1])


def kendall(x: np.ndarray, y: np.ndarray) -> float:
    """Kendall's tau-b (ties corrected); NaN when one side is constant."""
    dx, dy = np.sign(x[:, None] - x[None, :]), np.sign(y[:, None] - y[None, :])
    upper = np.triu_indices(len(x), 1)
    dx, dy = dx[upper], dy[upper]
    denominator = math.sqrt(float((dx != 0).sum()) * float((dy != 0).sum()))
    return float((dx * dy).sum() / denominator) if denominator else math.nan


def accuracy(judged: np.ndarray, labels: np.ndarray) -> float:
    """Share of rows where two pass/fail verdicts (arrays of 0/1 or booleans) agree; NaN for no row."""
    judged, labels = np.asarray(judged, dtype=bool), np.asarray(labels, dtype=bool)
    return float((judged == labels).mean()) if len(judged) else math.nan


def cohen_kappa(judged: np.ndarray, labels: np.ndarray) -> float:
    """Cohen's kappa of two pass/fail verdicts (Cohen 1960): ``(p_o - p_e) / (1 - p_e)``, the
    agreement beyond what the two sides' pass rates give by chance (``p_e = p_j p_h + (1 - p_j)(1 - p_h)``);
    1 perfect, 0 chance, below 0 worse than chance; NaN when both sides give one and the same
    verdict throughout (``p_e = 1``) or for no row."""
    judged, labels = np.asarray(judged, dtype=float), np.asarray(labels, dtype=float)
    if not len(judged):
        return math.nan
    observed = float((judged == labels).mean())
    p_judge, p_human = float(judged.mean()), float(labels.mean())
    chance = p_judge * p_human + (1 - p_judge) * (1 - p_human)
    return math.nan if chance == 1.0 else (observed - chance) / (1 - chance)
