"""A version's diagnosis: RAGChecker's metrics grouped as overall, retriever and generator, the largest
problem read in one line, and the worst rows of each diagnostic with the claims that failed.

A diagnostic *fails* a row when the row fails its threshold (``rag_eval.metrics.core.results.passes``: below it for a
higher-is-better metric, above it for a lower-is-better one). The reading names the leading diagnostic
(``Diagnostic.leads``: claim recall, context utilization, the two noise sensitivities, hallucination)
failing the largest share of its measured rows, with its plain-language problem and what to fix
("the retrieved chunks miss claims the reference needs in 41 % of rows (claim_recall < 0.5): fix retrieval
first …"); a tie goes to the retriever, whose failures the generator's figures inherit. RAGChecker
(Ru et al., NeurIPS 2024 D&B, §4) reads its figures the same way by hand: retriever first, then the
generator's use of context, noise, hallucination.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from rag_eval.metrics.diagnostics.claims import ClaimMetric, Diagnostic
from rag_eval.metrics.core.registry import builtin_registry
from rag_eval.metrics.core.results import Direction, Status, passes

#: RAGChecker's groups, in the order reports show them.
GROUPS = ("retriever", "generator", "overall")
#: Worst failing rows listed per diagnostic, failed claims listed per row (the rest are counted), and the
#: characters of a claim kept.
WORST_ROWS = 3
LISTED_CLAIMS = 5
CLAIM_CHARS = 200
#: ``failed_of(metric, rows)``: the failed claims of those rows of a metric, ``rows`` as ``(row, sample id)``
#: (the turns of a conversation share their row), ``{(row, sample id): [claim, ...]}`` (``eval_summary``
#: reads them from the stored results; a frame with ``details`` needs none).
FailedOf = Callable[[str, list[tuple[int, str]]], Mapping[tuple[int, str], Sequence[str]]]


def _diagnostic(metric: str) -> type[ClaimMetric]:
    """The built-in class of ``metric``, a diagnostic."""
    cls = builtin_registry()[metric]
    assert issubclass(cls, ClaimMetric)
    return cls


def diagnostics_in(metrics: Iterable[str]) -> dict[str, list[str]]:
    """``{group: [metric, ...]}`` of the diagnostics among ``metrics`` (in their order), groups in
    :data:`GROUPS` order, empty groups left out. The diagnostics are built-in metrics (family
    ``diagnostics``, ``rag_eval.metrics.core.registry.builtin_registry``)."""
    builtin = builtin_registry()
    found = [m for m in metrics if isinstance(builtin.get(m), type) and issubclass(builtin[m], Diagnostic)]
    return {g: members for g in GROUPS if (members := [m for m in found if _diagnostic(m).group == g])}


def _failed_in(details: Any) -> list[str] | None:
    if details is None or (isinstance(details, float) and details != details):
        return None
    parsed = json.loads(details) if isinstance(details, str) else dict(details)
    return list(parsed.get("failed", [])) if "failed" in parsed else None


def _cut(claim: str) -> str:
    return claim if len(claim) <= CLAIM_CHARS else claim[:CLAIM_CHARS - 1] + "…"


def _entry(metric: str, frame: pd.DataFrame, failed_of: FailedOf | None, scale: int) -> dict[str, Any]:
    cls = _diagnostic(metric)
    ok = frame[frame["status"] == Status.OK.value]
    threshold = float(frame["threshold"].iloc[0]) if "threshold" in frame else cls.default_threshold
    failing = ok.loc[np.array([not passes(float(v), threshold, cls.direction) for v in ok["value"]], dtype=np.bool_)]
    worst = failing.sort_values("value", ascending=cls.direction is Direction.HIGHER, kind="stable").head(WORST_ROWS)
    rows: list[int | None] = [int(r) for r in worst["row"]] if "row" in worst else [None] * len(worst)
    known = [(r, str(i)) for r, i in zip(rows, worst["sample_id"]) if r is not None]
    claims = dict(failed_of(metric, known)) if failed_of and rows and len(known) == len(rows) else {}
    listed = []
    for row, sample_id, value, details in zip(rows, worst["sample_id"], worst["value"],
                                              worst["details"] if "details" in worst else [None] * len(rows)):
        failed = _failed_in(details)
        if failed is None:
            failed = list(claims.get((row, str(sample_id)), [])) if row is not None else []
        listed.append({"line": None if row is None else row + 1, "id": sample_id,
                       "value": round(float(value) * scale, 4), "failed": [_cut(c) for c in failed[:LISTED_CLAIMS]],
                       "more_failed": max(len(failed) - LISTED_CLAIMS, 0)})
    return {"mean": round(float(ok["value"].mean()) * scale, 4) if len(ok) else None, "measured": len(ok),
            "total": len(frame), "threshold": round(threshold * scale, 4), "direction": cls.direction.value,
            "failing_share": round(len(failing) / len(ok), 4) if len(ok) else None,
            "problem": cls.problem, "worst_rows": listed}


def reading(groups: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> tuple[str | None, str]:
    """The leading diagnostic failing most rows and the one-line reading, or ``(None, why there is none)``."""
    candidates = [(entry["failing_share"], -GROUPS.index(group), -i, metric)
                  for group, members in groups.items() for i, (metric, entry) in enumerate(members.items())
                  if _diagnostic(metric).leads and entry["failing_share"]]
    if not candidates:
        measured = any(e["measured"] for members in groups.values() for e in members.values())
        return None, ("no diagnostic fails its threshold on any row" if measured
                      else "no diagnostic measured a row (see each metric's coverage)")
    share, _, _, metric = max(candidates)
    entry = next(members[metric] for members in groups.values() if metric in members)
    sign = "<" if entry["direction"] == Direction.HIGHER.value else ">"
    return metric, (f"{entry['problem']} in {share * 100:.0f} % of rows ({metric} {sign} {entry['threshold']:g}): "
                    f"{_diagnostic(metric).advice}")


def diagnose(results: pd.DataFrame, failed_of: FailedOf | None = None, scale: int = 1) -> dict[str, Any] | None:
    """The diagnosis of one version's per-row results, or ``None`` when no diagnostic is among them.

    Parameters
    ----------
    results : DataFrame
        One row per (sample, metric): ``sample_id``, ``metric``, ``status``, ``value`` and, optionally,
        ``row``, ``threshold`` (else the metric's default) and ``details`` (``rag_eval.metrics.core.scoring.results_frame``).
    failed_of : callable, optional
        The failed claims of rows whose ``details`` the frame lacks (:data:`FailedOf`).
    scale : {1, 10}
        Means, values and thresholds shown on [0, 1] or on dingo's 0-10 (``--scale 10``).

    Returns
    -------
    dict or None
        ``groups``: ``{group: {metric: {mean, measured, total, threshold, direction, failing_share,
        problem, worst_rows}}}``, each worst row ``{line, id, value, failed, more_failed}`` (lines counted
        from 1, the worst first); ``lead``: the leading diagnostic of the reading (or ``None``);
        ``reading``: the one-line diagnosis.
    """
    groups = diagnostics_in(dict.fromkeys(results["metric"]))
    if not groups:
        return None
    by_metric = dict(iter(results.groupby("metric", sort=False)))  # (a GroupBy has a `keys` attribute: not a mapping)
    entries = {g: {m: _entry(m, by_metric[m], failed_of, scale) for m in members} for g, members in groups.items()}
    lead, text = reading(entries)
    return {"groups": entries, "lead": lead, "reading": text}


def moved(compared: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Which diagnostics moved between two versions: ``{group: [{metric, verdict, difference}]}`` of those
    ``regressed`` or ``improved`` in ``compared`` (``rag_eval.metrics.stats.compare.Comparison.metrics``: each with a
    ``verdict`` and a ``difference`` turned so that + is better), every group of the compared diagnostics."""
    return {group: [{"metric": m, "verdict": compared[m].verdict, "difference": compared[m].difference}
                    for m in members if compared[m].verdict in ("regressed", "improved")]
            for group, members in diagnostics_in(compared).items()}


def moved_line(moves: Mapping[str, Sequence[Mapping[str, Any]]]) -> str:
    """:func:`moved` in one line: ``retriever: claim_recall regressed (-0.120); generator: nothing moved``."""
    return "; ".join(f"{group}: " + (", ".join(f"{m['metric']} {m['verdict']} ({m['difference']:+.3f})"
                                                for m in items) or "nothing moved")
                     for group, items in moves.items())
