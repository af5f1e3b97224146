"""Which lines and metrics the input can serve: a line no selected metric can use is *rejected*
(:func:`unusable`), a metric no line can serve cannot run (:func:`unavailable`)."""
from __future__ import annotations

from collections.abc import Iterable, Mapping

from rag_eval.metrics.core.samples import Sample, is_target_error


def field_problems(sample: Sample, fields: Iterable[str]) -> dict[str, str]:
    """``{field: why it cannot be used}`` for the fields of ``fields`` this sample lacks
    (the line's own problem for every field when the line is unreadable)."""
    return {name: why for name in fields if (why := sample.missing(name))}


def unusable(sample: Sample, required: Mapping[str, Iterable[str]]) -> str | None:
    """Why no metric of ``required`` (``{metric: fields it reads}``) can use ``sample``, or
    ``None`` when one can. Such a line is *rejected*; any other line is scored by the
    metrics whose fields it has, and the others report ``input_error`` for it. A field the
    system under evaluation failed to produce (``target_error``) counts as present here: the
    line is sound, the metrics reading the field report ``target_error``."""
    if "row" in sample.problems:
        return sample.problems["row"]
    if any(all(is_target_error(p) for p in field_problems(sample, fields).values()) for fields in required.values()):
        return None  # the system under evaluation failed on it: its target_error, not a bad line
    problems = field_problems(sample, dict.fromkeys(f for fields in required.values() for f in fields))
    return "no selected metric can use it: " + "; ".join(f"{name}: {why}" for name, why in problems.items())


def unavailable(samples: Iterable[Sample], required: Mapping[str, Iterable[str]],
                usable: set[str] | None = None) -> dict[str, str]:
    """``{metric: reason}`` for the metrics of ``required`` that cannot score any line,
    because a field they read is usable on no line of the input (e.g. production traffic
    without ``reference``). ``samples`` are read once, up to the first line on which every
    field is usable (a file read by :func:`iter_samples` is not held). ``usable``: a set the
    fields found usable are added to, for an input read in chunks: called on each chunk with
    the same set, the last call's answer holds for them all."""
    needed = dict.fromkeys(f for fields in required.values() for f in fields)
    usable = set() if usable is None else usable
    for sample in samples if len(usable) < len(needed) else ():
        usable.update(name for name in needed if name not in usable and sample.missing(name) is None)
        if len(usable) == len(needed):
            break
    reasons = {}
    for metric, fields in required.items():
        absent = [name for name in fields if name not in usable]
        if absent:
            reasons[metric] = "no line has a usable " + " or ".join(repr(name) for name in absent)
    return reasons
