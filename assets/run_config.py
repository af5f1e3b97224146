"""What a run asks for, read where a step needs it: the assets it selects (:func:`run_assets`), an op's config
(:func:`op_config`), and a judge cascade's settings (:class:`StrongSampleConfig`, checked by
:func:`refuse_cascade` before anything is scored)."""
from collections.abc import Mapping, Sequence
from typing import Any

import dagster as dg

from rag_eval.assets.ingestion import FIELD_ASSETS
from rag_eval.assets.resources import JudgeResource
from rag_eval.metrics.core.base import Metric
from rag_eval.metrics.core.samples import Sample
from rag_eval.metrics.core.strong import SAMPLINGS, refuse_unscorable, single_turn_lines
from rag_eval.metrics.judges.base import Judge
from rag_eval.metrics.stats.cascade import budget_rows, check_ids


def op_config(run_config: Mapping[str, Any], op: str) -> dict[str, Any]:
    """The config a run's config gives the op ``op`` (``{}`` when none)."""
    ops: Mapping[str, Any] = run_config.get("ops") or {}
    return dict((ops.get(op) or {}).get("config") or {})


def run_assets(context: dg.AssetExecutionContext) -> set[dg.AssetKey]:
    """The assets the step's run materializes."""
    return set(context.run.asset_selection or context.job_def.asset_layer.selected_asset_keys or ())


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


def runs_strong_sample(context: dg.AssetExecutionContext) -> bool:
    """Whether the step's run materializes the strong sample: selected, and its op in the run's job (a run of
    some ops of the asset job lists every asset of that job as selected)."""
    return dg.AssetKey(STRONG_OP) in run_assets(context) and context.job_def.graph.has_node_named(STRONG_OP)


def refuse_cascade(context: dg.AssetExecutionContext, judge: JudgeResource, strong_judge: JudgeResource,
                   metrics: Sequence[Metric] = (), cheap: Judge | None = None) -> None:
    """Refuse, before anything is scored, a run selecting the strong sample whose settings cannot run: a
    strong judge that is the cheap judge (the ``judge`` resource: a launch without ``judge: {config:
    {offline: true}}``, or with a smaller model, would score every row with the strong judge first), a
    budget :meth:`StrongSampleConfig.budget` refuses or more rows than the version has, a version with two rows of one id (they would share
    their draw: ``rag_eval.metrics.stats.cascade.check_ids``) or a conversation's turns on one line
    (``rag_eval.metrics.core.strong.single_turn_lines``), or one of ``metrics`` the judge ``cheap``
    has no rule for (``rag_eval.metrics.core.strong.refuse_unscorable``). The metric step (with the metrics
    it scores and its judge) and the strong sample's call it.

    Raises
    ------
    dagster.Failure
        Naming what to set, the lines (from 1) of the repeated id or of the conversation, or the metric (not retried)."""
    if not runs_strong_sample(context):
        return
    if strong_judge.code_version() == judge.code_version():
        raise dg.Failure(f"{STRONG_OP}: the strong judge is the cheap judge ({judge.code_version()}): set the judge "
                         "resource to the cheap judge (resources: judge: config: offline: true, or a smaller model) "
                         "and strong_judge to the LLM judge", allow_retries=False)
    budget = strong_config(context.run.run_config).budget()
    try:
        ids = [sample.id for sample in single_turn_lines(version_rows(context))]  # a conversation's line refused
        if ids:  # a rows budget above the version's rows: refused here, before the cheap judge pays for anything
            budget_rows(budget, len(ids))
        check_ids(ids)
        if cheap is not None:
            refuse_unscorable(metrics, cheap)
    except ValueError as exc:
        raise dg.Failure(f"{STRONG_OP}: {exc}", allow_retries=False) from None


def version_rows(context: dg.AssetExecutionContext) -> list[Sample]:
    """The rows of the step's version (its partition) in row order, read from a stored field table (every
    line reaches every field asset), each as a sample holding its id, row and turn (``conversation_id``,
    ``turn``: a table stored before conversations has one row per line); ``[]`` when none is stored yet."""
    database = context.resources.io_manager
    with database.connection() as connection:
        tables = database.stored(connection, context.partition_key, list(FIELD_ASSETS.values()))
        if not tables:
            return []
        query = next(iter(tables.values())).query
        names = [d[0] for d in connection.execute(f"select * from ({query}) limit 0").description]
        turns = "conversation_id, turn" if "turn" in names else "null, null"
        found = connection.execute(f"select id, row, {turns} from ({query}) order by row, 4").fetchall()
    return [Sample(id=str(row_id), row=int(row), conversation_id=conversation, turn=None if turn is None else int(turn))
            for row_id, row, conversation, turn in found]
