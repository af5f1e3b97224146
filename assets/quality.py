"""The lines of a version the selected metrics cannot use, by the sample model's own rules.

:class:`Validation` is the ingestion's account (``rag_eval.assets.ingestion``): the rejected lines
(no selected metric can use them; their share is the blocking check
``rejected_share_within_limit``) and the lines lacking a field some selected metric reads
(those metrics report ``input_error`` for them). great-expectations' suite, the non-blocking
checks on the ingested assets, is ``rag_eval.assets.expectations``.
"""

from collections.abc import Iterable, Mapping
from typing import Any

from rag_eval.metrics.core.samples import Sample
from rag_eval.metrics.core.usable import field_problems, unusable


class Validation:
    """The lines of a version read in chunks that the selected metrics ``required``
    (``{metric: fields}``) cannot use: :meth:`add` each chunk of samples (in row order), then
    :meth:`report`. What is kept of a line is its problems, not the sample."""

    def __init__(self, required: Mapping[str, Iterable[str]]) -> None:
        self.required = {metric: tuple(fields) for metric, fields in required.items()}
        self.fields = list(dict.fromkeys(f for fields in self.required.values() for f in fields))
        self._usable: set[str] = set()  # fields usable on some line
        self._lacking: list[tuple[int, str, str | None, dict[str, str]]] = []  # (row, id, unusable, problems)

    def add(self, samples: list[Sample]) -> None:
        """Take in the next chunk of samples."""
        for sample in samples:
            problems = field_problems(sample, self.fields)
            self._usable.update(f for f in self.fields if f not in problems)
            reason = unusable(sample, self.required)
            if problems or reason is not None:
                self._lacking.append((sample.row, str(sample.id), reason, problems))

    def report(self) -> dict[str, Any]:
        """The lines of every sample added that the selected metrics cannot use.

        Returns
        -------
        dict
            ``rejected``: one ``{"row", "line", "id", "reason"}`` per line no selected metric
            can use (unreadable, or lacking a field of every metric); ``input_errors``: one
            ``{"row", "line", "id", "fields": {field: reason}, "metrics": [...]}`` per other line
            lacking a field some selected metric reads (those metrics report ``input_error``
            for it; a field usable on no line at all is left out: its metrics cannot run).
            Lines count from 1.
        """
        rejected, input_errors = [], []
        for row, sample_id, reason, problems in self._lacking:
            entry = {"row": row, "line": row + 1, "id": sample_id}
            if reason is not None:
                rejected.append({**entry, "reason": reason})
            elif problems := {f: why for f, why in problems.items() if f in self._usable}:
                input_errors.append({**entry, "fields": problems, "metrics": [
                    m for m, needs in self.required.items() if set(needs) & set(problems)]})
        return {"rejected": rejected, "input_errors": input_errors}
