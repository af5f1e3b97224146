"""DocumentRetrieval: graded-relevance ranking metrics of retrieved documents (no LLM).

The values of Azure AI Evaluation's ``DocumentRetrievalEvaluator`` — NDCG@k, XDCG@k,
fidelity, top-1 relevance, top-3 max relevance, holes, holes ratio and the two totals —
computed from ``retrieval_ground_truth`` (``[{"document_id", "query_relevance_label"}]``)
and ``retrieved_documents`` (``[{"document_id", "relevance_score"}]``).

Where this differs from Azure AI Evaluation 1.18.10's ``DocumentRetrievalEvaluator``, on purpose:
``k`` is configurable (default 3); the fidelity weights are paired with their labels
numerically (Azure mis-pairs them for label scales of 10 and more); a duplicate
document counts once, at its best-ranked position, everywhere (holes and totals too);
documents labelled 0 are judged like any other label (Azure zeroes every metric when all
retrieved labels are 0); a ground truth without any relevant document makes NDCG and
fidelity ``not_applicable`` instead of 0 or NaN; default thresholds fit the label scale.
With ``gain="exponential"`` (gain ``2^label - 1``, Azure's) and ``tie_break="input"``
the values equal Azure's on the spec's worked cases A and D; with ``gain="linear"``
(gain = label) and ``tie_break="docid_desc"`` NDCG equals trec_eval's ``ndcg_cut_k``.

Negative labels (``label_min < 0``: judged non-relevant or harmful, as TREC Web's -2
spam) gain 0 with either gain, as in trec_eval, whose NDCG counts only positive gains;
Azure leaves them undefined (its ``2^label - 1`` would turn negative and push NDCG out
of [0, 1]). XDCG counts them 0 too. A label too large for the exponential gain (2^label
overflows a float, labels past 1023) is the row's ``input_error``.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from rag_eval.metrics.core.base import Family, InputProblem, Measured, Metric, NotApplicable, Options
from rag_eval.metrics.judges.base import Judge
from rag_eval.metrics.core.results import Direction
from rag_eval.metrics.core.samples import Sample

XDCG_DISCOUNT = 0.6


class RankingOptions(Options):
    """``k`` (cut-off), the label scale ``[label_min, label_max]``, ``gain`` ("exponential"
    or "linear") and ``tie_break`` ("input": equal scores keep input order, Azure's;
    "docid_desc": by document id descending, trec_eval's). The options of every
    document-retrieval metric, whose ``label_max`` may be left to the data (``None``, see
    :meth:`DocumentRetrievalMetric.fit`).

    Raises
    ------
    ValueError
        For ``k < 1``, ``label_min >= label_max`` or an unknown gain or tie-break.
    """

    k: int = Field(3, ge=1)
    label_min: int = 0
    label_max: int | None = None
    gain: Literal["exponential", "linear"] = "exponential"
    tie_break: Literal["input", "docid_desc"] = "input"

    @model_validator(mode="after")
    def _scale(self) -> RankingOptions:
        if self.label_max is not None and self.label_min >= self.label_max:
            raise ValueError(f"label_min {self.label_min} must be below label_max {self.label_max}")
        return self


class RankingSettings(RankingOptions):
    """The :class:`RankingOptions` a ranking is scored with: ``label_max`` settled (4, Azure's, unless given)."""

    label_max: int = 4


def _gain(label: int, kind: str) -> float:
    """``2^label - 1`` (exponential) or ``label`` (linear); 0 for a label of 0 or less."""
    if label <= 0:
        return 0.0
    return float(2 ** label - 1) if kind == "exponential" else float(label)


def _dcg(labels: list[int], k: int, kind: str) -> float:
    return sum(_gain(label, kind) / math.log2(rank + 1) for rank, label in enumerate(labels[:k], start=1))


def rank_documents(retrieved: list[dict[str, Any]], tie_break: str = "input") -> list[str]:
    """Document ids by ``relevance_score`` descending, each id once (its best rank)."""
    order = list(enumerate(retrieved))
    if tie_break == "docid_desc":
        order.sort(key=lambda item: item[1]["document_id"], reverse=True)
        order.sort(key=lambda item: -item[1]["relevance_score"])
    else:
        order.sort(key=lambda item: (-item[1]["relevance_score"], item[0]))
    return list(dict.fromkeys(item[1]["document_id"] for item in order))


def document_retrieval(ground_truth: list[dict[str, Any]], retrieved: list[dict[str, Any]],
                       settings: RankingSettings = RankingSettings()) -> dict[str, float | int | None]:
    """All DocumentRetrieval values of one query.

    Parameters
    ----------
    ground_truth : list of {"document_id": str, "query_relevance_label": int}
        Graded labels within ``[label_min, label_max]``; non-empty; an id at most once.
    retrieved : list of {"document_id": str, "relevance_score": float}
        The retriever's results; a repeated id counts once, at its best rank.
    settings : RankingSettings

    Returns
    -------
    dict
        ``ndcg`` in [0, 1] and ``xdcg`` in [0, 100] (higher is better; ``None`` when the
        ground truth has no relevant document); ``fidelity`` in [0, 1] (``None`` likewise);
        ``top1_relevance`` and ``top3_max_relevance`` on the label scale (a document without
        a label counts as ``label_min``; ``None`` when nothing was retrieved); ``holes`` (count)
        and ``holes_ratio`` in [0, 1] (lower is better); ``total_retrieved_documents`` and
        ``total_ground_truth_documents`` (distinct ids).

    Raises
    ------
    ValueError
        Empty ground truth, a label outside the scale, or an id labelled twice.
    OverflowError
        A label past 1023 with exponential gain (2^label does not fit a float).
    """
    if not ground_truth:
        raise ValueError("retrieval_ground_truth is empty")
    labels: dict[str, int] = {}
    for item in ground_truth:
        doc, label = item["document_id"], item["query_relevance_label"]
        if not settings.label_min <= label <= settings.label_max:
            raise ValueError(f"label {label} of document {doc!r} is outside [{settings.label_min}, "
                             f"{settings.label_max}]")
        if doc in labels:
            raise ValueError(f"document {doc!r} is labelled twice in retrieval_ground_truth")
        labels[doc] = label
    ranked = rank_documents(retrieved, settings.tie_break)
    result_labels = [labels.get(doc, settings.label_min) for doc in ranked]
    ideal = sorted(labels.values(), reverse=True)
    k, kind = settings.k, settings.gain
    ideal_dcg = _dcg(ideal, k, kind)
    discounts = sum(XDCG_DISCOUNT ** r for r in range(k))
    xdcg_scale = 100 / settings.label_max
    fidelity_weight = (lambda l: 2 ** (l + 1) - 1) if kind == "exponential" else (lambda l: max(l, 0))
    relevant_weight = sum(fidelity_weight(l) for l in labels.values() if l > settings.label_min)
    holes = sum(1 for doc in ranked if doc not in labels)
    return {
        "ndcg": _dcg(result_labels, k, kind) / ideal_dcg if ideal_dcg > 0 else None,
        "xdcg": (xdcg_scale * sum(max(l, 0) * XDCG_DISCOUNT ** r for r, l in enumerate(result_labels[:k])) / discounts
                 if ideal_dcg > 0 else None),
        "fidelity": (sum(fidelity_weight(l) for l in result_labels if l > settings.label_min) / relevant_weight
                     if relevant_weight > 0 else None),
        "top1_relevance": result_labels[0] if result_labels else None,
        "top3_max_relevance": max(result_labels[:3]) if result_labels else None,
        "holes": holes,
        "holes_ratio": holes / len(ranked) if ranked else 0.0,
        "total_retrieved_documents": len(ranked),
        "total_ground_truth_documents": len(labels),
    }


class DocumentRetrievalMetric(Metric):
    """One value of :func:`document_retrieval` as a metric (see the module docstring).

    Parameters
    ----------
    threshold : float, optional
    k, label_min, label_max, gain, tie_break
        :class:`RankingSettings`; ``label_max`` defaults to 4 (Azure's), or to 1 when the
        data's ground truth is binary (see :meth:`fit`).

    Raises
    ------
    ValueError
        For settings :class:`RankingSettings` refuses, or a threshold outside the range
        (on the label scale for the metrics that are, e.g. ``top1_relevance`` with
        ``label_max=10`` takes a threshold up to 10).
    """

    Options = RankingOptions
    options: RankingOptions

    family = Family.DOCUMENT_RETRIEVAL
    required_fields = ("retrieval_ground_truth", "retrieved_documents")
    #: True for a value on the label scale: its range is ``[label_min, label_max]`` and its
    #: default threshold the scale's midpoint.
    on_label_scale: ClassVar[bool] = False

    def set_threshold(self, threshold: float | None) -> None:
        """Settle the label scale (``label_max`` 4, Azure's, unless given) and the threshold on it."""
        options = self.options
        self._follow_data = options.label_max is None and options.label_min == 0 and threshold is None
        self._scale(RankingSettings(**{**options.model_dump(), "label_max": options.label_max or 4}), threshold)

    def _scale(self, settings: RankingSettings, threshold: float | None) -> None:
        self.settings = settings
        if self.on_label_scale:
            self.value_range = (float(settings.label_min), float(settings.label_max))
            if threshold is None:
                threshold = settings.label_min + (settings.label_max - settings.label_min) / 2
        super().set_threshold(threshold)

    def fit(self, samples: Sequence[Sample]) -> None:
        """Without ``label_max``, ``label_min`` or a threshold given, binary ground truth (every
        label 0 or 1) puts the metric on the binary scale [0, 1]: label 1 is the best a
        document can be, so top-1 and top-3 relevance can pass (threshold 0.5). Other data
        keeps Azure's [0, 4]."""
        labels = [item["query_relevance_label"] for sample in samples if not sample.missing("retrieval_ground_truth")
                  for item in sample.given("retrieval_ground_truth")]
        if self._follow_data and labels and set(labels) <= {0, 1}:
            s = self.settings
            self._scale(s.model_copy(update={"label_min": 0, "label_max": 1}), None)
        self._follow_data = False

    async def measure(self, sample: Sample, judge: Judge) -> Measured | NotApplicable:
        try:
            values = document_retrieval(sample.given("retrieval_ground_truth"), sample.given("retrieved_documents"),
                                        self.settings)
        except ValueError as exc:
            raise InputProblem("retrieval_ground_truth", str(exc)) from exc
        except OverflowError as exc:
            raise InputProblem("retrieval_ground_truth", f"a label is too large for {self.settings.gain} gain "
                                                         f"({exc}); use gain=linear") from exc
        value = values[self.name]
        details = {"values": values, "k": self.settings.k, "gain": self.settings.gain,
                   "label_range": [self.settings.label_min, self.settings.label_max]}
        if value is None:
            why = "nothing was retrieved" if not sample.retrieved_documents else \
                "the ground truth has no relevant document"
            return NotApplicable(f"{self.name} is undefined: {why}", details)
        return Measured(float(value), f"{self.name} {value:g} (k={self.settings.k}, {self.settings.gain} gain)",
                        details)


#: The ceiling of the count metrics' range.
MAX_COUNT = 10_000.0


class NDCG(DocumentRetrievalMetric):
    """NDCG@k of the retrieved documents, [0, 1], higher is better (Azure ``ndcg@3``)."""

    name = "ndcg"


class XDCG(DocumentRetrievalMetric):
    """XDCG@k, [0, 100], higher is better (Azure ``xdcg@3``; 0.6 discount)."""

    name = "xdcg"
    value_range = (0.0, 100.0)
    default_threshold = 50.0


class Fidelity(DocumentRetrievalMetric):
    """Share of the relevant documents' weight that was retrieved, [0, 1], higher is better."""

    name = "fidelity"


class Top1Relevance(DocumentRetrievalMetric):
    """Label of the top-ranked document, on the label scale, higher is better; threshold the scale's midpoint."""

    name = "top1_relevance"
    on_label_scale = True
    value_range = (0.0, 4.0)  # Azure's label scale; an instance takes its own
    default_threshold = 2.0


class Top3MaxRelevance(DocumentRetrievalMetric):
    """Highest label among the top three, on the label scale, higher is better; threshold the scale's midpoint."""

    name = "top3_max_relevance"
    on_label_scale = True
    value_range = (0.0, 4.0)  # Azure's label scale; an instance takes its own
    default_threshold = 2.0


class Holes(DocumentRetrievalMetric):
    """Retrieved documents without a label (count), lower is better; pass means none."""

    name = "holes"
    value_range = (0.0, MAX_COUNT)
    direction = Direction.LOWER
    default_threshold = 0.0


class HolesRatio(DocumentRetrievalMetric):
    """Share of retrieved documents without a label, [0, 1], lower is better."""

    name = "holes_ratio"
    direction = Direction.LOWER


class TotalRetrieved(DocumentRetrievalMetric):
    """Distinct documents retrieved (count), higher is better; pass means at least one."""

    name = "total_retrieved_documents"
    value_range = (0.0, MAX_COUNT)
    default_threshold = 1.0


class TotalGroundTruth(DocumentRetrievalMetric):
    """Distinct labelled documents (count), higher is better; pass means at least one."""

    name = "total_ground_truth_documents"
    value_range = (0.0, MAX_COUNT)
    default_threshold = 1.0


DOCUMENT_RETRIEVAL_METRICS = (NDCG, XDCG, Fidelity, Top1Relevance, Top3MaxRelevance, Holes, HolesRatio,
                              TotalRetrieved, TotalGroundTruth)
