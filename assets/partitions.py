"""The partition key space, declared once: one partition per dataset version."""
import dagster as dg

dataset_versions = dg.DynamicPartitionsDefinition(name="dataset_version")
