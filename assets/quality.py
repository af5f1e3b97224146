"""Data-quality suite of a dataset version, with great-expectations 1.x.

The suite is derived from the metrics selected: for every field they read, the field
is present, of the right type and not empty (``<field>_ok``, from the sample model's
per-row problems) and within length bounds; ids are unique. GE's expectations on
list-valued columns cannot be trusted (an empty list passes a length check), so the
suite runs on derived scalar columns. great-expectations takes about 6 s to import,
so it is imported on first use, never when the code location loads.
"""

from collections.abc import Iterable
from functools import lru_cache
from typing import Any

import pandas as pd

from metrics.samples import MAX_CHARS, MAX_CONTEXTS


def validation_frame(samples: pd.DataFrame, fields: Iterable[str]) -> pd.DataFrame:
    """One row per sample: ``id``, ``row`` and, per field, ``<field>_ok`` and ``<field>_size``
    (characters of a string, number of contexts of a list)."""
    frame = pd.DataFrame({"id": samples["id"].astype(str), "row": samples["row"]})
    for name in fields:
        frame[f"{name}_ok"] = [
            "row" not in problems and name not in problems and value is not None
            for value, problems in zip(samples[name], samples["problems"])
        ]
        frame[f"{name}_size"] = [len(value) if value is not None else 0 for value in samples[name]]
    return frame


@lru_cache(maxsize=1)
def _batch_definition():
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    return (context.data_sources.add_pandas("eval").add_dataframe_asset("samples")
            .add_batch_definition_whole_dataframe("whole"))


def build_suite(fields: Iterable[str]):
    """The expectation suite for the given fields (a ``gx.ExpectationSuite``)."""
    import great_expectations as gx

    expectations = [gx.expectations.ExpectColumnValuesToBeUnique(column="id")]
    for name in fields:
        expectations.append(gx.expectations.ExpectColumnValuesToBeInSet(column=f"{name}_ok", value_set=[True]))
        limit = MAX_CONTEXTS if name == "retrieved_contexts" else MAX_CHARS
        expectations.append(gx.expectations.ExpectColumnValuesToBeBetween(column=f"{name}_size", max_value=limit))
    return gx.ExpectationSuite(name="eval_samples_suite", expectations=expectations)


def validate(samples: pd.DataFrame, fields: Iterable[str]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Run the suite on the ingestion frame.

    Returns
    -------
    (failures, statistics)
        ``failures`` lists ``{"row", "id", "field", "reason"}`` for every failing row and
        field (a row may appear once per failing field); ``statistics`` is GE's summary
        (evaluated and successful expectations, success percent) plus the failing
        expectation types.
    """
    fields = list(fields)
    frame = validation_frame(samples, fields)
    result = _batch_definition().get_batch(batch_parameters={"dataframe": frame}).validate(build_suite(fields))
    failed = {r.expectation_config.kwargs["column"] for r in result.results if not r.success}
    problems = list(samples["problems"])
    failures: list[dict[str, Any]] = []
    if "id" in failed:
        dupes = frame[frame["id"].duplicated(keep=False)]
        failures += [{"row": int(r), "id": i, "field": "id", "reason": "duplicate id"}
                     for r, i in zip(dupes["row"], dupes["id"])]
    for name in fields:
        for index in frame.index[~frame[f"{name}_ok"]] if f"{name}_ok" in failed else []:
            row_problems = problems[index] or {}
            failures.append({"row": int(frame.at[index, "row"]), "id": frame.at[index, "id"], "field": name,
                             "reason": row_problems.get("row") or row_problems.get(name) or "missing"})
        if f"{name}_size" in failed:
            limit = MAX_CONTEXTS if name == "retrieved_contexts" else MAX_CHARS
            for index in frame.index[frame[f"{name}_size"] > limit]:
                failures.append({"row": int(frame.at[index, "row"]), "id": frame.at[index, "id"], "field": name,
                                 "reason": f"size {frame.at[index, f'{name}_size']} over the limit {limit}"})
    statistics = {**{k: result.statistics[k] for k in ("evaluated_expectations", "successful_expectations",
                                                        "success_percent")},
                  "failed_expectations": sorted(r.expectation_config.type + f"[{r.expectation_config.kwargs['column']}]"
                                                for r in result.results if not r.success)}
    return failures, statistics
