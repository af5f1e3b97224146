"""Which metric assets of a dataset version are missing or stale.

A metric asset is stale for a version when its code version changed since it was last
materialized for that version, or when a field asset it reads has a newer data version
than the one it was computed from (Dagster records both on every materialization).
"""
import dagster as dg

from assets.evaluation import metric_code_version
from assets.ingestion import FIELD_ASSETS
from metrics.registry import CORE_METRICS, METRICS


def latest_materialization(instance: dg.DagsterInstance, asset: str, version: str) -> dg.AssetMaterialization | None:
    """The newest materialization of ``asset`` for partition ``version``, if any."""
    result = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[version]), limit=1, ascending=False)
    return result.records[0].asset_materialization if result.records else None


def _data_version_used(instance: dg.DagsterInstance, tags: dict[str, str], asset: str) -> str | None:
    """Data version of the ``asset`` materialization a metric was computed from (Dagster
    records its event's storage id as ``dagster/input_event_pointer/<asset>``)."""
    pointer = tags.get(f"dagster/input_event_pointer/{asset}")
    if pointer is None:
        return None
    result = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), storage_ids=[int(pointer)]), limit=1)
    return result.records[0].asset_materialization.tags.get("dagster/data_version") if result.records else None


def stale_metrics(instance: dg.DagsterInstance, version: str) -> dict[str, str]:
    """``{metric: why}`` for the core metric assets of ``version`` that are missing, and
    every metric asset of ``version`` that is stale."""
    stale: dict[str, str] = {}
    field_versions = {}
    for asset in FIELD_ASSETS.values():
        materialization = latest_materialization(instance, asset, version)
        field_versions[asset] = materialization.tags.get("dagster/data_version") if materialization else None
    for metric in METRICS:
        materialization = latest_materialization(instance, metric, version)
        if materialization is None:
            if metric in CORE_METRICS:
                stale[metric] = "never materialized"
            continue
        if materialization.tags.get("dagster/code_version") != metric_code_version(metric):
            stale[metric] = "new code version"
            continue
        for field in METRICS[metric].required_fields:
            asset = FIELD_ASSETS[field]
            if _data_version_used(instance, materialization.tags, asset) != field_versions[asset]:
                stale[metric] = f"new data version of {asset}"
                break
    return stale
