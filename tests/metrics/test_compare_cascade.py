"""The gate and ``compare`` on judge-cascade runs (issue 38): a metric both versions' results carry a cascade
estimate of is decided on the two estimates of the strong judge's mean; values worked by hand."""
import math

import pandas as pd
import pytest

from rag_eval.metrics import evaluate
from rag_eval.metrics.core.strong import STRONG_RESULT_COLUMNS
from rag_eval.metrics.judges.offline import OfflineJudge
from rag_eval.metrics.stats.cascade_estimates import decided_on, frame_estimates
from rag_eval.metrics.stats.gate import GateConfig, Version, run_comparison
from rag_eval.metrics.stats.ppi import MeanEstimate
from tests.conftest import ScriptedJudge

ROWS = 20
GATE = GateConfig(metrics=["faithfulness"])


def cascade_run(strong: dict[int, float | None], cheap: float = 0.5, pi: float = 0.5,
                failed: int | None = None) -> pd.DataFrame:
    """A cascade run's results of faithfulness over ``ROWS`` rows: the cheap judge scores every row ``cheap``,
    each row has inclusion probability ``pi``, the rows of ``strong`` are drawn with that strong score (row
    ``failed`` drawn and a strong ``judge_error``)."""
    rows = []
    for i in range(ROWS):
        drawn = i in strong or i == failed
        rows.append({"sample_id": f"q{i:02d}", "row": i, "metric": "faithfulness", "status": "ok", "value": cheap,
                     "passed": cheap >= 0.5, "threshold": 0.5, "direction": "higher_is_better", "reason": "cheap",
                     "judge": "offline", **dict.fromkeys(STRONG_RESULT_COLUMNS), "inclusion_probability": pi,
                     "strong_status": ("judge_error" if i == failed else "ok") if drawn else None,
                     "strong_value": strong.get(i) if drawn else None, "strong_reason": "strong" if drawn else None,
                     "strong_judge": "llm:strong" if drawn else None})
    frame = pd.DataFrame(rows)
    frame["strong_value"] = frame["strong_value"].astype(float)
    return frame


