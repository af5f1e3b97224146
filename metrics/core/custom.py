"""Custom metrics from a YAML file, no Python: ``aspect_critic``, ``rubric``, ``discrete``, ``numeric``.

RAGAS ships ``AspectCritic``, rubric scores and ``@discrete_metric`` / ``@numeric_metric``
as Python; Azure AI Evaluation prompt-based evaluators; dingo custom prompts. Here a
definition in a file is enough::

    metrics:
      - name: helpfulness
        kind: aspect_critic
        fields: [user_input, response]
        prompt: Is the response helpful to the user, addressing what they asked?
      - name: tone
        kind: rubric
        fields: [response]
        prompt: 回答的语气是否礼貌、专业？
        headings: {response: 回答}
        levels: {1: 粗鲁, 2: 生硬, 3: 中性, 4: 礼貌, 5: 礼貌且专业}
        threshold: 4
      - name: answer_kind
        kind: discrete
        fields: [user_input, response]
        prompt: What kind of answer is this?
        labels: [direct, partial, refusal]
        pass_labels: [direct]
      - name: verbosity
        kind: numeric
        fields: [response]
        prompt: How many words of the response could be cut without losing information, as a share?
        range: [0, 1]
        threshold: 0.3
        direction: lower

Each definition becomes a :class:`CustomMetric` subclass (registered by
``rag_eval.metrics.core.registry.build_registry`` from the file an entry point was given),
judged by one LLM request per row (``rag_eval.metrics.judgements.custom``), cached, counted and
budgeted like the built-in metrics. Values: ``aspect_critic`` the verdict 0/1 (threshold
0.5: verdict 1 passes, or 0 with ``direction: lower``); ``rubric`` the level 1-5 (default
threshold 3); ``discrete`` 1 for a label in ``pass_labels`` else 0 (the label is in the
details); ``numeric`` the number, on its ``range``, ``threshold`` required.

Which file an entry point reads (the one named, else the project's setting, else
``./custom_metrics.yaml``): :func:`custom_metrics_file`.
"""
from __future__ import annotations

import hashlib
import math
import os
from pathlib import Path
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, TypeAdapter, ValidationError, model_validator

from rag_eval.metrics.core.bounded import MAX_QUOTE, clip, load_yaml, quote, read_bounded
from rag_eval.metrics.core.base import NAME_PATTERN, Family, Measured, Metric, NotApplicable, name_problem
from rag_eval.metrics.judgements.custom import ANSWER, CustomJudgement, CustomTexts, NeedsEndpoint
from rag_eval.metrics.judges.base import Judge
from rag_eval.metrics.core.results import Direction
from rag_eval.metrics.core.samples import Sample
from rag_eval.metrics.core.settings import tool_section
from rag_eval.metrics.errors import NotFoundError, SettingsError, StorageError

FieldName = Literal["user_input", "response", "retrieved_contexts", "reference"]
Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]


