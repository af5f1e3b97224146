"""Jobs: the whole evaluation graph for one dataset version."""
import dagster as dg

evaluation_job = dg.define_asset_job(
    "evaluation_job",
    selection=dg.AssetSelection.groups("ingestion", "metrics", "summary"),
    description="Ingest a dataset version, check it, score every metric and write the summary.",
)
