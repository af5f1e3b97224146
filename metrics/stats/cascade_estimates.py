"""A version's metrics as a judge cascade estimates them: the strong judge's mean beside the cheap one's.

:func:`add_cascade_estimates` reads the cheap judge's results frame (every row) and the strong frame
(``rag_eval.metrics.core.strong.STRONG_COLUMNS``: each row's inclusion probability and, on the drawn
rows, the strong judge's result) and puts, per metric, a ``cascade`` block beside the summary's raw
(cheap) ``mean``: ``rag_eval.metrics.stats.cascade.cascade_mean``'s estimate of the strong judge's mean
over the rows the cascade covers, with its 95 % interval, ``n`` strong-judged / ``N`` rows, the
sampling, the two judges' agreement and the strong requests saved against a full strong run.

**A drawn row the strong judge finds not applicable** is outside the metric's population (the rows the
strong judge would score): the estimate is the strong judge's mean over that population, whose size is
estimated too (``cascade_mean``'s ``outside``), and ``not_applicable`` counts those rows.

**A drawn row the strong judge could not score** (``judge_error``, or any other status but ``ok``): the
metric gets **no estimate**, its ``note`` naming the lines and statuses. Leaving the row out would
bias the estimate (its failure may depend on the row) and scoring it 0 would invent a verdict; the
row's result stays in the strong frame with its reason. Running again with the same seed and budget
draws the same rows and, with the LLM judge's cache, sends requests only for the failed ones: the note
says so when a ``judge_error`` is among them.

**Human labels stay the top of the chain.** Each metric's ``published`` says which figure to read:
``"ppi"`` when labels gave it a prediction-powered estimate (``rag_eval.metrics.stats.estimates``; they
correct the cheap judge, whose scores cover every row), else ``"cascade"`` when it has a cascade
estimate, else ``"mean"`` (the cheap judge's raw mean).
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from rag_eval.metrics.core.registry import Registry, given
from rag_eval.metrics.core.results import Direction, Status
from rag_eval.metrics.reports.aggregate import USAGE_COLUMNS
from rag_eval.metrics.stats.cascade import CascadeEstimate, StrongSample, cascade_mean
from rag_eval.metrics.stats.ppi import MeanEstimate
from rag_eval.metrics.stats.estimates import published, scaled, summary_factor, within

#: Failed drawn lines a note names at most (then "and k more").
NAMED_LINES = 5


def add_cascade_estimates(summary: dict[str, Any], results: pd.DataFrame, strong: pd.DataFrame,
                          settings: Mapping[str, Any], registry: Registry | None = None,
                          full_runs: Mapping[str, int] | None = None) -> dict[str, Any]:
    """Put each metric's cascade block under ``summary["metrics"][<metric>]["cascade"]``, its
    ``published`` figure, and the cascade's settings and strong usage under ``summary["cascade"]``.
    Run it after ``add_estimates`` (labels), whose estimates come first.

    Parameters
    ----------
    summary : dict
        ``rag_eval.metrics.reports.aggregate.summarize``'s summary of ``results`` (its ``scale``:
        [0, 1] metrics' figures are times 10 on ``"0-10"``).
    results : DataFrame
        The cheap judge's results frame: ``row``, ``metric``, ``status``, ``value``, ``threshold``,
        ``direction``.
    strong : DataFrame
        The strong frame (``rag_eval.metrics.core.strong.score_strong``): ``row``, ``metric``,
        ``inclusion_probability``, ``strong_status``, ``strong_value``, ``strong_reason``,
        ``strong_judge`` and the ``strong_`` usage columns.
    settings : mapping
        Written under ``summary["cascade"]``: ``sampling`` (``"active"`` or ``"uniform"``), and
        the budget and seed.
    registry : Registry, optional
        The metrics' classes (their value range, to which each estimate and interval is cut, as the
        labels' are; which are on [0, 1]): default the built-in ones.
    full_runs : mapping, optional
        Per metric, the chat requests a full strong run would send, where the caller planned them exactly
        (``rag_eval.metrics.core.strong.judge_cascade``); else estimated from the drawn rows (``_requests``).

    Returns
    -------
    dict
        ``{metric: block}``; a block holds ``estimate`` (``MeanEstimate.to_dict``: ``estimate``,
        ``ci_low``, ``ci_high``, ``se``, ``n``, ``N``, ``lam``, ``method`` ``"cascade-active"`` or
        ``"cascade-uniform"``, ``confidence``; ``None`` with ``note`` saying why), ``agreement``
        (share of rows where the judges' pass/fail agree, from the strong-judged rows weighted by
        ``1 / pi``), ``strong_judge``, ``sampling``, ``n`` strong-judged rows, ``rows`` covered,
        ``not_applicable`` (drawn rows the strong judge found not applicable: outside the population) and
        ``requests``. Nothing raised: a metric the estimate refuses gets the reason as ``note``.
    """
    blocks: dict[str, Any] = {}
    for metric, row in summary["metrics"].items():
        mine = strong[strong["metric"] == metric]
        if len(mine):
            cheap = results.loc[results["metric"] == metric, ["row", "status", "value", "threshold", "direction"]]
            known = given(registry).get(metric)
            scale = (float(known.value_range[0]), float(known.value_range[1])) if known else None
            blocks[metric] = row["cascade"] = _block(cheap.merge(mine, on="row"), str(settings["sampling"]),
                                                     summary_factor(summary, metric, registry), scale,
                                                     (full_runs or {}).get(metric))
        row["published"] = published(row)
    usage = {c: int(_counts(strong[f"strong_{c}"]).sum()) for c in USAGE_COLUMNS}
    summary["cascade"] = {**settings, "strong_judge": _judges(strong),
                          "metrics": {m: b["n"] for m, b in blocks.items()}, "usage": usage}
    return blocks


def _block(joined: pd.DataFrame, sampling: str, factor: float, scale: tuple[float, float] | None,
           full_run: int | None) -> dict[str, Any]:
    """One metric's cascade block from its cheap and strong rows joined by row; the estimate and its
    interval cut to the metric's ``scale`` (its value range, where the strong mean lies) when known."""
    inside = joined[joined["inclusion_probability"].notna()]
    drawn = inside["strong_status"].notna().to_numpy()
    block: dict[str, Any] = {"estimate": None, "agreement": None, "strong_judge": _judges(inside),
                             "sampling": sampling, "n": int(drawn.sum()), "rows": len(inside),
                             "not_applicable": int((inside["strong_status"] == Status.NOT_APPLICABLE.value).sum()),
                             "judge_error": int((inside["strong_status"] == Status.JUDGE_ERROR.value).sum()),
                             "requests": _requests(inside[drawn], len(inside), full_run)}
    found, block["note"] = _estimate(joined, sampling)
    if found is not None:
        block["estimate"] = scaled(within(found.estimate, scale) if scale else found.estimate, factor)
        block["agreement"] = None if found.agreement is None else round(found.agreement, 4)
    if block["note"] is None:
        del block["note"]
    return block


