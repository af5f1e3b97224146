"""The metrics the pipeline knows, by the name the peers use: registries are values.

Every ``Metric`` subclass with a ``name`` in a module of ``rag_eval.metrics.rag``, ``rag_eval.metrics.azure``,
``rag_eval.metrics.retrieval`` or ``rag_eval.metrics.diagnostics`` is built in: adding a metric is adding its
module (and its test). The ones imported below are listed in the order reports show them; a module not
listed here comes after them, in module order. :func:`builtin_registry` is them (built on first use, not
when ``metrics`` is imported; immutable, so shared).

:func:`build_registry` returns a new :class:`Registry` with, after them and in this order:

* the custom metrics of a file (``rag_eval.metrics.core.custom``), family ``custom``;
* the metrics of installed plugins: every entry point of the group :data:`PLUGIN_GROUP`
  (``rag_eval.metrics``), a ``Metric`` subclass or a list of them (``rag_eval.metrics.core.base.Metric``
  documents the contract), by distribution and entry point name.

Each entry point builds its registry once and passes it down: the CLI from ``--custom-metrics FILE``, the
Dagster code location (``rag_eval.orchestration.definitions``: the UI, the daemon, their run workers) as it
loads, both choosing the file by ``rag_eval.metrics.core.custom.custom_metrics_file`` (the one named, else the one
``[tool.rag_eval.metrics] custom_metrics`` of ``./pyproject.toml`` names, else ``./custom_metrics.yaml`` when
there is one: no environment variable); a Python caller passes the registry it built (the
functions here default to :func:`builtin_registry`). Importing ``metrics`` never reads a file or loads a
plugin, and registries of different files coexist in one process.
"""
from __future__ import annotations

import functools
import importlib
import inspect
import os
import pkgutil
from collections.abc import Iterable, Iterator, Mapping
from importlib.metadata import entry_points
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import rag_eval.metrics.azure
import rag_eval.metrics.diagnostics
import rag_eval.metrics.rag
import rag_eval.metrics.retrieval

from rag_eval.metrics.azure.groundedness import Groundedness
from rag_eval.metrics.azure.groundedness_pro import GroundednessPro
from rag_eval.metrics.azure.relevance import Relevance
from rag_eval.metrics.azure.response_completeness import ResponseCompleteness
from rag_eval.metrics.azure.retrieval import Retrieval
from rag_eval.metrics.core.base import Family, Metric, name_problem
from rag_eval.metrics.core.custom import CUSTOM_METRICS_FILE, CUSTOM_METRICS_SETTING, load_custom_metrics
from rag_eval.metrics.judges.config import PER_METRIC, LLMConfig
from rag_eval.metrics.rag.answer_correctness import AnswerCorrectness
from rag_eval.metrics.rag.answer_relevancy import AnswerRelevancy
from rag_eval.metrics.rag.context_entity_recall import ContextEntityRecall
from rag_eval.metrics.rag.context_precision import ContextPrecision
from rag_eval.metrics.rag.context_recall import ContextRecall
from rag_eval.metrics.rag.context_relevancy import ContextRelevancy
from rag_eval.metrics.rag.context_utilization import ContextUtilization
from rag_eval.metrics.rag.factual_correctness import FactualCorrectness
from rag_eval.metrics.rag.faithfulness import Faithfulness
from rag_eval.metrics.rag.noise_sensitivity import NoiseSensitivityIrrelevant, NoiseSensitivityRelevant
from rag_eval.metrics.rag.nv_context_relevance import NVContextRelevance
from rag_eval.metrics.retrieval.document_retrieval import DOCUMENT_RETRIEVAL_METRICS
from rag_eval.metrics.errors import SettingsError, UnknownNameError

if TYPE_CHECKING:
    from rag_eval.metrics.judges.base import Judge


def _discovered() -> list[type[Metric]]:
    """Every named ``Metric`` subclass of the metric packages' modules, in module order."""
    found: list[type[Metric]] = []
    for package in (rag_eval.metrics.rag, rag_eval.metrics.azure, rag_eval.metrics.retrieval, rag_eval.metrics.diagnostics):
        for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
            module = importlib.import_module(f"{package.__name__}.{info.name}")
            found += [c for c in vars(module).values() if isinstance(c, type) and issubclass(c, Metric)
                      and c.__module__ == module.__name__ and "name" in vars(c)]
    return found


