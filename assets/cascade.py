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
from collections.abc import Mapping
from typing import Any

import dagster as dg
import pandas as pd

from rag_eval.assets.evaluation import METRICS_OP, configured, metrics_config, op_config, run_metrics, version_samples
from rag_eval.assets.ingestion import FIELD_ASSETS
from rag_eval.assets.partitions import dataset_versions
from rag_eval.assets.resources import ExecutionResource, JudgeResource
from rag_eval.metrics.core.registry import Registry
from rag_eval.metrics.core.strong import SAMPLINGS, check_cascade, draw_strong, score_strong
from rag_eval.metrics.judges.endpoint import EndpointError

#: The op (and asset) of the strong sample, the key of its run configuration.
STRONG_OP = "strong_sample"


class StrongSampleConfig(dg.Config):
    """The strong sample's budget, per metric: ``share`` of the rows its cascade covers (in [0, 1]) or
    ``rows`` (a whole number up to them), exactly one; ``sampling``: ``active`` (rows the cheap
    judge is least sure of more likely, every row possible) or ``uniform``; ``seed``: the draw's
    (the same seed draws nested samples as the budget grows)."""

    share: float | None = None
    rows: int | None = None
    sampling: str = "active"
    seed: int = 0

    def budget(self) -> float | int:
        """The budget as ``rag_eval.metrics.stats.cascade.budget_rows`` takes it: a ``float`` share or
        an ``int`` of rows.

        Raises
        ------
        dagster.Failure
            When neither or both of ``share`` and ``rows`` are given, or ``sampling`` is unknown."""
        if (self.share is None) == (self.rows is None):
            raise dg.Failure(f"{STRONG_OP}: give exactly one of share (0.1: a tenth of the rows) and rows, "
                             f"got share={self.share} rows={self.rows}", allow_retries=False)
        if self.sampling not in SAMPLINGS:
            raise dg.Failure(f"{STRONG_OP}: sampling must be one of {', '.join(SAMPLINGS)}, got {self.sampling!r}",
                             allow_retries=False)
        return float(self.share) if self.share is not None else int(self.rows or 0)

    def described(self) -> dict[str, Any]:
        """The settings ``summary.json`` records under ``cascade``."""
        return {"sampling": self.sampling, "budget": self.budget(), "seed": self.seed}


def strong_config(run_config: Mapping[str, Any]) -> StrongSampleConfig:
    """The strong sample's settings in a run's config (the defaults where it gives none)."""
    return StrongSampleConfig(**op_config(run_config, STRONG_OP))


def _metadata(strong: pd.DataFrame, judge: str, config: StrongSampleConfig) -> dict[str, Any]:
    drawn = strong[strong["strong_status"].notna()]
    sent = drawn["strong_chat_requests"].fillna(0) + drawn["strong_embedding_requests"].fillna(0)
    return {"strong_judge": judge, "sampling": config.sampling, "budget": str(config.budget()), "seed": config.seed,
            "drawn": dg.MetadataValue.json({m: int(n) for m, n in drawn["metric"].value_counts().items()}),
            "requests_sent": int(sent.sum()), "judge_errors": int((drawn["strong_status"] == "judge_error").sum())}


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
        if strong_judge.code_version() == judge.code_version():
            raise dg.Failure(f"{STRONG_OP}: the strong judge is the cheap judge ({judge.code_version()}): give the "
                             "judge resource the cheap judge (offline: true, or a smaller model) and strong_judge the "
                             "LLM judge", allow_retries=False)
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

        try:  # a metric's own judging options go with its strong judge (``configured``)
            strong = score_strong(samples, [m for m, _ in built], {m.name: j for m, j in built}, draws, notes, progress)
        except EndpointError as exc:  # the endpoint cannot be used: stop, naming why, before spending
            raise dg.Failure(str(exc), allow_retries=False) from exc
        finally:
            scorer.forget()
        for metric, note in notes.items():
            context.log.warning(f"{version}: {metric}: {note}")
        return dg.Output(strong.assign(version=version), metadata=_metadata(strong, scorer.name, config))

    return strong_sample