def _estimate(joined: pd.DataFrame, sampling: str, stream: bool = False) -> tuple[CascadeEstimate | None, str | None]:
    """``(estimate, None)`` of one metric's cheap and strong rows joined by row, or ``(None, why)``; ``stream``:
    of the traffic the rows were sampled from (``rag_eval.metrics.stats.cascade.cascade_mean``)."""
    inside = joined[joined["inclusion_probability"].notna()]
    drawn = inside["strong_status"].notna().to_numpy()
    if not len(inside):
        return None, next(iter(joined["strong_reason"].dropna()), "no row the cascade covers")
    outside = drawn & (inside["strong_status"] == Status.NOT_APPLICABLE.value).to_numpy(bool, na_value=False)
    failed = inside[drawn & ~outside & (inside["strong_status"] != Status.OK.value).to_numpy()]
    if len(failed):
        lines = ", ".join(f"{int(r) + 1} ({s})" for r, s in zip(failed["row"][:NAMED_LINES],
                                                                 failed["strong_status"][:NAMED_LINES]))
        more = f" and {len(failed) - NAMED_LINES} more" if len(failed) > NAMED_LINES else ""
        retry = ": run again to retry the judge errors" if (failed["strong_status"] == Status.JUDGE_ERROR.value).any() \
            else ""
        return None, (f"no estimate: the strong judge has no score on drawn line(s) {lines}{more}; leaving "
                      f"them out would bias the interval{retry}")
    f = np.where(inside["status"] == Status.OK.value, inside["value"].to_numpy(float), np.nan)
    y = np.where(drawn & ~outside, inside["strong_value"].to_numpy(float), np.nan)
    sample = StrongSample(inside["inclusion_probability"].to_numpy(float), drawn, sampling)
    try:
        return cascade_mean(f, y, sample, threshold=float(inside["threshold"].iloc[0]),
                            higher=inside["direction"].iloc[0] != Direction.LOWER.value, outside=outside,
                            stream=stream), None
    except ValueError as error:
        return None, f"no estimate: {error}"


