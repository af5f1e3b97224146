"""Data-quality checks of the ingested samples, with great-expectations 1.x.

great-expectations takes about 6 s to import, so it is imported on first use, inside
the check, never when the code location loads. List-valued columns cannot be trusted
to GE's length expectations, so the suite runs on derived scalar columns.
"""

from functools import lru_cache
from typing import Any

import pandas as pd

from metrics.samples import FIELDS

#: Check name -> (derived columns it validates, blocking, description).
CHECKS: dict[str, tuple[tuple[str, ...], bool, str]] = {
    "required_fields_typed": (("user_input_ok", "response_ok", "reference_ok"), False,
                              "user_input, response and reference present and non-empty strings"),
    "contexts_are_string_lists": (("retrieved_contexts_ok",), False,
                                  "retrieved_contexts present and a list of strings"),
    "unique_ids": (("id",), True, "sample ids are unique"),
}


def validation_frame(samples: pd.DataFrame) -> pd.DataFrame:
    """One row per sample: ``id``, ``row`` and one boolean ``<field>_ok`` per field."""
    frame = pd.DataFrame({"id": samples["id"].astype(str), "row": samples["row"]})
    for name in FIELDS:
        frame[f"{name}_ok"] = [
            "row" not in problems and name not in problems and value is not None
            for value, problems in zip(samples[name], samples["problems"])
        ]
    return frame


@lru_cache(maxsize=1)
def _batch_definition():
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    return (context.data_sources.add_pandas("eval").add_dataframe_asset("samples")
            .add_batch_definition_whole_dataframe("whole"))


def _suite():
    import great_expectations as gx

    expectations = [gx.expectations.ExpectColumnValuesToBeUnique(column="id")]
    for columns, _, _ in CHECKS.values():
        expectations += [gx.expectations.ExpectColumnValuesToBeInSet(column=c, value_set=[True])
                         for c in columns if c.endswith("_ok")]
    return gx.ExpectationSuite(name="eval_samples_suite", expectations=expectations)


def run_checks(samples: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """Validate ``samples`` (the ingestion frame) and group the outcome per check.

    Returns
    -------
    dict
        ``{check_name: {"passed", "blocking", "description", "failing_rows"}}`` where
        ``failing_rows`` lists ``{"row", "id", "field", "reason"}`` for each bad row.
    """
    frame = validation_frame(samples)
    result = _batch_definition().get_batch(batch_parameters={"dataframe": frame}).validate(_suite())
    failed_columns = {r.expectation_config.kwargs["column"] for r in result.results if not r.success}
    problems = dict(zip(samples["id"].astype(str) + "#" + samples["row"].astype(str), samples["problems"]))
    outcome = {}
    for check, (columns, blocking, description) in CHECKS.items():
        failing = []
        for column in columns:
            if column not in failed_columns:
                continue
            if column == "id":
                dupes = frame[frame["id"].duplicated(keep=False)]
                failing += [{"row": int(r), "id": i, "field": "id", "reason": "duplicate id"}
                            for r, i in zip(dupes["row"], dupes["id"])]
                continue
            name = column.removesuffix("_ok")
            for _, bad in frame[~frame[column]].iterrows():
                reasons = problems.get(f"{bad['id']}#{bad['row']}") or {}
                failing.append({"row": int(bad["row"]), "id": bad["id"], "field": name,
                                "reason": reasons.get("row") or reasons.get(name) or "missing"})
        outcome[check] = {"passed": not failing, "blocking": blocking, "description": description,
                          "failing_rows": failing}
    return outcome
