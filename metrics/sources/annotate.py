"""A random sample of a version's rows for people to label: a CSV sheet and Label Studio tasks.

``rag-eval annotate export`` draws the rows (:func:`draw`) and writes them with
:func:`write_sheet` (CSV: one row per (line, metric), the fields that metric reads, a conversation's
question with its earlier turns, an empty ``label`` column) and :func:`write_label_studio` (tasks and a labeling config);
``rag-eval annotate import`` reads the filled files back (``rag_eval.metrics.sources.labels``).

**The draw is uniform**, which is what makes a prediction-powered interval valid
(``rag_eval.metrics.stats.estimates``): the rows are the first ``n`` of one shuffle seeded by ``seed``, and
are written in that shuffled order, so the first ``k`` rows of the sheet are themselves a
uniform random sample (label from the top), and a later, larger export with the same seed
keeps the rows already drawn. **Stratified** by the judge's verdict on a metric (pass, fail,
or its status), each stratum gets its share of ``n`` in proportion to its size (proportional
allocation, largest remainders), so every row has the same chance of being drawn (up to
rounding) and the estimate needs no weights; strata get their draw from their own seeded
shuffle, then the whole sample is shuffled once more for the sheet's order.
"""
from __future__ import annotations

import csv
import json
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar
from xml.sax.saxutils import quoteattr

import numpy as np

from rag_eval.metrics.sources.labels import is_ratio
from rag_eval.metrics.core.registry import Registry, given
from rag_eval.metrics.core.results import Direction
from rag_eval.metrics.core.samples import Sample
from rag_eval.metrics.errors import SettingsError

#: What a draw draws: a row, or a (row, turn) of a file of conversations.
U = TypeVar("U", int, tuple[int, int])

#: What a person is asked, per metric (others: the metric's own description).
GUIDELINES = {
    "faithfulness": "Is every claim of the response supported by the retrieved contexts? "
                    "pass: all of it; fail: any claim unsupported (or a score 0-1: the share supported).",
    "answer_relevancy": "Does the response answer the question (not evasive, not off the question)? pass/fail, "
                        "or a score 0-1.",
    "context_relevancy": "Are the retrieved contexts relevant to the question? pass/fail, or a score 0-1.",
    "context_recall": "Do the retrieved contexts hold everything the reference answer says? pass/fail, or the share "
                      "0-1.",
    "context_precision": "Are the contexts that help answer the question ranked first? pass/fail, or a score 0-1.",
}
#: The fields an annotator may be shown, in the sheet's column order.
SHOWN_FIELDS = ("user_input", "retrieved_contexts", "response", "reference")
SHEET_COLUMNS = ("line", "id", "metric", "guideline", *SHOWN_FIELDS, "label", "annotator", "notes", "version")


def guideline(metric: str, registry: Registry | None = None) -> str:
    """The question a person answers for ``metric`` (of ``registry``, default the built-in metrics), with
    the label it takes."""
    if metric in GUIDELINES:
        return GUIDELINES[metric]
    cls = given(registry)[metric]
    low, high = cls.value_range
    described = (cls.__doc__ or metric).strip().splitlines()[0].replace("``", "")
    way = "higher" if cls.direction is Direction.HIGHER else "lower"
    words = " (or pass/fail)" if is_ratio(metric, registry) else ""
    return f"{described} Label: a number from {low:g} to {high:g}, {way} is better{words}."


def _shuffle(rows: list[U], seed: int, salt: str = "") -> list[U]:
    rng = np.random.default_rng([seed, zlib.crc32(salt.encode())])
    return [rows[i] for i in rng.permutation(len(rows))]


def allocate(sizes: Mapping[str, int], n: int) -> dict[str, int]:
    """Proportional allocation of ``n`` draws over strata of ``sizes`` (largest remainders:
    each stratum gets ``floor(n N_h / N)``, the rest go to the largest fractional parts, ties by
    name), never more than a stratum holds."""
    total = sum(sizes.values())
    n = min(n, total)
    exact = {h: n * size / total for h, size in sizes.items()}
    quota = {h: int(v) for h, v in exact.items()}
    for h in sorted(exact, key=lambda h: (-(exact[h] - quota[h]), h))[: n - sum(quota.values())]:
        quota[h] += 1
    return quota


def draw(rows: list[U], n: int, seed: int = 0, strata: Mapping[U, str] | None = None) -> list[U]:
    """``n`` of ``rows`` drawn uniformly (module notes), in the order the sheet lists them.

    Parameters
    ----------
    rows : list of int, or of (int, int)
        The rows that may be drawn (``Sample.row``; ``(row, turn)`` to draw a conversation's turns, a
        single turn's ``turn`` 0: in the order of rows, so a file without conversations draws as by row).
    n : int
        How many (all of them when fewer).
    seed : int
        The shuffle's seed: the same seed gives the same draw, a larger ``n`` extends it.
    strata : mapping, optional
        The stratum of each of ``rows`` (the judge's verdict): proportional allocation.

    Raises
    ------
    ValueError
        For ``n`` below 1.
    """
    if n < 1:
        raise SettingsError(f"-n {n}: draw at least one row")
    if strata is None:
        return _shuffle(sorted(rows), seed)[:n]
    groups: dict[str, list[U]] = {}
    for row in sorted(rows):
        groups.setdefault(strata.get(row, "unscored"), []).append(row)
    quota = allocate({h: len(g) for h, g in groups.items()}, n)
    chosen = [row for h, group in sorted(groups.items()) for row in _shuffle(group, seed, h)[: quota[h]]]
    return _shuffle(chosen, seed, "order")