def is_cascade(results: pd.DataFrame) -> bool:
    """Whether a per-row results frame is a cascade run's: it carries the strong columns an estimate reads,
    ``inclusion_probability``, ``strong_status``, ``strong_value`` and ``strong_reason``
    (``rag_eval.metrics.core.strong.STRONG_COLUMNS``)."""
    return {"inclusion_probability", "strong_status", "strong_value", "strong_reason"} <= set(results.columns)


def frame_estimates(results: pd.DataFrame, registry: Registry | None = None,
                    stream: bool = False) -> tuple[dict[str, MeanEstimate], dict[str, str]]:
    """Each metric's cascade estimate recomputed from a cascade run's per-row results alone
    (``results.parquet``, or ``evaluate(...).results``: the cheap judge's columns and the strong ones
    merged per (row, metric); the first repeat when there is a ``repeat`` column), on the metric's own
    scale and cut to its value range (of ``registry``, default the built-in metrics), as the summary's.

    The sampling is read from the frame: ``uniform`` when every covered row the cheap judge scored has
    one inclusion probability, else ``active`` (it names the estimate's ``method`` only; the estimate
    is the same). A metric is in the cascade when a row of it has an inclusion probability or a
    strong reason (a sample that could not be drawn says why there). ``stream``: the rows are a sample of
    production traffic, and the estimate is of the traffic's strong mean, not of these rows'
    (``rag_eval.metrics.stats.cascade.cascade_mean``).

    Returns
    -------
    (dict, dict)
        ``{metric: MeanEstimate}`` (``method`` ``"cascade-active"`` or ``"cascade-uniform"``, ``n`` the
        strong-judged rows, ``N`` the rows covered) and ``{metric: why}`` for each metric in the cascade
        without an estimate (a drawn row the strong judge has no score on, naming its line; too few drawn
        rows). ``({}, {})`` for a frame that is not a cascade run's (:func:`is_cascade`). Nothing raised.
    """
    if not is_cascade(results):
        return {}, {}
    first = results[results["repeat"] == 0] if "repeat" in results else results
    known = given(registry)
    estimates, notes = {}, {}
    for metric, rows in first.groupby("metric", sort=False):
        if rows["inclusion_probability"].isna().all() and rows["strong_reason"].isna().all():
            continue
        scored = rows.loc[rows["status"] == Status.OK.value, "inclusion_probability"].dropna()
        sampling = "uniform" if scored.nunique() <= 1 else "active"
        found, why = _estimate(rows, sampling, stream)
        if found is None:
            notes[str(metric)] = str(why)
            continue
        low, high = known[metric].value_range if metric in known else (-math.inf, math.inf)
        estimates[str(metric)] = within(found.estimate, (float(low), float(high)))
    return estimates, notes


