"""Every registered metric holds the same contract (as scikit-learn's
``sklearn/metrics/tests/test_common.py`` holds its metrics): a value within the declared
range, ``input_error`` naming a missing field, ``judge_error`` for a failing judge, a
docstring stating range and direction, and the same result through ``evaluate()``, the
metric's asset and Spark."""
from __future__ import annotations

import re

import dagster as dg
import pytest

from rag_eval.metrics import evaluate
from rag_eval.metrics.judges.offline import OfflineJudge
from rag_eval.metrics.core.registry import builtin_registry
from rag_eval.metrics.core.results import Direction, Status
from rag_eval.metrics.core.samples import sample_from_dict
from tests.conftest import ScriptedJudge

METRICS = builtin_registry()
NAMES = list(METRICS)
#: One row every metric can score: text fields with two statements each, and documents.
FULL = {"id": "c1", "user_input": "Where was Marie Curie born?",
        "response": "Marie Curie was born in Warsaw. She won two Nobel Prizes.",
        "retrieved_contexts": ["Marie Curie was born in Warsaw in 1867.", "She won Nobel Prizes in 1903 and 1911."],
        "reference": "Marie Curie was born in Warsaw. She won the Nobel Prize twice.",
        "retrieval_ground_truth": [{"document_id": "d1", "query_relevance_label": 3},
                                   {"document_id": "d2", "query_relevance_label": 1}],
        "retrieved_documents": [{"document_id": "d2", "relevance_score": 0.9},
                                {"document_id": "d3", "relevance_score": 0.5}]}
#: What the scripted judge returns for the judgements that need a shape of their own.
SCRIPT = dict(matrix={"Marie Curie was born in Warsaw.": [1, 0], "She won the Nobel Prize twice.": [0, 1],
                      "She won two Nobel Prizes.": [0, 1]}, entities=["Marie Curie", "Warsaw"], likert=(4, "scripted"))


def full_sample(**changes):
    return sample_from_dict({**FULL, **changes}, row=0)


@pytest.mark.parametrize("name", NAMES)
def test_the_value_lies_in_the_declared_range(name):
    metric = METRICS[name]()
    result = metric.score(full_sample(), ScriptedJudge(**SCRIPT))
    low, high = metric.value_range
    assert result.status is Status.OK, result.reason
    assert low <= result.value <= high and result.passed == (
        result.value >= metric.threshold if metric.direction is Direction.HIGHER else result.value <= metric.threshold)


@pytest.mark.parametrize("name", NAMES)
def test_a_row_holding_only_the_required_fields_is_scored(name):
    # The metric step gives each metric only the fields it requires (rag_eval.assets.ingestion.only_fields): what
    # it reads besides them (factual_correctness, groundedness: the question) is optional, never a judge_error.
    required = METRICS[name].required_fields
    result = METRICS[name]().score(full_sample(**{f: None for f in FULL if f != "id" and f not in required}),
                                   ScriptedJudge(**SCRIPT))
    assert result.status is Status.OK, result.reason


@pytest.mark.parametrize("name", NAMES)
def test_each_missing_field_is_an_input_error_naming_it(name):
    for field in METRICS[name].required_fields:
        judge = ScriptedJudge(**SCRIPT)
        result = METRICS[name]().score(full_sample(**{field: None}), judge)
        assert result.status is Status.INPUT_ERROR and result.details["field"] == field
        assert f"field '{field}'" in result.reason and "line 1" in result.reason
        assert judge.calls == []  # nothing asked for a row that cannot be scored


@pytest.mark.parametrize("name", NAMES)
def test_a_failing_judge_is_a_judge_error_for_every_metric_that_asks_one(name):
    judge = ScriptedJudge(raise_error=True, **SCRIPT)
    result = METRICS[name]().score(full_sample(), judge)
    if judge.calls:  # it asked for a judgement or an embedding, and the judge failed
        assert result.status is Status.JUDGE_ERROR and "scripted failure" in result.reason
    else:  # it asks no judge (the document retrieval metrics): it declares no judgement and scores
        assert not METRICS[name].judgements and result.status is Status.OK


