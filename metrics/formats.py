"""Per-row results in the peers' shapes: Azure AI Evaluation rows and a RAGAS score table."""
from __future__ import annotations

import json
import math
from typing import Any

import pandas as pd

from metrics.registry import METRICS
from metrics.results import Direction, Status
from metrics.samples import Sample


def _result_word(status: str, passed: Any) -> str:
    if status == Status.OK.value:
        return "pass" if passed else "fail"
    return {"not_applicable": "not_applicable", "judge_error": "error", "input_error": "error"}[status]


def _value(value: Any) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def azure_rows(results: pd.DataFrame) -> list[dict[str, Any]]:
    """One dict per sample with Azure AI Evaluation 1.18's keys for the Azure metrics present.

    Likert evaluators: ``<name>`` (and ``gpt_<name>`` for older readers), ``<name>_reason``,
    ``<name>_result`` (pass, fail, not_applicable, error), ``<name>_threshold`` and
    ``<name>_status``. GroundednessPro: ``groundedness_pro_label`` (bool) and
    ``groundedness_pro_reason``. DocumentRetrieval: ``document_retrieval`` (NDCG),
    ``document_retrieval_result``, ``document_retrieval_threshold`` and
    ``document_retrieval_properties`` with every value and its ``_result``,
    ``_threshold`` and ``_higher_is_better``. Samples without Azure metrics are left out.
    """
    rows = []
    for (row, sample_id), frame in results.groupby(["row", "sample_id"], sort=True, dropna=False):
        record: dict[str, Any] = {"id": sample_id, "row": None if pd.isna(row) else int(row)}
        for result in frame.to_dict("records"):
            name, family = result["metric"], METRICS[result["metric"]].family if result["metric"] in METRICS else ""
            value, word = _value(result["value"]), _result_word(result["status"], result["passed"])
            if name == "groundedness_pro":
                record.update({"groundedness_pro_label": None if value is None else value == 1.0,
                               "groundedness_pro_reason": result["reason"]})
            elif family == "azure":
                record.update({name: value, f"gpt_{name}": value, f"{name}_reason": result["reason"],
                               f"{name}_result": word, f"{name}_threshold": result["threshold"],
                               f"{name}_status": result["status"]})
            elif family == "document_retrieval":
                properties = record.setdefault("document_retrieval_properties", {})
                properties.update({name: value, f"{name}_result": word, f"{name}_threshold": result["threshold"],
                                   f"{name}_higher_is_better": result["direction"] == Direction.HIGHER.value})
                if name == "ndcg":
                    record.update({"document_retrieval": value, "document_retrieval_result": word,
                                   "document_retrieval_threshold": result["threshold"]})
        if len(record) > 2:
            rows.append(record)
    return rows


def ragas_table(results: pd.DataFrame, samples: list[Sample] | None = None) -> pd.DataFrame:
    """RAGAS's ``EvaluationResult.to_pandas()`` shape: one row per sample, the sample's
    fields, then one column per metric holding the value of ``ok`` results (empty
    otherwise; the status and reason of each cell are in the per-row results)."""
    table = results.set_index(["row", "sample_id", "metric"])["value"].unstack("metric")
    table = table.reindex(columns=list(dict.fromkeys(results["metric"]))).reset_index()
    table.columns.name = None
    if samples is not None:
        fields = pd.DataFrame([{"row": s.row, "user_input": s.user_input, "retrieved_contexts": s.retrieved_contexts,
                                "response": s.response, "reference": s.reference} for s in samples])
        table = fields.merge(table, on="row", how="right")
    return table.rename(columns={"sample_id": "id"})


def write_azure_jsonl(results: pd.DataFrame, path) -> int:
    """Write :func:`azure_rows` as JSONL; returns the number of lines."""
    rows = azure_rows(results)
    with open(path, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    return len(rows)
