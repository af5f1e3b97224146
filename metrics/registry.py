"""The metrics the pipeline knows, by the name the peers use.

Every ``Metric`` subclass with a ``name`` in a module of ``metrics.rag``, ``metrics.azure``
or ``metrics.retrieval`` is registered: adding a metric is adding its module (and its
test). The ones imported below are listed in the order reports show them; a module not
listed here comes after them, in module order.
"""
from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable, Mapping
from typing import Any

import metrics.azure
import metrics.rag
import metrics.retrieval

from metrics.azure.groundedness import Groundedness
from metrics.azure.groundedness_pro import GroundednessPro
from metrics.azure.relevance import Relevance
from metrics.azure.response_completeness import ResponseCompleteness
from metrics.azure.retrieval import Retrieval
from metrics.base import Family, Metric
from metrics.rag.answer_correctness import AnswerCorrectness
from metrics.rag.answer_relevancy import AnswerRelevancy
from metrics.rag.context_entity_recall import ContextEntityRecall
from metrics.rag.context_precision import ContextPrecision
from metrics.rag.context_recall import ContextRecall
from metrics.rag.context_relevancy import ContextRelevancy
from metrics.rag.context_utilization import ContextUtilization
from metrics.rag.factual_correctness import FactualCorrectness
from metrics.rag.faithfulness import Faithfulness
from metrics.rag.noise_sensitivity import NoiseSensitivityIrrelevant, NoiseSensitivityRelevant
from metrics.rag.nv_context_relevance import NVContextRelevance
from metrics.retrieval.document_retrieval import DOCUMENT_RETRIEVAL_METRICS



def _discovered() -> list[type[Metric]]:
    """Every named ``Metric`` subclass of the metric packages' modules, in module order."""
    found: list[type[Metric]] = []
    for package in (metrics.rag, metrics.azure, metrics.retrieval):
        for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
            module = importlib.import_module(f"{package.__name__}.{info.name}")
            found += [c for c in vars(module).values() if isinstance(c, type) and issubclass(c, Metric)
                      and c.__module__ == module.__name__ and "name" in vars(c)]
    return found


METRICS: dict[str, type[Metric]] = {cls.name: cls for cls in (
    Faithfulness, AnswerRelevancy, ContextRelevancy, ContextRecall, ContextPrecision,
    ContextUtilization, ContextEntityRecall, NoiseSensitivityRelevant, NoiseSensitivityIrrelevant,
    NVContextRelevance, AnswerCorrectness, FactualCorrectness,
    Groundedness, GroundednessPro, Relevance, Retrieval, ResponseCompleteness,
    *DOCUMENT_RETRIEVAL_METRICS, *_discovered(),
)}
#: Metric names by family (``metrics.base.Family``: core, ragas, azure, document_retrieval), in registry order.
FAMILIES: dict[str, tuple[str, ...]] = {family.value: tuple(name for name, cls in METRICS.items() if cls.family is family)
                                        for family in Family}
#: The five core metrics of the dingo RAG guide, in the order reports show them.
CORE_METRICS: tuple[str, ...] = FAMILIES[Family.CORE.value]


def prompt_versions() -> dict[str, str]:
    """The version of every LLM request kind the registered metrics' judgements send (the
    LLM judge's ``describe()``)."""
    return {kind: judgement.version for cls in METRICS.values() for judgement in cls.judgements
            for kind in judgement.requests}


def resolve_names(selection: str | Iterable[str]) -> list[str]:
    """Metric names from names and family names (``core``, ``ragas``, ``azure``,
    ``document_retrieval``, ``all``), comma-separated or as an iterable, in registry order.

    Raises
    ------
    KeyError
        For a name that is neither a metric nor a family.
    """
    items = [s.strip() for s in selection.split(",")] if isinstance(selection, str) else list(selection)
    chosen: set[str] = set()
    for item in filter(None, items):
        if item == "all":
            chosen.update(METRICS)
        elif item in FAMILIES:
            chosen.update(FAMILIES[item])
        elif item in METRICS:
            chosen.add(item)
        else:
            raise KeyError(f"unknown metric {item!r}; known: {', '.join(METRICS)}; families: "
                           f"{', '.join(FAMILIES)}, all")
    return [name for name in METRICS if name in chosen]


def build_metrics(metrics: Iterable[str | Metric] | None = None, thresholds: Mapping[str, float] | None = None,
                  options: Mapping[str, Mapping[str, Any]] | None = None) -> list[Metric]:
    """Metric instances from names (or instances, passed through).

    Parameters
    ----------
    metrics : iterable of str or Metric, optional
        Metric names, family names (``core``, ``ragas``, ``azure``, ``document_retrieval``,
        ``all``) or instances. Defaults to :data:`CORE_METRICS`.
    thresholds : mapping, optional
        ``{metric_name: threshold}`` overriding the defaults of named metrics.
    options : mapping, optional
        ``{metric_name: {option: value}}`` for metrics with options (``mode`` of
        factual_correctness; ``k``, ``label_min``, ``label_max``, ``gain``, ``tie_break`` of
        the document retrieval metrics).

    Raises
    ------
    KeyError
        For an unknown metric name (the message lists the known ones).
    ValueError
        For an empty selection, or an option the metric does not take or a value it refuses
        (the metric's ``Options`` model).
    """
    thresholds, options = dict(thresholds or {}), dict(options or {})
    unknown = (set(thresholds) | set(options)) - set(METRICS)
    if unknown:
        raise KeyError(f"settings for unknown metrics {sorted(unknown)}; known: {list(METRICS)}")
    metrics = CORE_METRICS if metrics is None else list(metrics)
    if not metrics:
        raise ValueError("no metric selected")
    metrics = [name for item in metrics
               for name in ([item] if isinstance(item, Metric) or item in METRICS else resolve_names([item]))]
    built = []
    for item in metrics:
        if isinstance(item, Metric):
            built.append(item)
            continue
        built.append(METRICS[item](threshold=thresholds.get(item), **options.get(item, {})))
    return built
