"""rag_eval.metrics.stats.estimates and rag_eval.metrics.stats.agreement: a version's labels against its judge, worked out by hand.

The labelled and unlabelled scores are those of tests/metrics/test_ppi.py (checked there against
ppi-python 0.2.3 and by hand): joined from a results frame with rows the judge could not score,
exactly those labels, scores and unlabelled scores must reach ``rag_eval.metrics.stats.ppi.ppi_mean``.
"""
import io

import numpy as np
import pandas as pd
import pytest

from rag_eval.metrics.stats.agreement import accuracy, cohen_kappa
from rag_eval.metrics.stats.estimates import add_estimates, metric_estimate
from rag_eval.metrics.stats.ppi import ppi_mean
from tests.metrics.test_ppi import PPI_PY, UNLABELLED, Y, YHAT


def results(values, statuses=None, metric="faithfulness", threshold=0.5, direction="higher_is_better"):
    statuses = statuses or {}
    return pd.DataFrame([{"row": row, "sample_id": f"s{row}", "metric": metric, "status": statuses.get(row, "ok"),
                          "value": None if statuses.get(row, "ok") != "ok" else value, "threshold": threshold,
                          "direction": direction} for row, value in enumerate(values)])


def labels(pairs, metric="faithfulness"):
    return pd.DataFrame([{"line": row + 1, "id": sample_id, "metric": metric, "label": float(label)}
                         for row, sample_id, label in pairs])


# Rows 0-9 labelled (Y) with judge scores YHAT; rows 10-24 scored, unlabelled; row 25 judge_error but labelled;
# row 26 not_applicable; row 27 input_error. A label for row 12 carries another row's id (file replaced since).
FRAME = results([*YHAT, *UNLABELLED, 0.0, 0.0, 0.0], {25: "judge_error", 26: "not_applicable", 27: "input_error"})
LABELS = labels([*((row, f"s{row}", y) for row, y in enumerate(Y)), (25, "s25", 1), (12, "elsewhere", 0)])


def test_the_estimate_is_of_the_rows_scored_ok_and_other_rows_are_counted_not_scored():
    labelled = metric_estimate(FRAME, LABELS, "faithfulness")
    e = labelled.estimate
    assert e == ppi_mean(Y, YHAT, UNLABELLED)  # the 10 labels, their 10 scores and the 15 unlabelled ones
    # Wider than ppi-python's plain PPI++ (0.6815 [0.4525, 0.9105]): the Agresti-Coull pseudo-rows (rag_eval.metrics.stats.ppi).
    assert e.ci_high - e.ci_low > PPI_PY[None][2] - PPI_PY[None][1] and e.lam == pytest.approx(25 / 36)
    assert (e.n, e.N, labelled.rows) == (10, 15, 25)  # the judge_error, not_applicable, input_error rows: neither
    assert labelled.not_scored == {"judge_error": 1} and labelled.unmatched == 1
    # Raw mean over the 25 ok rows: (6.0 + 8.6) / 25.
    assert labelled.raw_mean == pytest.approx(14.6 / 25)
    # Pass at 0.5: judge [T,F,T,F,T,T,T,T,F,T], people [T,F,T,T,F,T,T,T,F,T]: 8 of 10 agree; both pass 7 of 10,
    # chance agreement 0.7*0.7 + 0.3*0.3 = 0.58, kappa (0.8 - 0.58) / 0.42. AUROC: of the 7 x 3 (accepted,
    # rejected) pairs the accepted score is higher in 20 (0.4 loses to 0.5 only).
    assert labelled.agreement == {"accuracy": 0.8, "cohen_kappa": round(0.22 / 0.42, 4), "auroc": round(20 / 21, 4)}
    assert (labelled.kind, labelled.basis) == ("binary", "ppi (n=10/25)")


