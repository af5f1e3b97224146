"""A conversation's metrics: Azure AI Evaluation's mean over its turns, and its worst turn.

Azure AI Evaluation scores a ``conversation`` turn by turn and reports, per evaluator, the mean over
the turns with each turn's value beside it (``evaluation_per_turn``). A chat team reads the worst turn
first: one ungrounded answer in a five-turn conversation is the one the user saw. So per metric and
conversation this gives both, and the summary adds the mean over turns by turn index (does turn 3 do
worse than turn 1: follow-ups a retriever resolves badly).

Only ``ok`` turns are averaged; a conversation with no ``ok`` turn for a metric is counted, not
averaged, as every unmeasured row is (``rag_eval.metrics.reports.aggregate``).
"""
from __future__ import annotations

import statistics
from typing import Any

import pandas as pd

from rag_eval.metrics.core.results import USAGE_COLUMNS, Direction, Status

#: How many conversations a metric's block lists as the worst (all are in :func:`conversation_frame`).
WORST_LISTED = 5
#: The columns of :func:`conversation_frame`.
CONVERSATION_COLUMNS = ["conversation_id", "line", "metric", "turns", "measured", "mean", "worst", "worst_turn",
                        "passed"]


def has_conversations(results: pd.DataFrame) -> bool:
    """Whether per-row ``results`` hold turns of conversations (a ``conversation_id`` on some row)."""
    return "conversation_id" in results and bool(results["conversation_id"].notna().any())


def conversation_frame(results: pd.DataFrame) -> pd.DataFrame:
    """One row per (conversation, metric) of per-row ``results``.

    Parameters
    ----------
    results : DataFrame
        Per-row results (``rag_eval.metrics.core.scoring.results_frame``) with ``conversation_id``
        and ``turn`` (NA on single-turn rows, which are left out), ``row``, ``metric``, ``status``,
        ``value``, ``passed`` and ``direction``.

    Returns
    -------
    DataFrame
        :data:`CONVERSATION_COLUMNS`: ``line`` (from 1, the conversation's input line), ``turns``
        (its turns), ``measured`` (its ``ok`` turns), ``mean`` (Azure's mean over the ``ok``
        turns), ``worst`` (the lowest ``ok`` value, the highest for a lower-is-better metric) at
        ``worst_turn`` (the first such turn), ``passed`` (every ``ok`` turn passed). A
        conversation with no ``ok`` turn has NA in the last four; values are on the metric's own
        scale, unrounded.
    """
    rows = []
    turns = results[results["conversation_id"].notna()] if has_conversations(results) else None
    for (conversation, metric), frame in turns.groupby(["conversation_id", "metric"], sort=False) \
            if turns is not None else ():
        ok = frame[frame["status"] == Status.OK.value].sort_values("turn")
        higher = frame["direction"].iloc[0] == Direction.HIGHER.value
        row = {"conversation_id": conversation, "line": int(frame["row"].min()) + 1, "metric": metric,
               "turns": len(frame), "measured": len(ok), "mean": None, "worst": None, "worst_turn": None,
               "passed": None}
        if len(ok):
            values = ok["value"].astype(float)
            at = values.idxmin() if higher else values.idxmax()
            row.update(mean=float(values.mean()), worst=float(values[at]), worst_turn=int(ok.loc[at, "turn"]),
                       passed=bool(ok["passed"].astype(bool).all()))
        rows.append(row)
    frame = pd.DataFrame(rows, columns=CONVERSATION_COLUMNS)
    return frame.astype({"mean": "float64", "worst": "float64", "worst_turn": "Int64", "passed": "boolean"})