#: The entry point group of plugin metrics (``[project.entry-points."rag_eval.metrics"]``).
PLUGIN_GROUP = "rag_eval.metrics"
def plugin_metrics() -> list[type[Metric]]:
    """The metric classes of every installed entry point of :data:`PLUGIN_GROUP`, by
    distribution and entry point name.

    Raises
    ------
    ValueError
        Naming the entry point and its distribution, when it cannot be loaded, is not a
        concrete ``Metric`` subclass with ``name``, ``required_fields`` and ``family``, or its
        name is refused as a custom metric's is (``rag_eval.metrics.core.base.name_problem``).
    """
    return [cls for _, cls in _plugin_points()]


def _plugin_points() -> list[tuple[str, type[Metric]]]:
    """:func:`plugin_metrics` with, for each, the entry point and distribution it came from."""
    found: list[tuple[str, type[Metric]]] = []
    points = sorted(entry_points(group=PLUGIN_GROUP), key=lambda p: (p.dist.name if p.dist else "", p.name))
    for point in points:
        where = f"plugin entry point '{point.name} = {point.value}'" + \
            (f" of {point.dist.name} {point.dist.version}" if point.dist else "")
        try:
            loaded = point.load()
        except Exception as exc:  # noqa: BLE001 - any failure of third-party code: say which plugin
            raise SettingsError(f"{where}: cannot be loaded: {type(exc).__name__}: {exc}") from None
        for cls in loaded if isinstance(loaded, (list, tuple)) else [loaded]:
            if not (isinstance(cls, type) and issubclass(cls, Metric)) or inspect.isabstract(cls):
                raise SettingsError(f"{where}: {cls!r} is not a concrete rag_eval.metrics.core.base.Metric subclass")
            missing = [a for a in ("name", "required_fields", "family") if not hasattr(cls, a)]
            if missing:
                raise SettingsError(f"{where}: {cls.__qualname__} does not declare {', '.join(missing)}")
            refused = name_problem(cls.name)
            if refused:
                raise SettingsError(f"{where}: {cls.__qualname__}: field 'name': {refused}")
            found.append((where, cls))
    return found


def _with_extensions(builtin: list[type[Metric]], source: Path | None, plugins: bool) -> dict[str, type[Metric]]:
    """The built-in metrics, then the custom file's (``source``), then the plugins' (if
    ``plugins``); a name may be used once."""
    metrics = {cls.name: cls for cls in builtin}
    origin = {cls.name: f"a built-in metric ({cls.__module__}.{cls.__qualname__})" for cls in builtin}
    extra: list[tuple[str, str, type[Metric]]] = [
        (f"{source}: metric {cls.name!r}", f"the custom metric {cls.name!r} of {source}", cls)
        for cls in (load_custom_metrics(source) if source else [])]
    extra += [(f"{where}: {cls.__qualname__}", f"the plugin metric {cls.__module__}.{cls.__qualname__} ({where})", cls)
              for where, cls in (_plugin_points() if plugins else [])]
    for where, what, cls in extra:
        taken = origin.get(cls.name) or ("a family" if cls.name in {f.value for f in Family} | {"all"} else None)
        if taken:
            raise SettingsError(f"{where}: field 'name': {cls.name!r} is taken by {taken}")
        metrics[cls.name], origin[cls.name] = cls, what
    return metrics


_WHERE = f"--custom-metrics FILE, [tool.rag_eval.{CUSTOM_METRICS_SETTING[0]}] {CUSTOM_METRICS_SETTING[1]} of " \
    f"./pyproject.toml or ./{CUSTOM_METRICS_FILE}"
_NO_FILE = f"no custom metrics file read ({_WHERE})"
_BUILD = "rag_eval.metrics.build_registry()"


def _builtin() -> list[type[Metric]]:
    """The built-in metrics, in the order reports show them."""
    return [Faithfulness, AnswerRelevancy, ContextRelevancy, ContextRecall, ContextPrecision,
            ContextUtilization, ContextEntityRecall, NoiseSensitivityRelevant, NoiseSensitivityIrrelevant,
            NVContextRelevance, AnswerCorrectness, FactualCorrectness,
            Groundedness, GroundednessPro, Relevance, Retrieval, ResponseCompleteness,
            *DOCUMENT_RETRIEVAL_METRICS, *_discovered()]


