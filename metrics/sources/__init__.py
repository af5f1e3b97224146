"""Where rows and labels come from: traces (OTLP, Langfuse, tables), the RAG system under test (targets), generated
test sets, human labels and the annotation sheet, production-traffic settings."""
