"""Which assets of a dataset version are stale, as Dagster itself resolves it.

This is the resolver behind the UI's "Unsynced" badge (GraphQL ``staleStatus(partition:)``):
an asset partition is stale when its code version changed since it was materialized, or
when an asset it depends on has a new data version for that partition. Each field asset's
data version is the hash of its content, so changing only the responses of a version makes
only the metrics that read responses stale; ``eval_summary`` depends on every field asset
and its code version covers the metrics' (``assets/summary.py``), so it is stale whenever
one of its metrics is.
"""
from pathlib import Path

import dagster as dg
from dagster._core.asset_graph_view.asset_graph_view import AssetGraphView, TemporalContext
from dagster._core.definitions.data_version import CachingStaleStatusResolver, StaleStatus
from dagster._time import get_current_datetime

from assets.registration import sha256_of


def latest_record(instance: dg.DagsterInstance, asset: str, version: str) -> dg.EventLogRecord | None:
    """The event record (its ``run_id``, its materialization) of the newest materialization of
    ``asset`` for partition ``version``, if any."""
    result = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[version]), limit=1, ascending=False)
    return result.records[0] if result.records else None


def latest_materialization(instance: dg.DagsterInstance, asset: str, version: str) -> dg.AssetMaterialization | None:
    """The newest materialization of ``asset`` for partition ``version``, if any."""
    record = latest_record(instance, asset, version)
    return record.asset_materialization if record else None


def changed_since_ingestion(instance: dg.DagsterInstance, samples: Path, version: str) -> str | None:
    """The SHA-256 of ``samples`` (``version``'s file) when it is not what the version's latest
    ingestion read (``rejected_samples``' ``source_sha256``), else ``None`` (the same, or never
    ingested). Dagster does not see the file: one replaced under its key (``rag-eval register
    --replace``, an edit in place) leaves every asset of the version reported fresh."""
    ingested = latest_materialization(instance, "rejected_samples", version)
    recorded = ingested.metadata.get("source_sha256") if ingested else None
    if recorded is None:
        return None
    digest = sha256_of(samples)
    return digest if digest != recorded.value else None


def _resolver(instance: dg.DagsterInstance, repository: dg.RepositoryDefinition,
              assets: list[str]) -> CachingStaleStatusResolver:
    """Dagster's resolver, with the asset records of ``assets`` and of the assets they depend on
    read in one query (``prefetch_asset_records``, as Dagster's automation does): asked one
    asset at a time, it read each in six (96 of the 257 event-log queries of a re-run's check)."""
    graph = repository.asset_graph
    view = AssetGraphView(temporal_context=TemporalContext(effective_dt=get_current_datetime(), last_event_id=None),
                          instance=instance, asset_graph=graph)
    resolver = CachingStaleStatusResolver(instance=instance, asset_graph=graph, loading_context=view)
    keys = {dg.AssetKey(asset) for asset in assets}
    resolver.instance_queryer.prefetch_asset_records(keys | {d for key in keys for d in graph.get(key).parent_keys})
    return resolver


def fresh(instance: dg.DagsterInstance, repository: dg.RepositoryDefinition, version: str, assets: list[str]) -> bool:
    """Whether Dagster reports every one of ``assets`` FRESH for partition ``version``:
    materialized (not MISSING) and not STALE."""
    resolver = _resolver(instance, repository, assets)
    return all(resolver.get_status(dg.AssetKey(asset), version) == StaleStatus.FRESH for asset in assets)


def stale_assets(instance: dg.DagsterInstance, repository: dg.RepositoryDefinition, version: str,
                 assets: list[str]) -> dict[str, str]:
    """``{asset: why}`` for those of ``assets`` whose partition ``version`` Dagster reports as
    STALE (never-materialized partitions are MISSING, not stale); ``why`` joins Dagster's
    stale causes, e.g. ``"has a new dependency data version (responses)"``."""
    resolver = _resolver(instance, repository, assets)
    stale = {}
    for asset in assets:
        key = dg.AssetKey(asset)
        if resolver.get_status(key, version) == StaleStatus.STALE:
            causes = resolver.get_stale_causes(key, version)
            stale[asset] = "; ".join(
                cause.reason + (f" ({cause.dependency.asset_key.to_user_string()})" if cause.dependency else "")
                for cause in causes)
    return stale
