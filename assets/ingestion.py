"""Ingestion: a dataset version's file into one asset per field, plus the rejected rows.

Each field (questions, responses, retrieved contexts, references, and the retrieval
ground truth and retrieved documents of DocumentRetrieval) is its own asset with
a data version that is the hash of its content, so a metric asset depends only on the
fields it reads: changing only the responses of a version makes only the
response-dependent metrics stale. Every line reaches every field asset, with why a
field is unusable; lines no selected metric can use are also kept in
``rejected_samples`` with the reason and the line as read.
"""

import functools
import hashlib
import itertools
import json
import math
import shlex
import warnings
from collections.abc import Set as AbstractSet
from dataclasses import replace
from pathlib import Path
from typing import Any

import dagster as dg
import pandas as pd
import pyarrow as pa

from rag_eval.assets.partitions import dataset_versions
from rag_eval.assets.quality import Validation
from rag_eval.assets.registration import sha256_of
from rag_eval.assets.resources import SETTINGS_FILE, DatasetStore
from rag_eval.assets.stored_results import TableWriter
from rag_eval.metrics.core.registry import CORE_METRICS, Registry
from rag_eval.metrics.errors import SettingsError, command
from rag_eval.metrics.core.samples import FIELDS, TURN_FIELDS, Sample, iter_samples, sample_from_dict, samples_to_frame
from rag_eval.metrics.core.usable import unavailable, unusable

# The blocking check below is partitioned like its asset, which Dagster 1.13 calls a preview: chosen knowingly,
# so every command does not warn about it.
warnings.filterwarnings("ignore", message="Specifying a partitions_def on an AssetCheckSpec", category=dg.PreviewWarning)

#: Field of the sample model -> the asset holding it.
FIELD_ASSETS = {"user_input": "questions", "response": "responses", "retrieved_contexts": "retrieved_contexts",
                "reference": "references", "retrieval_ground_truth": "retrieval_ground_truth",
                "retrieved_documents": "retrieved_documents"}


#: The share of rejected lines a version may have when nothing else says (:func:`rejection_limit`).
DEFAULT_REJECTED_SHARE = 0.05


class IngestConfig(dg.Config):
    """``max_rejected_share``: the share of rejected lines (no selected metric can use them)
    above which the version fails its blocking check; unset, the version's own
    (:func:`rejection_limit`)."""

    max_rejected_share: float | None = None


def rejection_limit(given: float | None, store: DatasetStore, version: str) -> tuple[float, str]:
    """The share of rejected lines ``version`` may have, and where it comes from: ``given`` (the
    run's ``ingest_dataset`` config), else the version's ``settings.json`` (``rag-eval register`` or
    ``run --max-rejected-share``, so a launch from the UI, a backfill or the automation uses it too),
    else :data:`DEFAULT_REJECTED_SHARE`.

    Raises
    ------
    SettingsError
        For a ``settings.json`` that cannot be read or holds no share from 0 to 1 (:meth:`DatasetStore.settings`).
    """
    if given is not None:
        return given, "the run's ingest_dataset config"
    kept = store.settings(version).get("max_rejected_share")
    if kept is not None:
        return float(kept), f"the version's {store.samples_path(version).with_name(SETTINGS_FILE)}"
    return DEFAULT_REJECTED_SHARE, "the default"


def passing_share(share: float) -> float:
    """The smallest limit of two decimals that a ``share`` of rejected lines passes (``share`` rounded up: 0.125 →
    0.13, 0.2 → 0.2; at most 1, as a share is), for a hint to print as it can be typed."""
    limit = math.ceil(round(share * 100, 6)) / 100  # 0.2 * 100 is 20.000000000000004: not 0.21
    return limit if limit >= share else round(limit + 0.01, 2)  # a share just above a limit (0.13 + 1e-9)


