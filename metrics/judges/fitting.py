"""Fitting the verifier's logistic model (``verifier.Verifier``) to labelled answers.

A labelled unit is a *group*: one answer's statements, whose mean probability of support (the
row's offline faithfulness) is fitted to the answer's label, the share of its statements supported
(1 or 0 for a single statement or a pass/fail label). Statements the offline rules decide alone
(``OfflineJudge.support_features`` gives ``None``) count in the mean with their fixed verdict.
``tools/train_verifier.py`` fits the shipped weights from zero (:func:`fit`); ``rag-eval align``
rescales them to a team's labels (:func:`rescale`).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize

from rag_eval.metrics.judges.verifier import FEATURES, Verifier
from rag_eval.metrics.errors import InputError

#: L2 strength on the shipped model's weights, over the summed group weights (1).
PENALTY = 1e-3
#: The most :func:`rescale` may sharpen the shipped logit: labels the logit separates perfectly would
#: otherwise push the scale to infinity (every probability 0 or 1).
MAX_SCALE = 5.0


@dataclass(frozen=True)
class Groups:
    """Statements' features ``x`` (rows × :data:`FEATURES`), each row's group index ``group``, and
    per group its ``target`` in [0, 1], ``weight`` (summing to 1), ``fixed`` (the summed verdicts of
    its statements the rules decided alone) and ``size`` (all its statements)."""

    x: np.ndarray
    group: np.ndarray
    target: np.ndarray
    weight: np.ndarray
    fixed: np.ndarray
    size: np.ndarray

    @classmethod
    def of(cls, judged: Sequence[Sequence[dict[str, float] | None]], fixed: Sequence[float],
           target: Sequence[float], weight: Sequence[float] | None = None) -> Groups:
        """Groups of the statements ``judged`` (``support_features`` per answer), ``fixed[i]`` the
        summed verdicts of answer ``i``'s statements whose features are ``None``; equal weights
        unless given. Raises ``ValueError`` for an answer without statements."""
        if any(not statements for statements in judged):
            raise InputError("every labelled answer needs at least one statement")
        rows = [[values[f] for f in FEATURES] for statements in judged for values in statements if values is not None]
        group = [i for i, statements in enumerate(judged) for values in statements if values is not None]
        w = np.ones(len(judged)) if weight is None else np.asarray(weight, dtype=float)
        return cls(np.array(rows, dtype=float).reshape(-1, len(FEATURES)), np.array(group, dtype=int),
                   np.asarray(target, dtype=float), w / w.sum(), np.asarray(fixed, dtype=float),
                   np.array([len(s) for s in judged], dtype=float))

    def subset(self, chosen: np.ndarray) -> Groups:
        """The ``chosen`` groups (indices; a repeated index repeats its group), renumbered in the order
        given, their weights summing to 1 again."""
        chosen = np.asarray(chosen, dtype=int)
        counts = np.bincount(self.group, minlength=len(self.target))
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        by_group = np.argsort(self.group, kind="stable")
        sizes = counts[chosen]
        rows = by_group[np.repeat(starts[chosen] - (np.cumsum(sizes) - sizes), sizes) + np.arange(sizes.sum())]
        weight = self.weight[chosen]
        return Groups(self.x[rows], np.repeat(np.arange(len(chosen)), sizes), self.target[chosen],
                      weight / weight.sum(), self.fixed[chosen], self.size[chosen])

    def means(self, bias: float, weights: np.ndarray) -> np.ndarray:
        """Each group's mean support under ``bias`` and ``weights``: the row score the judge gives."""
        p = 1 / (1 + np.exp(-np.clip(bias + self.x @ weights, -500, 500)))
        return (np.bincount(self.group, p, len(self.target)) + self.fixed) / self.size


def fit(groups: Groups, penalty: float = PENALTY) -> tuple[float, np.ndarray]:
    """Bias and weights minimising the weighted cross-entropy of each group's mean support against its
    target plus ``penalty`` times the squared weights, each weight's sign bound
    (``verifier.FEATURES``: support evidence >= 0, missing or contradicted evidence <= 0), by L-BFGS-B."""
    bounds = [(0, None) if FEATURES[f] == "+" else (None, 0) for f in FEATURES]
    theta = _minimise(groups, groups.x, bounds, np.zeros(len(FEATURES)), np.zeros(len(FEATURES) + 1), penalty)
    return float(theta[0]), theta[1:]


def rescale(groups: Groups, prior: Verifier) -> tuple[float, np.ndarray]:
    """``prior``'s model with its logit rescaled, ``a (bias + weights · x) + b`` (``0 <= a <= MAX_SCALE``; Platt
    scaling, two parameters: what a few dozen labels can fix without overfitting nine weights), as
    the bias and weights of the same model: ``a bias + b`` and ``a weights``. Every weight keeps its
    sign and the statements their order of support."""
    logit = (prior.bias + groups.x @ prior.weights)[:, None]
    theta = _minimise(groups, logit, [(0, MAX_SCALE)], np.zeros(1), np.array([0.0, 1.0]), 0.0)
    return float(theta[1] * prior.bias + theta[0]), theta[1] * prior.weights


def fold_positions(n: int, folds: int, seed: int = 0) -> list[np.ndarray]:
    """Positions ``0 .. n-1`` split at random (``seed``) into ``folds`` (at least 2) folds, each sorted."""
    order = np.random.default_rng(seed).permutation(n)
    return [np.sort(order[k::folds]) for k in range(folds)]


def cross_fit(groups: Groups, folds: Sequence[np.ndarray], prior: Verifier
              ) -> tuple[list[np.ndarray], list[tuple[float, np.ndarray]]]:
    """:func:`rescale` by cross-fitting: each fold's groups (indices into ``groups``, repeats allowed) scored
    (their mean support) by ``prior`` rescaled on the other folds' groups. Returns those scores, a fold at a
    time, and the fold models (bias, weights): an unlabelled row is scored by their mean
    (cross-prediction-powered inference, Zrnic & Candès 2024)."""
    scores, models = [], []
    for k, test in enumerate(folds):
        bias, w = rescale(groups.subset(np.concatenate([f for j, f in enumerate(folds) if j != k])), prior)
        scores.append(groups.subset(test).means(bias, w))
        models.append((bias, w))
    return scores, models


def _minimise(groups: Groups, x: np.ndarray, bounds: list, centre: np.ndarray, start: np.ndarray,
              penalty: float) -> np.ndarray:
    """``[bias, *weights]`` over the columns of ``x`` (the groups' rows), minimising :func:`fit`'s loss."""
    group, target, weight, size = groups.group, groups.target, groups.weight, groups.size

    def loss(theta: np.ndarray) -> tuple[float, np.ndarray]:
        p = 1 / (1 + np.exp(-np.clip(theta[0] + x @ theta[1:], -500, 500)))
        m = np.clip((np.bincount(group, p, len(target)) + groups.fixed) / size, 1e-9, 1 - 1e-9)
        value = -float(weight @ (target * np.log(m) + (1 - target) * np.log(1 - m)))
        d_m = weight * (m - target) / (m * (1 - m))  # d loss / d group mean
        d_z = d_m[group] * p * (1 - p) / size[group]
        gradient = np.concatenate([[d_z.sum()], x.T @ d_z])
        value += penalty * float((theta[1:] - centre) @ (theta[1:] - centre))
        gradient[1:] += 2 * penalty * (theta[1:] - centre)
        return value, gradient

    return minimize(loss, start, jac=True, method="L-BFGS-B", bounds=[(None, None), *bounds]).x
