"""Drift of production traffic: a day's metric compared with its trailing window.

``drift(day, window)`` takes the per-row results of a day's judged sample and of the days
before it (e.g. the last 7, pooled) and, per metric, gives the difference of the means
day − window, turned so that a positive difference is an improvement (lower-is-better
metrics: window − day), on the metric's own scale, with a 95 % bootstrap interval.

Method: the regression gate's (``rag_eval.metrics.stats.compare``), for two independent samples instead of
paired rows (production traces are never the same twice):

* **Interval**: percentile bootstrap of the difference of means, each side resampled on its
  own (Efron & Tibshirani 1993, §8.3: the two-sample bootstrap), ``resamples`` draws from
  numpy's PCG64 seeded with ``seed`` and the metric's name
  (``rag_eval.metrics.stats.compare.bootstrap_means``; the window's draws seeded apart from the day's);
* **Decision**: a *drop* when the whole interval lies below ``-margin``
  (``rag_eval.metrics.stats.compare.default_margin``: 0.02 on [0, 1]), a *rise* when it lies above
  ``+margin``, else no change detected. The one-sided p-values ``P*(d >= -margin)`` and
  ``P*(d <= margin)`` (+1 corrected) are Holm-adjusted across the metrics of the day, so the
  chance that an undegraded day raises any drop is at most 2.5 % however many metrics are
  checked (under the assumption the check makes: the day's and the window's traces are draws
  from the same traffic when nothing changed).
* **Judge cascades**: a metric both the day's and the window's results estimate by a judge cascade
  (``rag_eval.metrics.stats.cascade_estimates.frame_estimates``: the strong judge's mean; the window's
  over the pooled rows its cascades covered, each row with its own inclusion probability) is decided
  on the two estimates instead, as the gate decides it (``rag_eval.metrics.stats.ppi.difference_test``:
  independent samples, the normal interval and one-sided p-values, in the same Holm family); its
  ``basis`` says ``cascade (n=… vs …)`` (strong-judged / covered rows of the day and of the window) and
  its means are the estimates. Else ``basis`` is ``judge``: the judge's (the cheap one's) ``ok`` rows.
* **No decision**: a metric with no row scored ``ok`` on either side is *not applicable* (it
  cannot be measured in this traffic: e.g. context_recall without references) and decides
  nothing; fewer than ``MIN_ROWS`` ``ok`` rows on the day or in the window is *too few rows*;
  no earlier day at all is *no trailing window*. None of these fails.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from rag_eval.metrics.stats.cascade_estimates import frame_estimates
from rag_eval.metrics.stats.compare import ALPHA, MIN_ROWS, RESAMPLES, bootstrap_means, default_margin, holm
from rag_eval.metrics.stats.ppi import difference_test, estimate_basis
from rag_eval.metrics.core.registry import Registry, given
from rag_eval.metrics.core.results import Direction, Status
from rag_eval.metrics.errors import InputError

DROP, RISE, NO_CHANGE = "drop", "rise", "no change detected"
NOT_APPLICABLE, TOO_FEW, NO_WINDOW = "not applicable", "too few rows", "no trailing window"


@dataclass
class Drift:
    """One metric's day-versus-window comparison. ``difference``, ``low`` and ``high`` are
    day − window turned so that positive is better, on the metric's scale; ``None`` when
    there is no decision to make. ``coverage_day``/``coverage_window``: share of rows ``ok``."""

    metric: str
    direction: str
    n_day: int
    n_window: int
    day_mean: float | None
    window_mean: float | None
    difference: float | None
    low: float | None
    high: float | None
    margin: float
    p_drop: float | None
    p_drop_holm: float | None
    verdict: str
    coverage_day: float | None
    coverage_window: float | None
    basis: str = "judge"

    @property
    def failed(self) -> bool:
        """True when the metric dropped beyond its margin."""
        return self.verdict == DROP

    def describe(self) -> str:
        """One line: the verdict, the difference and its interval, n on each side."""
        if self.difference is None:
            return f"{self.metric}: {self.verdict} ({self.n_day} ok rows on the day, {self.n_window} in the window)"
        sides = f"day {self.day_mean:.3f}, n={self.n_day}; window {self.window_mean:.3f}, n={self.n_window}" \
            if self.basis == "judge" else f"day {self.day_mean:.3f}; window {self.window_mean:.3f}; {self.basis}"
        return (f"{self.metric}: {self.verdict}: {self.difference:+.3f} [{self.low:+.3f}, {self.high:+.3f}] "
                f"({sides}; margin {self.margin:g}, Holm p={self.p_drop_holm:.4f})")

    def to_dict(self) -> dict:
        """A JSON-safe dict of the fields."""
        return asdict(self)


def _ok_values(frame: pd.DataFrame, metric: str) -> tuple[np.ndarray, float | None]:
    rows = frame[frame["metric"] == metric]
    values = rows.loc[rows["status"] == Status.OK.value, "value"].to_numpy(float)
    return values, (len(values) / len(rows) if len(rows) else None)


def drift(day: pd.DataFrame, window: pd.DataFrame, metrics: Iterable[str] | None = None,
          margins: Mapping[str, float] | None = None, seed: int = 0, resamples: int = RESAMPLES,
          min_rows: int = MIN_ROWS, registry: Registry | None = None) -> dict[str, Drift]:
    """Compare the day's results with the window's, metric by metric (see the module's notes).

    Parameters
    ----------
    day, window : DataFrame
        Per-row results with ``metric``, ``status`` and ``value`` (``results.parquet``'s
        columns); ``window`` pools the trailing days' rows (empty: no trailing window).
    metrics : iterable of str, optional
        Default: every metric of ``day``.
    margins : mapping, optional
        ``{metric: margin}`` on its scale; others get ``rag_eval.metrics.stats.compare.default_margin``.
    seed, resamples, min_rows
        The bootstrap's seed and draws; the ``ok`` rows each side needs for a decision.
    registry : Registry, optional
        The metrics' classes (direction, range): default the built-in ones
        (``rag_eval.metrics.core.registry.builtin_registry``); a metric it does not know is read as higher
        is better with a margin of 0.02.

    Returns
    -------
    dict
        ``{metric: Drift}``; ``basis`` ``judge``, or ``cascade (n=… vs …)`` for a metric both sides
        estimate by a judge cascade (module notes).

    Raises
    ------
    ValueError
        If a frame lacks ``metric``, ``status`` or ``value``.
    """
    for label, frame in (("day", day), ("window", window)):
        missing = {"metric", "status", "value"} - set(frame.columns)
        if missing and len(frame.columns):
            raise InputError(f"{label}: results lack the column(s) {sorted(missing)}")
    if not len(window.columns):
        window = pd.DataFrame(columns=["metric", "status", "value"])
    chosen = list(dict.fromkeys(metrics if metrics is not None else day["metric"]))
    margins = dict(margins or {})
    found: dict[str, Drift] = {}
    rises: dict[str, float] = {}
    known = given(registry)
    (today_estimates, _), (window_estimates, _) = (frame_estimates(side, known, stream=True)
                                                        for side in (day, window))
    for metric in chosen:
        direction = known[metric].direction.value if metric in known else Direction.HIGHER.value
        margin = float(margins.get(metric, default_margin(metric, known) if metric in known else 0.02))
        today, coverage_day = _ok_values(day, metric)
        before, coverage_window = _ok_values(window, metric)
        result = Drift(metric, direction, len(today), len(before), None, None, None, None, None, margin, None, None,
                       NO_CHANGE, coverage_day, coverage_window)
        found[metric] = result
        if not len(today) and not len(before):
            result.verdict = NOT_APPLICABLE if (coverage_day is not None or coverage_window is not None) else NO_WINDOW
            continue
        if not len(window):
            result.verdict = NO_WINDOW
            continue
        if len(today) < min_rows or len(before) < min_rows:
            result.verdict = TOO_FEW
            continue
        sign = -1.0 if direction == Direction.LOWER.value else 1.0
        if metric in today_estimates and metric in window_estimates:
            estimates = window_estimates[metric], today_estimates[metric]
            result.window_mean, result.day_mean = (e.estimate for e in estimates)
            result.difference, result.low, result.high, result.p_drop, rises[metric] = difference_test(
                *estimates, sign, margin)
            result.basis = estimate_basis(today_estimates[metric], window_estimates[metric])
            continue
        diffs = sign * (bootstrap_means(today, seed, metric, resamples)
                        - bootstrap_means(before, seed, f"{metric} window", resamples))
        low, high = np.percentile(diffs, [100 * ALPHA / 2, 100 * (1 - ALPHA / 2)])
        result.day_mean, result.window_mean = float(today.mean()), float(before.mean())
        result.difference = sign * (result.day_mean - result.window_mean)
        result.low, result.high = float(low), float(high)
        result.p_drop = (1 + int((diffs >= -margin).sum())) / (resamples + 1)
        rises[metric] = (1 + int((diffs <= margin).sum())) / (resamples + 1)
    rises = holm(rises)
    for metric, p in holm({m: p for m in rises if (p := found[m].p_drop) is not None}).items():
        found[metric].p_drop_holm = p
        found[metric].verdict = DROP if p < ALPHA / 2 else RISE if rises[metric] < ALPHA / 2 else NO_CHANGE
    return found
