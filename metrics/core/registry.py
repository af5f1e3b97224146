"""The metrics the pipeline knows, by the name the peers use.

Every ``Metric`` subclass with a ``name`` in a module of ``rag_eval.metrics.rag``, ``rag_eval.metrics.azure``,
``rag_eval.metrics.retrieval`` or ``rag_eval.metrics.diagnostics`` is registered: adding a metric is adding its module (and its
test). The ones imported below are listed in the order reports show them; a module not
listed here comes after them, in module order. The registry (:data:`METRICS`) is built on
first use, not when ``metrics`` is imported.

:func:`load_extensions` adds, after them and in this order (an explicit call: the CLI makes
it as a command starts, ``rag_eval.orchestration.definitions`` before it builds the asset graph, a
Python API user when they want them; importing ``metrics`` never does):

* the custom metrics of a file: the one given, else the one ``$RAG_EVAL_CUSTOM_METRICS``
  names, else ``custom_metrics.yaml`` in the working directory when there is one
  (``rag_eval.metrics.core.custom``; the CLI's ``--custom-metrics FILE`` sets the variable, so Dagster's
  run workers read the same file), family ``custom``;
* the metrics of installed plugins: every entry point of the group :data:`PLUGIN_GROUP`
  (``rag_eval.metrics``), a ``Metric`` subclass or a list of them (``rag_eval.metrics.core.base.Metric``
  documents the contract), by distribution and entry point name.

So the CLI, the Dagster code location (the UI, the daemon, their run workers) and a Python
caller that loads the extensions see the same metrics.
"""
from __future__ import annotations

import importlib
import inspect
import os
import pkgutil
from collections.abc import Iterable, Iterator, Mapping, Sequence
from importlib.metadata import entry_points
from pathlib import Path
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
from rag_eval.metrics.core.custom import load_custom_metrics
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
#: The environment variable naming the custom metrics file.
CUSTOM_METRICS_ENV = "RAG_EVAL_CUSTOM_METRICS"
#: The custom metrics file read from the working directory when the variable is unset.
CUSTOM_METRICS_FILE = "custom_metrics.yaml"


def custom_metrics_file() -> Path | None:
    """The custom metrics file: ``$RAG_EVAL_CUSTOM_METRICS`` (which must exist), else
    ``./custom_metrics.yaml`` when there is one, else ``None``."""
    named = os.environ.get(CUSTOM_METRICS_ENV)
    if named:
        return Path(named).resolve()
    default = Path(CUSTOM_METRICS_FILE)
    return default.resolve() if default.is_file() else None


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


def _with_extensions(builtin: list[type[Metric]], source: Path | None) -> dict[str, type[Metric]]:
    """The built-in metrics, then the custom file's (``source``), then the plugins'; a name
    may be used once."""
    metrics = {cls.name: cls for cls in builtin}
    origin = {cls.name: f"a built-in metric ({cls.__module__}.{cls.__qualname__})" for cls in builtin}
    extra: list[tuple[str, str, type[Metric]]] = [
        (f"{source}: metric {cls.name!r}", f"the custom metric {cls.name!r} of {source}", cls)
        for cls in (load_custom_metrics(source) if source else [])]
    extra += [(f"{where}: {cls.__qualname__}", f"the plugin metric {cls.__module__}.{cls.__qualname__} ({where})", cls)
              for where, cls in _plugin_points()]
    for where, what, cls in extra:
        taken = origin.get(cls.name) or ("a family" if cls.name in {f.value for f in Family} | {"all"} else None)
        if taken:
            raise SettingsError(f"{where}: field 'name': {cls.name!r} is taken by {taken}")
        metrics[cls.name], origin[cls.name] = cls, what
    return metrics


_WHERE = f"--custom-metrics FILE, ${CUSTOM_METRICS_ENV} or ./{CUSTOM_METRICS_FILE}"
_NO_FILE = f"no custom metrics file read ({_WHERE})"


def _builtin() -> list[type[Metric]]:
    """The built-in metrics, in the order reports show them."""
    return [Faithfulness, AnswerRelevancy, ContextRelevancy, ContextRecall, ContextPrecision,
            ContextUtilization, ContextEntityRecall, NoiseSensitivityRelevant, NoiseSensitivityIrrelevant,
            NVContextRelevance, AnswerCorrectness, FactualCorrectness,
            Groundedness, GroundednessPro, Relevance, Retrieval, ResponseCompleteness,
            *DOCUMENT_RETRIEVAL_METRICS, *_discovered()]


