"""rag_eval.metrics.reports.diagnosis: a version's reading, its groups and worst rows (values by hand); which diagnostics
moved in a comparison; how the summary, the table and the gate's reports show them."""
import json

import pandas as pd
import pytest

from rag_eval.metrics.reports.aggregate import summarize
from rag_eval.metrics.stats.compare import compare
from rag_eval.metrics.reports.diagnosis import diagnose, diagnostics_in, moved_line
from rag_eval.metrics.reports.gate_report import diagnosis_markdown, html_report, markdown_report
from rag_eval.orchestration.report import print_table


def results(values: dict[str, list[float | None]], failed: dict[str, list[list[str]]] | None = None,
            thresholds: dict[str, float] | None = None) -> pd.DataFrame:
    """A results frame: one row per (line, metric); ``None`` is a not_applicable row."""
    rows = []
    for metric, column in values.items():
        for i, value in enumerate(column):
            details = {"failed": (failed or {}).get(metric, [[]] * len(column))[i]}
            rows.append({"sample_id": f"q{i}", "row": i, "metric": metric,
                         "status": "ok" if value is not None else "not_applicable", "value": value,
                         "passed": None, "threshold": (thresholds or {}).get(metric, 0.5),
                         "direction": "lower_is_better" if metric == "hallucination" else "higher_is_better",
                         "reason": "", "details": json.dumps(details), "judge": "scripted"})
    return pd.DataFrame(rows)


# claim_recall fails (< 0.5) on rows 1, 3 of 4 measured: 50 %; hallucination fails (> 0.5) on row 2 of 4:
# 25 %; retriever_context_precision fails everywhere but never leads (noise is expected of top-k).
FRAME = results({"claim_recall": [1.0, 0.0, 0.6, 0.25], "hallucination": [0.0, 0.2, 1.0, 0.5],
                 "retriever_context_precision": [0.2, 0.0, 0.1, 0.3], "faithfulness": [1.0, 1.0, 0.0, 1.0]},
                failed={"claim_recall": [[], ["It opened in 1889.", "It is in Paris."], ["x"], ["It is 300 m tall."]]})


def test_the_reading_names_the_leading_diagnostic_failing_most_rows():
    diagnosis = diagnose(FRAME)
    assert list(diagnosis["groups"]) == ["retriever", "generator"]
    assert list(diagnosis["groups"]["retriever"]) == ["claim_recall", "retriever_context_precision"]
    assert "faithfulness" not in str(diagnosis["groups"])  # a core metric, not a diagnostic
    assert diagnosis["lead"] == "claim_recall"
    assert diagnosis["reading"] == ("the retrieved chunks miss claims the reference needs in 50 % of rows "
                                    "(claim_recall < 0.5): fix retrieval first (the generator cannot use what was "
                                    "not retrieved)")
    recall = diagnosis["groups"]["retriever"]["claim_recall"]
    assert (recall["mean"], recall["failing_share"], recall["measured"]) == (0.4625, 0.5, 4)
    # The worst first, lines counted from 1, with the claims that failed.
    assert [(r["line"], r["value"], r["failed"]) for r in recall["worst_rows"]] == [
        (2, 0.0, ["It opened in 1889.", "It is in Paris."]), (4, 0.25, ["It is 300 m tall."])]
    assert diagnosis["groups"]["retriever"]["retriever_context_precision"]["failing_share"] == 1.0
    assert [r["line"] for r in diagnosis["groups"]["generator"]["hallucination"]["worst_rows"]] == [3]


def test_a_tie_goes_to_the_retriever_and_nothing_failing_is_said():
    tie = results({"hallucination": [1.0, 0.0], "claim_recall": [0.0, 1.0]})
    assert diagnose(tie)["lead"] == "claim_recall"
    healthy = results({"claim_recall": [1.0, 0.9], "hallucination": [0.0, None]})
    assert diagnose(healthy)["lead"] is None
    assert diagnose(healthy)["reading"] == "no diagnostic fails its threshold on any row"
    assert diagnose(results({"faithfulness": [1.0]})) is None
    unmeasured = diagnose(results({"generator_context_utilization": [None, None], "claim_recall": [None]}))
    assert unmeasured["reading"] == "no diagnostic measured a row (see each metric's coverage)"
    assert unmeasured["groups"]["retriever"]["claim_recall"] == {
        "mean": None, "measured": 0, "total": 1, "threshold": 0.5, "direction": "higher_is_better",
        "failing_share": None, "problem": "the retrieved chunks miss claims the reference needs", "worst_rows": []}


def test_the_users_threshold_decides_what_fails_and_the_scale_is_the_summarys():
    strict = diagnose(results({"claim_recall": [1.0, 0.9, 0.6, 0.8]}, thresholds={"claim_recall": 0.95}), scale=10)
    entry = strict["groups"]["retriever"]["claim_recall"]
    assert entry["failing_share"] == 0.75 and entry["threshold"] == 9.5 and entry["mean"] == 8.25
    assert "(claim_recall < 9.5)" in strict["reading"] and [r["value"] for r in entry["worst_rows"]] == [6.0, 8.0, 9.0]