def test_below_ten_labels_no_interval_and_every_row_labelled_the_labels_own_mean():
    few = metric_estimate(FRAME, LABELS[LABELS["line"] <= 9], "faithfulness")
    assert few.estimate is None and few.note == "9 labelled row(s) scored ok: an interval needs 10" and few.n == 9
    assert few.basis == "judge" and few.agreement["accuracy"] == pytest.approx(7 / 9, abs=1e-4)
    every = metric_estimate(results(YHAT), labels((row, f"s{row}", y) for row, y in enumerate(Y)), "faithfulness")
    # Agresti-Coull: 7 of 10 passes, n~ = 10 + z², p~ = (7 + z²/2) / n~ = 0.644493, [0.392325, 0.896662].
    z2 = 1.959963984540054 ** 2
    assert (every.estimate.method, every.estimate.estimate) == ("classical", pytest.approx((7 + z2 / 2) / (10 + z2)))
    assert (every.estimate.ci_low, every.estimate.ci_high) == pytest.approx((0.392325, 0.896662), abs=1e-6)


def test_grades_on_a_likert_scale_use_spearman_and_the_threshold_of_the_metric():
    judge = [5, 4, 4, 2, 1, 3, 5, 2, 3, 1, 4, 4]
    grades = [5, 5, 3, 2, 1, 4, 4, 1, 3, 2]
    labelled = metric_estimate(results(judge, metric="groundedness", threshold=3),
                               labels(((row, f"s{row}", g) for row, g in enumerate(grades)), "groundedness"),
                               "groundedness")
    # Pass at >= 3: judge [T,T,T,F,F,T,T,F,T,F], people [T,T,T,F,F,T,T,F,T,F]: all 10 agree.
    # Spearman of the ranks (ties averaged): judge 5,4,4,2,1,3,5,2,3,1 -> 9.5,7.5,7.5,3.5,1.5,5.5,9.5,3.5,5.5,1.5;
    # people 5,5,3,2,1,4,4,1,3,2 -> 9.5,9.5,5.5,3.5,1.5,7.5,7.5,1.5,5.5,3.5; less the mean 5.5: products sum to
    # 68, squares to 80 on each side: Pearson of the ranks 68 / 80 = 0.85.
    assert labelled.kind == "scale" and labelled.agreement["accuracy"] == 1.0
    assert labelled.agreement["spearman"] == pytest.approx(0.85, abs=1e-4) and "cohen_kappa" not in labelled.agreement
    assert labelled.agreement["auroc"] == 1.0


def test_the_summary_gets_the_blocks_on_its_own_scale():
    summary = {"scale": "0-10", "metrics": {"faithfulness": {"mean": 5.84}, "answer_relevancy": {"mean": 5.0}}}
    add_estimates(summary, FRAME, LABELS)
    row = summary["metrics"]["faithfulness"]
    expected = ppi_mean(Y, YHAT, UNLABELLED)
    assert row["ppi"]["estimate"] == pytest.approx(10 * expected.estimate, abs=1e-5)
    assert row["ppi"]["ci_high"] == pytest.approx(10 * expected.ci_high, abs=1e-5) and row["ppi"]["n"] == 10
    assert row["raw_mean"] == pytest.approx(5.84) and row["labels"]["not_scored"] == {"judge_error": 1}
    assert "ppi" not in summary["metrics"]["answer_relevancy"]  # no label of it
    assert summary["labels"] == {"rows": 12, "labels": 12, "metrics": {"faithfulness": 10}, "min_labels": 10}
    add_estimates(summary, FRAME, LABELS.iloc[:0])  # the labels removed: nothing of them stays
    assert "ppi" not in summary["metrics"]["faithfulness"] and "labels" not in summary


def test_cohen_kappa_and_accuracy_by_hand():
    # 2 x 2 table: both pass 20, judge only 5, people only 10, both fail 15 (n = 50): p_o = 0.7;
    # judge passes 0.5, people 0.6: p_e = 0.3 + 0.2 = 0.5; kappa = 0.2 / 0.5 = 0.4 (Cohen 1960's form).
    judge = np.array([1] * 25 + [0] * 25)
    people = np.array([1] * 20 + [0] * 5 + [1] * 10 + [0] * 15)
    assert accuracy(judge, people) == pytest.approx(0.7)
    assert cohen_kappa(judge, people) == pytest.approx(0.4)
    assert cohen_kappa(np.ones(4), np.ones(4)) != cohen_kappa(np.ones(4), np.ones(4))  # NaN: chance agreement 1


