"""The code location: ``dagster dev -w workspace.yaml`` loads ``defs`` from here.

Its metric registry is built once, as the code location loads, from the custom metrics file
``rag_eval.metrics.core.registry.custom_metrics_file`` finds (``$RAG_EVAL_CUSTOM_METRICS``, else
``./custom_metrics.yaml``) and the installed plugins: the UI, the daemon and the run workers they start
(which load this module again, in the same environment and folder) see the same metrics. An invalid
file or plugin fails the load, naming it.
"""
from rag_eval.metrics.core.registry import build_registry, custom_metrics_file
from rag_eval.orchestration.location import build_definitions

defs = build_definitions(build_registry(custom_metrics_file()))
