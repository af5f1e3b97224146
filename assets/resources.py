"""Resources: where dataset versions and reports live, and which judge scores."""

from functools import lru_cache
from pathlib import Path

import dagster as dg

from metrics.judges import Judge, OfflineJudge


class DatasetStore(dg.ConfigurableResource):
    """Dataset versions on disk: ``<root>/<version>/samples.jsonl`` (one JSON object a line)."""

    root: str = "datasets"

    def samples_path(self, version: str) -> Path:
        """The samples file of ``version``."""
        return Path(self.root) / version / "samples.jsonl"


class ReportStore(dg.ConfigurableResource):
    """Where each version's ``summary.json`` and ``results.parquet`` are written: ``<root>/<version>/``."""

    root: str = "out"

    def folder(self, version: str) -> Path:
        """The report folder of ``version``, created if needed."""
        path = Path(self.root) / version
        path.mkdir(parents=True, exist_ok=True)
        return path


@lru_cache(maxsize=4)
def _offline_judge(support_threshold: float | None) -> OfflineJudge:
    # One judge per process and setting, so its model loads once and its embedding
    # cache is shared by every metric asset of a run.
    return OfflineJudge() if support_threshold is None else OfflineJudge(support_threshold=support_threshold)


class JudgeResource(dg.ConfigurableResource):
    """The judge behind every metric asset.

    Without an OpenAI-compatible endpoint configured this is the offline heuristic
    judge (no key, no network), labelled ``offline-heuristic`` in every result.
    """

    support_threshold: float | None = None

    def get_judge(self) -> Judge:
        """The plain judge object from ``metrics.judges``."""
        return _offline_judge(self.support_threshold)
