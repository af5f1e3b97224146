"""A command's run settings as one frozen, typed value: :class:`RunSettings`.

Built once per command, from its arguments (:meth:`RunSettings.from_args`, the one place argv
meets it) or from a Dagster run config (:meth:`RunSettings.from_run_config`), and passed down to
what runs, estimates or sweeps; :meth:`RunSettings.to_run_config` is the only place the run-config
dict Dagster takes is made.
"""
from __future__ import annotations

import argparse
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rag_eval.assets.resources import JudgeResource
    from rag_eval.metrics.core.registry import Registry
    from rag_eval.metrics.sources.targets.config import SweepConfig


@dataclass(frozen=True)
class Executor:
    """Where the metric steps score: ``kind`` ``local`` (this process) or ``spark`` (Spark tasks at
    ``master``, ``parallelism`` tasks per metric); the defaults are the parser's."""

    kind: str
    master: str
    parallelism: int


@dataclass(frozen=True)
class Paths:
    """The folders a run reads and writes: ``datasets`` (the dataset versions; ``None`` for a command
    that reads none) and ``out`` (reports, tables, ``rag_eval.duckdb``)."""

    datasets: str | None
    out: str


def _frozen(options: Mapping[str, Mapping[str, Any]]) -> Mapping[str, Mapping[str, Any]]:
    return MappingProxyType({name: MappingProxyType(dict(values)) for name, values in options.items()})


def _judge() -> JudgeResource:
    from rag_eval.assets.resources import JudgeResource

    return JudgeResource()


