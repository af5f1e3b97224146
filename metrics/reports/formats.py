"""Per-row results in the peers' shapes: Azure AI Evaluation rows and a RAGAS score table."""
from __future__ import annotations

import json
import math
from typing import Any

import pandas as pd

from rag_eval.metrics.core.registry import builtin_registry
from rag_eval.metrics.core.results import Direction, Status
from rag_eval.metrics.core.samples import Sample


def _result_word(status: str, passed: Any) -> str:
    if status == Status.OK.value:
        return "pass" if passed else "fail"
    return {"not_applicable": "not_applicable", "judge_error": "error", "input_error": "error",
            "target_error": "error"}[status]


def _value(value: Any) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


#: DocumentRetrieval metrics whose values and thresholds Azure gives as ints (counts, labels).
_AZURE_INT_VALUES = {"top1_relevance", "top3_max_relevance", "holes", "total_retrieved_documents",
                     "total_ground_truth_documents"}
_AZURE_INT_THRESHOLDS = {"holes", "total_retrieved_documents", "total_ground_truth_documents"}


def azure_key(metric: str, k: int) -> str:
    """Azure DocumentRetrievalEvaluator's name of a document retrieval metric: ``ndcg@<k>``,
    ``xdcg@<k>``, the others as they are."""
    return f"{metric}@{k}" if metric in ("ndcg", "xdcg") else metric


def _document_retrieval(record: dict[str, Any], result: dict[str, Any], value: float | None, word: str) -> None:
    name = result["metric"]
    details = json.loads(result["details"]) if isinstance(result["details"], str) else dict(result["details"] or {})
    key = azure_key(name, int(details.get("k", 3)))
    record[key] = int(value) if name in _AZURE_INT_VALUES and value is not None and float(value).is_integer() else value
    record[f"{key}_result"] = word
    threshold = result["threshold"]
    record[f"{key}_threshold"] = int(threshold) if name in _AZURE_INT_THRESHOLDS and float(threshold).is_integer() \
        else float(threshold)
    record[f"{key}_higher_is_better"] = result["direction"] == Direction.HIGHER.value
    if result["status"] != Status.OK.value:
        record[f"{key}_reason"] = result["reason"]
    if name == "total_ground_truth_documents":  # the name in Azure's documentation and older releases
        record["total_groundtruth_documents"] = record[key]


def azure_rows(results: pd.DataFrame) -> list[dict[str, Any]]:
    """One dict per sample with Azure AI Evaluation 1.18's keys for the Azure metrics present.

    Likert evaluators: ``<name>`` (and ``gpt_<name>`` for older readers), ``<name>_reason``,
    ``<name>_result`` (pass, fail, not_applicable, error), ``<name>_threshold`` and
    ``<name>_status``; custom and plugin metrics (every metric that is not built in) the same keys, as
    Azure's custom evaluators give them. GroundednessPro: ``groundedness_pro_label`` (bool) and
    ``groundedness_pro_reason``. DocumentRetrieval: flat, as ``DocumentRetrievalEvaluator``
    returns them — ``ndcg@<k>``, ``xdcg@<k>`` (``k`` as used), ``fidelity``,
    ``top1_relevance``, ``top3_max_relevance``, ``holes``, ``holes_ratio``,
    ``total_retrieved_documents``, ``total_ground_truth_documents`` (also as
    ``total_groundtruth_documents``, the name in Azure's documentation), each with
    ``_result``, ``_threshold`` and ``_higher_is_better``; counts and labels are ints, as
    are the count thresholds; a value that could not be computed is ``None`` with its
    ``_reason``. Samples without Azure metrics are left out. The turns of a conversation (rows with a
    ``conversation_id``) are one dict, as Azure returns a ``conversation``'s: ``id`` the conversation's,
    each numeric key the mean over the turns that have it, and ``evaluation_per_turn``: ``{key: [the
    value of each turn]}`` for every key (:func:`conversation_row`).
    """
    builtin, rows = builtin_registry(), []
    conversations: dict[str, list[dict[str, Any]]] = {}
    of = dict(zip(results["sample_id"], results["conversation_id"])) if "conversation_id" in results else {}
    turn_of = dict(zip(results["sample_id"], results["turn"])) if of else {}
    for (row, sample_id), frame in results.groupby(["row", "sample_id"], sort=True, dropna=False):
        record: dict[str, Any] = {"id": sample_id, "row": None if pd.isna(row) else int(row)}
        for result in frame.to_dict("records"):
            name = result["metric"]
            family = builtin[name].family if name in builtin else "custom"  # custom or plugin: read alike
            value, word = _value(result["value"]), _result_word(result["status"], result["passed"])
            if name == "groundedness_pro":
                record.update({"groundedness_pro_label": None if value is None else value == 1.0,
                               "groundedness_pro_reason": result["reason"]})
            elif family in ("azure", "custom", "plugin"):
                record.update({name: value, f"gpt_{name}": value, f"{name}_reason": result["reason"],
                               f"{name}_result": word, f"{name}_threshold": result["threshold"],
                               f"{name}_status": result["status"]})
            elif family == "document_retrieval":
                _document_retrieval(record, result, value, word)
        if len(record) > 2:
            conversation = of.get(sample_id)
            if conversation is None or pd.isna(conversation):
                rows.append(record)
            elif conversation not in conversations:
                rows.append(record)  # its place, taken by the whole conversation below
                conversations[conversation] = [record]
            else:
                conversations[conversation].append(record)
    firsts = {id(turns[0]): conversation_row(name, sorted(turns, key=lambda r: int(turn_of[r["id"]])))
              for name, turns in conversations.items()}
    return [firsts.get(id(record), record) for record in rows]


