"""The metric base class: field checks, statuses and pass/fail, shared by every metric.

A subclass declares its name, the fields it reads, its range, direction and default
threshold, and implements :meth:`Metric.measure`, which returns a :class:`Measured`
or a :class:`NotApplicable`. Everything else (input errors, judge errors, pass/fail,
range validation) happens here, once.
"""
from __future__ import annotations

import keyword
import math
import numbers
import re
import traceback
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace
from enum import Enum
from collections.abc import Sequence
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError

from rag_eval.metrics.judgements.base import Judgement
from rag_eval.metrics.judges.base import Judge, JudgeError
from rag_eval.metrics.judges.endpoint import EndpointError
from rag_eval.metrics.judges.usage import Usage, current_usage
from rag_eval.metrics.core.conversation import unresolved
from rag_eval.metrics.core.results import Direction, MetricResult, Status, passes
from rag_eval.metrics.core.samples import ALIASES, FIELDS, Sample, is_target_error
from rag_eval.metrics.text import normalise_rag_text
from rag_eval.metrics.errors import SettingsError, redacted

#: Fields whose text is normalised (``rag_eval.metrics.text.normalise_rag_text``) before judging.
NORMALISED_FIELDS = ("response", "retrieved_contexts", "reference")


def normalised(sample: Sample) -> tuple[Sample, dict[str, Any]]:
    """The sample with its response, contexts and reference normalised (citation markers,
    Markdown, HTML, literal ``\\n``), and the original text of every field that changed."""
    changes: dict[str, Any] = {}
    originals: dict[str, Any] = {}
    for name in NORMALISED_FIELDS:
        value = getattr(sample, name)
        if value is None:
            continue
        clean = [normalise_rag_text(c) for c in value] if isinstance(value, list) else normalise_rag_text(value)
        if clean != value:
            changes[name], originals[name] = clean, value
    return (replace(sample, **changes) if changes else sample), originals


class Family(str, Enum):
    """Where a metric comes from (selectable by name: ``--metrics ragas``)."""

    #: The dingo RAG guide's five, in the order reports show them.
    CORE = "core"
    RAGAS = "ragas"
    AZURE = "azure"
    DOCUMENT_RETRIEVAL = "document_retrieval"
    #: Defined in a custom metrics file (``rag_eval.metrics.core.custom``), no Python.
    CUSTOM = "custom"
    #: From an installed plugin package (``rag_eval.metrics.core.registry.PLUGIN_GROUP``).
    PLUGIN = "plugin"
    #: RAGChecker's claim-level diagnostics of the retriever and the generator (``rag_eval.metrics.diagnostics``).
    DIAGNOSTICS = "diagnostics"


def nothing_retrieved(contexts: list[str]) -> bool:
    """True when retrieval returned no usable text: no context, or only blank ones
    (``[]``, ``["", " "]``); every metric reading contexts decides this one way."""
    return not any(c.strip() for c in contexts)


#: The pattern of a custom or plugin metric's name (it names an asset, a DuckDB table and columns).
NAME_PATTERN = r"^[a-z][a-z0-9_]{0,47}$"
#: The asset graph's assets that are not metrics (``assets/``; their DuckDB tables share the names). A
#: metric of that name would be a duplicate asset key; a test checks every non-metric asset key is here.
ASSET_NAMES = frozenset({
    "questions", "references", "responses", "retrieved_contexts", "retrieved_documents", "retrieval_ground_truth",
    "rejected_samples", "eval_summary", "question_set", "baseline_comparison", "retriever", "generator",
    "system_contexts", "system_responses", "human_labels", "label_estimates", "traffic_samples", "traffic_sample",
    "traffic_scores", "traffic_summary", "strong_sample"})
#: The code location's resources (``rag_eval.assets.resources.build_resources``): a metric of that name is an input of
#: ``eval_summary`` under the name of one of its resource parameters; a test checks these are its resources.
RESOURCE_NAMES = frozenset({"dataset_store", "report_store", "judge", "strong_judge", "execution", "io_manager",
                            "traffic_store"})
#: Names Dagster refuses for an asset (its own words and Python's keywords, ``keyword.kwlist``).
DAGSTER_WORDS = frozenset({"context", "conf", "config", "meta", "arg_dict", "dict", "input_arg_dict", "output_arg_dict",
                           "int", "str", "float", "bool", "input", "output", "type", *keyword.kwlist})
#: Columns of the per-row outputs besides the metrics' own (``rag_eval.metrics.reports.formats``: ``ragas_scores.csv``,
#: ``azure_results.jsonl``), and the sample fields under the aliases ingestion accepts.
OUTPUT_COLUMNS = frozenset({*FIELDS, *(a for names in ALIASES.values() for a in names), "id", "sample_id", "row",
                            "conversation_id", "turn", "unscored", "groundedness_pro_label",
                            "total_groundtruth_documents"})
