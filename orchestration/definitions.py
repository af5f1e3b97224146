"""The code location: ``dagster dev -w workspace.yaml`` loads ``defs`` from here.

Its metric registry is built once, as the code location loads, from the custom metrics file the code
location's settings name (``rag_eval.metrics.core.custom.custom_metrics_file``: ``custom_metrics`` of
``[tool.rag_eval.metrics]`` in ``./pyproject.toml``, else ``./custom_metrics.yaml``; no environment variable)
and the installed plugins: the UI, the daemon and the run workers they start (which load this module
again, in the same folder) see the same metrics, as ``rag-eval`` run in that folder does. An invalid
setting, file or plugin fails the load, naming it.
"""
from rag_eval.metrics.core.custom import custom_metrics_file
from rag_eval.metrics.core.registry import build_registry
from rag_eval.orchestration.location import build_definitions

defs = build_definitions(build_registry(custom_metrics_file()))
