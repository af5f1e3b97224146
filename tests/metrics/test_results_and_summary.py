"""Pass/fail semantics (BR-17) and summary.json aggregation (BR-02, the dingo summary vector)."""
from __future__ import annotations

import math
import statistics

import pandas as pd
import pytest

from rag_eval.metrics.reports.aggregate import metric_stats, summarize
from rag_eval.metrics.core.results import Direction, MetricResult, Status, passes

FAITH_KEY = "user_input,response,retrieved_contexts"
RELEV_KEY = "user_input,retrieved_contexts"


def frame(rows):
    """Results frame from (sample_id, metric, status, value, direction, threshold) tuples.

    ``passed`` is derived with :func:`passes` for ``ok`` rows and is None otherwise,
    exactly as the metrics do.
    """
    records = []
    for sample_id, metric, status, value, direction, threshold in rows:
        passed = passes(value, threshold, direction) if status == "ok" else None
        records.append({"sample_id": sample_id, "metric": metric, "status": status, "value": value,
                        "passed": passed, "threshold": threshold, "direction": direction.value})
    out = pd.DataFrame(records)
    out["value"] = out["value"].astype("float64")
    out["passed"] = out["passed"].astype("boolean")
    return out


H, L = Direction.HIGHER, Direction.LOWER


# --------------------------------------------------------------------------- passes (BR-17)


def test_BR17_higher_is_better_equal_to_threshold_passes():
    assert passes(0.5, 0.5, Direction.HIGHER) is True


def test_BR17_higher_is_better_strict_mode_below_best_fails():
    # strict mode = threshold at the best possible value (1.0)
    assert passes(0.99, 1.0, Direction.HIGHER) is False


def test_BR17_lower_is_better_above_threshold_fails():
    assert passes(0.3, 0.2, Direction.LOWER) is False


def test_BR17_lower_is_better_strict_mode_at_best_passes():
    # strict mode for lower-is-better = threshold 0.0
    assert passes(0.0, 0.0, Direction.LOWER) is True


def test_BR17_likert_equal_to_threshold_passes():
    assert passes(3, 3, Direction.HIGHER) is True


def test_BR17_all_checks_from_regression_file():
    import json
    from pathlib import Path

    with (Path(__file__).parents[1] / "data" / "regression_cases.jsonl").open(encoding="utf-8") as handle:
        case = next(c for c in map(json.loads, handle) if c["id"] == "BR-17")
    got = []
    for check in case["input"]["checks"]:
        direction = Direction.HIGHER if check["higher_is_better"] else Direction.LOWER
        threshold = check.get("threshold")
        if check.get("strict_mode"):
            threshold = 1.0 if check["higher_is_better"] else 0.0
        got.append(passes(check["score"], threshold, direction))
    assert got == case["expected"]["passed"] == [True, False, False, True, True]


def test_passes_lower_is_better_below_threshold_passes_and_accepts_string_direction():
    assert passes(0.1, 0.2, "lower_is_better") is True
    assert passes(0.6, 0.5, "higher_is_better") is True
    assert passes(0.4, 0.5, "higher_is_better") is False


@pytest.mark.parametrize(("value", "threshold"), [(math.nan, 0.5), (0.5, math.nan), (math.inf, 0.5)])
def test_passes_rejects_non_finite(value, threshold):
    with pytest.raises(ValueError):
        passes(value, threshold, Direction.HIGHER)


def test_passes_rejects_unknown_direction():
    with pytest.raises(ValueError):
        passes(0.5, 0.5, "sideways")


def test_metric_result_to_record_uses_string_enums():
    record = MetricResult("faithfulness", "s1", Status.NOT_APPLICABLE, None, None, 0.5, Direction.LOWER,
                          "nothing to judge").to_record()
    assert record["status"] == "not_applicable"
    assert record["direction"] == "lower_is_better"
    assert record["value"] is None and record["passed"] is None


# --------------------------------------------------------------------------- BR-02 aggregation


