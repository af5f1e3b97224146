"""A version's metrics corrected by its human labels: prediction-powered estimates and agreement.

For each metric with labels, :func:`metric_estimate` pairs the judge's per-row results with
the labels (by line and id) and gives, beside the judge's raw mean, the PPI++ estimate of the
mean human label with its 95 % interval (:func:`rag_eval.metrics.stats.ppi.ppi_mean`) and how far judge and
people agree on the labelled rows (accuracy at the metric's threshold, Cohen's kappa for
binary labels or Spearman for labels on a scale, AUROC; :mod:`rag_eval.metrics.stats.agreement`).

**Which rows count.** The estimate is of the mean label over the rows the judge scored
``ok``, the rows its raw mean covers: ``n`` is the labelled rows scored ``ok``, ``N`` the
``ok`` rows without a label. Rows whose result is ``not_applicable``, ``judge_error``,
``input_error`` or ``target_error`` have no judge score to correct: they enter neither
``n`` nor ``N``, are never scored as 0, and a label on one is counted under ``not_scored``
(by status), not used. A uniformly random sample of all rows restricted to the ``ok`` ones
is a uniformly random sample of the ``ok`` rows, so the interval stays valid. A label whose
line holds another id (the version's file replaced since) is counted as ``unmatched``.

**Binary or scale.** Labels of a [0, 1] metric that are all 0 or 1 are binary (the estimate
is the share of rows people pass); any other labels are on the metric's scale. Either way
the judge's prediction is its score on the metric's scale.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from rag_eval.metrics.stats.agreement import accuracy, auroc, cohen_kappa, spearman
from rag_eval.metrics.stats.ppi import MeanEstimate, classical_mean, ppi_mean
from rag_eval.metrics.core.registry import Registry, given
from rag_eval.metrics.reports.aggregate import is_ratio
from rag_eval.metrics.core.results import Direction, Status

#: Labelled rows scored ``ok`` a metric needs before it gets an estimate: the interval is a normal
#: one with Agresti–Coull pseudo-rows, whose coverage ``bench/trust_bench.py`` measures from 25 labels up
#: (docs/explanation/trust.md).
MIN_LABELS = 10


@dataclass
class LabelledMetric:
    """One metric's labels against its judge: the PPI estimate (``None`` with ``note`` saying why),
    the judge's raw mean over the ``ok`` rows, counts, and agreement on the labelled rows."""

    metric: str
    estimate: MeanEstimate | None
    raw_mean: float | None
    n: int
    rows: int
    kind: str
    agreement: dict[str, float | None]
    not_scored: dict[str, int] = field(default_factory=dict)
    unmatched: int = 0
    note: str | None = None

    @property
    def basis(self) -> str:
        """How a comparison uses it: ``ppi (n=10/30)`` (labelled / ``ok`` rows), or ``judge``."""
        return f"{'ppi' if self.estimate.method == 'ppi++' else 'labels'} (n={self.n}/{self.rows})" \
            if self.estimate else "judge"

    def to_summary(self, factor: float = 1.0) -> dict[str, Any]:
        """The blocks summary.json holds under ``metrics[<metric>]``: ``ppi`` (the estimate, or
        ``None``), ``raw_mean``, ``agreement`` and ``labels`` (counts), values times ``factor``
        (10 for a [0, 1] metric presented on dingo's 0-10 scale)."""
        ppi = None if self.estimate is None else scaled(self.estimate, factor)
        return {"ppi": ppi, "raw_mean": None if self.raw_mean is None else round(self.raw_mean * factor, 6),
                "agreement": self.agreement,
                "labels": {"n": self.n, "rows_ok": self.rows, "kind": self.kind, "not_scored": self.not_scored,
                           "unmatched": self.unmatched, **({"note": self.note} if self.note else {})}}