def decided_on(names: tuple[str, str], results: tuple[pd.DataFrame, pd.DataFrame],
               labelled: tuple[Mapping[str, MeanEstimate], Mapping[str, MeanEstimate]],
               registry: Registry | None = None) -> tuple[tuple[dict[str, MeanEstimate], dict[str, MeanEstimate]],
                                                           list[str]]:
    """The estimates two versions are compared on, per metric, and notes saying why a cascade was not used.

    Human labels stay first: a metric both versions have a labels' estimate of (``labelled``,
    ``rag_eval.metrics.stats.estimates``) is compared on those. Else a metric both versions' results
    (``results``, a cascade run's: :func:`is_cascade`) carry a cascade estimate of
    (:func:`frame_estimates`) is compared on the two estimates of the strong judge's mean. Else the
    comparison falls back to the cheap judge's paired rows (basis ``judge``), never a strong-judge
    estimate against a cheap judge's mean: a note (``names``: the baseline's and the candidate's)
    says so when only one version has a cascade of the metric, the two cascades' strong judges differ,
    or a version's cascade has no estimate (with its reason). Metrics of ``registry`` (default the built-in ones). Nothing raised.

    The comparison takes the two estimates as independent (``rag_eval.metrics.stats.ppi.difference``),
    which is conservative when the versions share rows: with one seed a row's uniform is the same in
    both draws, so the covariance of the two estimates' errors is ``sum (1 / max(pi_b, pi_c) - 1) r_b r_c
    / N²`` over the rows (``r`` a row's residual ``y - g``), positive when the cheap judge errs alike on
    a row in both versions, as on every unchanged row; ``sqrt(se_b² + se_c²)`` then overstates the
    spread of the difference.
    """
    (base, base_why), (cand, cand_why) = (frame_estimates(side, registry) for side in results)
    chosen: tuple[dict[str, MeanEstimate], dict[str, MeanEstimate]] = ({}, {})
    notes = []
    for metric in dict.fromkeys([*base, *base_why, *cand, *cand_why]):
        if metric in labelled[0] and metric in labelled[1]:
            continue
        if metric in base and metric in cand:
            judges = [_judges(side[side["metric"] == metric]) for side in results]
            if judges[0] == judges[1]:
                chosen[0][metric], chosen[1][metric] = base[metric], cand[metric]
            else:  # two strong judges' means differ by the judges as much as by the versions
                notes.append(f"{metric}: the versions' cascades have different strong judges ({judges[0]} and "
                             f"{judges[1]}): compared on the cheap judge's paired rows (basis judge)")
            continue
        inside = [metric in side or metric in why for side, why in ((base, base_why), (cand, cand_why))]
        if not all(inside):
            notes.append(f"{metric}: only {names[inside.index(True)]} is a judge cascade: compared on the cheap "
                         "judge's paired rows (basis judge), not its strong-judge estimate against a cheap mean")
        for name, why in zip(names, (base_why, cand_why)):
            if metric in why:
                notes.append(f"{metric}: {name}'s cascade gives no estimate ({why[metric]}): compared on the "
                             "cheap judge's paired rows (basis judge)")
    return chosen, notes


def _requests(drawn: pd.DataFrame, rows: int, full_run: int | None) -> dict[str, Any]:
    """What the strong sample cost and what a full strong run would, in chat requests when the strong judge
    reports usage (``unit: "chat_requests"``): ``full_run`` where it was planned exactly (``from: "plan"``),
    else the Horvitz-Thompson total of the chat requests sent, ``sum sent / pi`` over the drawn rows (``from:
    "estimate"``, unbiased over the draw). Embedding requests are batched as the run goes, so a full run's
    are not known in advance: ``embeddings_sent`` gives the sample's. ``reused`` counts the judgements
    answered without a request (from the cache, or shared within the run). Else in rows (``rows`` covered)."""
    sent = _counts(drawn["strong_chat_requests"])
    embeddings = _counts(drawn["strong_embedding_requests"])
    reused = _counts(drawn["strong_cache_hits"]) + _counts(drawn["strong_shared_hits"])
    if sent.sum() + embeddings.sum() + reused.sum() > 0 or full_run:
        full = full_run if full_run is not None else round(float((sent / drawn["inclusion_probability"]).sum()))
        return {"unit": "chat_requests", "sent": int(sent.sum()), "full_run": full,
                "from": "plan" if full_run is not None else "estimate", "saved": full - int(sent.sum()),
                "embeddings_sent": int(embeddings.sum()), "reused": int(reused.sum())}
    return {"unit": "rows", "used": len(drawn), "full_run": rows, "saved": rows - len(drawn)}


def _counts(column: pd.Series) -> pd.Series:
    """A usage column as numbers, 0 where empty (a row not drawn)."""
    return pd.to_numeric(column).fillna(0)


def _judges(frame: pd.DataFrame) -> str | None:
    names = sorted({str(n) for n in frame["strong_judge"].dropna() if n})
    return ", ".join(names) or None