class Registry(Mapping[str, type[Metric]]):
    """The registered metric classes by name, in registry order: an immutable value (a read-only
    mapping). :func:`builtin_registry` is the built-in metrics; :func:`build_registry` adds a custom
    metrics file's and the plugins'. Registries built from different files coexist in one process.

    ``custom_source`` is the custom metrics file read (``None``: none); ``extended`` says whether the
    custom metrics file and the plugins were looked for (``False`` for :func:`builtin_registry`)."""

    def __init__(self, metrics: Mapping[str, type[Metric]], custom_source: Path | None = None,
                 extended: bool = False) -> None:
        self._metrics: Mapping[str, type[Metric]] = MappingProxyType(dict(metrics))
        self._families = MappingProxyType({family.value: tuple(
            name for name, cls in metrics.items() if cls.family is family or family in cls.also_in)
            for family in Family})
        self._custom_source, self._extended = custom_source, extended

    @property
    def custom_source(self) -> Path | None:
        """The custom metrics file read (``None``: none)."""
        return self._custom_source

    @property
    def extended(self) -> bool:
        """Whether the custom metrics file and the plugins were looked for."""
        return self._extended

    @property
    def families(self) -> Mapping[str, tuple[str, ...]]:
        """Metric names by family (``rag_eval.metrics.core.base.Family``: core, ragas, azure,
        document_retrieval, custom, plugin, diagnostics), in registry order."""
        return self._families

    def __getitem__(self, name: str) -> type[Metric]:
        return self._metrics[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._metrics)

    def __len__(self) -> int:
        return len(self._metrics)

    def __hash__(self) -> int:  # equal registries (the same metrics) hash alike: their assets are built once
        return hash(frozenset(self._metrics.items()))

    def __repr__(self) -> str:
        return f"Registry({', '.join(self)})"


#: The five core metrics of the dingo RAG guide, in the order reports show them (family ``core``).
CORE_METRICS = ("faithfulness", "answer_relevancy", "context_relevancy", "context_recall", "context_precision")


@functools.cache
def builtin_registry() -> Registry:
    """The built-in metrics (:class:`Registry`), built on first use and shared: it is immutable."""
    return Registry({cls.name: cls for cls in _builtin()})


def build_registry(custom_metrics: str | os.PathLike[str] | None = None, plugins: bool = True) -> Registry:
    """A new registry: the built-in metrics, then the custom metrics of a YAML file, then the
    installed plugins' metrics (in that order; a name may be used once).

    Parameters
    ----------
    custom_metrics : path, optional
        The custom metrics file (``rag_eval.metrics.core.custom``); ``None``: none. The entry points
        choose it with ``rag_eval.metrics.core.custom.custom_metrics_file``.
    plugins : bool
        Whether to add the metrics of every entry point of :data:`PLUGIN_GROUP`.

    Raises
    ------
    SettingsError
        For an invalid custom metric (naming the file, the metric and the field), a plugin that
        cannot be loaded or is refused (naming its entry point and distribution), or a name taken
        twice.
    NotFoundError, StorageError
        For a custom metrics file that is not there or cannot be read.
    """
    source = Path(custom_metrics).resolve() if custom_metrics else None
    return Registry(_with_extensions(list(builtin_registry().values()), source, plugins), source, extended=True)


def given(registry: Registry | None) -> Registry:
    """``registry``, or :func:`builtin_registry` for ``None`` (what the Python API defaults to)."""
    return builtin_registry() if registry is None else registry


def prompt_versions(registry: Registry | None = None) -> dict[str, str]:
    """The version of every LLM request kind the metrics of ``registry`` (default
    :func:`builtin_registry`) send."""
    return {kind: judgement.version for cls in given(registry).values() for judgement in cls.judgements
            for kind in judgement.requests}


def describe_judge(judge: Judge, registry: Registry | None = None) -> dict[str, Any]:
    """What summaries and reports record of ``judge``: its ``describe()`` and, for the LLM judge,
    ``prompt_versions`` (:func:`prompt_versions` of ``registry``), which decide its verdicts as much
    as its model."""
    from rag_eval.metrics.judges.llm import LLMJudge

    described = judge.describe()
    if isinstance(judge, LLMJudge):
        described["prompt_versions"] = prompt_versions(registry)
    return described


def option_types(name: str, registry: Registry | None = None) -> dict[str, Any]:
    """What the metric ``name`` of ``registry`` (default :func:`builtin_registry`) may be configured with, by option, with its type: its
    ``threshold``, the judge settings a metric may set for itself (``PER_METRIC``, typed as in
    ``LLMConfig``, with their domains) and the fields of its ``Options`` model. The CLI's
    ``--metric-option`` and the metric assets' run config both read it.

    Raises
    ------
    KeyError
        For an unknown metric name.
    """
    hints = LLMConfig.types()
    return {"threshold": float, **{option: hints[option] for option in PER_METRIC},
            **{option: field.annotation for option, field in given(registry)[name].Options.model_fields.items()}}