class Registry(Mapping[str, type[Metric]]):
    """The registered metric classes by name, in registry order (a read-only mapping): the
    built-in ones, built on first use, then those :func:`load_extensions` adds.

    ``extensions_loaded`` says whether :func:`load_extensions` ran in this process;
    ``custom_source`` is the custom metrics file it read (``None``: none)."""

    def __init__(self) -> None:
        self._metrics: dict[str, type[Metric]] | None = None
        self.extensions_loaded = False
        self.custom_source: Path | None = None

    def _built(self) -> dict[str, type[Metric]]:
        if self._metrics is None:
            self._metrics = {cls.name: cls for cls in _builtin()}
        return self._metrics

    def __getitem__(self, name: str) -> type[Metric]:
        return self._built()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._built())

    def __len__(self) -> int:
        return len(self._built())

    def __repr__(self) -> str:
        return f"Registry({', '.join(self)})"

    def extend(self, source: Path | None) -> None:
        """Add the custom metrics of ``source`` and the plugins' (see :func:`load_extensions`)."""
        self._metrics = _with_extensions(list(self._built().values()), source)
        self.extensions_loaded, self.custom_source = True, source


#: The registered metric classes by name (:class:`Registry`), built on first use.
METRICS = Registry()


class _Family(Sequence[str]):
    """The names of one family's metrics, in registry order, as they are at the time of use."""

    def __init__(self, family: Family) -> None:
        self._family = family

    def _names(self) -> tuple[str, ...]:
        return tuple(name for name, cls in METRICS.items() if cls.family is self._family or self._family in cls.also_in)

    def __getitem__(self, index):
        return self._names()[index]

    def __len__(self) -> int:
        return len(self._names())

    def __repr__(self) -> str:
        return repr(self._names())


#: Metric names by family (``rag_eval.metrics.core.base.Family``: core, ragas, azure, document_retrieval, custom,
#: plugin), in registry order.
FAMILIES: dict[str, Sequence[str]] = {family.value: _Family(family) for family in Family}
#: The five core metrics of the dingo RAG guide, in the order reports show them.
CORE_METRICS: Sequence[str] = FAMILIES[Family.CORE.value]


def load_extensions(custom_metrics: str | os.PathLike[str] | None = None) -> Path | None:
    """Add the custom metrics of a YAML file and the installed plugins' metrics to the registry.

    Parameters
    ----------
    custom_metrics : path, optional
        The custom metrics file (``rag_eval.metrics.core.custom``). Default: the file ``$RAG_EVAL_CUSTOM_METRICS``
        names (which must exist), else ``./custom_metrics.yaml`` when there is one, else none.

    Returns
    -------
    Path or None
        The custom metrics file read. A second call reading the same file does nothing.

    Raises
    ------
    ValueError
        For an invalid custom metric (naming the file, the metric and the field), a plugin that
        cannot be loaded or is refused (naming its entry point and distribution), a name taken
        twice, or when this process loaded another custom metrics file already (its asset
        graph and run workers were built with that one: a new process is needed).
    OSError
        For a custom metrics file that cannot be read.
    """
    source = Path(custom_metrics).resolve() if custom_metrics else custom_metrics_file()
    if METRICS.extensions_loaded:
        if source != METRICS.custom_source:
            raise SettingsError(f"this process loaded the custom metrics of {METRICS.custom_source or 'no file'}; "
                                f"{source or 'no file'} needs a new process")
        return source
    METRICS.extend(source)
    return source


def prompt_versions() -> dict[str, str]:
    """The version of every LLM request kind the registered metrics' judgements send."""
    return {kind: judgement.version for cls in METRICS.values() for judgement in cls.judgements
            for kind in judgement.requests}


def describe_judge(judge: Judge) -> dict[str, Any]:
    """What summaries and reports record of ``judge``: its ``describe()`` and, for the LLM judge,
    ``prompt_versions`` (:func:`prompt_versions`), which decide its verdicts as much as its model."""
    from rag_eval.metrics.judges.llm import LLMJudge

    described = judge.describe()
    if isinstance(judge, LLMJudge):
        described["prompt_versions"] = prompt_versions()
    return described


