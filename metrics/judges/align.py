"""Aligning the offline verifier to a team's own faithfulness labels (``rag-eval align``).

The shipped verifier (``verifier.json``) was fitted on public data; a team's idea of "grounded"
differs. :func:`align` refits its logistic model on the rows people labelled (a row's label: pass/fail
or a share on [0, 1], fitted by the row's mean support as in ``fitting``) by rescaling the shipped
model's logit (``fitting.rescale``: two parameters, so that a few dozen labels cannot overfit nine
weights, and the statements keep their order of support), and measures it honestly by k-fold cross-fitting: each labelled row is scored by the model fitted on the
other folds, each unlabelled row by the mean of the k fold models (cross-prediction-powered
inference, Zrnic & Candès 2024, which keeps the interval valid). It reports agreement with the labels
and the prediction-powered interval of the mean label, shipped against aligned, on those held-out
scores. The aligned weights are a variant with its own name and version (``aligned-<hash of the
labels>``) that runs and caches under it (``--verifier``). An LLM judge is aligned with examples
of its mistakes instead (``rag_eval.metrics.judges.align_llm``), measured by the same cross-fitting
(:func:`labelled_rows`, :meth:`Labelled.alignment`).
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rag_eval.metrics.core.registry import build_metrics
from rag_eval.metrics.core.results import Status
from rag_eval.metrics.core.samples import Sample
from rag_eval.metrics.core.scoring import score_all
from rag_eval.metrics.judges.base import Judge, JudgeError
from rag_eval.metrics.judges.fitting import Groups, cross_fit, fold_positions, rescale
from rag_eval.metrics.judges.offline import OfflineJudge
from rag_eval.metrics.judges.verifier import FEATURES
from rag_eval.metrics.stats.agreement import accuracy, auroc
from rag_eval.metrics.stats.ppi import MeanEstimate, ppi_mean
from rag_eval.metrics.errors import InputError, SettingsError

@dataclass(frozen=True)
class Agreement:
    """Agreement of row scores with labels on held-out folds: ``auroc`` of the score against a
    passing label (``None`` with one class), ``accuracy`` of pass/fail at the metric's threshold, and the
    mean absolute error (lower is better; the others higher)."""

    auroc: float | None
    accuracy: float
    mae: float

    @classmethod
    def of(cls, scores: np.ndarray, labels: np.ndarray, threshold: float) -> Agreement:
        passes = (labels >= threshold).astype(float)
        both = 0 < passes.sum() < len(passes)
        return cls(auroc(scores, passes) if both else None, accuracy((scores >= threshold).astype(float), passes),
                   float(np.abs(scores - labels).mean()))


@dataclass(frozen=True)
class Alignment:
    """What :func:`align` found: ``before``/``after`` agreement and PPI ``interval`` of the mean label
    (shipped and aligned scores, both held out; ``None`` when every scored row is labelled), the labelled and scored rows used, ``scores`` (sample
    id: its shipped and its cross-fitted aligned faithfulness) and ``model``, the aligned weights
    file's content."""

    before: Agreement
    after: Agreement
    interval_before: MeanEstimate | None
    interval_after: MeanEstimate | None
    labelled: int
    scored: int
    scores: dict[str, tuple[float, float]]
    model: dict[str, Any]

    def write(self, path: str | Path) -> Path:
        """Write ``model`` (a ``Verifier`` weights file, or an LLM judge's ``Examples``) to ``path``; its
        folder is made."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.model, indent=1) + "\n", encoding="utf-8")
        return path


@dataclass(frozen=True)
class Labelled:
    """A version's rows as a judge scored their faithfulness, ready for cross-fitting (:func:`labelled_rows`):
    ``scored`` (sample, result) of the rows measured, ``before`` their scores, ``target`` their labels (0
    where unlabelled), the positions of the ``labelled`` and ``unlabelled`` ones, ``folds`` (each the sorted
    positions of its labelled rows) and the metric's pass ``threshold``."""

    scored: list[tuple[Sample, Any]]
    before: np.ndarray
    target: np.ndarray
    labelled: np.ndarray
    unlabelled: np.ndarray
    folds: list[np.ndarray]
    threshold: float

    def alignment(self, after: np.ndarray, model: dict[str, Any]) -> Alignment:
        """The :class:`Alignment` of the held-out ``after`` scores (every scored row's) and the variant ``model``."""
        labelled, unlabelled, before = self.labelled, self.unlabelled, self.before
        y = self.target[labelled]
        interval_before, interval_after = \
            (ppi_mean(y, before[labelled], before[unlabelled]), ppi_mean(y, after[labelled], after[unlabelled])) \
            if len(unlabelled) else (None, None)
        return Alignment(Agreement.of(before[labelled], y, self.threshold), Agreement.of(after[labelled], y, self.threshold),
                         interval_before, interval_after, len(labelled), len(self.scored),
                         {s.id: (float(b), float(a)) for (s, _), b, a in zip(self.scored, before, after)}, model)


