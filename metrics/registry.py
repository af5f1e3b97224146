"""The metrics the pipeline knows, by the name the peers use."""
from __future__ import annotations

from collections.abc import Iterable, Mapping

from metrics.base import Metric
from metrics.rag.answer_relevancy import AnswerRelevancy
from metrics.rag.context_precision import ContextPrecision
from metrics.rag.context_recall import ContextRecall
from metrics.rag.context_relevancy import ContextRelevancy
from metrics.rag.faithfulness import Faithfulness

METRICS: dict[str, type[Metric]] = {
    cls.name: cls for cls in (Faithfulness, AnswerRelevancy, ContextRelevancy, ContextRecall, ContextPrecision)
}
#: The five core metrics of the dingo RAG guide, in the order reports show them.
CORE_METRICS: tuple[str, ...] = tuple(METRICS)


def build_metrics(metrics: Iterable[str | Metric] | None = None,
                  thresholds: Mapping[str, float] | None = None) -> list[Metric]:
    """Metric instances from names (or instances, passed through).

    Parameters
    ----------
    metrics : iterable of str or Metric, optional
        Defaults to :data:`CORE_METRICS`.
    thresholds : mapping, optional
        ``{metric_name: threshold}`` overriding the defaults of named metrics.

    Raises
    ------
    KeyError
        For an unknown metric name (the message lists the known ones).
    ValueError
        For an empty selection.
    """
    thresholds = dict(thresholds or {})
    metrics = CORE_METRICS if metrics is None else list(metrics)
    if not metrics:
        raise ValueError("no metric selected")
    unknown = set(thresholds) - set(METRICS)
    if unknown:
        raise KeyError(f"thresholds for unknown metrics {sorted(unknown)}; known: {list(METRICS)}")
    built = []
    for item in metrics:
        if isinstance(item, Metric):
            built.append(item)
            continue
        if item not in METRICS:
            raise KeyError(f"unknown metric {item!r}; known: {list(METRICS)}")
        built.append(METRICS[item](threshold=thresholds.get(item)))
    return built
