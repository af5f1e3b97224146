"""The judges a judge resource built, one per configuration, and where their caches spill
(``rag_eval.assets.resources.JudgeResource``'s ``built_judges``; ``rag-eval`` gives a command that
judges its own, with the command's spill sink: ``rag_eval.orchestration.cache_cli.before_run``)."""
from __future__ import annotations

from collections.abc import Callable

from rag_eval.metrics.judges.base import Judge
from rag_eval.metrics.judges.cache import Sink


class BuiltJudges:
    """The judges one judge resource built, one per configuration, shared by its copies.

    Parameters
    ----------
    sink : Sink, optional
        Where the caches of those judges (and of the target calls the resource opens) send the answers
        their files refuse (``rag_eval.metrics.judges.spill.SpillSink``: a command's spill files);
        ``None``: kept in memory until the file takes them.
    """

    def __init__(self, sink: Sink | None = None) -> None:
        self._judges: dict[str, Judge] = {}
        self.sink = sink

    def get(self, key: str, build: Callable[[], Judge]) -> Judge:
        """The judge built for ``key``, ``build()`` the first time it is asked for."""
        if key not in self._judges:
            self._judges[key] = build()
        return self._judges[key]