def raise_limit(share: float, folder: Path, dataset: str | None = None) -> str:
    """How to raise the rejection limit to one that ``share`` passes (:func:`passing_share`), as it can be typed:
    ``rag-eval run`` and ``make run`` of the ``dataset`` file run, else ``rag-eval register`` of the version's
    ``folder`` (a backfill, a launch from the UI)."""
    option = f"--max-rejected-share {passing_share(share):g}"
    if dataset is None:
        return f"raise it for this version with {command(f'register {shlex.quote(str(folder))} {option}')}"
    return (f"raise it with {option}: {command(f'run {shlex.quote(dataset)} {option}')}; through make: "
            f"make run DATASET={shlex.quote(dataset)} ARGS='{option}'")


def selected_metrics(asset_selection: AbstractSet[dg.AssetKey] | None,
                     registry: Registry) -> dict[str, tuple[str, ...]]:
    """``{metric: fields it reads}`` for the metric assets of ``registry`` the run selects (the core metrics
    when it selects none)."""
    selected = [m for m in registry if asset_selection and dg.AssetKey(m) in asset_selection] or CORE_METRICS
    return {m: registry[m].required_fields for m in selected}


class ContentDigest:
    """:func:`content_version` of a frame given in row chunks, in row order (:meth:`update`
    each): the same digest as of the whole frame at once."""

    def __init__(self) -> None:
        self._hash, self._empty = hashlib.sha256(b"["), True

    def update(self, frame: pd.DataFrame, columns: list[str]) -> "ContentDigest":
        """Take in the next rows (``id`` and ``columns`` of ``frame``)."""
        pairs = [[str(i), *values] for i, *values in zip(frame["id"], *(frame[c] for c in columns))]
        if pairs:  # the JSON list of every row's pair, one chunk's items at a time
            items = json.dumps(pairs, ensure_ascii=True, default=str)[1:-1]
            self._hash.update((items if self._empty else ", " + items).encode())
            self._empty = False
        return self

    def version(self) -> dg.DataVersion:
        """The data version of the rows taken in so far."""
        digest = self._hash.copy()
        digest.update(b"]")
        return dg.DataVersion(digest.hexdigest()[:16])


def content_version(frame: pd.DataFrame, columns: list[str]) -> dg.DataVersion:
    """SHA-256 of ``id`` and ``columns``, row by row, in row order."""
    return ContentDigest().update(frame, columns).version()


#: Lines read, validated and written to the field files at a time (about 10 KB of memory a line).
READ_LINES = 2_000