def scaled(estimate: MeanEstimate, factor: float) -> dict[str, Any]:
    """``estimate.to_dict()`` with the estimate, its interval and ``se`` times ``factor`` (10 for a
    [0, 1] metric on a summary of scale ``"0-10"``: :func:`summary_factor`)."""
    out = estimate.to_dict()
    for key in ("estimate", "ci_low", "ci_high", "se"):
        out[key] = round(out[key] * factor, 6)
    return out


def summary_factor(summary: dict[str, Any], metric: str, registry: Registry | None = None) -> float:
    """10 for a [0, 1] metric of ``registry`` on a summary of scale ``"0-10"``, else 1."""
    return 10.0 if is_ratio(metric, registry) and summary.get("scale") == "0-10" else 1.0


def _round(value: float) -> float | None:
    return None if value is None or math.isnan(value) else round(float(value), 4)


def metric_estimate(results: pd.DataFrame, labels: pd.DataFrame, metric: str,
                    confidence: float = 0.95, registry: Registry | None = None) -> LabelledMetric:
    """``metric``'s labels against its judge's results on one version.

    Parameters
    ----------
    results : DataFrame
        Per-row results (``results.parquet``): ``row``, ``sample_id``, ``metric``, ``status``,
        ``value``, ``threshold``, ``direction`` (``passed`` when present; repeats other than 0
        are left out).
    labels : DataFrame
        The version's labels (``rag_eval.metrics.sources.labels``): ``line`` (from 1), ``id``, ``metric``,
        ``label`` on the metric's scale.
    metric : str
        The metric.
    confidence : float
        Coverage of the interval (0.95).
    registry : Registry, optional
        Where ``metric``'s class (its value range) is: default the built-in metrics
        (``rag_eval.metrics.core.registry.builtin_registry``).

    Returns
    -------
    LabelledMetric
        ``estimate`` is PPI++ (``method "ppi++"``, with ``rag_eval.metrics.stats.ppi``'s Agresti–Coull
        pseudo-rows at the ends of the metric's scale) with ``n >= MIN_LABELS`` labelled ``ok``
        rows and at least one unlabelled one, the labels' own (Agresti–Coull) interval when every
        ``ok`` row is labelled, ``None`` below ``MIN_LABELS``; the estimate and interval lie within
        the metric's value range (cut to it). Agreement values are in [0, 1] (accuracy,
        AUROC) or [-1, 1] (kappa, Spearman), higher is better, ``None`` when undefined.
    """
    frame = results[results["metric"] == metric]
    if "repeat" in frame:
        frame = frame[frame["repeat"] == 0]
    mine = labels[labels["metric"] == metric]
    # A label whose line holds another id now (the file replaced since) matches no row: it is unmatched.
    joined = frame.assign(line=frame["row"].astype(int) + 1, key=frame["sample_id"].astype(str)).merge(
        mine.assign(key=mine["id"].astype(str))[["line", "key", "label"]], on=["line", "key"], how="left")
    labelled = joined[joined["label"].notna()]
    unmatched = len(mine) - len(labelled)
    ok = joined["status"] == Status.OK.value
    not_scored = labelled.loc[~ok[labelled.index], "status"].value_counts().to_dict()
    y = labelled.loc[ok[labelled.index], "label"].to_numpy(float)
    f = labelled.loc[ok[labelled.index], "value"].to_numpy(float)
    unlabelled = joined.loc[ok & joined["label"].isna(), "value"].to_numpy(float)
    low, high = given(registry)[metric].value_range
    scale = (float(low), float(high))  # the pseudo-rows' labels (rag_eval.metrics.stats.ppi) sit at its ends
    kind = "binary" if scale == (0.0, 1.0) and set(y) <= {0.0, 1.0} else "scale"
    scored = joined.loc[ok, "value"].to_numpy(float)
    labelled_metric = LabelledMetric(metric, None, float(scored.mean()) if len(scored) else None, len(y),
                                     int(ok.sum()), kind, {}, {str(k): int(v) for k, v in not_scored.items()},
                                     unmatched)
    if len(y):
        labelled_metric.agreement = _agreement(y, f, frame, kind)
    if len(y) < MIN_LABELS:
        labelled_metric.note = f"{len(y)} labelled row(s) scored ok: an interval needs {MIN_LABELS}"
    elif not len(unlabelled):
        labelled_metric.estimate = within(classical_mean(y, confidence, scale=scale), scale)
        labelled_metric.note = "every row scored ok is labelled: the labels' own (Agresti-Coull) interval"
    else:
        labelled_metric.estimate = within(ppi_mean(y, f, unlabelled, confidence, scale=scale), scale)
    return labelled_metric


