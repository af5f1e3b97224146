"""A judge cascade: the cheap judge on every row, the strong judge on a seeded sample, one estimate.

The cheap judge (the offline verifier, a small model) scores all ``N`` rows; the strong judge
scores a sample; the published number estimates **the strong judge's mean over all N rows**,
with a 95 % interval valid whatever the cheap judge's quality (a better cheap judge only makes
it narrower). This is prediction-powered inference with the strong judge as the trusted signal
(``rag_eval.metrics.stats.ppi``, issue 26), and, when the sample favours the rows the cheap judge
is least sure of, active statistical inference (Zrnic & Candès, *Active Statistical
Inference*, ICML 2024).

**The draw** (:func:`inclusion_probabilities`, :func:`draw`). Each row ``i`` gets an inclusion
probability ``pi_i`` and a seeded uniform ``u_i`` (``rag_eval.metrics.stats.sampling.priority``
of the seed and the row id: the same on every run and machine, whatever the rows' order); it is
strong-judged iff ``u_i < pi_i`` (Poisson sampling: each row drawn independently, the sample's
size random around ``sum(pi)``). *Uniform*: ``pi_i = B / N`` for a budget of ``B`` rows.
*Active*: ``pi_i = min(1, max(floor * B / N, c * s_i))`` for the cheap judge's uncertainty
``s_i`` (:func:`score_uncertainty`: ``sqrt(f (1 - f))`` for a score in [0, 1]), ``c`` set so
that ``sum(pi) = B``: proportional to the uncertainty, never below ``floor`` times the uniform
rate (so every row can be drawn and no weight ``1 / pi`` exceeds ``N / (floor B)``), capped at 1
with the excess spread over the other rows. ``pi_i`` never decreases when ``B`` grows, so for
one seed a larger budget's sample **contains** the smaller one's: raising the budget judges
only the added rows.

**Rows without a cheap score** (``judge_error``) get ``pi_i = 1``: always strong-judged, they
enter the estimate with their strong score as it is and add no variance, so the estimate stays
valid whatever made the cheap judge fail (a fill such as 0.5 would also be valid, but spends
budget on guessing). They count toward the budget; the rest of it is spread over the scored rows.

**The estimate** (:func:`cascade_mean`). With the cheap prediction ``g_i = lam f_i + b`` and
``xi_i`` 1 for a strong-judged row::

    theta = mean_i [ g_i + (y_i - g_i) * xi_i / pi_i ]
    se²   = sum_i xi_i (y_i - g_i)² (1 - pi_i) / pi_i² / N²

the estimator of Zrnic & Candès (their ``b = 0``) with the Poisson-sampling (Horvitz–Thompson)
variance of the mean over these ``N`` rows; for fixed ``lam`` and ``b`` both are unbiased over
the draw. ``lam`` is power-tuned as PPI++ does: the value minimising ``se²``, clipped to [0, 1].
``b`` is the residuals' ``1 / pi``-weighted mean over the drawn rows (Hájek), so their weighted
sum is 0 and ``theta`` is the mean of ``g_i`` (of ``y_i`` on a row without a cheap score);
``se²`` is then multiplied by ``(N_s / sum_drawn 1 / pi)²`` (``N_s`` the rows with a cheap
score), the ratio estimator's linearised variance (Särndal, Swensson & Wretman 1992, §5.7),
which follows the realised sample size. Without ``b`` a residual mean that
is not 0 (a biased cheap judge, or ``lam < 1``) adds its square to every row's variance: at
``lam = 0`` and a pass rate of 0.7, 0.7 / 0.21 = 3.3 times the variance of the strong judge's
own sample mean. For uniform sampling of ``n`` rows this is PPI++'s point estimate with the
cheap mean over all ``N`` rows, and PPI++'s rectifier variance with the finite-population
correction ``1 - n / N`` and without ``lam² var(f) / (N - n)`` (the cheap mean is known on every row):
``tests/metrics/test_cascade.py`` checks the relation.

**Which mean.** The estimand is what the strong judge would say on *these* ``N`` rows, as a full
strong run would publish it. The paper's variance (the terms' sample variance over ``N``) is
that of the mean of an infinite population the rows come from: it adds the strong scores' own
variance over ``N`` and over-covers the mean of these rows, the more the larger the budget. A
row with ``pi = 1`` adds no variance; with ``pi = 1`` on every row the estimate is the strong
mean with zero width.

**Rows outside the population.** A drawn row the strong judge finds not applicable (``outside``), though
the cheap judge scored it, is outside the metric's population, which is then the rows the strong judge
would find applicable, a domain whose size is estimated too: ``N_d = N - sum_out 1 / pi`` and
``theta = [sum_i g_i + sum_in (y_i - g_i) / pi_i - sum_out g_i / pi_i] / N_d``, the ratio of two totals
each unbiased over the draw (domain estimation, Särndal, Swensson & Wretman 1992, §10.3); an outside row's
residual in ``se²`` is ``theta - g_i``, ``se`` divides by ``N_d``, the Hájek factor's ``N_s`` loses
``sum_out 1 / pi`` (95-96 % coverage with 10-30 % of the rows outside); with none outside nothing changes.

**Small samples.** ``lam`` and ``b`` are fitted on the ``m`` strong-judged rows that also estimate the
variance, so the residuals are too small by the parameters fitted: the variance is scaled by
``m / (m - k)`` (``k`` the parameters fitted, 2 by default) and the interval takes Student's t quantile
with ``m - k`` degrees of freedom; fewer than :data:`MIN_DRAWN` rows give no interval. When every drawn
row is fitted exactly (a binary strong judge passing all of them, say) no spread was seen, which is not
evidence of none: each residual is taken as a Bernoulli one of rate ``1 / (m + 2)`` (Laplace's rule of
succession), not zero. Measured with a noisy cheap judge over continuous and binary strong scores (2,000
draws a cell; 30-1,000 rows at budgets of 2-50 %, about 10-40 strong rows): 92-95 % coverage and no
zero-width interval, against 78-92 % and up to 280 zero-width intervals in 2,000 without them.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rag_eval.metrics.stats.cascade_fit import agreement_share, check_rows, power_tuning, stream_variance, t_value
from rag_eval.metrics.stats.ppi import MeanEstimate, z_value
from rag_eval.metrics.stats.sampling import priority

#: The least inclusion probability of active sampling, as a share of the uniform rate ``B / N``
#: (``bench/cascade_bench.py`` chose it on the tuning rows: docs/explanation/cascade.md).
FLOOR = 0.9

#: Strong-judged rows with ``pi < 1`` an interval needs (the variance is estimated from them).
MIN_DRAWN = 10


@dataclass(frozen=True)
class StrongSample:
    """The rows the strong judge scores: per row (in input order) the inclusion probability
    ``pi`` and whether it is ``drawn``; ``method`` is ``"uniform"`` or ``"active"``."""

    pi: np.ndarray
    drawn: np.ndarray
    method: str

    @property
    def rows(self) -> int:
        """Strong requests (rows) the sample costs."""
        return int(self.drawn.sum())


@dataclass(frozen=True)
class CascadeEstimate:
    """The strong judge's mean over all rows as the cascade estimates it (``estimate.method``
    ``"cascade-uniform"`` or ``"cascade-active"``, ``n`` the strong-judged rows, ``N`` all rows,
    ``lam`` the cheap score's weight), the ``intercept`` ``b`` of the cheap prediction, the
    cheap judge's raw mean over its scored rows, and ``agreement``: the share of rows where the
    two judges' pass/fail at ``threshold`` agree, estimated from the strong-judged rows with a
    cheap score (weighted by ``1 / pi``, so it is the population's agreement, not the
    uncertain rows'); ``None`` without such a row."""

    estimate: MeanEstimate
    intercept: float
    cheap_mean: float | None
    agreement: float | None


def budget_rows(budget: float | int, rows: int) -> float:
    """The budget ``B`` in (expected) rows: a whole number (``int``) is rows (0 to ``rows``), a
    ``float`` a share of ``rows`` in [0, 1] (so ``1`` is one row, ``1.0`` every row).

    Raises
    ------
    ValueError
        A bool, a negative or non-finite budget, a share above 1 or more rows than there are.
    """
    if isinstance(budget, bool) or not isinstance(budget, numbers.Real) or not math.isfinite(budget) or budget < 0:
        raise ValueError(f"strong budget must be a share in [0, 1] or a whole number of rows, got {budget!r}")
    if not isinstance(budget, numbers.Integral):
        if budget > 1.0:
            raise ValueError(f"strong budget share must be at most 1, got {budget}")
        return budget * rows
    if budget > rows:
        raise ValueError(f"strong budget of {budget} rows exceeds the {rows} rows")
    return float(budget)


def score_uncertainty(scores: Any) -> np.ndarray:
    """The cheap judge's uncertainty of a score in [0, 1]: ``sqrt(f (1 - f))`` (the standard
    deviation of a pass drawn with probability ``f``): 0.5 at 0.5, 0 at either end. NaN (no
    score) stays NaN; values outside [0, 1] are cut to it."""
    f = np.clip(np.asarray(scores, dtype=float), 0.0, 1.0)
    return np.sqrt(f * (1.0 - f))


def inclusion_probabilities(rows: int, budget: float | int, uncertainty: Any = None, floor: float = FLOOR,
                            forced: Any = None) -> np.ndarray:
    """Each row's probability of being strong-judged (the module docstring's draw).

    Parameters
    ----------
    rows : int
        ``N``, the rows.
    budget : float or int
        A share of the rows or a number of rows (:func:`budget_rows`): ``sum(pi)`` equals it.
    uncertainty : array-like of float, shape (N,), optional
        The cheap judge's uncertainty per row (>= 0, NaN where it has no score): active
        sampling. ``None``: uniform.
    floor : float
        Active sampling's least probability as a share of the uniform rate, in (0, 1] (1 is
        uniform sampling): every row can be drawn.
    forced : array-like of bool, shape (N,), optional
        Rows always strong-judged (``pi = 1``); by default those whose uncertainty is NaN.

    Returns
    -------
    ndarray of float, shape (N,)
        ``pi`` in [0, 1], summing to the budget; non-decreasing in the budget row by row.

    Raises
    ------
    ValueError
        A bad budget or floor, an uncertainty of another length or negative, a NaN uncertainty
        on a row not forced (naming its line), or forced rows more than the budget.
    """
    total = budget_rows(budget, rows)
    if not 0.0 < floor <= 1.0:
        raise ValueError(f"floor must be a share of the uniform rate in (0, 1], got {floor}")
    s = None if uncertainty is None else np.asarray(uncertainty, dtype=float).reshape(-1)
    if s is not None and (len(s) != rows or (s < 0).any()):
        raise ValueError(f"uncertainty must hold {rows} values >= 0 (NaN for no score)")
    must = np.zeros(rows, bool) if forced is None else np.asarray(forced, bool).reshape(-1)
    if s is not None and forced is None:
        must = np.isnan(s)
    if len(must) != rows:
        raise ValueError(f"forced must hold {rows} values")
    if s is not None and (np.isnan(s) & ~must).any():
        raise ValueError(f"line {int(np.argmax(np.isnan(s) & ~must)) + 1}: uncertainty: NaN (no cheap score) on a row "
                         "not forced: a row without a cheap score must be strong-judged for sure")
    spare, free = total - must.sum(), int((~must).sum())
    if spare < 0 or (spare == 0 and free and total > 0):
        raise ValueError(f"{int(must.sum())} row(s) must be strong-judged (no cheap score), more than a "
                         f"budget of {total:g} rows leaves room for: raise the budget")
    pi = np.ones(rows)
    if free:
        pi[~must] = _spread(spare, s[~must] if s is not None else np.ones(free), floor if s is not None else 1.0)
    return pi


def _spread(total: float, s: np.ndarray, floor: float) -> np.ndarray:
    """``min(1, max(floor * total / n, c s))`` with ``c`` found by bisection so the sum is ``total``;
    when the rows with ``s > 0`` all reach 1 first, the rest of ``total`` goes evenly to the others."""
    n = len(s)
    low = floor * total / n

    def probabilities(c: float) -> np.ndarray:
        return np.minimum(1.0, np.maximum(low, c * s))

    if not s.any() or floor == 1.0:
        return np.full(n, total / n)
    positive = s > 0
    certain = int((~positive).sum())
    if positive.sum() + low * certain <= total:
        return np.where(positive, 1.0, (total - positive.sum()) / certain if certain else 1.0)
    lo, hi = 0.0, 1.0 / float(s[positive].min())  # at hi every row with s > 0 is at 1
    for _ in range(200):
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if probabilities(mid).sum() < total else (lo, mid)
    return probabilities(hi)


def row_uniforms(ids: Sequence[str], seed: int, stream: str = "") -> np.ndarray:
    """Each row's seeded uniform ``u_i`` in [0, 1): ``sampling.priority`` of the seed and ``<stream><id>``.
    ``stream`` separates draws over rows an earlier draw chose by ``priority(seed, id)``: a traffic
    sample keeps the traces of lowest priority (``rag_eval.metrics.stats.sampling.select``), and a cascade
    within it on the same stream would draw all of them.

    Raises
    ------
    ValueError
        Two rows with one id (:func:`check_ids`).
    """
    check_ids(ids)
    return np.array([priority(seed, f"{stream}{row_id}") for row_id in ids])


def check_ids(ids: Iterable[str]) -> None:
    """Refuse two rows with one id (they would share their draw).

    Raises
    ------
    ValueError
        One line naming the later line and the earlier one (from 1) and the field ``id``.
    """
    seen: dict[str, int] = {}
    for line, row_id in enumerate(ids, start=1):
        if str(row_id) in seen:
            raise ValueError(f"line {line}: id {row_id!r} repeats line {seen[str(row_id)]}'s: row ids must be unique")
        seen[str(row_id)] = line


def sample_of(uniforms: np.ndarray, pi: np.ndarray, method: str) -> StrongSample:
    """The sample of the rows with ``u_i < pi_i``: ``uniforms`` from :func:`row_uniforms` (kept
    across budgets, so that samples nest), ``pi`` from :func:`inclusion_probabilities`, ``method``
    ``"uniform"`` or ``"active"`` (named in the estimate). Arrays of one length; nothing raised."""
    return StrongSample(np.asarray(pi, float), np.asarray(uniforms) < pi, method)


def draw(ids: Sequence[str], seed: int, budget: float | int, uncertainty: Any = None,
         floor: float = FLOOR, forced: Any = None) -> StrongSample:
    """The strong sample of the rows ``ids``: :func:`inclusion_probabilities` (uniform without
    ``uncertainty``, else active; ``forced`` rows, by default those of NaN uncertainty, always
    drawn: pass the rows without a cheap score for uniform sampling), then ``u_i < pi_i``.

    Raises
    ------
    ValueError
        As :func:`inclusion_probabilities` and :func:`row_uniforms` do.
    """
    pi = inclusion_probabilities(len(ids), budget, uncertainty, floor, forced)
    return sample_of(row_uniforms(ids, seed), pi, "uniform" if uncertainty is None else "active")


def cascade_mean(cheap: Any, strong: Any, sample: StrongSample, confidence: float = 0.95,
                 lam: float | None = None, intercept: float | None = None,
                 threshold: float = 0.5, higher: bool = True, outside: Any = None,
                 stream: bool = False) -> CascadeEstimate:
    """The strong judge's mean over all ``N`` rows, estimated from the cheap judge's scores on
    every row and the strong judge's on the sample (the module docstring's ``theta ± z se``).

    Parameters
    ----------
    cheap : array-like of float, shape (N,)
        The cheap judge's score per row; NaN where it has none (such a row must have ``pi = 1``).
    strong : array-like of float, shape (N,)
        The strong judge's score per drawn row; the others are ignored (NaN by convention).
    sample : StrongSample
        The draw (:func:`draw`): ``pi`` and ``drawn`` per row, in the same order.
    confidence : float
        Two-sided coverage of the interval, in (0, 1).
    lam, intercept : float, optional
        The cheap prediction ``lam f + intercept``; ``None`` fits them to the drawn rows
        (``lam`` clipped to [0, 1]). Both given: the estimate is unbiased over the draw
        (``intercept = 0`` is Zrnic & Candès's form) and so is ``se²`` for its variance (0
        when no row with ``pi < 1`` is drawn); nothing is fitted, so one drawn row suffices.
    threshold : float
        Pass/fail cut of both judges' scores for ``agreement`` (a score >= it passes).
    higher : bool
        Whether a higher score is better; ``False`` (a lower-is-better metric): a score <= ``threshold`` passes.
    outside : array-like of bool, shape (N,), optional
        Drawn rows the strong judge found not applicable: outside the metric's population (the rows it
        would score), whose size is then estimated too (the module docstring's domain estimate).
    stream : bool
        The rows are a sample of a stream (a day of production traffic): the estimate is of the stream's strong
        mean, and ``se²`` adds the rows' own sampling variance, the strong scores' spread over the rows covered
        (:func:`~rag_eval.metrics.stats.cascade_fit.stream_variance`; Student's t with the fewer degrees of freedom).

    Returns
    -------
    CascadeEstimate
        ``theta ± z se``; with ``pi = 1`` on every row (a budget of all rows) that is the strong
        judge's mean with zero width.

    Raises
    ------
    ValueError
        Arrays of other lengths than the sample; no strong-judged row, or none inside the population; a drawn
        row without a strong score, a row without a cheap score that was not sure to be drawn, or a row that
        can never be drawn (``pi = 0``), each naming its line (from 1) and field; fewer than ``MIN_DRAWN``
        strong-judged rows among those with ``pi < 1``; an estimated population of no row; a confidence
        outside (0, 1).
    """
    f = np.asarray(cheap, dtype=float).reshape(-1)
    y = np.asarray(strong, dtype=float).reshape(-1)
    pi, rows = sample.pi, len(sample.pi)
    out = np.zeros(rows, bool) if outside is None else np.asarray(outside, bool).reshape(-1) & sample.drawn
    drawn = sample.drawn & ~out  # the drawn rows with a strong score
    if len(f) != rows or len(y) != rows or len(out) != rows:
        raise ValueError(f"cheap ({len(f)}) and strong ({len(y)}) scores must have one per sampled row ({rows})")
    if not drawn.any():
        raise ValueError("no row was strong-judged inside the metric's population (a budget of 0, or a draw that "
                         "took none the strong judge could score): the strong judge's mean cannot be estimated; "
                         "raise the budget")
    check_rows(f, y, pi, drawn)
    z = z_value(confidence)
    method = f"cascade-{sample.method}"
    scored = ~np.isnan(f)
    cheap_mean = float(f[scored].mean()) if scored.any() else None
    agreement = agreement_share(f, y, pi, drawn & scored, threshold, higher)
    sampled = pi < 1.0
    fitted = drawn & sampled
    m, fits = int(fitted.sum()), (lam is None) + (intercept is None)  # the rows the fit sees, its parameters
    if fits and sampled.any() and m < MIN_DRAWN:
        raise ValueError(f"{m} strong-judged row(s) among the {int(sampled.sum())} sampled: an interval needs at "
                         f"least {MIN_DRAWN}; raise the budget")
    w = (1.0 - pi[fitted]) / pi[fitted] ** 2
    if lam is None:
        lam = power_tuning(f[fitted], y[fitted], w, intercept)
    both, hajek = drawn & scored, intercept is None
    if intercept is None:  # the residuals' mean over the scored rows (Hajek): they sum to 0 below
        intercept = float(np.average(y[both] - lam * f[both], weights=1.0 / pi[both])) if both.any() else 0.0
    g = np.where(scored, lam * np.nan_to_num(f) + intercept, 0.0)
    size = rows - float((1.0 / pi[out]).sum())  # the population's rows, estimated (all N when none is outside)
    if size <= 0:
        raise ValueError(f"the strong judge found {int(out.sum())} drawn row(s) not applicable, standing for more "
                         f"than the {rows} rows covered: the population's size cannot be estimated; raise the budget")
    theta = float((g + np.where(drawn, np.nan_to_num(y) - g, np.where(out, -g, 0.0)) / pi).sum()) / size
    residuals = (y[fitted] - g[fitted]) ** 2
    if m and not residuals.any():  # every drawn row fitted exactly: no spread seen, not none there (module notes)
        residuals = np.full(m, 1.0 / (m + 2) * (1.0 - 1.0 / (m + 2)))
    beyond = out & sampled  # a row outside the population: its residual against the mean is theta - g
    spread = float((w * residuals).sum()) + float(((1.0 - pi[beyond]) / pi[beyond] ** 2
                                                   * (theta - g[beyond]) ** 2).sum())
    variance = spread * (m / (m - fits) if m > fits else 1.0)  # the fit's degrees of freedom
    if hajek and both.any():  # the fitted intercept's share: scored rows (in the population) over their estimate
        variance *= ((scored.sum() - (1.0 / pi[out & scored]).sum()) / (1.0 / pi[both]).sum()) ** 2
    se, df = math.sqrt(variance) / size, m - fits if sampled.any() and m > fits else math.inf
    if stream:
        spread, rows_df = stream_variance(y[drawn], pi[drawn], theta)
        se, df = math.sqrt(se ** 2 + spread / size), min(df, rows_df)
    if df < math.inf:
        z = t_value(z, int(df))
    return CascadeEstimate(MeanEstimate(theta, theta - z * se, theta + z * se, se, int(drawn.sum()), rows, lam,
                                        method, confidence), intercept, cheap_mean, agreement)
