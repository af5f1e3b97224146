"""What the Dagster instance recorded of a version's materializations, read through its public API.

The sensor asks whether a version's file is still the one its ingestion read
(:func:`changed_since_ingestion`); ``rag-eval run`` and ``rag-eval sweep``, which materialize
in their own process, which assets of a version are missing or stale (:func:`out_of_date`). When the
daemon re-runs what changed is declared in ``rag_eval.orchestration.automation``.
"""
from pathlib import Path

import dagster as dg

from rag_eval.assets.registration import sha256_of

#: The tags Dagster records on each materialization: the asset's code version, and the data version it produced.
CODE_VERSION_TAG, DATA_VERSION_TAG = "dagster/code_version", "dagster/data_version"


def latest_record(instance: dg.DagsterInstance, asset: str | dg.AssetKey, version: str,
                  before: int | None = None) -> dg.EventLogRecord | None:
    """The event record (its ``run_id``, ``storage_id``, materialization) of the newest
    materialization of ``asset`` for partition ``version`` (``before``: stored before that
    storage id), if any."""
    result = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=asset if isinstance(asset, dg.AssetKey) else dg.AssetKey(asset),
                             asset_partitions=[version], before_storage_id=before),
        limit=1, ascending=False)
    return result.records[0] if result.records else None


def materialization(record: dg.EventLogRecord) -> dg.AssetMaterialization:
    """The materialization a record of :func:`latest_record` holds (it fetches materializations only)."""
    found = record.asset_materialization
    assert found is not None  # fetch_materializations returns materialization records
    return found


def _data_version(record: dg.EventLogRecord) -> str | None:
    return (materialization(record).tags or {}).get(DATA_VERSION_TAG)


def changed_since_ingestion(instance: dg.DagsterInstance, samples: Path, version: str) -> str | None:
    """The SHA-256 of ``samples`` (``version``'s file) when it is not what the version's latest
    ingestion read (``rejected_samples``' ``source_sha256``), else ``None`` (the same, or never
    ingested). Dagster does not see the file: one replaced under its key (``rag-eval register
    --replace``, an edit in place) leaves every asset of the version reported fresh."""
    ingested = latest_record(instance, "rejected_samples", version)
    recorded = materialization(ingested).metadata.get("source_sha256") if ingested else None
    if recorded is None:
        return None
    digest = sha256_of(samples)
    return digest if digest != recorded.value else None


def out_of_date(instance: dg.DagsterInstance, definitions: dg.Definitions, version: str,
                assets: list[str]) -> dict[str, str]:
    """``{asset: why}`` for those of ``assets`` whose partition ``version`` was never
    materialized ("missing") or is stale, by the rule of the UI's "Unsynced" badge, on the
    versions each materialization recorded: its asset's
    code version in ``definitions`` is not the one it ran with ("has a new code version"), or an
    asset it depends on was materialized again since, with a data version other than the one it
    had then ("has a new dependency data version (responses)"). Not carried downstream (a metric stale because its
    code changed leaves the summary fresh until the metric runs again); a dependency never
    materialized makes nothing stale.
    Each field asset's data version is the hash of its content, so changing only the responses
    of a version makes only the metrics that read responses stale."""
    specs = {spec.key: spec for spec in definitions.resolve_all_asset_specs()}
    records: dict[dg.AssetKey, dg.EventLogRecord | None] = {}

    def record(key: dg.AssetKey) -> dg.EventLogRecord | None:
        if key not in records:
            records[key] = latest_record(instance, key, version)
        return records[key]

    stale = {}
    for asset in assets:
        key = dg.AssetKey(asset)
        if (mine := record(key)) is None:
            stale[asset] = "missing"
            continue
        tags, causes = materialization(mine).tags or {}, []
        if specs[key].code_version is not None and tags.get(CODE_VERSION_TAG) != specs[key].code_version:
            causes.append("has a new code version")
        for dependency in sorted(dep.asset_key.to_user_string() for dep in specs[key].deps):
            theirs = record(dg.AssetKey(dependency))
            if theirs is None or theirs.storage_id < mine.storage_id:
                continue  # never materialized, or not since
            read = latest_record(instance, dependency, version, before=mine.storage_id)
            if read is None or _data_version(read) != _data_version(theirs):
                causes.append(f"has a new dependency data version ({dependency})")
        if causes:
            stale[asset] = "; ".join(causes)
    return stale
