"""The metric assets: one subsettable multi-asset with one output per registered metric,
the per-row results of the version's samples (each written to a file chunk by chunk as it
is judged, ``rag_eval.assets.stored_results``, then stored in its table). The step reads the field
tables it depends on itself, chunk by chunk. The selected metrics of a run are judged
together, every request of every metric under the judge's one concurrency limit (as
``rag_eval.metrics.evaluate.evaluate`` does); each output keeps its own key, group, code version
and lineage (it depends on exactly the field assets it reads).

The multi-asset and its run config are built from the registry the caller passes
(:func:`metric_assets`; ``rag_eval.metrics.core.registry.build_registry``: ``rag_eval.orchestration.definitions``
and the CLI build theirs once)."""

import functools
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from types import UnionType
from typing import Any, Literal, Union, get_args, get_origin

import dagster as dg
import duckdb
import pandas as pd
from pydantic import create_model

from rag_eval.assets.ingestion import FIELD_ASSETS, only_fields, samples_from_fields
from rag_eval.assets.partitions import dataset_versions
from rag_eval.assets.resources import ExecutionResource, JudgeResource
from rag_eval.assets.run_config import refuse_cascade, run_assets
from rag_eval.assets.stored_results import StoredTable
from rag_eval.metrics.reports.aggregate import USAGE_COLUMNS
from rag_eval.metrics.core.base import Family
from rag_eval.metrics.judges.config import PER_METRIC
from rag_eval.metrics.judges.endpoint import EndpointError
from rag_eval.metrics.core.registry import Registry, build_metrics, given, option_types
from rag_eval.metrics.core.results import Status
from rag_eval.metrics.core.scoring import CHUNK_ROWS, Task
from rag_eval.metrics.core.samples import Sample


def _plain(annotation: Any) -> Any:
    """The Dagster config type of an option's annotation: ``Literal["a", "b"]`` is ``str``,
    ``int | None`` is ``int``."""
    if get_origin(annotation) is Literal:
        return type(get_args(annotation)[0])
    inner = [a for a in get_args(annotation) if a is not type(None)]
    return _plain(inner[0]) if inner and get_origin(annotation) in (Union, UnionType) else annotation


def metrics_config(registry: Registry) -> tuple[type[dg.Config], tuple[str, ...]]:
    """The run configuration of the metric assets, one ``MetricConfig`` per metric of ``registry``
    (e.g. ``{"ops": {"score_metrics": {"config": {"answer_relevancy": {"strictness": 5}}}}}``):
    its pass/fail threshold, its judging options (model, temperature, strictness with the LLM
    judge) and its ``Options`` (``mode``, ``k``...); and the names of those ``Options``.

    Every option has its type (``rag_eval.metrics.core.registry.option_types``: the threshold, the judge
    settings a metric may set for itself and its ``Options`` fields), checked by the metric
    itself when it is built; domains kept: strictness 0 is refused as the step starts."""
    options = {option: kind for name in registry for option, kind in option_types(name, registry).items()}
    # Any: mypy matches a ** dict against every parameter of create_model, not the fields it holds
    fields: dict[str, Any] = {name: (_plain(kind) | None, None) for name, kind in options.items()}
    metric_config = create_model("MetricConfig", __base__=dg.Config, **fields)
    config = type("MetricsConfig", (dg.Config,), {
        "__annotations__": dict.fromkeys(registry, metric_config), **{name: metric_config() for name in registry},
        "__doc__": "One MetricConfig per metric (threshold, judging options, metric options)."})
    return config, tuple(name for name in options if name not in ("threshold", *PER_METRIC))


#: The op (node) of the metric assets, the key of their run configuration.
METRICS_OP = "score_metrics"
#: Each family's asset group (``rag_eval.metrics.core.base.Family``, declared there once): ``<family>_metrics``,
#: ``retrieval_metrics`` for document_retrieval.
GROUPS = {family.value: f"{family.value.removeprefix('document_')}_metrics" for family in Family}
_FIELD_OF = {asset: field for field, asset in FIELD_ASSETS.items()}


def metric_metadata(frame: pd.DataFrame) -> dict[str, dg.MetadataValue]:
    """Mean, pass rate and coverage of a metric's results, as numeric metadata the UI plots."""
    ok = frame[frame["status"] == Status.OK.value]
    metadata: dict[str, dg.MetadataValue] = {f"n_{s.value}": dg.MetadataValue.int(int((frame["status"] == s.value).sum()))
                                             for s in Status}
    metadata["coverage"] = dg.MetadataValue.float(len(ok) / len(frame) if len(frame) else 0.0)
    if len(ok):
        metadata["mean"] = dg.MetadataValue.float(float(ok["value"].mean()))
        metadata["pass_rate"] = dg.MetadataValue.float(float(ok["passed"].astype(bool).mean()))
    return metadata


