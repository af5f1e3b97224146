"""Running the RAG system under evaluation: target configurations, calls and their cache (no Dagster)."""