class Definition(BaseModel):
    """What every kind declares: its name, the fields it reads, its wording and headings."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Annotated[str, StringConstraints(pattern=NAME_PATTERN)]
    fields: Annotated[list[FieldName], Field(min_length=1)]
    #: The definition, question or instruction put to the judge, in any language.
    prompt: Text
    #: One line for the asset's description (default: the prompt's first line).
    description: Text | None = None
    #: Headings of the fields in the prompt (default Question, Response, Contexts, Reference).
    headings: dict[FieldName, Text] = {}

    @model_validator(mode="after")
    def _distinct_fields(self) -> Definition:
        if len(set(self.fields)) != len(self.fields):
            raise ValueError(f"fields: each field once, got {quote(self.fields)}")
        return self


class Scored(Definition):
    """A kind with its own pass/fail threshold and direction."""

    direction: Literal["higher", "lower"] = "higher"
    threshold: float | None = None


class AspectCritic(Scored):
    """A definition → a binary verdict with its reason (RAGAS ``AspectCritic``)."""

    kind: Literal["aspect_critic"]


class Rubric(Scored):
    """Levels 1-5, each with its description (RAGAS rubric scores)."""

    kind: Literal["rubric"]
    levels: dict[int, Text]

    @model_validator(mode="after")
    def _five_levels(self) -> Rubric:
        if sorted(self.levels) != [1, 2, 3, 4, 5]:
            raise ValueError(f"levels: describe each of 1, 2, 3, 4, 5, got {quote(sorted(self.levels))}")
        return self


class Discrete(Definition):
    """A set of allowed labels, some of which pass (RAGAS ``@discrete_metric``)."""

    kind: Literal["discrete"]
    labels: Annotated[list[Text], Field(min_length=2)]
    pass_labels: Annotated[list[Text], Field(min_length=1)]

    @model_validator(mode="after")
    def _known_pass_labels(self) -> Discrete:
        if len(set(self.labels)) != len(self.labels):
            raise ValueError(f"labels: each label once, got {quote(self.labels)}")
        unknown = [label for label in self.pass_labels if label not in self.labels]
        if unknown:
            raise ValueError(f"pass_labels: {quote(unknown)} not among the labels {quote(self.labels)}")
        return self


class Numeric(Scored):
    """A number on a range (RAGAS ``@numeric_metric``); its threshold is required."""

    kind: Literal["numeric"]
    range: tuple[float, float]
    threshold: float

    @model_validator(mode="after")
    def _ordered(self) -> Numeric:
        low, high = self.range
        if not (math.isfinite(low) and math.isfinite(high)):
            raise ValueError(f"range: both ends must be finite numbers, got {quote(list(self.range))}")
        if not low < high:
            raise ValueError(f"range: the low end must be below the high end, got {quote(list(self.range))}")
        return self


AnyDefinition = Annotated[AspectCritic | Rubric | Discrete | Numeric, Field(discriminator="kind")]
_ADAPTER = TypeAdapter(AnyDefinition)


class CustomMetric(Metric):
    """A metric defined in a custom metrics file (:func:`load_custom_metrics` makes one
    subclass per definition; see the module docstring for its value, range and direction).

    With the offline judge it is ``not_applicable``, its reason saying it needs an LLM
    endpoint; a reply outside the kind's schema is re-asked once, then ``judge_error``.
    """

    family = Family.CUSTOM
    definition: ClassVar[AspectCritic | Rubric | Discrete | Numeric]

    async def measure(self, sample: Sample, judge: Judge) -> Measured | NotApplicable:
        """One judgement of the fields the definition reads."""
        [judgement] = self.judgements
        shown: dict[str, Any] = {name: getattr(sample, name) for name in self.required_fields}
        if "user_input" in shown:  # with the earlier turns of a conversation (``Sample.question``)
            shown["user_input"] = sample.question()
        texts = CustomTexts(**shown)
        try:
            verdict = await judge.ask(judgement, texts)
        except NeedsEndpoint as exc:
            return NotApplicable(str(exc))
        answer, definition = verdict.answer, self.definition
        value = float(answer in definition.pass_labels) if isinstance(definition, Discrete) else float(answer)
        return Measured(value, verdict.reason, {ANSWER[definition.kind]: answer})


def metric_class(definition: AspectCritic | Rubric | Discrete | Numeric) -> type[CustomMetric]:
    """The :class:`CustomMetric` subclass of one definition; its ``version`` is a digest of
    the whole definition (threshold and direction too), its judgement's of what is asked."""
    kind = definition.kind
    judgement = CustomJudgement(definition.name, kind, tuple(definition.fields), definition.prompt,
                                dict(definition.headings), getattr(definition, "levels", None),
                                tuple(getattr(definition, "labels", ())), getattr(definition, "range", None))
    value_range = definition.range if isinstance(definition, Numeric) else \
        (1.0, 5.0) if kind == "rubric" else (0.0, 1.0)
    threshold = getattr(definition, "threshold", None)
    digest = hashlib.sha256(definition.model_dump_json().encode()).hexdigest()[:12]
    direction = Direction.LOWER if getattr(definition, "direction", "higher") == "lower" else Direction.HIGHER
    threshold = float(threshold) if threshold is not None else 3.0 if kind == "rubric" else 0.5
    low, high = map(float, value_range)
    doc = (f"{definition.description or definition.prompt.splitlines()[0]} (custom {kind} metric on [{low:g}, {high:g}], "
           f"{direction.value.replace('_', ' ')}, threshold {threshold:g}; reads {', '.join(definition.fields)})")
    return type(definition.name, (CustomMetric,), {
        "__doc__": doc, "__module__": __name__, "name": definition.name, "required_fields": tuple(definition.fields),
        "value_range": (low, high), "direction": direction, "default_threshold": threshold, "version": digest,
        "judgements": (judgement,), "definition": definition})


def _problem(error: Mapping[str, Any]) -> str:
    """One pydantic error as ``field 'levels': message (got value)``; a check of the whole
    definition names its field first (``levels: ...``)."""
    loc = [str(part) for part in error["loc"] if part not in ("aspect_critic", "rubric", "discrete", "numeric")]
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] == "union_tag_invalid":
        loc = ["kind"]
    elif not loc:
        field, _, message = message.partition(": ")
        return f"field '{field}': {message}"
    return f"field '{'.'.join(loc)}': {message}" + ("" if error["type"] == "missing" else f" (got {quote(error['input'])})")