#: The endings and beginnings of the columns a metric adds next to its value in ``azure_results.jsonl``.
OUTPUT_SUFFIXES = ("_reason", "_result", "_threshold", "_status", "_higher_is_better")
OUTPUT_PREFIXES = ("gpt_",)


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a custom or plugin metric (``None``: it can): not matching
    :data:`NAME_PATTERN`, the name of an asset or a resource (:data:`ASSET_NAMES`,
    :data:`RESOURCE_NAMES`), a word Dagster refuses
    (:data:`DAGSTER_WORDS`) or the name of an output column
    (:data:`OUTPUT_COLUMNS`), or shaped like a metric's own output columns
    (:data:`OUTPUT_SUFFIXES`, :data:`OUTPUT_PREFIXES`). Built-in and family names are the
    registry's to check (``rag_eval.metrics.core.registry``)."""
    if not isinstance(name, str) or not re.fullmatch(NAME_PATTERN, name):
        return f"{name!r} is not a metric name: a lower-case letter, then up to 47 of a-z, 0-9 and _"
    if name in ASSET_NAMES:
        return f"{name!r} is taken by an asset"
    if name in RESOURCE_NAMES:
        return f"{name!r} is taken by a resource"
    if name in DAGSTER_WORDS:
        return f"{name!r} is a word Dagster reserves (its own or a Python keyword)"
    if name in OUTPUT_COLUMNS:
        return f"{name!r} is taken by a column of the per-row outputs (a sample field or its alias, id, row, unscored)"
    clash = next((s for s in OUTPUT_SUFFIXES if name.endswith(s)), None) or \
        next((p for p in OUTPUT_PREFIXES if name.startswith(p)), None)
    if clash:
        return (f"{name!r} {'ends' if clash.startswith('_') else 'starts'} with {clash!r}, which azure_results.jsonl "
                "uses for the columns beside a metric's value")
    return None


class InputProblem(ValueError):
    """A field is present but unusable for this metric (e.g. a label outside the scale).

    Raise it from :meth:`Metric.measure` with the field's name; the sample gets
    ``input_error`` naming the row and the field.
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass
class Measured:
    """A measured value with its reason and per-item details."""

    value: float
    reason: str
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class NotApplicable:
    """Nothing to judge on this sample (e.g. a refusal with no factual statement)."""

    reason: str
    details: dict[str, Any] = field(default_factory=dict)


class Options(BaseModel):
    """A metric's options besides its threshold, as a typed model (``Literal`` where the
    values are a set): the Python API (``Metric(**options)``, ``build_metrics(options=)``),
    the CLI's ``--metric-option`` and the run config all read it. None by default."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def problems(exc: ValidationError) -> str:
    """A pydantic validation error as ``field: message (got value)``, joined by "; "."""
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'options'}: {e['msg']} (got {e['input']!r})"
                     for e in exc.errors())