@pytest.mark.parametrize("name", NAMES)
def test_the_docstring_states_range_and_direction(name):
    cls = METRICS[name]
    doc = " ".join((cls.__doc__ or "").split()).lower()
    direction = "higher is better" if cls.direction is Direction.HIGHER else "lower is better"
    assert direction in doc, doc
    low, high = (f"{v:g}" for v in cls.value_range)
    ranges = (f"[{low}, {high}]", f"{low}-{high}", "on the label scale", "(count)")
    assert any(r in doc for r in ranges), doc


def test_every_judgement_a_metric_asks_has_a_version_in_its_code_version():
    for cls in METRICS.values():
        version = cls.code_version("offline:4")
        assert version.startswith(f"m{cls.version}-") and version.endswith("-offline:4")
        assert all(re.search(rf"\b{j.kind}:{j.version}\b", version) for j in cls.judgements)


# --------------------------------------------------------------------------- the same result on every path

ROWS = [FULL, {**FULL, "id": "c2", "response": "I do not know.", "retrieved_contexts": []},
        {**FULL, "id": "c3", "reference": None, "retrieved_documents": []}]
COLUMNS = ["sample_id", "row", "metric", "status", "passed", "threshold"]


def same_results(got, expected) -> bool:
    """Equal statuses, pass/fail and thresholds, and values equal up to float32 rounding (the
    offline encoder's vectors differ in their last bits with the batch a text is encoded in)."""
    got, expected = got.reset_index(drop=True), expected.reset_index(drop=True)
    return got[COLUMNS].equals(expected[COLUMNS]) and list(got["value"].isna()) == list(expected["value"].isna()) \
        and all(abs(a - b) <= 1e-6 for a, b in zip(got["value"].dropna(), expected["value"].dropna()))


@pytest.fixture(scope="module")
def local():
    return evaluate(ROWS, NAMES, judge=OfflineJudge())


@pytest.mark.slow
def test_evaluate_gives_what_each_metric_scores_alone(local):
    judge = OfflineJudge()
    for name in NAMES:
        ok = local.results[(local.results["metric"] == name) & (local.results["status"] == "ok")]
        low, high = METRICS[name].value_range  # the offline judge's values lie in the declared range too
        assert ok["value"].between(low, high).all(), (name, list(ok["value"]))
        alone = [METRICS[name]() for _ in ROWS]
        for metric in alone:
            metric.fit([sample_from_dict(r, i) for i, r in enumerate(ROWS)])
        expected = [m.score(sample_from_dict(r, i), judge) for i, (m, r) in enumerate(zip(alone, ROWS))]
        got = local.results[local.results["metric"] == name]
        assert list(got["status"]) == [r.status.value for r in expected], name
        assert [v if v == v else None for v in got["value"]] == pytest.approx([r.value for r in expected], abs=1e-6), name


@pytest.mark.slow
@pytest.mark.pipeline
def test_each_metric_asset_gives_what_evaluate_gives(local, tmp_path):
    import json

    import duckdb

    from rag_eval.assets.evaluation import METRICS_OP, metric_assets
    from rag_eval.assets.ingestion import ingestion_asset
    from rag_eval.assets.resources import build_resources
    from rag_eval.assets.summary import summary_asset

    folder = tmp_path / "datasets" / "v1"
    folder.mkdir(parents=True)
    (folder / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("dataset_version", ["v1"])
        result = dg.materialize([ingestion_asset(METRICS), *metric_assets(METRICS), summary_asset(METRICS)], partition_key="v1", instance=instance,
                                resources=build_resources(tmp_path / "out", tmp_path / "datasets"))
        assert result.success
        with duckdb.connect(str(tmp_path / "out" / "rag_eval.duckdb"), read_only=True) as database:
            for name in NAMES:  # as stored: the asset's output names a file the database took in and deleted
                assert not result.output_for_node(METRICS_OP, name).path.exists(), name
                frame = database.execute(f"select * from eval.{name} where version = 'v1'").fetchdf().astype(
                    {"passed": "boolean"})  # bool when no row lacks a verdict
                assert same_results(frame.drop(columns="version"), local.results[local.results["metric"] == name]), name


@pytest.mark.slow
@pytest.mark.spark
def test_spark_gives_what_evaluate_gives(local, spark):
    distributed = evaluate(spark.sparkContext.parallelize(ROWS, 2), NAMES, judge=OfflineJudge())
    assert same_results(distributed.results, local.results)