def _contexts(contexts: list[str] | None) -> str:
    return "\n\n".join(f"[{i}] {text}" for i, text in enumerate(contexts or [], start=1))


def _shown(sample: Sample, field: str) -> str:
    """``field`` of ``sample`` as a person labels it: the question as the judge reads it (a conversation's turn
    with its earlier turns, ``Sample.question``), the contexts numbered."""
    if field == "user_input":
        return sample.question() if sample.user_input is not None else ""
    if field == "retrieved_contexts":
        return _contexts(sample.retrieved_contexts)
    return getattr(sample, field) or ""


def tasks(samples: list[Sample], metrics: list[str], version: str,
          judged: Mapping[tuple[int, int, str], tuple[float | None, str]] | None = None,
          registry: Registry | None = None) -> list[dict[str, Any]]:
    """One record per (sample, metric of ``registry``, default the built-in ones), in the samples' order:
    line, id, metric, guideline, the fields the metric reads (others empty; ``user_input`` a conversation's turn
    with its earlier turns, as the judge reads it), version; with ``judged`` (``{(row, turn, metric):
    (score, reason)}``, a single turn's ``turn`` 0) also ``judge_score`` and ``judge_reason`` (annotators are blind to
    the judge otherwise)."""
    records = []
    for sample in samples:
        for metric in metrics:
            reads = set(given(registry)[metric].required_fields)
            record = {"line": sample.line, "id": sample.id, "metric": metric, "guideline": guideline(metric, registry),
                      **{f: _shown(sample, f) if f in reads else "" for f in SHOWN_FIELDS},
                      "label": "", "annotator": "", "notes": "", "version": version}
            if judged is not None:
                score, reason = judged.get((sample.row, sample.turn or 0, metric), (None, ""))
                record.update(judge_score="" if score is None else score, judge_reason=reason)
            records.append(record)
    return records


def write_sheet(records: list[dict[str, Any]], path: str | Path) -> Path:
    """The CSV to fill in a spreadsheet (UTF-8 with a byte-order mark, so Excel reads its
    accents and Chinese; cells with line breaks quoted)."""
    path = Path(path)
    columns = list(SHEET_COLUMNS) + [c for c in ("judge_score", "judge_reason") if records and c in records[0]]
    with path.open("w", encoding="utf-8-sig", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(records)
    return path


def label_config(metrics: list[str], registry: Registry | None = None) -> str:
    """A Label Studio labeling config for the exported tasks: the guideline, the fields, a
    ``label`` choice pass/fail for [0, 1] metrics and a number (``label_<metric>``) on each
    other metric's scale, and a ``notes`` text area; ``metrics`` of ``registry`` (default the built-in ones)."""
    ratio = [m for m in metrics if is_ratio(m, registry)]
    scaled = [m for m in metrics if not is_ratio(m, registry)]
    lines = ["<View>", '  <Header value="$metric"/>', '  <Text name="guideline" value="$guideline"/>']
    lines += [f'  <Header value="{f}" size="6"/>\n  <Text name="{f}" value="${f}"/>' for f in SHOWN_FIELDS]
    if ratio:
        lines.append('  <Choices name="label" toName="response" choice="single" showInline="true">\n'
                     '    <Choice value="pass"/>\n    <Choice value="fail"/>\n  </Choices>')
    for metric in scaled:
        low, high = given(registry)[metric].value_range
        lines.append(f'  <Header value={quoteattr(f"{metric} only: a number from {low:g} to {high:g}")} size="6"/>\n'
                     f'  <Number name="label_{metric}" toName="response" min="{low:g}" max="{high:g}"/>')
    lines += ['  <TextArea name="notes" toName="response" placeholder="notes (optional)" rows="2"/>', "</View>"]
    return "\n".join(lines) + "\n"


def write_label_studio(records: list[dict[str, Any]], metrics: list[str], folder: str | Path,
                       stem: str, registry: Registry | None = None) -> tuple[Path, Path]:
    """``<stem>.label_studio.json`` (tasks: each record as a task's ``data``, its id as
    ``sample_id``) and ``<stem>.label_config.xml`` (:func:`label_config` of ``metrics`` of ``registry``); their paths. Import the tasks into a
    project set up with the config; export it as JSON for ``rag-eval annotate import``."""
    folder = Path(folder)
    tasks_path, config_path = folder / f"{stem}.label_studio.json", folder / f"{stem}.label_config.xml"
    data = [{"data": {("sample_id" if k == "id" else k): v for k, v in r.items()
                      if k not in ("label", "annotator", "notes")}} for r in records]
    tasks_path.write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")
    config_path.write_text(label_config(metrics, registry), encoding="utf-8")
    return tasks_path, config_path