class Metric(ABC):
    """Base class of every metric, and the public API of plugin metrics.

    A plugin (a package of its own, ``examples/plugin_metric``) subclasses it and lists the
    class under the entry point group ``rag_eval.metrics`` in its ``pyproject.toml``::

        [project.entry-points."rag_eval.metrics"]
        language_match = "rag_eval_language:LanguageMatch"

    ``pip install`` of the package adds the metric to the CLI (``--metrics language_match``
    or ``--metrics plugin``), the Python API (``evaluate(..., metrics=["language_match"])``)
    and the asset graph (an asset of the group ``plugin_metrics``). A subclass declares:

    * ``name``: the metric's name (:data:`NAME_PATTERN`, not a built-in's, a family's, an
      asset's or an output column's: :func:`name_problem`);
    * ``required_fields``: the sample fields it reads (``user_input``, ``response``,
      ``retrieved_contexts``, ``reference``, ``retrieval_ground_truth``,
      ``retrieved_documents``); a row without one is ``input_error`` before ``measure``;
    * ``value_range`` (default ``(0.0, 1.0)``), ``direction`` (:class:`Direction`, default
      higher is better) and ``default_threshold`` (default 0.5);
    * ``family``: :attr:`Family.PLUGIN` for a plugin;
    * ``judgements``: the judgements (``rag_eval.metrics.judgements``) it asks the judge for, as
      objects (part of its code version; none for a metric that needs no judge);
    * ``version``: bumped whenever its formula changes (the asset's code version);
    * ``Options``: its options besides the threshold, a pydantic model (optional);

    and implements ``async def measure(self, sample, judge)``: ``sample`` is a
    :class:`rag_eval.metrics.core.samples.Sample` with the required fields present (response, contexts
    and reference normalised), ``judge`` the run's :class:`rag_eval.metrics.judges.base.Judge`
    (``await judge.ask(judgement, judgement.Input(...))`` for a verdict). It returns
    :class:`Measured` (a value in ``value_range``, its reason, details) or
    :class:`NotApplicable` (nothing to judge, with the reason), and raises
    :class:`InputProblem` for an unusable field. Everything else is done here once: the
    input errors, a ``JudgeError`` or any other exception becoming that row's
    ``judge_error``, as is a return of another type (a bare float), a value outside the range
    refused, pass/fail, the cost counters.

    Parameters
    ----------
    threshold : float, optional
        Pass/fail threshold; defaults to the metric's ``default_threshold``
        (0.5 on [0, 1], i.e. dingo's 5/10; 3 on a 1-5 Likert scale).
    **options
        Fields of the metric's :class:`Options` model (``mode="precision"`` of
        factual_correctness).

    Raises
    ------
    ValueError
        If ``threshold`` lies outside the metric's range, or for an unknown or invalid option.
    """

    name: ClassVar[str]
    required_fields: ClassVar[tuple[str, ...]]
    value_range: tuple[float, float] = (0.0, 1.0)
    direction: ClassVar[Direction] = Direction.HIGHER
    default_threshold: ClassVar[float] = 0.5
    #: Bumped whenever the formula or the judgement it asks for changes.
    version: ClassVar[str] = "1"
    #: The judgements the metric asks for (``rag_eval.metrics.judgements``), as objects.
    judgements: ClassVar[tuple[Judgement, ...]] = ()
    #: Where the metric comes from (:class:`Family`).
    family: ClassVar[Family]
    #: Other families whose selection (``--metrics <family>``) includes it: RAGAS's noise sensitivity
    #: is also one of RAGChecker's diagnostics. Its asset group stays its own family's.
    also_in: ClassVar[tuple[Family, ...]] = ()
    #: The metric's options (:class:`Options` or a subclass).
    Options: ClassVar[type[Options]] = Options

    def __init__(self, threshold: float | None = None, **options: Any) -> None:
        try:
            self.options = self.Options(**options)
        except ValidationError as exc:
            raise SettingsError(f"{self.name}: {problems(exc)}") from None
        self.set_threshold(threshold)

    def set_threshold(self, threshold: float | None) -> None:
        """Set the pass/fail threshold (``None``: the default), the one place its range is checked.

        Raises
        ------
        ValueError
            If it lies outside the metric's (instance's) ``value_range``.
        """
        self.threshold = self.default_threshold if threshold is None else float(threshold)
        low, high = self.value_range
        if not low <= self.threshold <= high:
            raise SettingsError(f"{self.name}: threshold {self.threshold:g} outside [{low:g}, {high:g}]")

    @classmethod
    def code_version(cls, judge: str) -> str:
        """Changes with the metric's formula (``version``), the version of every judgement it
        asks for and the judge that decides them (``judge``: ``Judge.code_version``), e.g.
        ``m1-statement_support:1-offline:4``."""
        return "-".join((f"m{cls.version}", *(j.tag for j in cls.judgements), judge))

    def fit(self, samples: Sequence[Sample]) -> None:
        """Settle, once, the settings that follow the data, before any sample is scored
        (none by default; the document retrieval metrics take a binary label scale from
        binary ground truth). Called by ``rag_eval.metrics.core.scoring.score_all`` and on Spark's driver."""

    @abstractmethod
    async def measure(self, sample: Sample, judge: Judge) -> Measured | NotApplicable:
        """Compute the value from the judge's per-item verdicts. Fields are present."""

    def asks(self, sample: Sample) -> list[tuple[Judgement, BaseModel]]:
        """The judgements :meth:`measure` will ask of ``sample`` (as ``measure`` gets it), each
        with its input, as far as known before it runs: what a judge may prepare for many rows
        at once (``Judge.prefetch``, via :func:`asked`). None by default."""
        return []

    def score(self, sample: Sample, judge: Judge) -> MetricResult:
        """Synchronous :meth:`ascore`."""
        return judge.run(self.ascore(sample, judge))

    async def ascore(self, sample: Sample, judge: Judge) -> MetricResult:
        """Score one sample; never raises for bad input or a failing judge.

        Returns
        -------
        MetricResult
            ``input_error`` naming the row and field when a required field is missing or
            malformed; ``judge_error`` with the cause when the judge fails, when the metric
            raises anything else on this row, returns neither :class:`Measured` (with a real
            number) nor :class:`NotApplicable`, or computes a value outside its range;
            otherwise ``ok`` or ``not_applicable``.

        Raises
        ------
        EndpointError
            When the judge's endpoint cannot be used at all (unreachable, key refused,
            unknown model): every row would fail, so the run stops before spending.
        """
        usage = Usage()
        token = current_usage.set(usage)
        try:
            result = await self._score(sample, judge)
        finally:
            current_usage.reset(token)
        result.usage = usage.as_dict()
        result.row, result.conversation_id, result.turn = sample.row, sample.conversation_id, sample.turn
        return result

    async def _score(self, sample: Sample, judge: Judge) -> MetricResult:
        base: dict[str, Any] = dict(metric=self.name, sample_id=sample.id, threshold=self.threshold,
                                    direction=self.direction, judge=judge.name)
        where = f"line {sample.line} (id {sample.id})"
        if "row" in sample.problems:
            return MetricResult(status=Status.INPUT_ERROR, value=None, passed=None,
                                details={"field": None, "problem": sample.problems["row"]},
                                reason=f"line {sample.line}: unreadable: {sample.problems['row']}", **base)
        for name in self.required_fields:
            problem = sample.missing(name)
            if problem:
                kind = "is malformed: " if name in sample.problems and not is_target_error(problem) else ""
                return MetricResult(status=Status.TARGET_ERROR if is_target_error(problem) else Status.INPUT_ERROR,
                                    value=None, passed=None,
                                    reason=f"{where}: field '{name}' {kind}{problem}",
                                    details={"field": name, "problem": f"{kind}{problem}"}, **base)
        sample, originals = normalised(sample)
        try:
            outcome = await judge.admit(self, sample)
            if outcome is None:
                outcome = await self.measure(sample, judge)
        except JudgeError as exc:
            return MetricResult(status=Status.JUDGE_ERROR, value=None, passed=None,
                                reason=f"judge failed: {exc}", **base)
        except InputProblem as exc:
            return MetricResult(status=Status.INPUT_ERROR, value=None, passed=None,
                                details={"field": exc.field, "problem": str(exc)},
                                reason=f"{where}: field '{exc.field}': {exc}", **base)
        except EndpointError:  # the endpoint cannot be used at all: the run stops, naming why
            raise
        except Exception as exc:  # noqa: BLE001 - a fault of this metric on this row loses no other row's or metric's result
            return MetricResult(status=Status.JUDGE_ERROR, value=None, passed=None,
                                reason=redacted(f"{self.name} failed on this row: {type(exc).__name__}: {exc}"),
                                details={"traceback": redacted("".join(traceback.format_exception(exc)))}, **base)
        wrong = type(outcome).__name__ if not isinstance(outcome, (Measured, NotApplicable)) else \
            f"Measured with a {type(outcome.value).__name__} value" \
            if isinstance(outcome, Measured) and not isinstance(outcome.value, numbers.Real) else None
        if wrong:  # a plugin's contract broken on this row: that row's judge_error, like a raise
            return MetricResult(status=Status.JUDGE_ERROR, value=None, passed=None,
                                reason=f"{self.name} ({type(self).__module__}.{type(self).__qualname__}): measure "
                                       f"returned {wrong}, not Measured or NotApplicable", **base)
        if originals:
            outcome.details = {**outcome.details, "original": originals}
        note = unresolved(sample.given("user_input"), sample.history) if "user_input" in self.required_fields else None
        if note:  # a follow-up question without the turns it continues: the reason says so
            outcome.reason, outcome.details = f"{outcome.reason}; {note}", {**outcome.details, "question": note}
        if isinstance(outcome, NotApplicable):
            return MetricResult(status=Status.NOT_APPLICABLE, value=None, passed=None,
                                reason=outcome.reason, details=outcome.details, **base)
        low, high = self.value_range
        if not (math.isfinite(outcome.value) and low <= outcome.value <= high):
            return MetricResult(status=Status.JUDGE_ERROR, value=None, passed=None, details=outcome.details,
                                reason=f"{self.name} computed {outcome.value!r} outside [{low:g}, {high:g}]", **base)
        return MetricResult(status=Status.OK, value=float(outcome.value),
                            passed=passes(outcome.value, self.threshold, self.direction),
                            reason=outcome.reason, details=outcome.details, **base)


def asked(window: list[tuple[Metric, Sequence[Sample]]]) -> list[tuple[Judgement, BaseModel]]:
    """What measuring the rows of ``window`` (each metric with its samples) will ask of the judge,
    row by row as ``rag_eval.metrics.core.scoring`` judges them: :meth:`Metric.asks` of each row normalised as
    :meth:`Metric.ascore` gives it to ``measure`` (a row lacking a required field asks nothing),
    for ``Judge.prefetch``."""
    out: list[tuple[Judgement, BaseModel]] = []
    clean: dict[int, Sample] = {}  # each row normalised once for all its metrics
    for i in range(max((len(samples) for _, samples in window), default=0)):
        for metric, samples in window:
            sample = samples[i] if i < len(samples) else None
            if sample is not None and not any(sample.missing(name) for name in metric.required_fields):
                if id(sample) not in clean:
                    clean[id(sample)] = normalised(sample)[0]
                out += metric.asks(clean[id(sample)])
    return out