def labelled_rows(samples: Sequence[Sample], labels: Mapping[str, float], judge: Judge, folds: int = 5,
                  seed: int = 0) -> Labelled:
    """``judge``'s faithfulness of ``samples`` with ``labels`` split into ``folds`` at random (``seed``).

    Rows whose faithfulness is not measured (no statement, a judge error) are left out.

    Raises
    ------
    ValueError
        ``folds`` below 2, a label outside [0, 1], fewer than ``2 * folds`` labelled rows with a measured
        faithfulness, or labels all passing or all failing.
    JudgeError
        When the judge could not judge a row (an LLM judge's failure after its retries).
    """
    if folds < 2:
        raise SettingsError(f"folds must be at least 2, got {folds}")
    bad = {k: v for k, v in labels.items() if not 0 <= v <= 1}
    if bad:
        raise InputError(f"faithfulness labels must lie in [0, 1]: {dict(list(bad.items())[:3])}")
    metric = build_metrics(["faithfulness"])[0]
    results = score_all(list(samples), [metric], judge)
    if failed := [r for r in results if r.status == Status.JUDGE_ERROR]:  # never dropped as "not measured"
        raise JudgeError(f"{len(failed)} of {len(results)} rows could not be judged ({failed[0].reason}); run align "
                         "again: the judgements made are cached")
    scored = [(s, r) for s, r in zip(samples, results) if r.value is not None]
    in_labels = np.array([s.id in labels for s, _ in scored], dtype=bool)
    if in_labels.sum() < 2 * folds:
        raise InputError(f"{in_labels.sum()} labelled rows with a measured faithfulness among {len(scored)}: "
                         f"aligning needs at least {2 * folds} (--folds {folds})")
    target = np.array([labels.get(s.id, 0.0) for s, _ in scored])
    labelled = np.flatnonzero(in_labels)
    y = target[labelled]
    if len(set(y >= metric.threshold)) < 2:
        raise InputError(f"every one of the {len(y)} labels {'passes' if y[0] >= metric.threshold else 'fails'}: "
                         "aligning needs labels of both kinds (a constant judge would agree with them all)")
    return Labelled(scored, np.array([r.value for _, r in scored]), target, labelled, np.flatnonzero(~in_labels),
                    [labelled[p] for p in fold_positions(len(labelled), folds, seed)], metric.threshold)


def align(samples: Sequence[Sample], labels: Mapping[str, float], judge: OfflineJudge | None = None,
          folds: int = 5, seed: int = 0, source: str = "") -> Alignment:
    """Refit ``judge``'s verifier (the shipped one by default) on faithfulness ``labels``.

    Parameters
    ----------
    samples : list of Sample
        The version's rows; those whose faithfulness is not measured (no statement) are left out.
    labels : mapping of sample id to float in [0, 1]
        People's faithfulness labels (1 pass, 0 fail, or a share), of some of ``samples``.
    folds : int
        Cross-fitting folds, at least 2; every fold needs a labelled row.
    source : str
        Where the labels come from (a dataset version), written in the weights file.

    Returns
    -------
    Alignment

    Raises
    ------
    ValueError
        As :func:`labelled_rows`.
    """
    judge = judge or OfflineJudge()
    rows = labelled_rows(samples, labels, judge, folds, seed)
    statements = [r.details["statements"] for _, r in rows.scored]
    groups = Groups.of([[item.get("features") for item in items] for items in statements],
                       [sum(item["verdict"] for item in items if "features" not in item) for items in statements],
                       list(rows.target))
    labelled, unlabelled = rows.labelled, rows.unlabelled
    after = np.empty(len(rows.scored))
    scores, models = cross_fit(groups, rows.folds, judge.verifier)
    for test, held_out in zip(rows.folds, scores):
        after[test] = held_out
    after[unlabelled] = np.mean([groups.subset(unlabelled).means(bias, w) for bias, w in models], axis=0)
    bias, w = rescale(groups.subset(labelled), judge.verifier)
    digest = hashlib.sha256(json.dumps(sorted(labels.items())).encode() + judge.verifier.version.encode())
    model = {"name": "aligned", "version": digest.hexdigest()[:10], "bias": round(bias, 6),
             "threshold": judge.verifier.threshold, "long_threshold": judge.verifier.long_threshold,
             "long_words": judge.verifier.long_words, "features": {f: round(float(v), 6) for f, v in zip(FEATURES, w)},
             "trained_on": f"{len(labelled)} faithfulness labels of {source or 'a dataset version'}, from "
                           f"{judge.verifier.name}-{judge.verifier.version}",
             "script": "rag-eval align"}
    return rows.alignment(after, model)
