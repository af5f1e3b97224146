"""Comparison of two evaluated versions of a RAG system: paired differences with intervals.

``compare(baseline, candidate)`` takes two per-row results frames (``results.parquet``,
``rag_eval.metrics.evaluate.results_frame``), matches rows by id, and for every metric gives the
paired difference candidate − baseline over the rows scored ``ok`` in both, turned so that
a positive difference is always an improvement (lower-is-better metrics: baseline −
candidate), on the metric's own scale (Likert 1-5, label scales and counts are not
stretched), with a 95 % paired bootstrap interval and the number of rows behind it.

Method
------
* **Interval**: percentile bootstrap of the mean paired difference (Efron & Tibshirani
  1993, ch. 13), ``resamples`` draws of the paired rows with replacement, from numpy's
  PCG64 generator seeded with ``seed`` and the metric's name (CRC-32), so the same inputs
  give the same interval on every machine and in any metric order.
* **The judge's own variance**: a frame may hold ``K`` repeated judgements of each row (a
  ``repeat`` column, ``0 .. K-1``; LLM judge with sampling varied per repeat). A row's score
  is then the mean of its ``ok`` repeats, and the bootstrap resamples rows of these means:
  the variance of the mean of row means is (σ²_rows + σ²_judge / K) / n, and resampling
  the rows (the top stage of the two-stage design) carries both parts (Davison & Hinkley
  1997, §3.8). The judge's test-retest spread per metric is the pooled within-row
  standard deviation over rows with two or more ``ok`` repeats (``retest_sd``).
* **Decision** (direction-aware, per metric, ``margin`` on the metric's scale):
  *regressed* when the whole 95 % interval lies below ``-margin``, *improved* when it lies
  above ``+margin``, else *no change detected*. The one-sided bootstrap p-values
  ``p_regression = P*(d >= -margin)`` and ``p_improvement = P*(d <= margin)`` (with the
  +1 correction of Davison & Hinkley, eq. 4.11) are Holm-adjusted across the metrics
  compared (Holm 1979), each direction on its own; a metric regresses when its adjusted
  ``p_regression`` is below 0.025, which for one metric is exactly "the upper end of the
  95 % percentile interval lies below ``-margin``". The family-wise rate of false
  regression calls is so at most 2.5 % whatever the number of metrics.
* **Coverage**: per metric and version, the share of rows not scored ``ok``: errors
  (``judge_error``, ``input_error``, ``target_error``) and ``not_applicable`` alike, so a
  candidate that refuses to answer ("I don't know" is not applicable to faithfulness) loses
  coverage as one that fails does; the gate fails when the candidate's share exceeds the
  baseline's by more than ``max_coverage_drop``.

* **Estimates** (``estimates``): where both versions have an estimate of a metric's mean, the
  prediction-powered one from their human labels (``rag_eval.metrics.stats.estimates``) or a judge
  cascade's (``rag_eval.metrics.stats.cascade_estimates.frame_estimates``: the strong judge's mean), that
  metric is decided on the difference of the two estimates (``rag_eval.metrics.stats.ppi.difference_test``:
  independent samples, the normal interval of ``sqrt(se_b² + se_c²)``; conservative when the versions
  share rows, whose labels, or strong-judge residuals, then correlate positively) instead of the judge's
  paired rows, with the normal one-sided p-values ``Φ((d + margin) / se)`` and ``Φ((margin - d) / se)``
  in Holm's family; its ``basis`` says ``ppi (n=…/… vs …/…)`` (labelled / ok rows of each version) or
  ``cascade (n=…/… vs …/…)`` (strong-judged / covered rows), others ``judge``.
* **Not applicable**: a metric no row of either version scored ``ok`` (e.g. ``context_recall``
  on data without references) cannot be measured on either side: its verdict is ``not
  applicable`` and it decides nothing (no failure, no hypothesis in Holm's family).

What it returns (:class:`~rag_eval.metrics.stats.comparison.Comparison`, a
:class:`~rag_eval.metrics.stats.comparison.MetricComparison` per metric, and the verdicts' words):
``rag_eval.metrics.stats.comparison``.

Default margins (:func:`default_margin`): 0.02 of the scale's range on bounded scales
(0.02 on [0, 1], 0.08 on a 1-5 Likert scale or a 0-4 label scale, 2 on XDCG's 0-100), and
half a document on the count metrics.
"""
from __future__ import annotations