def metric_code_version(name: str, judge: str | None = None, registry: Registry | None = None) -> str:
    """Changes with the metric's formula, its judgements' versions or the judge that decides
    them (``Metric.code_version`` of ``name`` in ``registry``, default the built-in metrics; ``judge``:
    the judge the definitions' resource configures, ``JudgeResource().code_version()``, worked out here
    when not given)."""
    return given(registry)[name].code_version(judge or JudgeResource().code_version())


def _metric_out(name: str, judge: str, registry: Registry) -> dg.AssetOut:
    cls = registry[name]
    return dg.AssetOut(group_name=GROUPS[cls.family], code_version=metric_code_version(name, judge, registry),
                       kinds={"pandas"},
                       description=(cls.__doc__ or name).strip().splitlines()[0], is_required=False,
                       metadata={"reads": list(cls.required_fields),
                                 "direction": cls.direction.value, "range": list(cls.value_range)})


def build_metric_assets(registry: Registry) -> dg.AssetsDefinition:
    """The multi-asset computing the selected metrics of ``registry`` on the version's samples; each
    metric's output reads only the field assets of the fields the metric needs."""

    judge_version = JudgeResource().code_version()  # once: building a resource is not free
    MetricsConfig, metric_options = metrics_config(registry)

    def score_metrics(context: dg.AssetExecutionContext, config: dg.Config, judge: JudgeResource,
                      strong_judge: JudgeResource, execution: ExecutionResource):
        """Judge every selected metric of the version at once; one output per metric."""
        names = [name for name in registry if name in context.selected_output_names]
        scorer = judge.get_judge()
        samples = version_samples(context, names, registry)
        tasks: list[Task] = []
        for name in names:
            metric, metric_judge = configured(name, getattr(config, name), metric_options, scorer, registry)
            tasks.append((metric, samples[name], metric_judge))
        # a cascade that cannot run, before anything is scored
        refuse_cascade(context, judge, strong_judge, [metric for metric, _, _ in tasks], scorer)

        try:  # progress, if any, told by the execution resource (``ExecutionResource.progress``)
            stored = execution.score(tasks, context.partition_key)
        except EndpointError as exc:  # the endpoint cannot be used: stop, naming why, before spending
            raise dg.Failure(str(exc), allow_retries=False) from exc
        try:
            for (metric, _, metric_judge), results in zip(tasks, stored):
                frame = results.frame(["status", "value", "passed", *USAGE_COLUMNS])  # what the metadata reads
                metadata = metric_metadata(frame)
                metadata["judge"] = dg.MetadataValue.text(metric_judge.name)
                metadata["threshold"] = dg.MetadataValue.float(metric.threshold)
                for column in USAGE_COLUMNS:
                    metadata[column] = dg.MetadataValue.int(int(frame[column].sum()))
                yield dg.Output(results, output_name=metric.name, metadata=metadata)  # its file moved into place
        except BaseException:  # an output not stored (the step stopped): its file goes too
            for results in stored:
                results.path.unlink(missing_ok=True)
            raise

    # Dagster reads the step's config schema from the annotation of ``config``: this registry's, made above.
    score_metrics.__annotations__["config"] = MetricsConfig
    return dg.multi_asset(
        name=METRICS_OP,
        outs={name: _metric_out(name, judge_version, registry) for name in registry},
        deps=list(FIELD_ASSETS.values()),  # read by the step itself, only those its metrics need
        internal_asset_deps={name: {dg.AssetKey(FIELD_ASSETS[f]) for f in cls.required_fields}
                             for name, cls in registry.items()},
        partitions_def=dataset_versions,
        can_subset=True,
    )(score_metrics)


def run_metrics(context: dg.AssetExecutionContext, registry: Registry) -> list[str]:
    """The metrics of ``registry`` the step's run materializes, in the registry's order."""
    keys = run_assets(context)
    return [m for m in registry if dg.AssetKey(m) in keys]


def version_samples(context: dg.AssetExecutionContext, names: list[str], registry: Registry
                    ) -> dict[str, "FieldSamples"]:
    """Per metric of ``names``, the partition's samples as it reads them: only its required fields, as
    its own asset would see them, built from the field tables chunk by chunk (:class:`FieldSamples`; the
    fields are read and the samples built once a chunk for all the metrics).

    Raises
    ------
    dagster.Failure
        When a field table the metrics read holds no row of the version (registered, not ingested).
    """
    database = context.resources.io_manager
    needed = [FIELD_ASSETS[f] for f in dict.fromkeys(f for n in names for f in registry[n].required_fields)]
    with database.connection() as connection:
        tables = database.stored(connection, context.partition_key, needed)
    if missing := [asset for asset in needed if asset not in tables]:
        raise dg.Failure(f"version {context.partition_key} has no {', '.join(missing)} rows: it was registered "
                         f"but not ingested; materialize ingest_dataset and the field assets for it first",
                         allow_retries=False)
    every = FieldSamples.stored({_FIELD_OF[asset]: table for asset, table in tables.items()}, database.connection)
    by_fields: dict[tuple[str, ...], FieldSamples] = {}
    for name in names:
        needs = registry[name].required_fields
        by_fields.setdefault(needs, every.only(needs))
    return {name: by_fields[registry[name].required_fields] for name in names}