def test_failed_claims_read_on_demand_when_the_frame_has_no_details():
    compact = FRAME.assign(details=None)
    asked = []

    def failed_of(metric, rows):
        asked.append((metric, rows))
        return {(row, sample_id): [f"claim of line {row + 1}"] for row, sample_id in rows}

    recall = diagnose(compact, failed_of)["groups"]["retriever"]["claim_recall"]
    assert recall["worst_rows"][0]["failed"] == ["claim of line 2"]
    assert ("claim_recall", [(1, "q1"), (3, "q3")]) in asked
    assert ("retriever_context_precision", [(1, "q1"), (2, "q2"), (0, "q0")]) in asked


def test_the_failed_claims_of_two_turns_on_one_line_are_their_own():
    """Lines 2 and 4 as the turns c/1 and c/2 of one conversation on line 2: each worst row gets its turn's claims."""
    compact = FRAME.assign(details=None, row=FRAME["row"].map({0: 0, 1: 1, 2: 2, 3: 1}),
                           sample_id=FRAME["row"].map({0: "q0", 1: "c/1", 2: "q2", 3: "c/2"}))

    def failed_of(metric, rows):
        return {(row, sample_id): [f"claim of {sample_id}"] for row, sample_id in rows}

    worst = diagnose(compact, failed_of)["groups"]["retriever"]["claim_recall"]["worst_rows"]
    assert [(r["line"], r["id"], r["failed"]) for r in worst] == [(2, "c/1", ["claim of c/1"]),
                                                                  (2, "c/2", ["claim of c/2"])]


def test_long_claims_are_cut_and_counted():
    many = [f"claim {i} " + "x" * 300 for i in range(7)]
    row = diagnose(results({"claim_recall": [0.0]}, failed={"claim_recall": [many]}))["groups"]["retriever"][
        "claim_recall"]["worst_rows"][0]
    assert len(row["failed"]) == 5 and row["more_failed"] == 2 and len(row["failed"][0]) == 200


def test_summary_table_and_console_group_the_diagnostics(capsys):
    summary = summarize(FRAME)
    assert summary["diagnosis"]["lead"] == "claim_recall"
    print_table(summary, width=100)
    out = capsys.readouterr().out
    # Core metrics first, then each group under its name, then the reading and the lead's worst rows.
    assert out.index("faithfulness") < out.index("retriever:") < out.index("  claim_recall") \
        < out.index("generator:") < out.index("  hallucination")
    assert "diagnosis: the retrieved chunks miss claims the reference needs in 50 % of rows" in out
    assert 'line 2 (id q1): 0: "It opened in 1889."; "It is in Paris."' in out


def test_which_diagnostic_moved_in_a_comparison_and_the_reports_show_it():
    ids = [f"q{i}" for i in range(12)]

    def side(recall: float, hallucination: float, failed: str) -> pd.DataFrame:
        frame = results({"claim_recall": [recall] * 12, "hallucination": [hallucination] * 12},
                        failed={"claim_recall": [[failed]] * 12})
        return frame.assign(sample_id=[ids[r] for r in frame["row"]])

    comparison = compare(side(1.0, 0.3, ""), side(0.25, 0.3, "<b>the [1889](http://x) claim</b>"))
    assert comparison.diagnosis["moved"] == {"retriever": [{"metric": "claim_recall", "verdict": "regressed",
                                                            "difference": pytest.approx(-0.75)}],
                                             "generator": []}
    assert moved_line(comparison.diagnosis["moved"]) == \
        "retriever: claim_recall regressed (-0.750); generator: nothing moved"
    assert comparison.diagnosis["candidate"]["lead"] == "claim_recall"
    assert json.loads(json.dumps(comparison.to_dict()))["diagnosis"]["moved"]["generator"] == []
    md = markdown_report(comparison)
    assert "Diagnostics that moved: retriever: claim\\_recall regressed \\(\\-0.750\\); generator: nothing moved" in md
    page = html_report(comparison, [], [])
    assert "retriever: claim_recall regressed (-0.750); generator: nothing moved" in page
    assert "&lt;b&gt;the [1889](http://x) claim&lt;/b&gt;" in page and "<b>the [1889]" not in page
    lines = diagnosis_markdown(comparison.diagnosis["candidate"])
    assert any("&lt;b&gt;the \\[1889\\]\\(http://x\\) claim&lt;/b&gt;" in line for line in lines)


def test_groups_follow_ragcheckers_order():
    assert diagnostics_in(["overall_f1", "hallucination", "faithfulness", "claim_recall"]) == {
        "retriever": ["claim_recall"], "generator": ["hallucination"], "overall": ["overall_f1"]}