def conversation_row(conversation_id: str, turns: list[dict[str, Any]]) -> dict[str, Any]:
    """The Azure row of a conversation from its turns' rows (in turn order): ``id`` and ``row`` (its
    line's), each key whose values are numbers (not booleans) the mean of the turns' numbers (``None``
    when no turn has one), and ``evaluation_per_turn`` with every key's value per turn (``None`` where
    a turn lacks it), as Azure AI Evaluation's ``_aggregate_results`` gives them."""
    keys = list(dict.fromkeys(k for turn in turns for k in turn if k not in ("id", "row")))
    record: dict[str, Any] = {"id": conversation_id, "row": turns[0]["row"]}
    for key in keys:
        present = [v for v in (turn.get(key) for turn in turns) if v is not None]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
            record[key] = sum(present) / len(present) if present else None
    record["evaluation_per_turn"] = {key: [turn.get(key) for turn in turns] for key in keys}
    return record


def fields_frame(samples: list[Sample]) -> pd.DataFrame:
    """The RAGAS fields of samples, one row each, with their ``row`` and ``sample_id`` (the turns of a
    conversation share a row)."""
    return pd.DataFrame([{"row": s.row, "sample_id": s.id, "user_input": s.user_input,
                          "retrieved_contexts": s.retrieved_contexts, "response": s.response, "reference": s.reference}
                         for s in samples],
                        columns=["row", "sample_id", "user_input", "retrieved_contexts", "response", "reference"])


def ragas_table(results: pd.DataFrame, fields: pd.DataFrame | None = None) -> pd.DataFrame:
    """RAGAS's ``EvaluationResult.to_pandas()`` shape: one row per sample (a turn of a conversation
    with its ``conversation_id`` and ``turn`` when ``results`` has them, NA for a single turn), the
    sample's fields (``fields``: a frame with ``row``, ``sample_id`` when the turns of a conversation
    are there, and the RAGAS fields, e.g. :func:`fields_frame`), then one column per metric holding
    the value of ``ok`` results (empty otherwise), and ``unscored``: for every empty cell,
    ``metric: status: reason`` (``; ``-joined), so no row is there without saying why."""
    keys = ["row", "sample_id"]
    table = results.set_index([*keys, "metric"])["value"].unstack("metric")
    table = table.reindex(columns=list(dict.fromkeys(results["metric"]))).reset_index()
    table.columns.name = None
    missing = results[results["status"] != Status.OK.value]
    notes = {key: "; ".join(f"{m}: {st}: {r}" for m, st, r in zip(group["metric"], group["status"], group["reason"]))
             for key, group in missing.groupby(keys)}
    table["unscored"] = [notes.get(key, "") for key in zip(table["row"], table["sample_id"])]
    if "turn" in results:
        turns = results.drop_duplicates(keys)[[*keys, "conversation_id", "turn"]]
        table = turns.merge(table, on=keys, how="right")
    if fields is not None:
        front = [c for c in fields if c != "sample_id"]  # the fields first, then the id (as without turns)
        table = fields.merge(table, on=[k for k in keys if k in fields], how="right")
        table = table[[*front, *(c for c in table if c not in front)]]
    return table.rename(columns={"sample_id": "id"})
def write_ragas_csv(table: pd.DataFrame, path) -> None:
    """Write a :func:`ragas_table` as CSV with RFC 4180 line ends (``\\r\\n``), so a field
    holding a carriage return or a newline is quoted and every row stays one record."""
    table.to_csv(path, index=False, lineterminator="\r\n")


def write_azure_jsonl(results: pd.DataFrame, path) -> int:
    """Write :func:`azure_rows` as JSONL; returns the number of lines."""
    rows = azure_rows(results)
    with open(path, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    return len(rows)
