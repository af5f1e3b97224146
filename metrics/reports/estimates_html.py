"""The parts of the gate's ``report.html`` that show estimates rather than the judge's means.

:func:`estimates_section` lists the metrics a comparison decided on two versions' estimates: the human
labels' prediction-powered ones (basis ``ppi``) and the judge cascades' estimates of the strong judge's
mean (basis ``cascade``), each version's estimate, interval and the rows behind it. :func:`published_line`
says which points of the trend charts are cascade estimates (``gate_report.version_stats``), and of how
many strong-judged rows.
"""
from __future__ import annotations

import html
from typing import Any

from rag_eval.metrics.stats.comparison import Comparison

#: Per basis: the section's title, its two count columns, and what the estimate is.
_KINDS = {
    "ppi": ("Human labels", "labelled", "unlabelled ok rows", "λ (PPI++)",
            "The mean human label over the rows the judge scored ok, estimated from the judge's scores of every row "
            "corrected by the labelled ones (PPI++, Angelopoulos et al. 2023); valid when the labelled rows are a "
            "uniform random sample (rag-eval annotate export)."),
    "cascade": ("Judge cascade", "strong-judged", "rows covered", "λ",
                "The strong judge's mean over the rows the cascade covers, estimated from the cheap judge's scores of "
                "every row corrected by the strong judge's on a seeded sample (docs/explanation/cascade.md); the two "
                "versions' estimates are taken as independent, which widens the interval of their difference when "
                "their samples share rows (conservative)."),
}


def estimates_section(comparison: Comparison) -> list[str]:
    """HTML parts: per basis (``ppi``, ``cascade``) the metrics decided on estimates, each version's
    estimate, 95 % interval, rows behind it and λ; nothing when no metric was. Names are escaped."""
    e = html.escape
    parts = []
    for kind, (title, counted, others, lam, what) in _KINDS.items():
        decided = [m for m in comparison.metrics.values() if m.estimates and m.basis.startswith(kind)]
        if not decided:
            continue
        parts.append(f"<h2>{title}</h2><table><tr><th>metric</th><th>version</th><th>estimate</th>"
                     f"<th>95 % interval</th><th>{counted}</th><th>{others}</th><th>{lam}</th></tr>")
        for m in decided:
            for side, name in (("baseline", comparison.baseline), ("candidate", comparison.candidate)):
                est = m.estimates[side]
                parts.append(f"<tr><td>{e(m.metric)}</td><td>{e(name)}</td><td>{est['estimate']:.3f}</td>"
                             f"<td>[{est['ci_low']:.3f}, {est['ci_high']:.3f}]</td><td>{est['n']}</td>"
                             f"<td>{est['N']}</td><td>{est['lam']:.2f}</td></tr>")
        parts.append(f"</table><p class='small'>{what}</p>")
    return parts


def published_line(history: list[dict[str, Any]], metrics: list[str]) -> list[str]:
    """An HTML paragraph naming the trend charts' points that are cascade estimates (``published``
    ``"cascade"`` in ``history``'s per-metric points), ``metric: version (n strong / N)``; nothing when none is."""
    cascades = [f"{metric}: {h['version']} ({h['metrics'][metric]['n']} strong / {h['metrics'][metric]['rows']})"
                for metric in metrics for h in history
                if h["metrics"].get(metric, {}).get("published") == "cascade"]
    if not cascades:
        return []
    return [f"<p class='small'>Cascade estimates (the strong judge's mean estimated from a sample, with its 95 % "
            f"interval; hollow points): {html.escape('; '.join(cascades))}. The other points are the judge's mean "
            "of the rows scored ok.</p>"]