@dataclass(frozen=True, kw_only=True)
class RunSettings:
    """What a run is asked to do, checked and converted: nothing in it is read again from argv.

    ``paths``: the folders; ``metrics``: the selected metric names (resolved against the command's
    registry, in its order); ``metric_options``: per metric, its options and threshold (converted to their types; a
    threshold of a [0, 1] metric stored on [0, 1] whatever the ``scale``); ``scale`` and
    ``dingo_layout``: the summary's presentation (``rag_eval.assets.summary.SummaryConfig``);
    ``summary_scope``: its scope (``version`` for a sweep; ``None``: the run's tag, else ``run``);
    ``max_rejected_share``: the ingestion's limit (``None``: the version's own); ``sample``: the
    traffic sample's budget and seed (``None`` for every command but ``traffic``); ``judge``: the
    ``judge`` resource of the judge options (default the offline judge's, or the environment's
    LLM judge); ``executor`` (``None`` where nothing is scored by the command's own executor);
    ``strong``: a judge cascade's strong sample (``rag_eval.assets.cascade.StrongSampleConfig``'s
    fields: ``share`` or ``rows``, ``sampling``, ``seed``; ``None``: no cascade), whose rows the
    ``strong_judge`` resource scores while ``judge``, the cheap judge, scores every row.
    """

    paths: Paths
    metrics: tuple[str, ...] = ()
    metric_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    scale: int = 1
    dingo_layout: bool = False
    summary_scope: str | None = None
    max_rejected_share: float | None = None
    sample: Mapping[str, Any] | None = None
    judge: JudgeResource = field(default_factory=_judge)
    executor: Executor | None = None
    strong: Mapping[str, Any] | None = None
    strong_judge: JudgeResource | None = None

    def __post_init__(self) -> None:  # read-only all the way down: the settings cannot be changed in passing
        object.__setattr__(self, "metrics", tuple(self.metrics))
        object.__setattr__(self, "metric_options", _frozen(self.metric_options))
        for name in ("sample", "strong"):
            if (value := getattr(self, name)) is not None:
                object.__setattr__(self, name, MappingProxyType(dict(value)))

    def judges(self) -> list[JudgeResource]:
        """The run's judge resources: its judge and, in a judge cascade, its strong judge."""
        return [self.judge, *([self.strong_judge] if self.strong_judge is not None else [])]

    @classmethod
    def from_args(cls, args: argparse.Namespace, target: SweepConfig | None = None) -> RunSettings:
        """The settings of ``rag-eval run``, ``backfill``, ``sweep`` or ``traffic`` from its parsed
        arguments (``args.registry``: the command's metric registry; the judge is
        the :func:`judge_resource`'s, shared with the command's checks, except
        for ``traffic``, which has no judge options: the default judge).
        ``target``: a sweep's target file, whose ``metrics`` apply without ``--metrics`` and whose
        ``metric_options`` (checked as it was read) are the sweep's; its summaries describe the
        whole version (``summary_scope="version"``).

        Raises
        ------
        SettingsError
            One line naming the option: an unknown metric or option (``--metric-option``,
            ``--threshold``), a value of the wrong type or out of range (a threshold out of range
            says the ``--scale`` it was read on), ``--max-rejected-share`` outside [0, 1], a per-metric
            or ``--model``-like option without an LLM judge, a judge option outside its domain.
        UnknownNameError
            For an unknown metric or family name.
        MissingExtra
            ``--executor spark`` without pyspark (naming the extra).
        """
        paths = Paths(getattr(args, "datasets", None), args.out)
        if args.command == "traffic":
            sample = {k: v for k in ("budget_rows", "budget_cost", "seed", "strong_share")
                      if (v := getattr(args, k)) is not None}
            if not 0 <= sample.get("strong_share", 0) <= 1:
                from rag_eval.metrics.errors import SettingsError

                raise SettingsError(f"--strong-share {sample['strong_share']:g}: give a share from 0 (no cascade) to 1")
            return cls(sample=sample, paths=paths)  # its --seed is the sample's: the judge is the default one
        executor = Executor(args.executor, args.spark_master, args.parallelism)
        if target is not None:
            return cls(metrics=_sweep_metrics(args.metrics, target, args.registry),
                       metric_options=target.metric_options, summary_scope="version",
                       max_rejected_share=args.max_rejected_share, judge=judge_resource(args), executor=executor,
                       paths=paths)
        from rag_eval.metrics.core.registry import resolve_names

        metrics = resolve_names(args.metrics, args.registry)  # unknown names fail here, before anything else
        if args.executor == "spark":
            from rag_eval.metrics.core.extras import require

            require("pyspark", "spark", "Spark execution")  # without it: the extra to install, before anything runs
        share = args.max_rejected_share
        if share is not None and not 0 <= share <= 1:
            from rag_eval.metrics.errors import SettingsError

            raise SettingsError(f"--max-rejected-share {share:g}: give a share between 0 and 1")
        options = _metric_options(args, args.registry)
        strong, judge, strong_judge = cascade_judges(args)
        return cls(metrics=tuple(metrics), metric_options=options, scale=args.scale, dingo_layout=args.dingo_summary,
                   max_rejected_share=share, judge=judge, executor=executor, paths=paths, strong=strong,
                   strong_judge=strong_judge)

    @classmethod
    def from_run_config(cls, config: Mapping[str, Any], **others: Any) -> RunSettings:
        """The settings a Dagster run config carries (what :meth:`to_run_config` writes: the
        summary's ``scale``, ``dingo_layout`` and ``scope``, the ingestion's ``max_rejected_share``,
        each metric's options, the traffic sample), with ``others`` for the fields it does not
        carry (``metrics``, ``judge``, ``executor``, ``paths``); an op it does not name keeps its
        config class's defaults (``SummaryConfig``, ``IngestConfig``). ``from_run_config(s.to_run_config(),
        metrics=s.metrics, judge=s.judge, executor=s.executor, paths=s.paths) == s``. The metric
        options are checked by the metric step as it starts, as Dagster's are.

        Raises
        ------
        SettingsError
            One line naming each field of the config of the summary, the ingestion or the traffic
            sample that its config class refuses (``ops.eval_summary.config.scale 'x': ...``).
        TypeError
            For a field in ``others`` that ``RunSettings`` does not have.
        """
        from pydantic import ValidationError

        from rag_eval.assets.run_config import STRONG_OP, StrongSampleConfig
        from rag_eval.assets.evaluation import METRICS_OP
        from rag_eval.assets.ingestion import IngestConfig
        from rag_eval.assets.summary import SummaryConfig
        from rag_eval.assets.traffic import TrafficSampleConfig
        from rag_eval.metrics.errors import SettingsError

        ops = config.get("ops") or {}

        def of(op: str, kind: Any = None) -> Any:
            given = (ops.get(op) or {}).get("config") or {}
            try:
                return given if kind is None else kind(**given)
            except ValidationError as exc:
                raise SettingsError("; ".join(f"ops.{op}.config.{'.'.join(map(str, e['loc']))} {e['input']!r}: "
                                              f"{e['msg']}" for e in exc.errors())) from None

        summary = of("eval_summary", SummaryConfig)
        sample, strong = (of(op) if op in ops else None for op in ("traffic_sample", STRONG_OP))
        for op, kind in (("traffic_sample", TrafficSampleConfig), (STRONG_OP, StrongSampleConfig)):
            if op in ops:
                of(op, kind)  # checked; kept as given (unset: the config class's defaults)
        return cls(scale=summary.scale, dingo_layout=summary.dingo_layout, summary_scope=summary.scope,
                   max_rejected_share=of("ingest_dataset", IngestConfig).max_rejected_share,
                   metric_options=of(METRICS_OP), sample=sample, strong=strong, **others)

    def to_run_config(self, selection: Collection[str] | None = None) -> dict[str, Any]:
        """The Dagster run config of these settings, the only place it is made: ``traffic_job``'s
        (the sample's config) for ``traffic``, else ``evaluation_job``'s (the summary's scale,
        layout and scope; the ingestion's rejection share; each metric's options under the metric
        assets' op, when any), the console logger quiet (the run's log stays in the instance, the
        UI shows it). ``selection``: the assets a run materializes; the config of an op none of
        whose assets it selects is left out (Dagster refuses it)."""
        from rag_eval.assets.run_config import STRONG_OP
        from rag_eval.assets.evaluation import METRICS_OP
        from rag_eval.assets.ingestion import FIELD_ASSETS

        if self.sample is not None:
            ops: dict[str, Any] = {"traffic_sample": {"config": dict(self.sample)}}
        else:
            summary: dict[str, Any] = {"scale": self.scale, "dingo_layout": self.dingo_layout}
            if self.summary_scope is not None:
                summary["scope"] = self.summary_scope
            ops = {"eval_summary": {"config": summary},
                   "ingest_dataset": {"config": {"max_rejected_share": self.max_rejected_share}}}
            if self.metric_options:
                ops[METRICS_OP] = {"config": {name: dict(values) for name, values in self.metric_options.items()}}
            if self.strong is not None:
                ops[STRONG_OP] = {"config": dict(self.strong)}
            if selection is not None:
                assets = {"eval_summary": {"eval_summary"}, METRICS_OP: set(self.metrics), STRONG_OP: {STRONG_OP},
                          "ingest_dataset": {*FIELD_ASSETS.values(), "rejected_samples"}}
                ops = {op: config for op, config in ops.items() if assets[op] & set(selection)}
        return {"ops": ops, "loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}


def judge_resource(args: argparse.Namespace):
    """The ``judge`` resource of the judge options given (``--base-url``, ``--model``...;
    any field of ``JudgeResource`` the parser declares), built once per command: the command's
    checks and its runs share its judges (``JudgeResource.built_judges``).

    Raises
    ------
    ValueError
        Naming the option, for a value outside its domain (``--strictness 0``, ``--temperature -1``).
    """
    if getattr(args, "judge_resource", None) is None:
        args.judge_resource = _resource(**_judge_options(args))
    return args.judge_resource


def _judge_options(args: argparse.Namespace) -> dict[str, Any]:
    """The fields of ``JudgeResource`` the command's arguments give."""
    from rag_eval.assets.resources import JudgeResource

    return {k: getattr(args, k) for k in JudgeResource.model_fields if getattr(args, k, None) is not None}


def _resource(**fields: Any) -> JudgeResource:
    from pydantic import ValidationError

    from rag_eval.assets.resources import JudgeResource
    from rag_eval.metrics.errors import SettingsError

    try:
        return JudgeResource(**fields)
    except ValidationError as exc:
        raise SettingsError("; ".join(f"--{'.'.join(map(str, e['loc'])).replace('_', '-')} {e['input']!r}: {e['msg']}"
                                   for e in exc.errors())) from None


#: The options of a judge cascade other than ``--strong-budget``, which they need.
CASCADE_OPTIONS = ("strong_sampling", "strong_seed", "cheap_model")


def cascade_judges(args: argparse.Namespace) -> tuple[dict[str, Any] | None, JudgeResource, JudgeResource | None]:
    """``(strong, judge, strong_judge)`` of a command's arguments: without ``--strong-budget``,
    ``(None, judge_resource(args), None)``; with it, the strong sample's settings (:func:`strong_budget`,
    ``--strong-sampling``, ``--strong-seed``), the cheap judge (the offline judge, or ``--cheap-model``
    on the LLM judge's endpoint) and the strong judge: the LLM judge the judge options describe (it
    becomes the command's :func:`judge_resource`, whose endpoint is checked first). A ``--verifier``
    goes to the judge of its kind: verifier weights to the offline judge, examples to the LLM judge.

    Raises
    ------
    SettingsError
        A cascade option without ``--strong-budget``; ``--strong-budget`` without an LLM judge
        configured; a budget :func:`strong_budget` refuses.
    """
    from rag_eval.metrics.errors import SettingsError

    if getattr(args, "strong_budget", None) is None:
        if given := [o for o in CASCADE_OPTIONS if getattr(args, o, None) is not None]:
            raise SettingsError(f"--{given[0].replace('_', '-')} applies to a judge cascade: give --strong-budget too")
        return None, judge_resource(args), None
    strong = {**strong_budget(args.strong_budget), "sampling": args.strong_sampling or "active",
              "seed": args.strong_seed or 0}
    fields = {k: v for k, v in _judge_options(args).items() if k != "verifier"}
    weights = args.verifier is not None and _holds_weights(args.verifier)
    if weights:  # the offline judge's: the LLM judge is the options' without them
        args.judge_resource = _resource(**fields)
    strong_judge = judge_resource(args)
    if strong_judge.code_version().startswith("offline"):
        raise SettingsError("--strong-budget: the strong judge is an LLM judge: set OPENAI_BASE_URL or OPENAI_API_KEY, "
                            "or pass --base-url (the cheap judge is the offline one, or --cheap-model)")
    cheap = _resource(**{**fields, "model": args.cheap_model}) if args.cheap_model else \
        _resource(offline=True, **({"verifier": args.verifier} if weights else {}))
    if cheap.code_version() == strong_judge.code_version():
        raise SettingsError(f"--cheap-model {args.cheap_model}: the strong judge's model too; give a smaller one")
    return strong, cheap, strong_judge


def _holds_weights(path: str) -> bool:
    """Whether a judge variant file holds the offline verifier's weights (else an LLM judge's examples)."""
    from rag_eval.metrics.judges.examples import Examples, read_variant

    return not isinstance(read_variant(path), Examples)


def strong_budget(text: str) -> dict[str, Any]:
    """``--strong-budget``'s value as the strong sample takes it: ``0.1`` or ``10%`` → ``{"share": 0.1}``
    (of each metric's rows), ``200`` → ``{"rows": 200}``, ``5usd`` (a sum with its currency's
    three-letter code, priced by ``--price``) → ``{"cost": 5.0, "currency": "usd"}``, which
    :func:`rag_eval.orchestration.dry_run.priced_budget` turns into rows before the run.

    Raises
    ------
    SettingsError
        For anything else: a share above 1 or not above 0, no row, a negative or unreadable value.
    """
    import re

    from rag_eval.metrics.errors import SettingsError

    text = text.strip()
    if match := re.fullmatch(r"(\d+(?:\.\d*)?|\.\d+)\s*%", text):
        share = float(match[1]) / 100
    elif re.fullmatch(r"\d+", text):
        if int(text) >= 1:
            return {"rows": int(text)}
        share = -1.0
    elif re.fullmatch(r"\d*\.\d+|\d+\.", text):
        share = float(text)
    elif match := re.fullmatch(r"(\d+(?:\.\d*)?|\.\d+)\s*([A-Za-z]{3})", text):
        if float(match[1]) > 0:
            return {"cost": float(match[1]), "currency": match[2].lower()}
        share = -1.0
    else:
        share = -1.0
    if not 0 < share <= 1:
        raise SettingsError(f"--strong-budget {text!r}: give a share of the rows (0.1 or 10%, above 0 and at most 1), "
                            "a whole number of rows (200), or a sum with its currency (5usd, priced with --price)")
    return {"share": share}


def _sweep_metrics(given: str | None, target: SweepConfig, registry: Registry) -> tuple[str, ...]:
    """A sweep's metrics, ranked in this order: ``--metrics``, else the target file's, else core."""
    from rag_eval.metrics.core.registry import resolve_names

    chosen = given.split(",") if given else target.metrics or ["core"]
    return tuple(dict.fromkeys(m for item in chosen for m in resolve_names([item.strip()], registry)))


def _metric_options(args: argparse.Namespace, registry: Registry) -> dict[str, dict[str, Any]]:
    """Each metric's options (``--metric-option``) and threshold (``--threshold``, given on the table's
    scale: stored on [0, 1] for a [0, 1] metric), converted to their types and checked by building
    the metric (its ``Options`` model and its threshold range); per-metric judging options need the
    LLM judge.

    Raises
    ------
    SettingsError
        One line naming the option, as :meth:`RunSettings.from_args` says.
    """
    from rag_eval.metrics.core.registry import option_types, option_value
    from rag_eval.metrics.errors import SettingsError
    from rag_eval.metrics.judges.config import PER_METRIC, LLMConfig
    from rag_eval.metrics.reports.aggregate import is_ratio

    items = [f"{t.partition('=')[0]}.threshold={t.partition('=')[2]}" for t in args.threshold or []]
    per_metric: dict[str, dict[str, Any]] = {}
    for item in items + (args.metric_option or []):
        target, _, value = item.partition("=")
        metric, _, option = target.partition(".")
        types = option_types(metric, registry) if metric in registry else {}
        if option not in types or not value:
            known = f"OPTION one of {', '.join(types)}" if types else "METRIC a metric name (see --metrics)"
            raise SettingsError(f"bad metric option {item!r}: use METRIC.OPTION=VALUE with {known}")
        try:
            converted = option_value(metric, option, value, registry)
        except ValueError as exc:
            raise SettingsError(f"bad metric option {item!r}: {exc}") from None
        if option == "threshold":  # a [0, 1] metric's threshold is given on the table's scale (--scale)
            converted /= args.scale if is_ratio(metric, registry) else 1
        per_metric.setdefault(metric, {})[option] = converted
    for metric, config in per_metric.items():
        try:  # the metric checks its own options and its threshold's range (per instance: label_max=10...)
            registry[metric](**{k: v for k, v in config.items() if k not in PER_METRIC})
        except ValueError as exc:
            scale = f" (at --scale {args.scale}, thresholds of [0, 1] metrics are given on the 0-{args.scale} " \
                    "scale)" if is_ratio(metric, registry) and args.scale != 1 else ""
            raise SettingsError(f"bad metric option for {metric}: {exc}{scale}") from None
    judging = [o for o in PER_METRIC if getattr(args, o, None) is not None] + \
        [f"{m}.{o}" for m, options in per_metric.items() for o in options if o in PER_METRIC]
    if judging and not LLMConfig.from_env(base_url=args.base_url).configured:
        raise SettingsError(f"{', '.join(judging)} apply to the LLM judge only: set OPENAI_BASE_URL or OPENAI_API_KEY, "
                            "or pass --base-url")
    return per_metric
