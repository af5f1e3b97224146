"""A judge cascade in the graph: ``strong_sample``, the strong judge on a seeded sample of each metric's rows.

The metric assets score every row with the ``judge`` resource (the cheap judge: the offline one, or
a small model); ``strong_sample`` draws, per metric the run selects, the rows the ``strong_judge``
resource scores (``rag_eval.metrics.core.strong``: uniformly or actively, seeded, so that a larger
budget's sample holds a smaller one's and the judgement cache answers the rows judged before) and
stores the **strong frame** (``STRONG_COLUMNS``: each row's inclusion probability and, on the drawn
rows, the strong judge's result). ``eval_summary`` depends on it: in a run that materializes it, the
summary gives each metric's cascade estimate of the strong judge's mean with its 95 % interval
(``rag_eval.metrics.stats.cascade_estimates``) and ``results.parquet`` carries the strong columns.
"""
import functools
from typing import Any

import dagster as dg
import pandas as pd

from rag_eval.assets.evaluation import METRICS_OP, configured, metrics_config, run_metrics, version_samples
from rag_eval.assets.ingestion import FIELD_ASSETS
from rag_eval.assets.partitions import dataset_versions
from rag_eval.assets.resources import ExecutionResource, JudgeResource
from rag_eval.assets.run_config import STRONG_OP, StrongSampleConfig, op_config, refuse_cascade
from rag_eval.metrics.core.registry import Registry
from rag_eval.metrics.core.strong import check_cascade, draw_strong, plan_full_runs, score_strong
from rag_eval.metrics.judges.endpoint import EndpointError

#: The strong sample's metadata entry of each metric's full strong run, in chat requests (``plan_full_runs``).
FULL_RUNS = "full_run_chat_requests"


def _metadata(strong: pd.DataFrame, judge: str, config: StrongSampleConfig, full: dict[str, int]) -> dict[str, Any]:
    drawn = strong[strong["strong_status"].notna()]
    sent = drawn["strong_chat_requests"].fillna(0) + drawn["strong_embedding_requests"].fillna(0)
    return {"strong_judge": judge, "sampling": config.sampling, "budget": str(config.budget()), "seed": config.seed,
            "drawn": dg.MetadataValue.json({m: int(n) for m, n in drawn["metric"].value_counts().items()}),
            "requests_sent": int(sent.sum()), "judge_errors": int((drawn["strong_status"] == "judge_error").sum()),
            FULL_RUNS: dg.MetadataValue.json(full)}


def planned_full_runs(context: dg.AssetExecutionContext) -> dict[str, int] | None:
    """Per metric, a full strong run's chat requests as this run's strong sample planned them (its materialization
    of the step's version, :data:`FULL_RUNS`); ``None`` when this run materialized none."""
    found = context.instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(STRONG_OP), asset_partitions=[context.partition_key]),
        limit=1).records
    event = found[0].asset_materialization if found and found[0].run_id == context.run_id else None
    entry = event.metadata.get(FULL_RUNS) if event is not None else None
    value = entry.value if isinstance(entry, dg.JsonMetadataValue) else None
    return {str(m): int(n) for m, n in value.items()} if isinstance(value, dict) else None


@functools.cache
def strong_sample_asset(registry: Registry) -> dg.AssetsDefinition:
    """The ``strong_sample`` asset over the metrics of ``registry``; built once per set of metrics."""
    metric_config, metric_options = metrics_config(registry)

    @dg.asset(
        name=STRONG_OP,
        partitions_def=dataset_versions,
        group_name="cascade",
        code_version="1",
        kinds={"pandas"},
        # Reads the cheap judge's results and the fields of the drawn rows itself.
        deps=[*registry, *FIELD_ASSETS.values()],
        description="The strong judge (strong_judge resource) on a seeded sample of each selected metric's rows, "
                    "drawn from the cheap judge's scores: each row's inclusion probability and the strong results; "
                    "eval_summary turns them into estimates of the strong judge's mean with 95 % intervals.",
    )
    def strong_sample(context: dg.AssetExecutionContext, config: StrongSampleConfig, judge: JudgeResource,
                      strong_judge: JudgeResource, execution: ExecutionResource) -> dg.Output[pd.DataFrame]:
        """Draw each metric's strong sample from its stored cheap results and score it."""
        version, budget = context.partition_key, config.budget()
        refuse_cascade(context, judge, strong_judge)
        database = context.resources.io_manager
        with database.connection() as connection:
            tables = database.stored(connection, version, list(registry))
            names = [m for m in run_metrics(context, registry) if m in tables] or list(tables)
            if not names:
                raise dg.Failure(f"no metric has been computed for version {version}: materialize its metric assets "
                                 "(the cheap judge's scores) first", allow_retries=False)
            cheap = pd.concat([tables[m].frame(connection, compact=True) for m in names], ignore_index=True)
        options = metric_config(**op_config(context.run.run_config, METRICS_OP))  # the metrics' thresholds, options
        scorer = strong_judge.get_judge()
        built = [configured(name, getattr(options, name), metric_options, scorer, registry) for name in names]
        samples = version_samples(context, names, registry)
        for metric, _ in built:
            metric.fit(samples[metric.name])  # as the cheap run did: a row scores as in a full strong run
        try:
            uniforms = check_cascade(samples[names[0]], budget, config.sampling, config.seed)
        except ValueError as exc:
            raise dg.Failure(f"{STRONG_OP}: {exc}", allow_retries=False) from None
        draws, notes = draw_strong(cheap, [m for m, _ in built], uniforms, budget, config.sampling)
        done, total = [0], int(draws["drawn"].sum())

        def progress(_: int) -> None:
            done[0] += 1
            if execution.progress:
                execution.progress("strong judge", done[0], total)

        judges = {m.name: j for m, j in built}  # a metric's own judging options go with its strong judge
        full = plan_full_runs(samples, [m for m, _ in built], judges)  # before the strong judge sends
        try:
            strong = score_strong(samples, [m for m, _ in built], judges, draws, notes, progress)
        except EndpointError as exc:  # the endpoint cannot be used: stop, naming why, before spending
            raise dg.Failure(str(exc), allow_retries=False) from exc
        finally:
            scorer.forget()
        for metric, note in notes.items():
            context.log.warning(f"{version}: {metric}: {note}")
        return dg.Output(strong.assign(version=version), metadata=_metadata(strong, scorer.name, config, full))

    return strong_sample
