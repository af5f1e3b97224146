"""Dagster software-defined assets: what the pipeline computes, partitioned by dataset version."""