import math
import zlib
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from rag_eval.metrics.reports.diagnosis import diagnose, diagnostics_in, moved
from rag_eval.metrics.stats.comparison import NO_ROWS_IN_COMMON, NOT_APPLICABLE, Comparison, MetricComparison
from rag_eval.metrics.stats.ppi import MeanEstimate, difference_test, estimate_basis
from rag_eval.metrics.core.registry import Registry, given
from rag_eval.metrics.core.results import Direction, Status
from rag_eval.metrics.errors import InputError, SettingsError

#: Bootstrap draws per metric; the smallest p-value is 1 / (RESAMPLES + 1).
RESAMPLES = 4000
#: Paired rows needed before a metric gets a verdict; fewer is ``too few rows`` (no decision: the
#: percentile bootstrap is too narrow on a handful of rows), which does not fail the gate.
MIN_ROWS = 10
ALPHA = 0.05
ERROR_STATUSES = (Status.JUDGE_ERROR.value, Status.INPUT_ERROR.value, Status.TARGET_ERROR.value)
#: Worst rows listed per metric.
WORST_ROWS = 5


def default_margin(metric: str, registry: Registry | None = None) -> float:
    """The margin of ``metric`` (of ``registry``, default the built-in metrics) on its own scale: 0.02 of its range when the range is at
    most 100 wide (0.02 on [0, 1], 0.08 on 1-5 Likert), 0.5 for the count metrics.

    Raises
    ------
    KeyError
        For an unknown metric.
    """
    low, high = given(registry)[metric].value_range
    return 0.5 if high - low > 100 else round(0.02 * (high - low), 10)