@functools.cache
def ingestion_asset(registry: Registry) -> dg.AssetsDefinition:
    """The ``ingest_dataset`` multi-asset, its lines checked against the selected metrics of ``registry``
    (:func:`selected_metrics`); built once per set of metrics."""

    @dg.multi_asset(
        partitions_def=dataset_versions,
        group_name="ingestion",
        # A target run's samples.jsonl is written by `system_responses` (assets/targets.py); file-based
        # versions never materialize these, and their ingestion does not need them.
        deps=["question_set", "system_contexts", "system_responses"],
        outs={
            **{asset: dg.AssetOut(code_version="3", kinds={"pandas"},
                                  description=f"The {field} of every line of the version, one row per turn of a "
                                              f"conversation (id, row, {field}, problem: why it is unusable, "
                                              "unreadable: why the line is, conversation_id, turn"
                                              + (", history" if field == "user_input" else "") + ").")
               for field, asset in FIELD_ASSETS.items()},
            "rejected_samples": dg.AssetOut(code_version="3", kinds={"pandas"},
                                            description="Lines no selected metric can use: row, line, id, reason and "
                                                        "the line as read."),
        },
        check_specs=[dg.AssetCheckSpec("rejected_share_within_limit", asset="rejected_samples", blocking=True,
                                       partitions_def=dataset_versions,
                                       description="The share of rejected lines is at most max_rejected_share.")],
    )
    def ingest_dataset(context: dg.AssetExecutionContext, config: IngestConfig, dataset_store: DatasetStore):
        """Load ``<datasets>/<version>/samples.jsonl``, validate it, split it into field assets.

        Every line goes to every field asset, so every metric reports on every line: a
        missing or malformed field is the ``input_error`` of the metrics that read it, and a
        line no selected metric can use (unreadable, or lacking a field of every metric) is
        also listed in ``rejected_samples`` and counted against ``max_rejected_share``.
        """
        version = context.partition_key
        path = dataset_store.samples_path(version)
        required = selected_metrics(context.run.asset_selection or context.job_def.asset_layer.selected_asset_keys,
                                    registry)
        validation, cannot_run, lines, rows, last = Validation(required), {}, 0, 0, None
        usable: set[str] = set()
        sources: dict[int, str | None] = {}  # row: its line as read
        writers = {asset: TableWriter(pa.schema([("id", pa.string()), ("row", pa.int64()), (field, pa.string()),
                                                 ("version", pa.string()), ("problem", pa.string()),
                                                 ("unreadable", pa.string()), *_turn_schema(field)]))
                   for field, asset in FIELD_ASSETS.items()}
        digests = {asset: ContentDigest() for asset in FIELD_ASSETS.values()}
        try:  # the lines a chunk at a time: each field's rows go to its file, so the version is never whole in memory
            samples = iter_samples(path)
            for chunk in iter(lambda: list(itertools.islice(samples, READ_LINES)), []):
                validation.add(chunk)
                cannot_run = unavailable(chunk, required, usable)  # the last chunk's answer holds for them all
                sources.update((s.row, s.source) for s in chunk if unusable(s, required) is not None)
                frame, rows = samples_to_frame(chunk), rows + len(chunk)
                lines += len({s.row for s in chunk} - {last})  # the turns of a conversation share its line
                last = chunk[-1].row
                unreadable = [s.problems.get("row") for s in chunk]
                for field, asset in FIELD_ASSETS.items():
                    out = frame[["id", "row", field]].assign(version=version)
                    out[field] = out[field].map(as_text).astype("string")  # VARCHAR in DuckDB, even when all empty
                    out["problem"] = pd.Series([s.problems.get(field) for s in chunk], dtype="string")
                    out["unreadable"] = pd.Series(unreadable, dtype="string")
                    out = out.assign(**_turn_columns(frame, field))
                    writers[asset].write(out)
                    # single-turn lines hash as before conversations were read: their metrics stay up to date
                    digests[asset].update(out, [field, "problem", "unreadable",
                                                *(c for c in TURN_FIELDS if c in out and out["turn"].notna().any())])
            if not lines:
                raise dg.Failure(f"{path} holds no samples (empty or blank lines only)")
            report = validation.report()
            for metric, why in cannot_run.items():
                context.log.warning(f"{metric} cannot run on {version}: {why}; every line will be its input_error")
            context.log.info(f"{version}: {lines} lines, {len(report['rejected'])} rejected, "
                             f"{len(report['input_errors'])} with input errors, metrics {list(required)}")
            for asset, writer in writers.items():  # each file moved into its place by the results store
                yield dg.Output(writer.close(), output_name=asset, metadata={"num_rows": rows},
                                data_version=digests[asset].version())
            rejected = pd.DataFrame(report["rejected"], columns=["row", "line", "id", "reason"]).assign(
                version=version, sample=lambda f: [sources[r] for r in f["row"]])
            share = rejected["row"].nunique() / lines  # of the lines: a line's turns rejected count once
            source_sha256 = sha256_of(path)
            yield dg.Output(rejected, output_name="rejected_samples", data_version=content_version(rejected, ["reason"]),
                            metadata={"rejected_rows": len(rejected), "rejected_share": share, "total_rows": lines,
                                      "input_error_rows": len(report["input_errors"]), "source_sha256": source_sha256,
                                      "metrics": list(required), "cannot_run": dg.MetadataValue.json(cannot_run),
                                      "dataset_meta": dg.MetadataValue.json(dataset_store.meta(version))})
        finally:
            for writer in writers.values():  # a file not stored (the step failed or stopped) goes too
                writer.discard()
        try:
            limit, source = rejection_limit(config.max_rejected_share, dataset_store, version)
        except SettingsError as exc:  # a settings.json planted or broken: the step fails with its one line
            raise dg.Failure(str(exc), allow_retries=False) from exc
        yield dg.AssetCheckResult(
            check_name="rejected_share_within_limit", asset_key="rejected_samples",
            passed=share <= limit, description=None if share <= limit else (
                f"{share:.1%} of the lines rejected > limit {limit:.1%} ({source}; "
                f"{raise_limit(share, dataset_store.samples_path(version).parent)}, or in the run's ingest_dataset "
                "config)"),
            metadata={"rejected_share": share, "limit": limit, "limit_source": source, "rejected_rows": len(rejected),
                      "total_rows": lines, "rejected": dg.MetadataValue.json(report["rejected"][:50]),
                      "input_errors": dg.MetadataValue.json(report["input_errors"][:50]),
                      "input_error_rows": len(report["input_errors"]), "cannot_run": dg.MetadataValue.json(cannot_run)},
        )

    return ingest_dataset


