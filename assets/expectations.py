"""great-expectations' suite of a dataset version: its expectations, the Dagster asset checks
they are reported as, and its Data Docs.

The suite validates the version's *profile* (:func:`profile`): one row per line of its file
as written (before the sample model reads it), with the line number, the id, whether the
line is a JSON object, and per field its JSON type, its length (characters of a text,
number of contexts), the script of the question, the relevance labels and a digest of the
fields read. It holds scalars only: GE's own expectations treat a list-valued cell as one
value, and a text would hold the whole version in memory.

:func:`suite` declares every expectation, each under one of :data:`CHECKS` (a Dagster asset
check on the ingested asset it concerns, with its severity). ERROR: what makes a line's
field unusable to the metrics reading it (a line that is no JSON object, a field missing
or of the wrong type, a relevance label off the scale, an id two lines share: the gate and
``rag-eval compare`` match two versions' rows by id). WARN: what is scored as it is but deserves a look (empty or overlong texts,
no or too many contexts, a line repeated, questions in another script than most). None
blocks: the blocking check is ``rejected_share_within_limit`` (``rag_eval.assets.ingestion``).

great-expectations takes seconds to import (its expectation registry, scipy, altair), so
it is imported by :func:`suite` and :func:`validate` only, in the check's step, never when
the code location loads or ``rag-eval`` starts.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import re
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pandas as pd

from rag_eval.assets.data_docs import repair_store_ids, set_aside_damaged_results, write_store_id
from rag_eval.assets.ingestion import FIELD_ASSETS
from rag_eval.metrics.core.field_values import MAX_CHARS, MAX_CONTEXTS
from rag_eval.metrics.core.samples import FIELDS, given_keys, iter_jsonl_records

#: What :func:`profile` says of a line that is a JSON object (else why it is unreadable).
READABLE = "JSON object"
#: The texts whose length the suite bounds.
TEXT_FIELDS = ("user_input", "response", "reference")
#: JSON types (:func:`json_type`) the sample model reads for each field.
TYPES = {"user_input": ["string"], "response": ["string"], "reference": ["string", "list of strings"],
         "retrieved_contexts": ["list of strings", "empty list", "string"],
         "retrieval_ground_truth": ["list of objects"], "retrieved_documents": ["list of objects", "empty list"]}
#: Share of questions that must be in the version's dominant script (``language_mix``).
DOMINANT_SHARE = 0.9
#: Characters of a question its script is read from.
SCRIPT_CHARS = 500
_SCRIPTS = {name: re.compile(f"[{letters}]") for name, letters in {
    "Latin": "A-Za-z\u00c0-\u024f", "CJK": "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff",
    "Hangul": "\u1100-\u11ff\uac00-\ud7af", "Cyrillic": "\u0400-\u04ff", "Greek": "\u0370-\u03ff",
    "Arabic": "\u0600-\u06ff", "Hebrew": "\u0590-\u05ff", "Devanagari": "\u0900-\u097f", "Thai": "\u0e00-\u0e7f",
}.items()}
_WEIGHTS = {"CJK": 3, "Hangul": 3}


@dataclass(frozen=True)
class Check:
    """A Dagster asset check reporting some of the suite's expectations."""

    name: str
    asset: str
    severity: str  # "ERROR" or "WARN" (dagster.AssetCheckSeverity)
    description: str


#: The suite's asset checks (all declared; a run reports those with expectations for its fields).
CHECKS = {check.name: check for check in [
    Check("lines_are_json_objects", "rejected_samples", "ERROR", "Every line is a JSON object (UTF-8, valid JSON)."),
    Check("ids_unique", "rejected_samples", "ERROR", "No two lines share an id (results are paired by id)."),
    Check("no_duplicate_samples", "rejected_samples", "WARN", "No line repeats another's fields read."),
    *[Check(f"{field}_typed", asset, "ERROR", f"{field} is present on every line and of a JSON type it is "
            f"read as ({' or '.join(TYPES[field])}).") for field, asset in FIELD_ASSETS.items()],
    *[Check(f"{field}_length", FIELD_ASSETS[field], "WARN", f"{field} is not empty and at most {MAX_CHARS:,} "
            "characters.") for field in TEXT_FIELDS],
    Check("contexts_per_row", "retrieved_contexts", "WARN",
          f"Every line has 1 to {MAX_CONTEXTS} retrieved contexts."),
    Check("language_mix", "questions", "WARN", f"At least {DOMINANT_SHARE:.0%} of the questions are in the "
          "version's dominant script."),
    Check("relevance_labels_allowed", "retrieval_ground_truth", "ERROR",
          "Every query_relevance_label is an integer on the document-retrieval metrics' label scale."),
]}


