"""One asset per registered metric: per-row results of the version's samples."""

from collections.abc import Callable

import dagster as dg
import pandas as pd

from assets.ingestion import FIELD_ASSETS, samples_from_fields
from assets.partitions import dataset_versions
from assets.resources import ExecutionResource, JudgeResource
from metrics.aggregate import USAGE_COLUMNS
from metrics.evaluate import results_frame
from metrics.judges.endpoint import EndpointError
from metrics.judges.llm import LLMJudge
from metrics.registry import METRICS, build_metrics
from metrics.results import Status


#: Callables ``(metric, done, total)`` told after each scored sample, in the process that
#: runs the asset (``rag-eval run`` draws its progress bars with them).
progress_listeners: list[Callable[[str, int, int], None]] = []


class MetricConfig(dg.Config):
    """Run configuration of a metric asset: its pass/fail threshold and, with the LLM
    judge, the model, temperature and strictness (AnswerRelevancy) it is judged with."""

    threshold: float | None = None
    model: str | None = None
    temperature: float | None = None
    strictness: int | None = None
    #: Options of some metrics: ``mode`` (factual_correctness); ``k``, ``label_min``,
    #: ``label_max``, ``gain``, ``tie_break`` (document retrieval metrics).
    mode: str | None = None
    k: int | None = None
    label_min: int | None = None
    label_max: int | None = None
    gain: str | None = None
    tie_break: str | None = None


METRIC_OPTIONS = ("mode", "k", "label_min", "label_max", "gain", "tie_break")
GROUPS = {"core": "core_metrics", "ragas": "ragas_metrics", "azure": "azure_metrics",
          "document_retrieval": "retrieval_metrics"}


def metric_metadata(frame: pd.DataFrame) -> dict[str, dg.MetadataValue]:
    """Mean, pass rate and coverage of a metric's results, as numeric metadata the UI plots."""
    ok = frame[frame["status"] == Status.OK.value]
    metadata = {f"n_{s.value}": dg.MetadataValue.int(int((frame["status"] == s.value).sum())) for s in Status}
    metadata["coverage"] = dg.MetadataValue.float(len(ok) / len(frame) if len(frame) else 0.0)
    if len(ok):
        metadata["mean"] = dg.MetadataValue.float(float(ok["value"].mean()))
        metadata["pass_rate"] = dg.MetadataValue.float(float(ok["passed"].astype(bool).mean()))
    return metadata


def metric_code_version(name: str) -> str:
    """Changes with the metric's formula, its judgements' versions or the judge that decides
    them (``Metric.code_version``; the judge the definitions' resource configures)."""
    return METRICS[name].code_version(JudgeResource().code_version())


def build_metric_asset(name: str) -> dg.AssetsDefinition:
    """The asset computing metric ``name`` on the version's accepted samples; it reads
    only the field assets of the fields the metric needs."""
    cls = METRICS[name]

    @dg.asset(
        name=name,
        ins={FIELD_ASSETS[field]: dg.AssetIn(key=FIELD_ASSETS[field]) for field in cls.required_fields},
        partitions_def=dataset_versions,
        group_name=GROUPS[cls.family],
        code_version=metric_code_version(name),
        kinds={"pandas"},
        description=(cls.__doc__ or name).strip().splitlines()[0],
        metadata={"partition_expr": "version", "reads": list(cls.required_fields), "direction": cls.direction.value,
                  "range": list(cls.value_range)},
    )
    def _metric(context: dg.AssetExecutionContext, config: MetricConfig, judge: JudgeResource,
                execution: ExecutionResource,
                **fields: pd.DataFrame) -> dg.Output[pd.DataFrame]:
        inverse = {asset: field for field, asset in FIELD_ASSETS.items()}
        samples = samples_from_fields({inverse[asset]: frame for asset, frame in fields.items()})
        options = {k: getattr(config, k) for k in METRIC_OPTIONS if getattr(config, k) is not None}
        try:
            metric = build_metrics([name], {name: config.threshold} if config.threshold is not None else None,
                                   {name: options} if options else None)[0]
        except ValueError as exc:
            raise dg.Failure(str(exc)) from exc
        scorer = judge.get_judge()
        judging = {k: getattr(config, k) for k in ("model", "temperature", "strictness") if getattr(config, k) is not None}
        if judging:
            if not isinstance(scorer, LLMJudge):
                raise dg.Failure(f"{name}: {sorted(judging)} apply to the LLM judge only; no endpoint is configured")
            scorer = scorer.with_options(**judging)
        done = []

        def progress(step: int) -> None:
            done.append(step)
            for listener in progress_listeners:
                listener(name, len(done), len(samples))
            if len(done) % 10 == 0 or len(done) == len(samples):
                context.log.info(f"{name}: {len(done)}/{len(samples)} samples scored")

        try:
            frame = results_frame(execution.score(samples, metric, scorer, progress))
        except EndpointError as exc:  # the endpoint cannot be used: stop, naming why, before spending
            raise dg.Failure(str(exc), allow_retries=False) from exc
        frame.insert(0, "version", context.partition_key)
        metadata = metric_metadata(frame)
        metadata["judge"] = dg.MetadataValue.text(scorer.name)
        metadata["threshold"] = dg.MetadataValue.float(metric.threshold)
        for column in USAGE_COLUMNS:
            metadata[column] = dg.MetadataValue.int(int(frame[column].sum()))
        return dg.Output(frame, metadata=metadata)

    return _metric


metric_assets = [build_metric_asset(name) for name in METRICS]
