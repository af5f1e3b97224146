"""Jobs: the whole evaluation of a dataset version, and one per metric group."""
import dagster as dg

INGESTION = dg.AssetSelection.groups("ingestion")

evaluation_job = dg.define_asset_job(
    "evaluation_job",
    selection=dg.AssetSelection.groups("ingestion", "metrics", "summary"),
    description="Ingest a dataset version, check it, score every metric and write the summary.",
)
response_metrics_job = dg.define_asset_job(
    "response_metrics_job",
    selection=INGESTION | dg.AssetSelection.assets("faithfulness", "answer_relevancy"),
    description="The metrics that read the responses: faithfulness and answer relevancy (no reference needed).",
)
retrieval_metrics_job = dg.define_asset_job(
    "retrieval_metrics_job",
    selection=INGESTION | dg.AssetSelection.assets("context_relevancy", "context_recall", "context_precision"),
    description="The metrics that read the retrieved contexts only: relevancy, recall and precision.",
)
ingestion_job = dg.define_asset_job("ingestion_job", selection=INGESTION,
                                    description="Re-ingest a version (new field data versions; nothing judged).")