def json_type(value: Any) -> str | None:
    """The JSON type of a field's value as written: ``string``, ``number``, ``boolean``,
    ``object``, ``list of <type>s``, ``empty list``, ``mixed list``; ``None`` for null."""
    if value is None:
        return None
    if isinstance(value, list):
        kinds = {json_type(item) or "null" for item in value}
        return "empty list" if not kinds else f"list of {kinds.pop()}s" if len(kinds) == 1 else "mixed list"
    return {bool: "boolean", int: "number", float: "number", str: "string", dict: "object"}.get(type(value), "other")


def script_of(text: str) -> str | None:
    """The script most letters of the first :data:`SCRIPT_CHARS` characters of ``text`` are
    in (Latin, CJK, Hangul, Cyrillic, Greek, Arabic, Hebrew, Devanagari, Thai; a CJK or Hangul
    character counts as 3 letters, about a word: "什么是ETF？" is CJK); ``None`` with no letter of
    those."""
    head = text[:SCRIPT_CHARS]
    counts = {name: len(letters.findall(head)) * _WEIGHTS.get(name, 1) for name, letters in _SCRIPTS.items()}
    best = max(counts, key=counts.__getitem__)
    return best if counts[best] else None


def _chars(value: Any) -> int | None:
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        value = "\n".join(value)  # a reference given as a list of strings is read joined
    return len(value.strip()) if isinstance(value, str) else None


def profile(path: str | Path, fields: Iterable[str]) -> pd.DataFrame:
    """The profile of the version's file at ``path`` the suite validates: one row per line
    (blank lines skipped; per turn of a conversation, its fields as its sample holds them:
    ``rag_eval.metrics.core.samples.record_samples``) with ``line`` (from 1), ``id`` (the sample's), ``record``
    (:data:`READABLE` or why the line is unreadable), ``<field>_type`` (:func:`json_type` of
    each field of ``rag_eval.metrics.core.samples.FIELDS``, under its name or an alias), ``<text>_chars``
    (characters, surrounding space not counted), ``retrieved_contexts_count``,
    ``user_input_script`` (:func:`script_of`), ``relevance_labels`` (the
    ``query_relevance_label`` of each ground-truth document) and ``sample_digest`` (of
    ``fields``, the fields the selected metrics read).

    Raises
    ------
    OSError
        When the file cannot be read.
    """
    fields = list(fields)
    rows = []
    for sample, record in iter_jsonl_records(path):
        raw = {f: getattr(sample, f) for f in FIELDS} if sample.turn is not None else \
            {f: record[keys[0]] if record is not None and (keys := given_keys(record, f)) else None for f in FIELDS}
        contexts, truth, question = raw["retrieved_contexts"], raw["retrieval_ground_truth"], raw["user_input"]
        rows.append({
            "line": sample.line, "id": sample.id,
            "record": READABLE if record is not None else sample.problems["row"],
            **{f"{f}_type": json_type(raw[f]) for f in FIELDS}, **{f"{f}_chars": _chars(raw[f]) for f in TEXT_FIELDS},
            "retrieved_contexts_count": len(contexts) if isinstance(contexts, list)
            else 1 if isinstance(contexts, str) else None,
            "user_input_script": script_of(question) if isinstance(question, str) else None,
            "relevance_labels": [d.get("query_relevance_label") if isinstance(d, dict) else None for d in truth]
            if isinstance(truth, list) else None,
            "sample_digest": None if record is None else hashlib.sha256(json.dumps(
                [raw[f] for f in fields], sort_keys=True, default=str).encode()).hexdigest()[:16]})
    frame = pd.DataFrame(rows, columns=["line", "id", "record", *(f"{f}_type" for f in FIELDS),
                                        *(f"{f}_chars" for f in TEXT_FIELDS), "retrieved_contexts_count",
                                        "user_input_script", "relevance_labels", "sample_digest"])
    counts = [f"{f}_chars" for f in TEXT_FIELDS] + ["retrieved_contexts_count"]
    return frame.astype({"line": "int64", **dict.fromkeys(counts, "Int64")})


def great_expectations():
    """``great_expectations``, imported on first use without pyspark unless pyspark is already
    loaded (GE imports it only to validate Spark frames, never done here; where ``__main__``
    has no file, as in Dagster's run workers, its ``pyspark.sql.connect`` import ended the
    process with status 0)."""
    blocked = [name for name in ("pyspark",) if name not in sys.modules]
    for name in blocked:
        sys.modules[name] = None  # an ImportError for GE's optional import
    try:
        import great_expectations as gx
    finally:
        for name in blocked:
            del sys.modules[name]
    return gx