def load_custom_metrics(path: str | Path) -> list[type[CustomMetric]]:
    """The metric classes defined in a YAML file (``metrics:`` a list of definitions, module
    docstring), in file order.

    Raises
    ------
    ValueError
        Naming the file, the metric (its name and position, from 1) and the field: a file that
        is not YAML, not a regular file or too large (``rag_eval.metrics.core.bounded.read_bounded``), a definition of an unknown kind, a missing or unknown field, a bad value
        (five rubric levels, pass labels among the labels, an ordered finite range, a threshold
        on the range), a name used twice or taken by an asset or an output column
        (``rag_eval.metrics.core.base.name_problem``).
    NotFoundError, StorageError
        For a file that is not there or cannot be read.
    """
    path = Path(path)
    try:
        document = load_yaml(read_bounded(path), str(path))
    except FileNotFoundError:
        raise NotFoundError(f"custom metrics file {path}: not found") from None
    except OSError as exc:
        raise StorageError(path, f"the custom metrics file cannot be read ({exc.strerror or exc})") from None
    except yaml.YAMLError as exc:
        raise SettingsError(f"{path}: not valid YAML: {clip(str(exc), 2 * MAX_QUOTE)}") from None
    if document is None:
        return []
    if not isinstance(document, dict) or set(document) != {"metrics"} or not isinstance(document["metrics"], list):
        raise SettingsError(f"{path}: expected one key 'metrics' holding a list of metric definitions")
    made: list[type[CustomMetric]] = []
    for number, raw in enumerate(document["metrics"], start=1):
        label = f"{path}: metric {quote(raw.get('name'))} (entry {number})" if isinstance(raw, dict) \
            else f"{path}: entry {number}"
        if not isinstance(raw, dict):
            raise SettingsError(f"{label}: expected a metric definition (name, kind, fields, prompt...), got {quote(raw)}")
        if "kind" not in raw:
            raise SettingsError(f"{label}: field 'kind': missing (aspect_critic, rubric, discrete or numeric)")
        try:
            definition = _ADAPTER.validate_python(raw)
        except ValidationError as exc:
            problems = "; ".join(_problem(e) for e in exc.errors()[:5]) + \
                (f"; {exc.error_count() - 5} more" if exc.error_count() > 5 else "")
            if any(e["type"] == "string_type" and isinstance(e["input"], bool) for e in exc.errors()):
                problems += ("; YAML reads unquoted yes, no, on, off, true and false as booleans: quote them "
                             "(labels: ['yes', 'no'])")
            raise SettingsError(f"{label}: {problems}") from None
        taken = name_problem(definition.name)
        if taken:
            raise SettingsError(f"{label}: field 'name': {taken}")
        if any(cls.name == definition.name for cls in made):
            raise SettingsError(f"{label}: field 'name': {quote(definition.name)} is defined twice")
        try:
            cls = metric_class(definition)
            cls()  # the threshold on the range
        except ValueError as exc:
            raise SettingsError(f"{label}: field 'threshold': {exc}") from None
        made.append(cls)
    return made


__all__ = ["CustomMetric", "load_custom_metrics"]


#: The setting naming the custom metrics file: ``custom_metrics`` of ``[tool.rag_eval.metrics]`` in ``./pyproject.toml``.
CUSTOM_METRICS_SETTING = ("metrics", "custom_metrics")
#: The custom metrics file read from the working directory when none is named.
CUSTOM_METRICS_FILE = "custom_metrics.yaml"
#: The environment variable that named the file before the setting did: refused when set, not read.
RETIRED_ENV = "RAG_EVAL_CUSTOM_METRICS"


def custom_metrics_file(named: str | os.PathLike[str] | None = None) -> Path | None:
    """The custom metrics file an entry point reads: ``named`` (the CLI's ``--custom-metrics``), else
    the one ``[tool.rag_eval.metrics] custom_metrics`` of ``./pyproject.toml`` names (relative to the
    working directory, where the code location and ``rag-eval`` run), else ``./custom_metrics.yaml`` when
    there is one, else ``None``. Read once by each entry point (the code location as it loads); a file
    named must exist (:func:`build_registry` says so when it does not).

    Raises
    ------
    SettingsError
        For a ``./pyproject.toml`` ``rag_eval.metrics.core.settings.tool_section`` refuses, a
        ``custom_metrics`` that is not a file name, or, when no file is ``named``,
        ``$RAG_EVAL_CUSTOM_METRICS`` set (no longer read: the line says where the file is named now).
    """
    if named:
        return Path(named).resolve()
    if os.environ.get(RETIRED_ENV):
        raise SettingsError(f"${RETIRED_ENV} is no longer read: name the custom metrics file in ./pyproject.toml "
                            "([tool.rag_eval.metrics] custom_metrics = \"FILE\") or with --custom-metrics FILE, "
                            f"and unset ${RETIRED_ENV}")
    section, key = CUSTOM_METRICS_SETTING
    configured = tool_section(None, section, {key}).get(key)
    if configured is not None:
        if not isinstance(configured, str) or not configured.strip():
            raise SettingsError(f"{Path('pyproject.toml').resolve()}: [tool.rag_eval.{section}] {key} must name a "
                                f"file, got {configured!r}")
        return Path(configured).resolve()
    default = Path(CUSTOM_METRICS_FILE)
    return default.resolve() if default.is_file() else None