class FieldSamples(Sequence[Sample]):
    """Samples built as they are asked for, ``build(start, stop)`` giving those of the rows at
    positions ``start`` to ``stop`` (``rows`` in all, in row order): a slice of rows (a chunk
    judged at once) builds those samples only, so a version's samples and fields are never
    all in memory at once. The last slice built is kept (metrics reading the same fields
    share a chunk)."""

    def __init__(self, rows: int, build: Callable[[int, int], list[Sample]]) -> None:
        self._rows, self._build = rows, build
        self._last: tuple[tuple[int, int], list[Sample]] | None = None

    @classmethod
    def stored(cls, fields: dict[str, StoredTable],
               connect: Callable[[], AbstractContextManager[duckdb.DuckDBPyConnection]]) -> "FieldSamples":
        """The samples of field assets (``{field: stored partition}``, every field holding every
        line): ``rag_eval.assets.ingestion.samples_from_fields`` on a slice's rows of every field,
        read over one connection ``connect()`` opens."""
        def build(start: int, stop: int) -> list[Sample]:
            with connect() as connection:
                frames = {f: table.rows_at(connection, start, stop) for f, table in fields.items()}
                counts = {f: table.count(connection) for f, table in fields.items()}
                if changed := {f: n for f, n in counts.items() if n != fields[f].rows}:
                    raise dg.Failure(
                        "the version's samples changed while it was being evaluated ("
                        + ", ".join(f"{f}: {fields[f].rows} rows at the start, {n} now" for f, n in changed.items())
                        + "; was it registered again?): this run's results are not stored; run it again",
                        allow_retries=False)
                return samples_from_fields(frames)

        return cls(len(next(iter(fields.values()))), build)

    def only(self, fields: tuple[str, ...]) -> "FieldSamples":
        """These samples as ``fields`` alone would build them (``rag_eval.assets.ingestion.only_fields``),
        from the slices built here: the fields are read and the samples built once for both."""
        return FieldSamples(self._rows, lambda start, stop: only_fields(self[start:stop], fields))

    def __len__(self) -> int:
        return self._rows

    def __iter__(self) -> Iterator[Sample]:
        for start in range(0, self._rows, CHUNK_ROWS):
            yield from self[start:start + CHUNK_ROWS]

    def __getitem__(self, index):
        if not isinstance(index, slice):
            row = range(self._rows)[index]
            return self[row:row + 1][0]
        start, stop, _ = index.indices(self._rows)
        if self._last is None or self._last[0] != (start, stop):
            self._last = (start, stop), self._build(start, stop)
        return self._last[1]


def configured(name: str, config: dg.Config, metric_options: tuple[str, ...], scorer, registry: Registry):
    """The metric ``name`` of ``registry`` with its run configuration (one ``MetricConfig`` of
    :func:`metrics_config`; ``metric_options``: its ``Options`` names), and ``scorer`` (a judge) with the
    metric's own judging options.

    Raises
    ------
    dagster.Failure
        For options the metric refuses, or judging options with a judge other than an LLM."""
    from rag_eval.metrics.judges.llm import LLMJudge

    options = {k: getattr(config, k) for k in ("threshold", *metric_options) if getattr(config, k) is not None}
    threshold = options.pop("threshold", None)
    try:
        metric = build_metrics([name], {name: threshold} if threshold is not None else None,
                               {name: options} if options else None, registry)[0]
    except ValueError as exc:
        raise dg.Failure(str(exc)) from exc
    judging = {k: getattr(config, k) for k in PER_METRIC if getattr(config, k) is not None}
    if judging:
        if not isinstance(scorer, LLMJudge):
            raise dg.Failure(f"{name}: {sorted(judging)} apply to the LLM judge only; no endpoint is configured")
        scorer = scorer.with_options(**judging)
    return metric, scorer


def metric_assets(registry: Registry) -> list[dg.AssetsDefinition]:
    """``[build_metric_assets(registry)]``, built once per set of metrics (registries holding the same
    metrics share it): the CLI asks for them more than once a command."""
    return _metric_assets(registry)


@functools.cache
def _metric_assets(registry: Registry) -> list[dg.AssetsDefinition]:
    return [build_metric_assets(registry)]
