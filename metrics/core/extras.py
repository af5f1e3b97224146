"""The optional parts of the distribution (``pyproject.toml``'s extras), imported where they are used.

``pip install rag-eval-pipeline`` runs the pipeline offline or with an LLM judge; these extras
add what only some users need:

* ``spark``: ``pyspark[connect]``, scoring in Spark tasks (``--executor spark``; Java 17 or later);
* ``report``: ``matplotlib``, the trend and cost charts of the regression gate's ``report.html``
  (without it the report has its tables and says how to get the charts);
* ``testset``: ``pypdf`` (PDF documents of ``rag-eval testset``) and ``bm25s`` (the BM25 baseline
  retriever of the sweep it writes, and of ``examples/rag_system``);
* ``ui``: ``dagster-webserver``, the Dagster UI of ``dagster dev`` (``make dev``).
"""
from __future__ import annotations

import importlib
from types import ModuleType

from rag_eval.metrics.errors import UserError

DISTRIBUTION = "rag-eval-pipeline"


class MissingExtra(UserError, ImportError, ValueError):
    """An optional module is not installed; the message names the extra that installs it.
    A :class:`rag_eval.metrics.errors.UserError`, so the CLI reports it in one line (``error: ...``, exit status 2)."""


def install_hint(extra: str) -> str:
    """``pip install 'rag-eval-pipeline[<extra>]'``."""
    return f"pip install '{DISTRIBUTION}[{extra}]'"


def require(module: str, extra: str, what: str) -> ModuleType:
    """``module`` imported, or :class:`MissingExtra`: ``<what> needs the '<extra>' extra: pip install
    'rag-eval-pipeline[<extra>]'`` (e.g. ``require("pyspark", "spark", "Spark execution")``)."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        if exc.name is not None and exc.name != module and not module.startswith(f"{exc.name}."):
            raise  # the module is there but something it imports is broken: not a missing extra
        raise MissingExtra(f"{what} needs the '{extra}' extra: {install_hint(extra)}") from None