def br02_frame():
    return frame([
        ("s1", "faithfulness", "ok", 0.9, H, 0.5),
        ("s2", "faithfulness", "not_applicable", None, H, 0.5),
        ("s3", "faithfulness", "ok", 0.7, H, 0.5),
    ])


def test_BR02_passed_is_none_for_unmeasured():
    assert br02_frame()["passed"].tolist() == [True, pd.NA, True]


def test_BR02_mean_over_measured_only():
    summary = summarize(br02_frame())
    stats = summary["metrics_score"][FAITH_KEY]["stats"]["faithfulness"]
    assert stats["score_average"] == 0.8
    assert stats["score_count"] == 2
    assert (stats["score_min"], stats["score_max"]) == (0.7, 0.9)
    assert stats["score_std_dev"] == 0.1
    assert summary["metrics_score"][FAITH_KEY]["summary"]["faithfulness"] == 0.8


def test_BR02_coverage_counts_unmeasured():
    summary = summarize(br02_frame())
    assert summary["coverage"]["faithfulness"] == {"ok": 2, "not_applicable": 1, "judge_error": 0,
                                                   "input_error": 0, "target_error": 0, "total": 3}


def test_BR02_row_counts_and_score():
    summary = summarize(br02_frame())
    assert (summary["total"], summary["num_good"], summary["num_bad"], summary["num_unmeasured"]) == (3, 2, 0, 1)
    assert summary["score"] == 66.67  # round(2/3*100, 2)
    assert summary["type_ratio"][FAITH_KEY] == {
        "QUALITY_GOOD.FAITHFULNESS_PASS": round(2 / 3, 6),
        "QUALITY_UNMEASURED.FAITHFULNESS_NOT_APPLICABLE": round(1 / 3, 6),
    }


# --------------------------------------------------------------------------- dingo summary vector


def dingo_frame():
    values = [1.0, 0.667, 0.333, 0.0]
    return frame([(f"r{i}", "faithfulness", "ok", v, H, 0.5) for i, v in enumerate(values)])


def test_dingo_summary_vector_on_scale_10():
    summary = summarize(dingo_frame(), scale=10)
    stats = summary["metrics_score"][FAITH_KEY]["stats"]["faithfulness"]
    # Scaled values [10, 6.67, 3.33, 0]: mean 20/4 = 5.0; population std sqrt(55.5778/4) = 3.7275
    expected_std = round(statistics.pstdev([10.0, 6.67, 3.33, 0.0]), 2)
    assert expected_std == 3.73
    assert stats == {"score_average": 5.0, "score_count": 4, "score_min": 0.0, "score_max": 10.0,
                     "score_std_dev": 3.73}
    assert summary["metrics_score"][FAITH_KEY]["overall_average"] == 5.0
    assert summary["scale"] == "0-10"


def test_dingo_summary_vector_rows_and_labels():
    summary = summarize(dingo_frame(), scale=10)
    # Threshold 0.5 (dingo 5/10): 1.0 and 0.667 pass, 0.333 and 0.0 fail.
    assert (summary["total"], summary["num_good"], summary["num_bad"], summary["num_unmeasured"]) == (4, 2, 2, 0)
    assert summary["score"] == 50.0
    assert summary["type_ratio"][FAITH_KEY] == {"QUALITY_GOOD.FAITHFULNESS_PASS": 0.5,
                                                "QUALITY_BAD.FAITHFULNESS_FAIL": 0.5}


def test_dingo_summary_vector_on_scale_1():
    stats = summarize(dingo_frame())["metrics_score"][FAITH_KEY]["stats"]["faithfulness"]
    # mean (1 + .667 + .333 + 0)/4 = 0.5; pstdev 0.372753 -> 0.3728 (4 digits on scale 1)
    assert stats["score_average"] == 0.5
    assert stats["score_std_dev"] == round(statistics.pstdev([1.0, 0.667, 0.333, 0.0]), 4) == 0.3728