def conversation_summary(results: pd.DataFrame, factors: dict[str, float], digits: int) -> dict[str, Any] | None:
    """The ``conversations`` block of summary.json, or ``None`` when ``results`` hold no conversation.

    Parameters
    ----------
    results : DataFrame
        As for :func:`conversation_frame`.
    factors : dict
        ``{metric: factor}`` the summary presents a metric's values with (10 for a [0, 1] metric on
        ``--scale 10``, else 1).
    digits : int
        Rounding of the figures.

    Returns
    -------
    dict or None
        ``{"conversations": n, "turns": n, "metrics": {metric: {...}}}`` where each metric has
        ``mean`` (the mean over conversations of their mean over turns), ``worst_turn_mean`` (the
        mean over conversations of their worst turn), ``pass_rate`` (the share of measured
        conversations whose every measured turn passed), ``measured`` / ``total`` conversations,
        ``by_turn`` (``{turn: {"mean", "measured"}}``, the mean over the conversations' turn k) and
        ``worst`` (the :data:`WORST_LISTED` conversations with the worst turns: id, line, turn, value).
    """
    if not has_conversations(results):
        return None
    turns = results[results["conversation_id"].notna()]
    per = conversation_frame(results)
    block: dict[str, Any] = {"conversations": int(turns["conversation_id"].nunique()),
                             "turns": len(turns[["conversation_id", "turn"]].drop_duplicates()), "metrics": {}}
    for metric, frame in per.groupby("metric", sort=False):
        factor = factors.get(metric, 1)
        measured = frame[frame["measured"] > 0]
        higher = turns.loc[turns["metric"] == metric, "direction"].iloc[0] == Direction.HIGHER.value
        ok = turns[(turns["metric"] == metric) & (turns["status"] == Status.OK.value)]
        by_turn = {str(int(turn)): {"mean": round(float(values.mean()) * factor, digits), "measured": len(values)}
                   for turn, values in ok.groupby("turn")["value"]}
        worst = measured.sort_values("worst", ascending=higher, kind="stable").head(WORST_LISTED)
        block["metrics"][metric] = {
            "mean": _mean(measured["mean"], factor, digits), "worst_turn_mean": _mean(measured["worst"], factor, digits),
            "pass_rate": round(float(measured["passed"].astype(bool).mean()), 4) if len(measured) else None,
            "measured": len(measured), "total": len(frame), "by_turn": by_turn,
            "worst": [{"conversation_id": r.conversation_id, "line": int(r.line), "turn": int(r.worst_turn),
                       "value": round(float(r.worst) * factor, digits)} for r in worst.itertuples()]}
    return block


def _mean(values: pd.Series, factor: float, digits: int) -> float | None:
    return round(statistics.fmean(values.astype(float)) * factor, digits) if len(values) else None


def per_conversation_results(results: pd.DataFrame) -> pd.DataFrame:
    """Per-row ``results`` with each conversation's turns folded into one row per (conversation, metric,
    repeat): what a comparison of two versions resamples when their rows are conversations' turns (the
    turns of one conversation are not independent: resampling turns would understate the uncertainty).

    The folded row has the conversation's id as ``sample_id``, its first line's ``row``, ``turn`` NA,
    and, when a turn was ``ok``, status ``ok`` with ``value`` the mean over its ``ok`` turns and
    ``passed`` when every ``ok`` turn passed, the reason of its worst turn; otherwise the status and
    reason of its first turn. Rows of no conversation (single-turn lines) are kept as they are, each a
    conversation of one turn. Usage columns are summed over the turns.
    """
    if not has_conversations(results):
        return results
    single = results[results["conversation_id"].isna()]
    turns = results[results["conversation_id"].notna()].sort_values(["turn"], kind="stable")
    keys = ["conversation_id", "metric", *(["repeat"] if "repeat" in turns else [])]
    usage = [c for c in USAGE_COLUMNS if c in turns]
    rows = []
    for _, frame in turns.groupby(keys, sort=False):
        first = frame.iloc[0].to_dict()
        ok = frame[frame["status"] == Status.OK.value]
        row = {**first, "sample_id": first["conversation_id"], "row": frame["row"].min(), "turn": pd.NA,
               **{c: frame[c].sum() for c in usage}}
        if len(ok):
            values = ok["value"].astype(float)
            worst = values.idxmin() if first["direction"] == Direction.HIGHER.value else values.idxmax()
            row.update(status=Status.OK.value, value=float(values.mean()), passed=bool(ok["passed"].astype(bool).all()),
                       reason=ok.loc[worst, "reason"])
        rows.append(row)
    folded = pd.DataFrame(rows, columns=results.columns).astype(results.dtypes.to_dict())
    return pd.concat([single, folded], ignore_index=True)