def _keyed(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with a ``key``: the id, plus ``#k`` for the k-th repeat of an id within a metric
    (ids may repeat in a file; rows are then matched in file order)."""
    frame = frame.reset_index(drop=True)
    if "repeat" not in frame:
        frame["repeat"] = 0
    frame["sample_id"] = frame["sample_id"].astype(str)
    order = frame.sort_values("row", kind="stable") if "row" in frame else frame
    nth = order.groupby(["metric", "repeat", "sample_id"], sort=False).cumcount()
    frame["key"] = frame["sample_id"].where(nth.reindex(frame.index) == 0,
                                            frame["sample_id"] + "#" + nth.reindex(frame.index).astype(str))
    return frame


def _per_row(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per (metric, key): the mean of the ``ok`` repeats, the status (``ok`` when any
    repeat is, else repeat 0's), the reason of the lowest ``ok`` repeat (or of repeat 0), the
    number of ``ok`` repeats and their within-row variance."""
    ok = frame[frame["status"] == Status.OK.value]
    values = ok.groupby(["metric", "key"])["value"].agg(value="mean", k="count", var="var")  # var: ddof 1
    first = frame.sort_values("repeat").groupby(["metric", "key"]).first()[["status", "reason", "sample_id"]]
    rows = first.join(values, how="left")
    rows.loc[rows["k"].fillna(0) > 0, "status"] = Status.OK.value
    lowest = ok.sort_values("value").groupby(["metric", "key"]).first()["reason"]
    rows.loc[lowest.index, "reason"] = lowest
    rows["k"] = rows["k"].fillna(0).astype(int)
    return rows


def _direction(metric: str, known: Registry, *frames: pd.DataFrame) -> str:
    if metric in known:
        return known[metric].direction.value
    for frame in frames:
        values = frame.loc[frame["metric"] == metric, "direction"] if "direction" in frame else None
        if values is not None and len(values):
            return str(values.iloc[0])
    return Direction.HIGHER.value


def bootstrap_means(values: np.ndarray, seed: int, metric: str, resamples: int = RESAMPLES) -> np.ndarray:
    """``resamples`` means of ``values`` resampled with replacement, seeded by ``seed`` and the
    metric's name (the same draws for a metric whatever else is compared)."""
    rng = np.random.default_rng([seed, zlib.crc32(metric.encode())])
    return values[rng.integers(0, len(values), size=(resamples, len(values)))].mean(axis=1)


def _bootstrap(diffs: np.ndarray, margin: float, seed: int, metric: str, resamples: int) -> tuple[float, ...]:
    means = bootstrap_means(diffs, seed, metric, resamples)
    low, high = np.percentile(means, [100 * ALPHA / 2, 100 * (1 - ALPHA / 2)])
    p_regression = (1 + int((means >= -margin).sum())) / (resamples + 1)
    p_improvement = (1 + int((means <= margin).sum())) / (resamples + 1)
    return float(low), float(high), p_regression, p_improvement


def holm(pvalues: Mapping[str, float]) -> dict[str, float]:
    """Holm's step-down adjustment (Holm 1979): the adjusted p-value of the i-th smallest of
    m is ``max_{j<=i} min(1, (m - j + 1) p_(j))``. ``{name: p}`` in, ``{name: adjusted}`` out."""
    ordered = sorted(pvalues.items(), key=lambda item: item[1])
    adjusted, running = {}, 0.0
    for i, (name, p) in enumerate(ordered):
        running = max(running, min(1.0, (len(ordered) - i) * p))
        adjusted[name] = running
    return adjusted


def _coverage(rows: pd.DataFrame) -> dict[str, Any]:
    counts = {s.value: int((rows["status"] == s.value).sum()) for s in Status}
    total = len(rows)
    return {**counts, "total": total,
            "error_share": round(sum(counts[s] for s in ERROR_STATUSES) / total, 6) if total else 0.0,
            "unscored_share": round(1 - counts[Status.OK.value] / total, 6) if total else 0.0}


def compare(baseline: pd.DataFrame, candidate: pd.DataFrame, metrics: Iterable[str] | None = None,
            margins: Mapping[str, float] | None = None, gated: Iterable[str] | None = None,
            max_coverage_drop: float = 0.05, seed: int = 0, resamples: int = RESAMPLES,
            names: tuple[str, str] = ("baseline", "candidate"),
            estimates: tuple[Mapping[str, MeanEstimate], Mapping[str, MeanEstimate]] | None = None,
            registry: Registry | None = None) -> Comparison:
    """Compare ``candidate`` with ``baseline``, metric by metric, rows matched by id.

    Parameters
    ----------
    baseline, candidate : DataFrame
        Per-row results with ``sample_id``, ``metric``, ``status``, ``value`` and ``reason``
        (``row``, ``direction`` and ``repeat`` when present), as in ``results.parquet``.
    metrics : iterable of str, optional
        Metrics to compare; default every metric present in both frames.
    margins : mapping, optional
        ``{metric: margin}`` on the metric's own scale; others get :func:`default_margin`
        (0.02 on [0, 1] metrics).
    gated : iterable of str, optional
        Metrics whose regression (or coverage drop, or absence from a version) fails the gate;
        default all compared metrics. Holm's adjustment runs over the gated metrics (the
        others are adjusted among themselves).
    max_coverage_drop : float
        Largest allowed rise of the share of rows not scored ``ok`` (errors and ``not_applicable``).
    seed, resamples
        The bootstrap's seed and number of draws.
    names : (str, str)
        Labels of the two versions (version keys or file names) for the report.
    estimates : (mapping, mapping), optional
        ``{metric: MeanEstimate}`` of the baseline and of the candidate (prediction-powered
        estimates from their human labels, ``rag_eval.metrics.stats.estimates``, or both a judge cascade's,
        ``rag_eval.metrics.stats.cascade_estimates``): a metric estimated in both is decided on their
        difference (module notes), its ``basis`` saying so.
    registry : Registry, optional
        The metrics' classes (direction, range): default the built-in ones
        (``rag_eval.metrics.core.registry.builtin_registry``); a metric it does not know is read as higher
        is better (unless the frames say) with a margin of 0.02.

    Returns
    -------
    Comparison
        Per-metric :class:`MetricComparison`; rows only in one version; per metric, rows
        whose status changed; coverage; the worst rows; the gate's failures.

    Raises
    ------
    ValueError
        If a frame lacks a needed column, or a gated metric is not compared.
    """
    for label, frame in zip(names, (baseline, candidate)):
        missing = {"sample_id", "metric", "status", "value", "reason"} - set(frame.columns)
        if missing:
            raise InputError(f"{label}: results lack the column(s) {sorted(missing)}")
    base, cand = _keyed(baseline), _keyed(candidate)
    shared = [m for m in dict.fromkeys(base["metric"]) if m in set(cand["metric"])]
    chosen = list(dict.fromkeys(metrics)) if metrics is not None else shared
    absent = [m for m in chosen if m not in shared]
    gated = list(dict.fromkeys(gated)) if gated is not None else chosen
    if set(gated) - set(chosen):
        raise SettingsError(f"gated metric(s) {sorted(set(gated) - set(chosen))} are not among those compared")
    margins = dict(margins or {})
    base_rows, cand_rows = _per_row(base), _per_row(cand)
    base_keys, cand_keys = set(base["key"]), set(cand["key"])
    results: dict[str, MetricComparison] = {}
    status_changes: dict[str, list[dict[str, Any]]] = {}
    coverage: dict[str, dict[str, Any]] = {}
    worst: dict[str, list[dict[str, Any]]] = {}
    failures: list[str] = []
    undecidable: set[str] = set()
    known = given(registry)
    for metric in chosen:
        direction = _direction(metric, known, baseline, candidate)
        margin = float(margins.get(metric, default_margin(metric, known) if metric in known else 0.02))
        scale = known[metric].value_range if metric in known else (float("nan"), float("nan"))
        if metric in absent:
            side = names[0] if metric not in set(base["metric"]) else names[1]
            results[metric] = MetricComparison(metric, direction, scale, 0, None, None, None, None, None, margin,
                                               None, None, verdict=f"not in {side}")
            continue
        b = base_rows.loc[metric]
        c = cand_rows.loc[metric]
        both = b.join(c, lsuffix="_b", rsuffix="_c", how="inner")
        coverage[metric] = {"baseline": _coverage(b), "candidate": _coverage(c)}
        coverage[metric]["drop"] = round(coverage[metric]["candidate"]["unscored_share"]
                                         - coverage[metric]["baseline"]["unscored_share"], 6)
        if not (b["status"] == Status.OK.value).any() and not (c["status"] == Status.OK.value).any():
            results[metric] = MetricComparison(metric, direction, scale, 0, None, None, None, None, None, margin,
                                               None, None, verdict=NOT_APPLICABLE)
            continue  # measured on neither side (no reference in either file...): nothing to decide
        changed = both[both["status_b"] != both["status_c"]]
        status_changes[metric] = [{"id": r.sample_id_c, "baseline": r.status_b, "candidate": r.status_c,
                                   "reason": r.reason_c} for r in changed.itertuples()]
        paired = both[(both["status_b"] == Status.OK.value) & (both["status_c"] == Status.OK.value)]
        sign = -1.0 if direction == Direction.LOWER.value else 1.0
        diffs = sign * (paired["value_c"].to_numpy(float) - paired["value_b"].to_numpy(float))
        row = MetricComparison(metric, direction, scale, len(diffs), None, None, None, None, None, margin, None, None,
                               repeats={"baseline": int(base.loc[base["metric"] == metric, "repeat"].nunique()),
                                        "candidate": int(cand.loc[cand["metric"] == metric, "repeat"].nunique())},
                               retest_sd={"baseline": _retest(b), "candidate": _retest(c)})
        if len(diffs):
            row.baseline_mean = float(paired["value_b"].mean())
            row.candidate_mean = float(paired["value_c"].mean())
            row.difference = float(diffs.mean())
            row.low, row.high, row.p_regression, row.p_improvement = _bootstrap(diffs, margin, seed, metric,
                                                                                resamples)
        baseline_estimate, candidate_estimate = (side.get(metric) for side in estimates or ({}, {}))
        if len(diffs) and baseline_estimate is not None and candidate_estimate is not None:
            _on_estimates(row, baseline_estimate, candidate_estimate, sign)
        if both.empty:  # another question set: nothing to pair, no decision (not a failure)
            row.verdict = NO_ROWS_IN_COMMON
            del coverage[metric]  # error shares of two unrelated question sets say nothing of a change
        elif row.basis == "judge" and (len(diffs) < MIN_ROWS or (np.ptp(diffs) == 0 and -margin <= diffs[0] <= margin)):
            undecidable.add(metric)
        results[metric] = row
        order = np.argsort(diffs, kind="stable")
        worst[metric] = [{"id": paired["sample_id_c"].iloc[i], "baseline": float(paired["value_b"].iloc[i]),
                          "candidate": float(paired["value_c"].iloc[i]), "difference": float(diffs[i]),
                          "reason": paired["reason_c"].iloc[i], "baseline_reason": paired["reason_b"].iloc[i]}
                         for i in order[:WORST_ROWS] if diffs[i] < 0]
    for family in (gated, [m for m in chosen if m not in gated]):
        # Tarone (1990): a metric that cannot be decided (too few rows, or every paired difference the
        # same and inside the margin, p = 1 for certain) is no hypothesis to correct for.
        measured = [m for m in family if results[m].p_regression is not None and m not in undecidable]
        for name, p in holm({m: p for m in measured if (p := results[m].p_regression) is not None}).items():
            results[name].p_regression_holm = p
        for name, p in holm({m: p for m in measured if (p := results[m].p_improvement) is not None}).items():
            results[name].p_improvement_holm = p
    for name in undecidable:
        results[name].p_regression_holm = results[name].p_regression
        results[name].p_improvement_holm = results[name].p_improvement
    for row in results.values():
        if row.p_regression is None:
            continue
        # both set above (Holm's or, undecidable, as they are) for every row with p-values
        assert row.p_regression_holm is not None and row.p_improvement_holm is not None
        if row.n < MIN_ROWS and row.basis == "judge":
            row.verdict = "too few rows"
        elif row.p_regression_holm < ALPHA / 2:
            row.verdict = "regressed"
        elif row.p_improvement_holm < ALPHA / 2:
            row.verdict = "improved"
        else:
            row.verdict = "no change detected"
    for metric in gated:
        row = results[metric]
        if row.verdict == "regressed":
            failures.append(f"{metric} regressed: {_fmt(row.difference)} [{_fmt(row.low)}, {_fmt(row.high)}] "
                            f"lies below -{row.margin:g} ({row.basis if row.basis != 'judge' else f'n={row.n}'}, "
                            f"Holm p={row.p_regression_holm:.4f})")
        elif row.verdict == "not measured" or row.verdict.startswith("not in"):
            failures.append(f"{metric}: {row.verdict} (no row scored ok in both versions)")
        if metric in coverage and coverage[metric]["drop"] > max_coverage_drop:
            cov = coverage[metric]
            failures.append(f"{metric} coverage dropped: not scored on {cov['candidate']['unscored_share']:.1%} of rows "
                            f"vs {cov['baseline']['unscored_share']:.1%} (errors {cov['candidate']['error_share']:.1%}, "
                            f"not applicable {cov['candidate'][Status.NOT_APPLICABLE.value] / cov['candidate']['total']:.1%}; "
                            f"limit +{max_coverage_drop:.1%})")
    return Comparison(baseline=names[0], candidate=names[1], metrics=results, gated=gated,
                      only_in_baseline=sorted(base_keys - cand_keys), only_in_candidate=sorted(cand_keys - base_keys),
                      status_changes=status_changes, coverage=coverage, worst_rows=worst, failures=failures,
                      diagnosis=_diagnosis(results, candidate),
                      settings={"alpha": ALPHA, "interval": "95 % paired percentile bootstrap", "resamples": resamples,
                                "seed": seed, "correction": "Holm", "min_rows": MIN_ROWS,
                                "max_coverage_drop": max_coverage_drop})


def _on_estimates(row: MetricComparison, baseline: MeanEstimate, candidate: MeanEstimate, sign: float) -> None:
    """Decide ``row`` on the difference of two versions' estimates of its mean (prediction-powered from
    human labels, or a judge cascade's; turned by ``sign`` so that + is better):
    :func:`rag_eval.metrics.stats.ppi.difference_test`."""
    row.baseline_mean, row.candidate_mean = baseline.estimate, candidate.estimate
    row.difference, row.low, row.high, row.p_regression, row.p_improvement = difference_test(
        baseline, candidate, sign, row.margin)
    row.basis = estimate_basis(baseline, candidate)
    row.estimates = {"baseline": baseline.to_dict(), "candidate": candidate.to_dict()}


def _diagnosis(compared: dict[str, MetricComparison], candidate: pd.DataFrame) -> dict[str, Any]:
    """Which diagnostics moved, and the candidate's diagnosis (its first repeat), when any was compared."""
    if not diagnostics_in(compared):
        return {}
    first = candidate[candidate["repeat"] == 0] if "repeat" in candidate else candidate
    return {"moved": moved(compared), "candidate": diagnose(first[first["metric"].isin(compared)])}


def _retest(rows: pd.DataFrame) -> float | None:
    """Pooled within-row standard deviation over rows with two or more ``ok`` repeats."""
    repeated = rows[rows["k"] >= 2]
    if not len(repeated):
        return None
    return float(math.sqrt(((repeated["k"] - 1) * repeated["var"]).sum() / (repeated["k"] - 1).sum()))


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:+.3f}"
