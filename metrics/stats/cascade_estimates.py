"""A version's metrics as a judge cascade estimates them: the strong judge's mean beside the cheap one's.

:func:`add_cascade_estimates` reads the cheap judge's results frame (every row) and the strong frame
(``rag_eval.metrics.core.strong.STRONG_COLUMNS``: each row's inclusion probability and, on the drawn
rows, the strong judge's result) and puts, per metric, a ``cascade`` block beside the summary's raw
(cheap) ``mean``: ``rag_eval.metrics.stats.cascade.cascade_mean``'s estimate of the strong judge's mean
over the rows the cascade covers, with its 95 % interval, ``n`` strong-judged / ``N`` rows, the
sampling, the two judges' agreement and the strong requests saved against a full strong run.

**A drawn row the strong judge could not score** (``judge_error``, or any status but ``ok``): the
metric gets **no estimate**, its ``note`` naming the lines and statuses. Leaving the row out would
bias the estimate (its failure may depend on the row) and scoring it 0 would invent a verdict; the
row's result stays in the strong frame with its reason. Running again with the same seed and budget
draws the same rows and, with the LLM judge's cache, sends requests only for the failed ones.

**Human labels stay the top of the chain.** Each metric's ``published`` says which figure to read:
``"ppi"`` when labels gave it a prediction-powered estimate (``rag_eval.metrics.stats.estimates``; they
correct the cheap judge, whose scores cover every row), else ``"cascade"`` when it has a cascade
estimate, else ``"mean"`` (the cheap judge's raw mean).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from rag_eval.metrics.core.registry import Registry, given
from rag_eval.metrics.core.results import Direction, Status
from rag_eval.metrics.reports.aggregate import USAGE_COLUMNS
from rag_eval.metrics.stats.cascade import StrongSample, cascade_mean
from rag_eval.metrics.stats.estimates import published, scaled, summary_factor, within

#: Failed drawn lines a note names at most (then "and k more").
NAMED_LINES = 5


def add_cascade_estimates(summary: dict[str, Any], results: pd.DataFrame, strong: pd.DataFrame,
                          settings: Mapping[str, Any], registry: Registry | None = None) -> dict[str, Any]:
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

    Returns
    -------
    dict
        ``{metric: block}``; a block holds ``estimate`` (``MeanEstimate.to_dict``: ``estimate``,
        ``ci_low``, ``ci_high``, ``se``, ``n``, ``N``, ``lam``, ``method`` ``"cascade-active"`` or
        ``"cascade-uniform"``, ``confidence``; ``None`` with ``note`` saying why), ``agreement``
        (share of rows where the judges' pass/fail agree, from the strong-judged rows weighted by
        ``1 / pi``), ``strong_judge``, ``sampling``, ``n`` strong-judged rows, ``rows`` covered and
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
                                                     summary_factor(summary, metric, registry), scale)
        row["published"] = published(row)
    usage = {c: int(_counts(strong[f"strong_{c}"]).sum()) for c in USAGE_COLUMNS}
    summary["cascade"] = {**settings, "strong_judge": _judges(strong),
                          "metrics": {m: b["n"] for m, b in blocks.items()}, "usage": usage}
    return blocks


def _block(joined: pd.DataFrame, sampling: str, factor: float,
           scale: tuple[float, float] | None) -> dict[str, Any]:
    """One metric's cascade block from its cheap and strong rows joined by row; the estimate and its
    interval cut to the metric's ``scale`` (its value range, where the strong mean lies) when known."""
    inside = joined[joined["inclusion_probability"].notna()]
    drawn = inside["strong_status"].notna().to_numpy()
    block: dict[str, Any] = {"estimate": None, "agreement": None, "strong_judge": _judges(inside),
                             "sampling": sampling, "n": int(drawn.sum()), "rows": len(inside),
                             "requests": _requests(inside[drawn], len(inside))}
    if not len(inside):
        block["note"] = next(iter(joined["strong_reason"].dropna()), "no row the cascade covers")
        return block
    failed = inside[drawn & (inside["strong_status"] != Status.OK.value).to_numpy()]
    if len(failed):
        lines = ", ".join(f"{int(r) + 1} ({s})" for r, s in zip(failed["row"][:NAMED_LINES],
                                                                 failed["strong_status"][:NAMED_LINES]))
        more = f" and {len(failed) - NAMED_LINES} more" if len(failed) > NAMED_LINES else ""
        block["note"] = (f"no estimate: the strong judge has no score on drawn line(s) {lines}{more}; leaving "
                         "them out would bias the interval: run again to retry them")
        return block
    f = np.where(inside["status"] == Status.OK.value, inside["value"].to_numpy(float), np.nan)
    y = np.where(drawn, inside["strong_value"].to_numpy(float), np.nan)
    sample = StrongSample(inside["inclusion_probability"].to_numpy(float), drawn, sampling)
    try:
        found = cascade_mean(f, y, sample, threshold=float(inside["threshold"].iloc[0]),
                             higher=inside["direction"].iloc[0] != Direction.LOWER.value)
    except ValueError as error:
        block["note"] = f"no estimate: {error}"
        return block
    block["estimate"] = scaled(within(found.estimate, scale) if scale else found.estimate, factor)
    block["agreement"] = None if found.agreement is None else round(found.agreement, 4)
    return block


def _requests(drawn: pd.DataFrame, rows: int) -> dict[str, Any]:
    """What the strong sample cost and what a full strong run would: in requests when the strong
    judge reports usage (a row's requests sent plus judgements answered without one, from the cache
    or shared within the run; the full run is their Horvitz-Thompson total, ``sum c / pi`` over the
    drawn rows, unbiased over the draw), else in rows (``rows`` the rows covered)."""
    sent = _counts(drawn["strong_chat_requests"]) + _counts(drawn["strong_embedding_requests"])
    cost = sent + _counts(drawn["strong_cache_hits"]) + _counts(drawn["strong_shared_hits"])
    if cost.sum() > 0:
        full = round(float((cost / drawn["inclusion_probability"]).sum()))
        return {"unit": "requests", "used": int(cost.sum()), "sent": int(sent.sum()),
                "from_cache": int(cost.sum() - sent.sum()), "full_run": full, "saved": full - int(cost.sum())}
    return {"unit": "rows", "used": len(drawn), "full_run": rows, "saved": rows - len(drawn)}


def _counts(column: pd.Series) -> pd.Series:
    """A usage column as numbers, 0 where empty (a row not drawn)."""
    return pd.to_numeric(column).fillna(0)


def _judges(frame: pd.DataFrame) -> str | None:
    names = sorted({str(n) for n in frame["strong_judge"].dropna() if n})
    return ", ".join(names) or None