def within(estimate: MeanEstimate, scale: tuple[float, float]) -> MeanEstimate:
    """The estimate and its interval cut to the metric's scale, where the mean lies (a normal
    interval near an end reaches past it; cutting it never leaves the true mean out)."""
    low, high = scale
    return replace(estimate, estimate=min(max(estimate.estimate, low), high), ci_low=max(estimate.ci_low, low),
                   ci_high=min(estimate.ci_high, high))


def _agreement(labels: np.ndarray, scores: np.ndarray, frame: pd.DataFrame, kind: str) -> dict[str, float | None]:
    """Accuracy of the judge's pass/fail against the label's at the metric's threshold, Cohen's
    kappa (binary labels) or Spearman (scale), and AUROC of the score against the label's pass."""
    threshold = float(frame["threshold"].iloc[0])
    higher = str(frame["direction"].iloc[0]) == Direction.HIGHER.value
    judge_pass = scores >= threshold if higher else scores <= threshold
    human_pass = labels >= threshold if higher else labels <= threshold
    second = {"cohen_kappa": _round(cohen_kappa(judge_pass, human_pass))} if kind == "binary" else \
        {"spearman": _round(spearman(scores, labels))}
    return {"accuracy": _round(accuracy(judge_pass, human_pass)), **second,
            "auroc": _round(auroc(scores if higher else -scores, human_pass.astype(int)))}


def published(row: dict[str, Any]) -> str:
    """Which figure of a summary's metric ``row`` to read: ``"ppi"`` when human labels gave it a
    prediction-powered estimate (they stay the top of the chain), else ``"cascade"`` when a judge
    cascade estimated the strong judge's mean (``rag_eval.metrics.stats.cascade_estimates``), else
    ``"mean"``, the judge's raw mean."""
    return "ppi" if row.get("ppi") else "cascade" if (row.get("cascade") or {}).get("estimate") else "mean"


def add_estimates(summary: dict[str, Any], results: pd.DataFrame, labels: pd.DataFrame,
                  registry: Registry | None = None) -> dict[str, LabelledMetric]:
    """Put each labelled metric's blocks (:meth:`LabelledMetric.to_summary`) under
    ``summary["metrics"][<metric>]`` and the label counts under ``summary["labels"]``, on the
    summary's scale (``"0-10"``: [0, 1] metrics times 10); the metrics' estimates. Metrics
    ``registry`` (default the built-in ones) does not know are left as they are."""
    known = given(registry)
    done: dict[str, LabelledMetric] = {}
    for metric, row in summary["metrics"].items():
        for key in ("ppi", "raw_mean", "agreement", "labels"):
            row.pop(key, None)  # a summary of earlier labels is not carried over
        if metric in known and (labels["metric"] == metric).any():
            done[metric] = metric_estimate(results, labels, metric, registry=known)
            row.update(done[metric].to_summary(summary_factor(summary, metric, known)))
        if "published" in row or "ppi" in row:  # set by a cascade, or labels now: said again
            row["published"] = published(row)
    summary.pop("labels", None)
    if len(labels):
        summary["labels"] = {"rows": int(labels[["line", "id"]].drop_duplicates().shape[0]), "labels": len(labels),
                             "metrics": {m: e.n for m, e in done.items()}, "min_labels": MIN_LABELS}
    return done