def test_the_estimates_table_stays_within_80_columns():
    from rich.console import Console

    from rag_eval.orchestration.report import print_estimates

    summary = {"labels": {"min_labels": 10}, "metrics": {
        "context_precision": {"raw_mean": 0.8, "ppi": {"estimate": 0.61234, "ci_low": 0.36512, "ci_high": 0.85712},
                              "agreement": {"accuracy": 0.6, "cohen_kappa": -0.25, "auroc": 0.57},
                              "labels": {"n": 150, "rows_ok": 10000}},
        "groundedness": {"raw_mean": 3.1, "ppi": None, "agreement": {"accuracy": 1.0, "spearman": 0.875, "auroc": 1.0},
                         "labels": {"n": 3, "rows_ok": 30}}}}
    buffer = io.StringIO()
    print_estimates(summary, Console(file=buffer, width=80))
    lines = buffer.getvalue().splitlines()
    assert max(len(line) for line in lines) <= 80
    assert any("context_precision" in line and "0.612 [0.365, 0.857]" in line and "150/10000" in line
               and "κ -0.25" in line for line in lines)
    assert any("groundedness" in line and "needs 10 labels" in line and "ρ 0.88" in line for line in lines)


def test_evaluate_takes_a_labels_file_and_refuses_a_bad_line(tmp_path):
    from rag_eval.metrics import evaluate
    from tests.conftest import ScriptedJudge

    rows = [{"id": f"r{i}", "user_input": "Where is the Louvre?", "retrieved_contexts": ["The Louvre is in Paris."],
             "response": "The Louvre is in Paris." if i % 3 else "The Louvre is in Rome."} for i in range(14)]
    judge = ScriptedJudge(support=lambda statement: int("Paris" in str(statement)))
    people = [int(i % 3 != 0 or i == 3) for i in range(10)]  # they pass the judge's passes, and row 3 too
    sheet = tmp_path / "labels.csv"
    sheet.write_text("id,metric,label\n" + "".join(f"r{i},faithfulness,{y}\n" for i, y in enumerate(people)),
                     encoding="utf-8")
    result = evaluate(rows, metrics=["faithfulness"], judge=judge, labels=sheet)
    scores = [float(i % 3 != 0) for i in range(14)]
    assert result.summary["metrics"]["faithfulness"]["ppi"] == ppi_mean(people, scores[:10], scores[10:]).to_dict()
    assert result.summary["metrics"]["faithfulness"]["agreement"]["accuracy"] == 0.9
    sheet.write_text("id,metric,label\nr1,faithfulness,maybe\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"labels.csv line 2: field 'label': 'maybe' is not a label of faithfulness"):
        evaluate(rows, metrics=["faithfulness"], judge=judge, labels=sheet)


def test_the_interval_is_cut_to_the_metrics_scale():
    # 10 rows labelled pass, the judge sure of every row: the normal interval reaches past 1 (the
    # attacker's 10 of 12 labelled case); the mean of a [0, 1] metric cannot, so the interval stops at 1.
    scores = [1.0] * 10 + [0.9, 1.0]
    frame, given = results(scores), labels((row, f"s{row}", 1) for row in range(10))
    plain = ppi_mean([1.0] * 10, [1.0] * 10, [0.9, 1.0])
    assert plain.ci_high > 1.0  # what the interval was before it was cut
    e = metric_estimate(frame, given, "faithfulness").estimate
    assert (e.estimate, e.ci_low, e.ci_high) == (min(plain.estimate, 1.0), plain.ci_low, 1.0)


def test_labels_of_conversation_turns_pair_with_their_turn_not_their_line():
    """FRAME's rows put two by two on one line as a conversation's turns (rows 2k and 2k+1 -> line k+1, ids
    c{k}/1 and c{k}/2): the same scores and labels must give the same estimate as one row per line."""
    turns = FRAME.assign(row=FRAME.index // 2, sample_id=[f"c{i // 2}/{i % 2 + 1}" for i in FRAME.index])
    turn_labels = LABELS.assign(line=LABELS["line"].sub(1) // 2 + 1,
                                id=[f"c{(l - 1) // 2}/{(l - 1) % 2 + 1}" if i != "elsewhere" else i
                                    for l, i in zip(LABELS["line"], LABELS["id"])])
    labelled = metric_estimate(turns, turn_labels, "faithfulness")
    assert labelled.estimate == ppi_mean(Y, YHAT, UNLABELLED)
    assert (labelled.estimate.n, labelled.estimate.N, labelled.rows, labelled.unmatched) == (10, 15, 25, 1)
