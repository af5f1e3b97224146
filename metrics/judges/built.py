"""The judges a judge resource built, one per configuration, and where their caches spill
(``rag_eval.assets.resources.JudgeResource``'s ``built_judges``; ``rag-eval`` gives a command that
judges its own, with the command's spill sink: ``rag_eval.orchestration.cache_cli.before_run``)."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rag_eval.metrics.judges.base import Judge
from rag_eval.metrics.judges.cache import Sink
from rag_eval.metrics.judges.spill import SpillSink


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
        self._told: set[Path] = set()

    def get(self, key: str, build: Callable[[], Judge]) -> Judge:
        """The judge built for ``key``, ``build()`` the first time it is asked for."""
        if key not in self._judges:
            self._judges[key] = build()
        return self._judges[key]

    def untold_spills(self) -> list[Path]:
        """The spill files the sink has written that this method has not returned before (each is said once)."""
        files = [f for paths in (self.sink.files.values() if isinstance(self.sink, SpillSink) else ()) for f in paths
                 if f not in self._told]
        self._told.update(files)
        return files
