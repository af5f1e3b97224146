"""Drift of a traffic day against its trailing window (rag_eval.metrics.stats.drift), on hand-worked cases:
constant scores make every bootstrap draw the same difference, so the interval and the
p-values are known exactly."""
import pandas as pd
import pytest

from rag_eval.metrics.stats.drift import DROP, NO_CHANGE, NO_WINDOW, NOT_APPLICABLE, TOO_FEW, drift


def rows(metric, values, status="ok"):
    return pd.DataFrame({"metric": metric, "status": status, "value": values})


def test_a_drop_beyond_the_margin_fails_with_its_difference_and_interval():
    found = drift(rows("faithfulness", [0.5] * 20), rows("faithfulness", [0.9] * 40), resamples=4000)
    f = found["faithfulness"]
    assert f.verdict == DROP and f.failed
    assert (f.day_mean, f.window_mean, f.n_day, f.n_window) == (0.5, 0.9, 20, 40)
    assert f.difference == pytest.approx(-0.4) and f.low == pytest.approx(-0.4) and f.high == pytest.approx(-0.4)
    assert f.p_drop == f.p_drop_holm == 1 / 4001  # no draw at or above -margin; the +1 correction
    assert f.describe() == ("faithfulness: drop: -0.400 [-0.400, -0.400] (day 0.500, n=20; window 0.900, n=40; "
                            "margin 0.02, Holm p=0.0002)")


def test_the_margin_decides_a_small_drop():
    inside = drift(rows("faithfulness", [0.79] * 20), rows("faithfulness", [0.80] * 20))["faithfulness"]
    beyond = drift(rows("faithfulness", [0.77] * 20), rows("faithfulness", [0.80] * 20))["faithfulness"]
    assert (inside.verdict, inside.p_drop) == (NO_CHANGE, 1.0)  # -0.01 lies within the 0.02 margin
    assert beyond.verdict == DROP and beyond.difference == pytest.approx(-0.03)


def test_holm_adjusts_across_the_metrics_of_the_day():
    day = pd.concat([rows("faithfulness", [0.5] * 20), rows("answer_relevancy", [0.5] * 20)])
    window = pd.concat([rows("faithfulness", [0.9] * 20), rows("answer_relevancy", [0.9] * 20)])
    found = drift(day, window, resamples=4000)
    assert [found[m].p_drop_holm for m in ("faithfulness", "answer_relevancy")] == [2 / 4001, 2 / 4001]
    assert all(f.verdict == DROP for f in found.values())


def test_no_decision_without_rows_to_compare():
    not_measured = rows("context_relevancy", [float("nan")] * 12, status="not_applicable")
    found = drift(pd.concat([not_measured, rows("faithfulness", [0.5] * 5)]),
                  pd.concat([not_measured, rows("faithfulness", [0.9] * 30)]))
    assert found["context_relevancy"].verdict == NOT_APPLICABLE and not found["context_relevancy"].failed
    assert found["context_relevancy"].coverage_day == 0.0
    assert found["faithfulness"].verdict == TOO_FEW  # 5 ok rows on the day, 10 needed
    empty = pd.DataFrame(columns=["metric", "status", "value"])
    assert drift(rows("faithfulness", [0.1] * 30), empty)["faithfulness"].verdict == NO_WINDOW


def test_a_rise_is_no_failure():
    found = drift(rows("faithfulness", [0.95] * 20), rows("faithfulness", [0.5] * 20))["faithfulness"]
    assert found.verdict == "rise" and not found.failed and found.difference == pytest.approx(0.45)