def test_summarize_rejects_other_scales():
    with pytest.raises(ValueError):
        summarize(dingo_frame(), scale=5)


def test_metric_stats_single_value_has_zero_std_and_empty_is_none():
    assert metric_stats([0.4], 4) == {"score_average": 0.4, "score_count": 1, "score_min": 0.4,
                                      "score_max": 0.4, "score_std_dev": 0.0}
    assert metric_stats([], 4) == {"score_average": None, "score_count": 0, "score_min": None,
                                   "score_max": None, "score_std_dev": None}


# --------------------------------------------------------------------------- good / bad / unmeasured


def mixed_frame():
    return frame([
        # A: both metrics measured and passing -> good
        ("A", "faithfulness", "ok", 0.9, H, 0.5),
        ("A", "context_relevancy", "ok", 1.0, H, 0.5),
        # B: one passes, one fails -> bad
        ("B", "faithfulness", "ok", 0.8, H, 0.5),
        ("B", "context_relevancy", "ok", 0.0, H, 0.5),
        # C: one passes, the other could not be measured -> good
        ("C", "faithfulness", "ok", 0.6, H, 0.5),
        ("C", "context_relevancy", "judge_error", None, H, 0.5),
        # D: nothing measured -> unmeasured (neither good nor bad)
        ("D", "faithfulness", "not_applicable", None, H, 0.5),
        ("D", "context_relevancy", "input_error", None, H, 0.5),
    ])


def test_good_bad_unmeasured_rows():
    summary = summarize(mixed_frame())
    assert summary["total"] == 4
    assert (summary["num_good"], summary["num_bad"], summary["num_unmeasured"]) == (2, 1, 1)
    assert summary["score"] == 50.0


def test_unmeasured_statuses_are_counted_not_averaged():
    summary = summarize(mixed_frame())
    faith = summary["metrics_score"][FAITH_KEY]["stats"]["faithfulness"]
    relev = summary["metrics_score"][RELEV_KEY]["stats"]["context_relevancy"]
    assert (faith["score_count"], faith["score_average"]) == (3, round((0.9 + 0.8 + 0.6) / 3, 4))
    assert (relev["score_count"], relev["score_average"]) == (2, 0.5)
    assert summary["coverage"]["context_relevancy"] == {"ok": 2, "not_applicable": 0, "judge_error": 1,
                                                        "input_error": 1, "target_error": 0, "total": 4}
    assert summary["type_ratio"][RELEV_KEY]["QUALITY_UNMEASURED.CONTEXT_RELEVANCY_JUDGE_ERROR"] == 0.25
    assert summary["type_ratio"][RELEV_KEY]["QUALITY_BAD.CONTEXT_RELEVANCY_FAIL"] == 0.25


def test_lower_is_better_failure_makes_row_bad():
    summary = summarize(frame([
        ("A", "faithfulness", "ok", 0.9, H, 0.5),
        ("A", "noise", "ok", 0.3, L, 0.2),  # 0.3 > 0.2 on a lower-is-better metric: fail
        ("B", "noise", "ok", 0.1, L, 0.2),
    ]))
    assert (summary["num_good"], summary["num_bad"], summary["num_unmeasured"]) == (1, 1, 0)
    # an unregistered metric is grouped under dingo's "default" key
    assert summary["metrics_score"]["default"]["stats"]["noise"]["score_count"] == 2


def test_all_unmeasured_statistics_are_none():
    summary = summarize(frame([("A", "faithfulness", "judge_error", None, H, 0.5)]))
    assert (summary["num_good"], summary["num_bad"], summary["num_unmeasured"], summary["score"]) == (0, 0, 1, 0.0)
    assert summary["metrics_score"][FAITH_KEY]["stats"]["faithfulness"]["score_average"] is None
    assert summary["metrics_score"][FAITH_KEY]["overall_average"] is None
    assert summary["overall_average"] is None
