"""The code location: ``dagster dev -w workspace.yaml`` loads ``defs`` from here."""
from rag_eval.orchestration.location import build_definitions

defs = build_definitions()
