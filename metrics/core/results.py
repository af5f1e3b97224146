"""Result types shared by every metric: statuses, score direction and pass/fail.

A metric produces one :class:`MetricResult` per sample. Only ``ok`` results carry a
value and a pass/fail verdict; the other statuses are counted, never averaged
(see ``rag_eval.metrics.reports.aggregate``).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any


#: Per-row cost columns of a results frame (``rag_eval.metrics.core.scoring.results_frame``).
USAGE_COLUMNS = ["chat_requests", "embedding_requests", "prompt_tokens", "completion_tokens", "cache_hits",
                 "shared_hits"]


class Status(str, Enum):
    """The five outcomes of scoring one sample with one metric.

    ``ok``: a value was measured. ``not_applicable``: nothing to judge (e.g. a refusal
    with no factual statement; RAGAS's NaN). ``judge_error``: the judge failed after
    retries or its output stayed invalid. ``input_error``: a field the metric needs is
    missing or malformed. ``target_error``: the RAG system under evaluation failed to
    produce a field the metric needs (``rag_eval.metrics.sources.targets``; the cause is the reason).
    """

    OK = "ok"
    NOT_APPLICABLE = "not_applicable"
    JUDGE_ERROR = "judge_error"
    INPUT_ERROR = "input_error"
    TARGET_ERROR = "target_error"


class Direction(str, Enum):
    """Whether a larger value of a metric is better or worse."""

    HIGHER = "higher_is_better"
    LOWER = "lower_is_better"


def passes(value: float, threshold: float, direction: Direction | str) -> bool:
    """Pass/fail of one measured value.

    Pass means ``value >= threshold`` for higher-is-better metrics and
    ``value <= threshold`` for lower-is-better ones (regression case BR-17).

    Raises
    ------
    ValueError
        If ``value`` or ``threshold`` is not a finite number.
    """
    if not (math.isfinite(value) and math.isfinite(threshold)):
        raise ValueError(f"cannot compare non-finite value {value!r} with threshold {threshold!r}")
    if Direction(direction) is Direction.HIGHER:
        return value >= threshold
    return value <= threshold


@dataclass
class MetricResult:
    """The outcome of one metric on one sample.

    Attributes
    ----------
    metric : str
        Metric name as the peers spell it (``faithfulness``, ``answer_relevancy``...).
    sample_id : str
        Id of the sample that was scored.
    status : Status
        One of the four statuses; only ``ok`` has a ``value`` and ``passed``.
    value : float or None
        The score, in the metric's declared range, when ``status`` is ``ok``.
    passed : bool or None
        ``value`` compared with ``threshold`` in the metric's ``direction``.
    threshold : float
        The threshold used for ``passed``.
    direction : Direction
        Whether higher or lower values are better.
    reason : str
        Human-readable explanation (always set, for every status).
    details : dict
        Per-item evidence, e.g. the statements and their verdicts.
    judge : str
        Name of the judge that scored it (``offline-heuristic``, ``openai:<model>``...).
    usage : dict
        Requests, tokens and cache hits spent on this result (``rag_eval.metrics.judges.Usage``).
    row : int or None
        Position of the sample in its input (line number minus one for JSONL).
    conversation_id, turn : str and int, or None
        The sample's conversation and turn (``Sample.conversation_id``, ``Sample.turn``); ``None``
        for a single-turn sample.
    """

    metric: str
    sample_id: str
    status: Status
    value: float | None
    passed: bool | None
    threshold: float
    direction: Direction
    reason: str
    details: dict[str, Any] = field(default_factory=dict)
    judge: str = ""
    usage: dict[str, int] = field(default_factory=dict)
    row: int | None = None
    conversation_id: str | None = None
    turn: int | None = None

    def to_record(self) -> dict[str, Any]:
        """A flat, JSON-safe dict (enums as their string values)."""
        record = asdict(self)
        record["status"] = self.status.value
        record["direction"] = self.direction.value
        return record
