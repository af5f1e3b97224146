"""Retrieval metrics without an LLM."""