def _turn_schema(field: str) -> list[tuple[str, pa.DataType]]:
    """The columns of a conversation's turn in the table of ``field`` (:func:`_turn_columns`)."""
    return [("conversation_id", pa.string()), ("turn", pa.int64()),
            *([("history", pa.string())] if field == "user_input" else [])]  # TURN_FIELDS' types


def _turn_columns(frame: pd.DataFrame, field: str) -> dict[str, pd.Series]:
    """A chunk's ``conversation_id`` and ``turn`` (every field's table: a metric reading any field knows
    the turn it scores) and, with the questions, ``history`` as JSON text (what the judges read with
    them); NA on single-turn lines."""
    columns = {"conversation_id": frame["conversation_id"].astype("string"), "turn": frame["turn"].astype("Int64")}
    if field == "user_input":
        columns["history"] = frame["history"].map(as_text).astype("string")
    return columns


def as_text(value) -> str | None:
    """A field value as stored in its asset: strings as they are, lists as JSON text."""
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def samples_from_fields(frames: dict[str, pd.DataFrame]) -> list[Sample]:
    """Samples rebuilt from field assets (``{field: frame}``), with each field's problem and
    the line's (unreadable) problem as ingestion found them; fields not given stay ``None``."""
    parts = [frame[[c for c in ("id", "row", field, "problem", "unreadable", *TURN_FIELDS) if c in frame]]
             .rename(columns={"problem": f"{field}.problem"}) for field, frame in frames.items()]
    merged = functools.reduce(lambda left, right: left.merge(
        right.drop(columns=[c for c in ("unreadable", *TURN_FIELDS) if c in right and c in left]), on=["id", "row"],
        how="inner"), parts)
    lists = {"retrieved_contexts", "retrieval_ground_truth", "retrieved_documents"}
    samples = []
    for record in merged.sort_values(["row", "turn"] if "turn" in merged else "row").to_dict("records"):
        sample = sample_from_dict({**{f: _decode(record.get(f), f in lists) for f in FIELDS}, "id": record["id"]},
                                  int(record["row"]))
        problems = {f: record[f"{f}.problem"] for f in frames if not _is_empty(record[f"{f}.problem"])}
        if not _is_empty(record["unreadable"]):
            problems["row"] = record["unreadable"]
        sample.problems.update(problems)
        if not _is_empty(record.get("turn")):  # a conversation's turn, with what its questions table keeps of it
            sample.conversation_id, sample.turn = str(record["conversation_id"]), int(record["turn"])
            sample.history = _decode(record.get("history"), True)
        samples.append(sample)
    return samples


def only_fields(samples: list[Sample], fields: tuple[str, ...]) -> list[Sample]:
    """``samples`` as :func:`samples_from_fields` rebuilds them from ``fields`` alone: the other
    fields ``None`` and their problems dropped (the line's own problem kept)."""
    # Any: mypy matches a ** dict against every parameter of Sample (id, row...), not the fields it holds
    blank: dict[str, Any] = {f: None for f in FIELDS if f not in fields}
    return [replace(s, **blank, problems={k: v for k, v in s.problems.items() if k in fields or k == "row"})
            for s in samples]


def _is_empty(value) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and value != value)


def _decode(value, is_list: bool):
    if _is_empty(value):
        return None
    return json.loads(value) if is_list and isinstance(value, str) else value