def warm_up() -> threading.Thread:
    """Start importing great-expectations (:func:`great_expectations`: about 5 s of CPU, most of
    a run's fixed cost) in a background thread, so that the import overlaps the steps before the
    suite's, which runs last and mostly waits on the judge; that step then finds it imported, or
    waits for the rest (Python's import lock). Not where pyspark may be imported meanwhile
    (``--executor spark``): the import hides pyspark while it runs. An import that fails here
    fails again, and is reported, in the suite's step."""
    def load() -> None:
        try:
            great_expectations()
        except Exception:  # noqa: BLE001 - the suite's step imports it again and reports the error
            pass

    thread = threading.Thread(target=load, name="great-expectations import", daemon=True)
    thread.start()
    return thread


def suite(frame: pd.DataFrame, fields: Iterable[str], labels: list[int]) -> list:
    """The suite's expectations (GE expectation objects) on the version's ``frame``
    (:func:`profile`) for the ``fields`` the selected metrics read, with the allowed relevance
    ``labels``; the dominant script is the questions' most frequent one. Each expectation's
    ``meta`` names its check (:data:`CHECKS`), the field it concerns and how a failing line is
    told (``failure``, formatted with the line's ``value``); its severity is its check's."""
    gx = great_expectations()
    from rag_eval.assets.expect_column_list_items_to_be_in_set import ExpectColumnListItemsToBeInSet

    expect = gx.expectations
    fields = list(fields)
    scripts = frame["user_input_script"].dropna()
    dominant_script = scripts.mode().iloc[0] if len(scripts) else None
    declared: list[tuple[str, str, str, Callable[..., Any], dict[str, Any]]] = [
        # (check, field, how a failing line is told, expectation class, its arguments)
        ("lines_are_json_objects", "", "{value}", expect.ExpectColumnValuesToBeInSet,
         {"column": "record", "value_set": [READABLE]}),
        ("ids_unique", "id", "{value!r} is also another line's id", expect.ExpectColumnValuesToBeUnique,
         {"column": "id"}),
        ("no_duplicate_samples", ", ".join(fields), "the same as another line", expect.ExpectColumnValuesToBeUnique,
         {"column": "sample_digest"}),
    ]
    for field in fields:
        declared += [
            (f"{field}_typed", field, "missing", expect.ExpectColumnValuesToNotBeNull,
             {"column": f"{field}_type", "row_condition": f'record=="{READABLE}"', "condition_parser": "pandas"}),
            (f"{field}_typed", field, "type {value}, expected " + " or ".join(TYPES[field]),
             expect.ExpectColumnValuesToBeInSet, {"column": f"{field}_type", "value_set": TYPES[field]})]
        if field in TEXT_FIELDS:
            declared.append((f"{field}_length", field, f"{{value}} characters, expected 1 to {MAX_CHARS}",
                             expect.ExpectColumnValuesToBeBetween,
                             {"column": f"{field}_chars", "min_value": 1, "max_value": MAX_CHARS}))
    if "retrieved_contexts" in fields:
        declared.append(("contexts_per_row", "retrieved_contexts",
                         f"{{value}} contexts, expected 1 to {MAX_CONTEXTS}", expect.ExpectColumnValuesToBeBetween,
                         {"column": "retrieved_contexts_count", "min_value": 1, "max_value": MAX_CONTEXTS}))
    if "user_input" in fields and dominant_script:
        declared.append(("language_mix", "user_input", f"in {{value}} script, most questions in {dominant_script}",
                         expect.ExpectColumnValuesToBeInSet,
                         {"column": "user_input_script", "value_set": [dominant_script], "mostly": DOMINANT_SHARE}))
    if "retrieval_ground_truth" in fields:
        declared.append(("relevance_labels_allowed", "retrieval_ground_truth",
                         f"labels {{value}}, allowed {labels[0]} to {labels[-1]}", ExpectColumnListItemsToBeInSet,
                         {"column": "relevance_labels", "value_set": labels,
                          "description": f"query_relevance_label values must be integers from {labels[0]} to "
                                         f"{labels[-1]}."}))
    return [kind(**arguments, meta={"check": check, "field": field, "failure": failure},
                 severity="critical" if CHECKS[check].severity == "ERROR" else "warning")
            for check, field, failure, kind, arguments in declared]


#: GE's name of the suite, of its Data Docs site and of the data source the version's profile is validated as.
SUITE = "rag_eval_samples"
#: Failing lines GE lists per expectation (the count is always whole).
LISTED = 20
#: Validation results the Data Docs index lists, the latest first (each run reads them again; older pages stay).
INDEXED = 100


def _context(site: Path):
    """An ephemeral GE context whose validation results and Data Docs site are files under ``site``."""
    gx = great_expectations()
    from great_expectations.data_context.types.base import (DataContextConfig, InMemoryStoreBackendDefaults,
                                                            ProgressBarsConfig)

    stores = InMemoryStoreBackendDefaults()
    stores.stores[stores.validation_results_store_name]["store_backend"] = {
        "class_name": "TupleFilesystemStoreBackend", "base_directory": str(site / ".validation_results")}
    return gx.get_context(mode="ephemeral", project_config=DataContextConfig(
        store_backend_defaults=stores, progress_bars=ProgressBarsConfig(globally=False),
        data_docs_sites={SUITE: {"class_name": "SiteBuilder", "show_how_to_buttons": False,
                                 "store_backend": {"class_name": "TupleFilesystemStoreBackend",
                                                   "base_directory": str(site)},
                                 "site_index_builder": {"class_name": "DefaultSiteIndexBuilder",
                                                        "validation_results_limit": INDEXED}}}))


