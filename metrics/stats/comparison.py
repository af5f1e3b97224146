"""What a comparison of two evaluated versions gives (``rag_eval.metrics.stats.compare.compare``):
per metric a :class:`MetricComparison`, and the :class:`Comparison` with the gate's decision over the
gated metrics; ``Comparison.to_dict()`` is comparison.json. How the numbers are made: ``rag_eval.metrics.stats.compare``.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

#: A metric's verdict when the two versions share no row id (another question set): no decision, no failure.
NO_ROWS_IN_COMMON = "no rows in common"
#: A metric's verdict when no row of either version is scored ``ok``: it cannot be measured, it decides nothing.
NOT_APPLICABLE = "not applicable"
#: What to do about a gate that compared nothing (printed by the CLI, written in report.md).
NO_DECISION_HINT = ("compare versions of the same questions: name the question set's baseline with --baseline "
                    '(tag:NAME or a version key), or set baseline = "tag:NAME" in [tool.rag_eval.gate] of pyproject.toml '
                    "(or of the --config file)")


@dataclass
class MetricComparison:
    """One metric's paired comparison. ``difference``, ``low`` and ``high`` are
    candidate − baseline turned so that positive is better, on the metric's scale; they
    are ``None`` when no row is scored ``ok`` in both versions."""

    metric: str
    direction: str
    scale: tuple[float, float]
    n: int
    baseline_mean: float | None
    candidate_mean: float | None
    difference: float | None
    low: float | None
    high: float | None
    margin: float
    p_regression: float | None
    p_improvement: float | None
    p_regression_holm: float | None = None
    p_improvement_holm: float | None = None
    verdict: str = "not measured"
    repeats: dict[str, int] = field(default_factory=dict)
    retest_sd: dict[str, float | None] = field(default_factory=dict)
    basis: str = "judge"
    estimates: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass
class Comparison:
    """What ``rag_eval.metrics.stats.compare.compare`` returns. ``passed`` and ``failures`` are the gate's decision
    over the ``gated`` metrics; ``to_dict()`` is comparison.json."""

    baseline: str
    candidate: str
    metrics: dict[str, MetricComparison]
    gated: list[str]
    only_in_baseline: list[str]
    only_in_candidate: list[str]
    status_changes: dict[str, list[dict[str, Any]]]
    coverage: dict[str, dict[str, Any]]
    worst_rows: dict[str, list[dict[str, Any]]]
    failures: list[str]
    settings: dict[str, Any]
    #: RAGChecker's diagnostics when compared: ``moved`` (``rag_eval.metrics.reports.diagnosis.moved``) and the candidate's
    #: diagnosis (``rag_eval.metrics.reports.diagnosis.diagnose``).
    diagnosis: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        """True when no gated metric regressed, went unmeasured or lost coverage beyond the limit."""
        return not self.failures

    @property
    def decided(self) -> bool:
        """False when no gated metric has a row id in both versions (another question set), or none
        of those that have can be measured: nothing was compared, so :attr:`passed` is no evidence
        of anything."""
        return not self.gated or any(self.metrics[m].verdict not in (NO_ROWS_IN_COMMON, NOT_APPLICABLE)
                                     for m in self.gated)

    @property
    def not_applicable(self) -> list[str]:
        """The gated metrics no row of either version was scored ``ok`` on: they decided nothing."""
        return [m for m in self.gated if self.metrics[m].verdict == NOT_APPLICABLE]

    @property
    def verdict(self) -> str:
        """The gate's verdict in words: ``gate failed``, ``gate passed``, or, when nothing was
        compared, ``no decision: the candidate shares no row id with baseline <key>; nothing was
        compared`` (not a failure: a new question set must not fail its blocking check)."""
        if self.failures:
            return "gate failed"
        if not self.decided and not self.not_applicable:
            return f"no decision: the candidate shares no row id with baseline {self.baseline}; nothing was compared"
        if not self.decided:
            return f"no decision: no gated metric can be measured ({', '.join(self.not_applicable)}: not applicable)"
        skipped = f" ({', '.join(self.not_applicable)}: not applicable, no row scored ok in either version)" \
            if self.not_applicable else ""
        return "gate passed" + skipped

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict: verdict, settings, per-metric rows and the row lists."""
        body = asdict(self)
        body["passed"] = self.passed
        body["verdict"] = self.verdict
        return json.loads(json.dumps(body, default=str))
