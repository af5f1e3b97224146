"""Drift checks and the gate's reports on judge-cascade runs (issue 38): where they show a version's mean they
show the cascade's estimate of the strong judge's mean with its interval, and say so; values by hand."""
import math

import pytest

from rag_eval.metrics.judges.offline import OfflineJudge
from rag_eval.metrics.reports.gate_report import html_report, markdown_report, version_stats
from rag_eval.metrics.reports.traffic_report import traffic_html
from rag_eval.metrics.stats.cascade import t_value
from rag_eval.metrics.stats.drift import DROP, NO_CHANGE, drift
from rag_eval.metrics.stats.gate import GateConfig, Version, run_comparison
from tests.metrics.test_compare_cascade import BASELINE, CANDIDATE, cheap_only

#: Each version's estimate has se sqrt(0.01) (tests/metrics/test_compare_cascade.py): its interval is theta ± t
#: with 8 degrees of freedom (2.306, as cascade.t_value expands it) times it, cut to [0, 1]; the difference of
#: two, ± 1.95996 sqrt(0.02).
HALF = t_value(1.959964, 8) * math.sqrt(0.01)
DIFFERENCE = 1.959964 * math.sqrt(0.02)
#: A traffic day's estimate is of the traffic's strong mean, not of its 20 rows: se² adds the strong scores' spread
#: over the rows, weighted by 1 / pi, with k / (k - 1): (8 * 0.2² + 2 * 0.8²) / 10 * 10 / 9 = 0.17778 (baseline;
#: the candidate's 2 passes of 10 the same), over the 20 rows: 0.0088889; so se² = 0.0188889 a side, and the
#: difference of two ± 1.95996 sqrt(0.0377778).
STREAM_DIFFERENCE = 1.959964 * math.sqrt(2 * (0.01 + 0.16 * 10 / 9 / 20))


def test_a_day_and_a_window_estimated_by_cascades_drift_on_the_strong_judges_estimates():
    # The window's cascade estimates the strong judge's mean at 0.8, the day's at 0.2 (se² 0.01 each): the
    # difference -0.6 [-0.877, -0.323] lies below -0.02, a drop; the cheap judge, 0.5 on every row of both, sees
    # no change.
    found = drift(CANDIDATE, BASELINE)["faithfulness"]
    assert found.verdict == DROP and found.basis == "cascade (n=10/20 vs 10/20)"
    assert (found.day_mean, found.window_mean, found.difference) == pytest.approx((0.2, 0.8, -0.6))
    assert (found.low, found.high) == pytest.approx((-0.6 - STREAM_DIFFERENCE, -0.6 + STREAM_DIFFERENCE), abs=1e-6)
    # p = Phi((-0.6 + 0.02) / 0.19437) = Phi(-2.984) = 0.0014.
    assert found.describe() == ("faithfulness: drop: -0.600 [-0.981, -0.219] (day 0.200; window 0.800; "
                                "cascade (n=10/20 vs 10/20); margin 0.02, Holm p=0.0014)")
    cheap = drift(cheap_only(CANDIDATE), cheap_only(BASELINE))["faithfulness"]
    assert cheap.verdict == NO_CHANGE and cheap.basis == "judge" and cheap.difference == 0.0
    one_sided = drift(CANDIDATE, cheap_only(BASELINE))["faithfulness"]  # a cheap window: the judge's rows
    assert one_sided.basis == "judge" and one_sided.day_mean == 0.5


def test_the_trend_point_of_a_cascade_run_is_its_estimate_and_the_reports_say_so():
    point = version_stats("base", BASELINE, ["faithfulness"])["metrics"]["faithfulness"]
    assert point == pytest.approx({"mean": 0.8, "low": 0.8 - HALF, "high": 1.0, "n": 10, "rows": 20,
                                   "published": "cascade"})
    cheap = version_stats("base", cheap_only(BASELINE), ["faithfulness"])["metrics"]["faithfulness"]
    assert cheap["mean"] == 0.5 and cheap["published"] == "mean" and cheap["n"] == 20

    comparison, notes = run_comparison(Version("base", BASELINE), Version("cand", CANDIDATE),
                                       GateConfig(metrics=["faithfulness"]), OfflineJudge())
    page = html_report(comparison, [version_stats(v.name, v.results, ["faithfulness"]) for v in
                                    (Version("base", BASELINE), Version("cand", CANDIDATE))], notes)
    assert ("<h2>Judge cascade</h2><table><tr><th>metric</th><th>version</th><th>estimate</th><th>95 % interval</th>"
            "<th>strong-judged</th><th>rows covered</th><th>λ</th></tr>") in page
    assert "<tr><td>faithfulness</td><td>base</td><td>0.800</td><td>[0.569, 1.000]</td><td>10</td><td>20</td>" \
           "<td>0.00</td></tr>" in page
    assert "<h2>Human labels</h2>" not in page
    assert ("Cascade estimates (the strong judge's mean estimated from a sample, with its 95 % interval; hollow "
            "points): faithfulness: base (10 strong / 20); faithfulness: cand (10 strong / 20).") in page
    report = markdown_report(comparison, notes)
    assert "| faithfulness | 0.800 | 0.200 | -0.600 [-0.877, -0.323] | 20 | cascade (n=10/20 vs 10/20) |" in report
    assert "- basis `cascade`: the metric is decided on the two versions' judge-cascade estimates" in report
    assert "basis `ppi`" not in report


def test_the_traffic_page_names_each_drift_verdict_s_basis_and_the_cascade_points():
    day = {"partition": "2026-12-02", "traces": 20, "sampled": 20, "problems": 0, "latency_ms": {},
           "system_tokens": {}, "judging_cost": {}, "worst_rows": {},
           "metrics": version_stats("2026-12-02", CANDIDATE, ["faithfulness"])["metrics"],
           "drift": {"faithfulness": drift(CANDIDATE, BASELINE)["faithfulness"].to_dict()}}
    before = {**day, "partition": "2026-12-01", "drift": {},
              "metrics": version_stats("2026-12-01", BASELINE, ["faithfulness"])["metrics"]}
    page = traffic_html([before, day], "2026-12-02")
    assert "<td>20 / 20</td><td class='text'>cascade (n=10/20 vs 10/20)</td><td>±0.02</td>" in page
    assert "faithfulness: 2026-12-01 (10 strong / 20); faithfulness: 2026-12-02 (10 strong / 20)" in page
    assert "hollow: a judge cascade" in page  # the trend chart's legend


def test_a_cascade_version_s_cost_counts_the_strong_judge_s_requests_too():
    # The traffic day's judging cost read only the cheap judge's columns: a cascade of 10 strong-judged rows
    # (2 chat requests and 300 prompt tokens each) beside an offline cheap judge (0) showed nothing spent.
    frame = BASELINE.assign(chat_requests=0, prompt_tokens=0)
    drawn = frame["strong_status"].notna()
    frame["strong_chat_requests"] = drawn.map({True: 2, False: None})
    frame["strong_prompt_tokens"] = drawn.map({True: 300, False: None})
    cost = version_stats("day", frame, ["faithfulness"])["cost"]
    assert (cost["chat_requests"], cost["prompt_tokens"]) == (20, 3000)