def _plain(value: Any) -> Any:
    """A value of GE's result as plain JSON (numpy scalars and arrays to Python)."""
    return json.loads(json.dumps(value, default=lambda v: v.tolist() if hasattr(v, "tolist") else str(v)))


def _failing(line: int, meta: dict[str, str], value: Any) -> dict[str, Any]:
    """A failing line of an expectation (``meta``: its check, field and failure): ``line``,
    ``value`` (of the profile's column) and the ``message`` naming the line and the field."""
    where = f"line {line} {meta['field']}".rstrip()
    return {"line": line, "value": value, "message": f"{where}: {meta['failure'].format(value=value)}"}


def validate(frame: pd.DataFrame, expectations: list, version: str, run_id: str, site: Path
             ) -> tuple[list[dict[str, Any]], Path]:
    """Validate ``frame`` (:func:`profile`) under ``expectations`` (:func:`suite`) with a GE
    checkpoint named for the Dagster run ``run_id``, keep the result and add its page to the
    Data Docs site in ``site`` (one site for every version; one process at a time; a store id
    file a fault left half-written is repaired first: :func:`~rag_eval.assets.data_docs.repair_store_ids`, and a cut-short
    validation result set aside: :func:`~rag_eval.assets.data_docs.set_aside_damaged_results`).

    Returns
    -------
    (outcomes, page)
        One outcome per expectation: ``check``, ``field``, ``expectation`` (GE's type),
        ``column``, ``success``, ``unexpected_count``, ``failing`` (up to :data:`LISTED` of
        ``{"line", "value", "message"}``, lines from 1); and the Data Docs page of the result.

    Raises
    ------
    RuntimeError
        When an expectation raised instead of deciding (GE's message and traceback).
    """
    gx = great_expectations()
    from great_expectations.core.run_identifier import RunIdentifier

    site = site.resolve()  # GE's file stores take absolute folders only (the code location's out/ is relative)
    site.mkdir(parents=True, exist_ok=True)
    with open(site / ".lock", "w", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the site's index and result files, written by one process at a time
        repair_store_ids(site)
        write_store_id(site)
        for aside in set_aside_damaged_results(site):
            print(f"Data Docs: a validation result a fault left cut short was set aside as {aside}; this run "
                  "adds its own", file=sys.stderr)
        context = _context(site)
        batch = context.data_sources.add_pandas(SUITE).add_dataframe_asset(version) \
            .add_batch_definition_whole_dataframe("profile")
        checked = context.suites.add(gx.ExpectationSuite(name=SUITE, expectations=expectations))
        definition = context.validation_definitions.add(gx.ValidationDefinition(name=version, data=batch, suite=checked))
        checkpoint = context.checkpoints.add(gx.Checkpoint(
            name=SUITE, validation_definitions=[definition],
            actions=[gx.checkpoint.UpdateDataDocsAction(name="data_docs", site_names=[SUITE])],
            result_format={"result_format": "SUMMARY", "unexpected_index_column_names": ["line"],
                           "partial_unexpected_count": LISTED}))
        [(key, result)] = checkpoint.run(batch_parameters={"dataframe": frame},
                                         run_id=RunIdentifier(run_name=run_id)).run_results.items()
        [page] = context.get_docs_sites_urls(resource_identifier=key, site_name=SUITE)
    outcomes = []
    for item in result.results:
        config = item.expectation_config
        info = item.exception_info or {}  # one entry, or one per metric GE computed
        entries = [info] if "raised_exception" in info else list(info.values())
        if raised := [entry for entry in entries if entry.get("raised_exception")]:
            raise RuntimeError(f"great-expectations failed on {config.type} ({config.kwargs.get('column')}): "
                               f"{raised[0]['exception_message']}\n{raised[0]['exception_traceback']}")
        column, meta = config.kwargs.get("column"), config.meta
        failing = [] if item.success else [_failing(int(entry["line"]), meta, _plain(entry.get(column)))
                                           for entry in item.result.get("partial_unexpected_index_list") or []]
        outcomes.append({"check": meta["check"], "field": meta["field"], "expectation": config.type, "column": column,
                         "success": bool(item.success), "failing": failing,
                         "unexpected_count": int(item.result.get("unexpected_count") or 0)})
    return outcomes, Path(unquote(urlparse(page["site_url"]).path))