def option_types(name: str) -> dict[str, Any]:
    """What the metric ``name`` may be configured with, by option, with its type: its
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
            **{option: field.annotation for option, field in METRICS[name].Options.model_fields.items()}}


def option_value(metric: str, option: str, value: Any) -> Any:
    """``value`` of ``metric``'s ``option`` converted to its type (:func:`option_types`; a string
    such as ``"3"`` is read as the type says).

    Raises
    ------
    KeyError
        For an unknown metric or option.
    ValueError
        For a value outside the option's type or domain (pydantic's first message).
    """
    from pydantic import TypeAdapter, ValidationError

    kind = option_types(metric)[option]  # KeyError for either
    try:
        return TypeAdapter(kind).validate_python(value)
    except ValidationError as exc:
        raise SettingsError(exc.errors()[0]["msg"]) from None


def resolve_names(selection: str | Iterable[str]) -> list[str]:
    """Metric names from names and family names (``core``, ``ragas``, ``azure``,
    ``document_retrieval``, ``custom``, ``plugin``, ``all``), comma-separated or as an iterable, in registry order.

    Raises
    ------
    UnknownNameError
        For a name that is neither a metric nor a family.
    ValueError
        When nothing is selected because the families named (``custom``, ``plugin``) are
        empty, saying which custom metrics file was read (or that none was found).
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
            source = f"custom metrics read from {METRICS.custom_source}" if METRICS.custom_source else _NO_FILE \
                if METRICS.extensions_loaded else "custom and plugin metrics not loaded (rag_eval.metrics.load_extensions())"
            raise UnknownNameError(f"unknown metric {item!r}; known: {', '.join(METRICS)}; families: "
                                   f"{', '.join(FAMILIES)}, all; {source}")
    names = [name for name in METRICS if name in chosen]
    read = METRICS.custom_source
    empty = {"custom": f"no custom metrics were read ({read} defines none)" if read
             else f"no custom metrics were read (no custom metrics file found: {_WHERE})"
             if METRICS.extensions_loaded else "custom metrics not loaded (rag_eval.metrics.load_extensions())",
             "plugin": f"no plugin metric is installed (entry point group {PLUGIN_GROUP})"
             if METRICS.extensions_loaded else "plugin metrics not loaded (rag_eval.metrics.load_extensions())"}
    said = [empty[item] for item in dict.fromkeys(items) if item in empty and not FAMILIES[item]]
    if not names and said:
        raise SettingsError(f"no metric selected: {'; '.join(said)}")
    return names


def build_metrics(metrics: Iterable[str | Metric] | None = None, thresholds: Mapping[str, float] | None = None,
                  options: Mapping[str, Mapping[str, Any]] | None = None) -> list[Metric]:
    """Metric instances from names (or instances, passed through).

    Parameters
    ----------
    metrics : iterable of str or Metric, optional
        Metric names, family names (``core``, ``ragas``, ``azure``, ``document_retrieval``,
        ``custom``, ``plugin``, ``all``) or instances (e.g. of ``rag_eval.metrics.core.custom.load_custom_metrics``). Defaults to :data:`CORE_METRICS`.
    thresholds : mapping, optional
        ``{metric_name: threshold}`` overriding the defaults of named metrics.
    options : mapping, optional
        ``{metric_name: {option: value}}`` for metrics with options (``mode`` of
        factual_correctness; ``k``, ``label_min``, ``label_max``, ``gain``, ``tie_break`` of
        the document retrieval metrics).

    Raises
    ------
    UnknownNameError
        For an unknown metric name (the message lists the known ones).
    ValueError
        For an empty selection, or an option the metric does not take or a value it refuses
        (the metric's ``Options`` model).
    """
    thresholds, options = dict(thresholds or {}), dict(options or {})
    unknown = (set(thresholds) | set(options)) - set(METRICS)
    if unknown:
        raise UnknownNameError(f"settings for unknown metrics {sorted(unknown)}; known: {list(METRICS)}")
    metrics = CORE_METRICS if metrics is None else list(metrics)
    if not metrics:
        raise SettingsError("no metric selected")
    metrics = [name for item in metrics
               for name in ([item] if isinstance(item, Metric) or item in METRICS else resolve_names([item]))]
    built = []
    for item in metrics:
        if isinstance(item, Metric):
            built.append(item)
            continue
        built.append(METRICS[item](threshold=thresholds.get(item), **options.get(item, {})))
    return built