def option_value(metric: str, option: str, value: Any, registry: Registry | None = None) -> Any:
    """``value`` of ``metric``'s ``option`` converted to its type (:func:`option_types` of ``registry``; a string
    such as ``"3"`` is read as the type says).

    Raises
    ------
    KeyError
        For an unknown metric or option.
    ValueError
        For a value outside the option's type or domain (pydantic's first message).
    """
    from pydantic import TypeAdapter, ValidationError

    kind = option_types(metric, registry)[option]  # KeyError for either
    try:
        return TypeAdapter(kind).validate_python(value)
    except ValidationError as exc:
        raise SettingsError(exc.errors()[0]["msg"]) from None


def resolve_names(selection: str | Iterable[str], registry: Registry | None = None) -> list[str]:
    """Metric names of ``registry`` (default :func:`builtin_registry`) from names and family names (``core``, ``ragas``, ``azure``,
    ``document_retrieval``, ``custom``, ``plugin``, ``all``), comma-separated or as an iterable, in registry order.

    Raises
    ------
    UnknownNameError
        For a name that is neither a metric nor a family.
    ValueError
        When nothing is selected because the families named (``custom``, ``plugin``) are
        empty, saying which custom metrics file was read (or that none was found).
    """
    metrics = given(registry)
    families = metrics.families
    items = [s.strip() for s in selection.split(",")] if isinstance(selection, str) else list(selection)
    chosen: set[str] = set()
    for item in filter(None, items):
        if item == "all":
            chosen.update(metrics)
        elif item in families:
            chosen.update(families[item])
        elif item in metrics:
            chosen.add(item)
        else:
            source = f"custom metrics read from {metrics.custom_source}" if metrics.custom_source else _NO_FILE \
                if metrics.extended else f"custom and plugin metrics not loaded ({_BUILD})"
            raise UnknownNameError(f"unknown metric {item!r}; known: {', '.join(metrics)}; families: "
                                   f"{', '.join(families)}, all; {source}")
    names = [name for name in metrics if name in chosen]
    read = metrics.custom_source
    empty = {"custom": f"no custom metrics were read ({read} defines none)" if read
             else f"no custom metrics were read (no custom metrics file found: {_WHERE})"
             if metrics.extended else f"custom metrics not loaded ({_BUILD})",
             "plugin": f"no plugin metric is installed (entry point group {PLUGIN_GROUP})"
             if metrics.extended else f"plugin metrics not loaded ({_BUILD})"}
    said = [empty[item] for item in dict.fromkeys(items) if item in empty and not families[item]]
    if not names and said:
        raise SettingsError(f"no metric selected: {'; '.join(said)}")
    return names


def build_metrics(metrics: Iterable[str | Metric] | None = None, thresholds: Mapping[str, float] | None = None,
                  options: Mapping[str, Mapping[str, Any]] | None = None,
                  registry: Registry | None = None) -> list[Metric]:
    """Metric instances from names of ``registry`` (or instances, passed through).

    Parameters
    ----------
    metrics : iterable of str or Metric, optional
        Metric names, family names (``core``, ``ragas``, ``azure``, ``document_retrieval``,
        ``custom``, ``plugin``, ``all``) or instances (e.g. of ``rag_eval.metrics.core.custom.load_custom_metrics``). Defaults to the family ``core``.
    thresholds : mapping, optional
        ``{metric_name: threshold}`` overriding the defaults of named metrics.
    options : mapping, optional
        ``{metric_name: {option: value}}`` for metrics with options (``mode`` of
        factual_correctness; ``k``, ``label_min``, ``label_max``, ``gain``, ``tie_break`` of
        the document retrieval metrics).
    registry : Registry, optional
        The metrics the names name (default :func:`builtin_registry`; with custom and plugin
        metrics: :func:`build_registry`).

    Raises
    ------
    UnknownNameError
        For an unknown metric name (the message lists the known ones).
    ValueError
        For an empty selection, or an option the metric does not take or a value it refuses
        (the metric's ``Options`` model).
    """
    known = given(registry)
    thresholds, options = dict(thresholds or {}), dict(options or {})
    unknown = (set(thresholds) | set(options)) - set(known)
    if unknown:
        raise UnknownNameError(f"settings for unknown metrics {sorted(unknown)}; known: {list(known)}")
    metrics = list(known.families[Family.CORE.value]) if metrics is None else list(metrics)
    if not metrics:
        raise SettingsError("no metric selected")
    metrics = [name for item in metrics
               for name in ([item] if isinstance(item, Metric) or item in known else resolve_names([item], known))]
    built = []
    for item in metrics:
        if isinstance(item, Metric):
            built.append(item)
            continue
        built.append(known[item](threshold=thresholds.get(item), **options.get(item, {})))
    return built