def cheap_only(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.drop(columns=[c for c in frame.columns if c.startswith("strong_") or c == "inclusion_probability"])


#: Rows 0, 2, ..., 18 drawn (10 of 20, pi = 0.5); the strong judge passes 8 of them in the baseline, 2 in
#: the candidate.
BASELINE = cascade_run({i: float(i < 16) for i in range(0, ROWS, 2)})
CANDIDATE = cascade_run({i: float(i < 4) for i in range(0, ROWS, 2)})


def test_a_metric_both_versions_estimate_by_cascade_is_decided_on_the_strong_judges_estimates():
    # The cheap judge scores 0.5 on every row of both versions: its paired differences are all 0 (no change).
    # Constant cheap scores give lam = 0 and b = the drawn strong scores' mean: theta = 0.8 (baseline) and 0.2
    # (candidate). se² = sum w (y - b)² * m / (m - 2) (N / sum 1/pi)² / N² with w = (1 - 0.5) / 0.5² = 2, m = 10
    # strong rows (lam and b fitted on them) and sum 1/pi = 20 = N: 2 * (8 * 0.2² + 2 * 0.8²) * 10 / 8 / 20² =
    # 4 / 400 = 0.01 on each side, so the difference -0.6 has se sqrt(0.02) = 0.14142 and the interval
    # -0.6 ± 1.95996 * 0.14142 = [-0.8772, -0.3228], below -0.02: regressed, with
    # p = Phi((-0.6 + 0.02) / 0.14142) = Phi(-4.101) = 2.05e-5.
    comparison, notes = run_comparison(Version("base", BASELINE), Version("cand", CANDIDATE), GATE, OfflineJudge())
    row = comparison.metrics["faithfulness"]
    assert row.basis == "cascade (n=10/20 vs 10/20)" and row.verdict == "regressed"
    assert (row.baseline_mean, row.candidate_mean, row.difference) == pytest.approx((0.8, 0.2, -0.6))
    se = math.sqrt(0.02)
    assert (row.low, row.high) == pytest.approx((-0.6 - 1.959964 * se, -0.6 + 1.959964 * se), abs=1e-5)
    assert row.p_regression == pytest.approx(2.05e-5, rel=0.01)
    assert row.estimates["baseline"]["method"] == "cascade-uniform" and row.estimates["candidate"]["n"] == 10
    assert comparison.failures[0].startswith("faithfulness regressed: -0.600 [-0.877, -0.323] lies below -0.02 "
                                             "(cascade (n=10/20 vs 10/20), Holm p=0.0000)")
    assert ("decided on the versions' judge cascades (estimates of the strong judge's mean, difference of two "
            "independent intervals): faithfulness cascade (n=10/20 vs 10/20); the other metrics on the judge's "
            "paired rows") in notes
    # The same versions without their strong columns: the cheap judge's paired rows, all alike, decide nothing.
    cheap, _ = run_comparison(Version("base", cheap_only(BASELINE)), Version("cand", cheap_only(CANDIDATE)), GATE,
                              OfflineJudge())
    assert cheap.metrics["faithfulness"].basis == "judge" and cheap.metrics["faithfulness"].verdict == "no change detected"


def test_only_one_version_with_a_cascade_is_compared_on_the_cheap_judge_and_says_so():
    comparison, notes = run_comparison(Version("base", cheap_only(BASELINE)), Version("cand", CANDIDATE), GATE,
                                       OfflineJudge())
    row = comparison.metrics["faithfulness"]
    assert row.basis == "judge" and row.verdict == "no change detected" and row.difference == 0.0
    assert ("faithfulness: only cand is a judge cascade: compared on the cheap judge's paired rows (basis judge), "
            "not its strong-judge estimate against a cheap mean") in notes


def test_a_cascade_without_an_estimate_falls_back_to_the_cheap_judge_and_names_the_line():
    failing = cascade_run(dict.fromkeys(range(0, ROWS, 2), 1.0), failed=5)
    comparison, notes = run_comparison(Version("base", BASELINE), Version("cand", failing), GATE, OfflineJudge())
    assert comparison.metrics["faithfulness"].basis == "judge"
    assert any(n.startswith("faithfulness: cand's cascade gives no estimate (no estimate: the strong judge has no "
                            "score on drawn line(s) 6 (judge_error);") for n in notes)


def test_human_labels_estimates_stay_first_and_a_one_sided_label_leaves_the_cascades_to_decide():
    labels = MeanEstimate(0.7, 0.6, 0.8, 0.05, 10, 10, 0.5, "ppi++", 0.95)
    (base, cand), notes = decided_on(("base", "cand"), (BASELINE, CANDIDATE),
                                     ({"faithfulness": labels}, {"faithfulness": labels}))
    assert base == cand == {} and notes == []
    (base, cand), _ = decided_on(("base", "cand"), (BASELINE, CANDIDATE), ({"faithfulness": labels}, {}))
    assert (base["faithfulness"].estimate, cand["faithfulness"].estimate) == pytest.approx((0.8, 0.2))


def test_the_estimate_recomputed_from_the_results_frame_is_the_summary_s():
    # Every row's strong score 1 - cheap score on half of them: what evaluate's summary publishes is what the
    # gate recomputes from the per-row results alone (the sampling, active, read from the unequal pi).
    data = [{"id": f"r{i}", "user_input": f"What is item {i}?", "response": f"Item {i} is blue.",
             "retrieved_contexts": [f"Item {i} is {'blue' if i % 3 else 'red'}."]} for i in range(40)]
    result = evaluate(data, metrics=["faithfulness"], judge=OfflineJudge(),
                      strong_judge=ScriptedJudge(support=lambda item: 1), strong_budget=0.5, seed=3)
    published = result.summary["metrics"]["faithfulness"]["cascade"]["estimate"]
    estimates, notes = frame_estimates(result.results)
    assert notes == {} and estimates["faithfulness"].to_dict() == published
    assert published["method"] == "cascade-active" and published["n"] > 2


def test_two_cascades_with_different_strong_judges_are_compared_on_the_cheap_judge_and_say_why():
    # The candidate's strong judge is another model: its mean differs from the baseline's by the judges as much as
    # by the versions, so the estimates are not compared; the cheap judge's paired rows (all 0.5: no change) are.
    other = CANDIDATE.assign(strong_judge=CANDIDATE["strong_judge"].where(CANDIDATE["strong_judge"].isna(),
                                                                          "llm:other"))
    comparison, notes = run_comparison(Version("base", BASELINE), Version("cand", other), GATE, OfflineJudge())
    row = comparison.metrics["faithfulness"]
    assert row.basis == "judge" and row.verdict == "no change detected"
    assert any(n.startswith("faithfulness: the versions' cascades have different strong judges (llm:strong and "
                            "llm:other)") for n in notes)
