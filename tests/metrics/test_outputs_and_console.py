"""The data path without Dagster: bad lines kept, summaries on one scale, peers' layouts, the console."""
from __future__ import annotations

import csv
import io
import json

import pandas as pd
import pytest

from rag_eval.metrics.reports.aggregate import dingo_summary, summarize
from rag_eval.metrics.evaluate import evaluate, results_frame
from rag_eval.metrics.reports.formats import azure_rows, ragas_table, write_ragas_csv
from rag_eval.metrics.core.results import Direction, MetricResult, Status
from rag_eval.metrics.core.samples import load_samples
from rag_eval.metrics.core.usable import unavailable, unusable
from rag_eval.orchestration.report import ProgressDisplay, print_input_errors, print_rejected, print_table, printable

FIQA_ROW = {"user_input": "What is an ETF?", "response": "An ETF is an exchange-traded fund.",
            "retrieved_contexts": ["An exchange-traded fund (ETF) is a fund traded on an exchange."]}


def result(metric, value, row=0, status=Status.OK, passed=None, threshold=0.5, direction=Direction.HIGHER,
           details=None, reason="r", judge="offline-heuristic"):
    return MetricResult(metric=metric, sample_id=f"s{row}", status=status, value=value,
                        passed=passed if passed is not None else (None if status != Status.OK else True),
                        threshold=threshold, direction=direction, reason=reason, details=details or {},
                        judge=judge, row=row)


# ----------------------------------------------------------------------------- point 2: lines that cannot be read


def test_a_line_nested_100000_levels_deep_is_one_rejected_line(tmp_path):
    path = tmp_path / "deep.jsonl"
    path.write_text(json.dumps(FIQA_ROW) + "\n" + "[" * 100_000 + "]" * 100_000 + "\n"
                    + '{"user_input": ' + "[" * 70 + "1" + "]" * 70 + "}\n" + json.dumps(FIQA_ROW) + "\n")
    samples = load_samples(path)
    assert [s.line for s in samples] == [1, 2, 3, 4]
    assert samples[1].problems == {"row": "nested more than 64 levels deep"}
    assert samples[2].problems == {"row": "nested more than 64 levels deep"}  # parses, but deeper than any sample
    assert samples[1].source.startswith("[[[") and samples[1].source.endswith("(200000 characters in all)")
    assert not samples[0].problems and not samples[3].problems


def test_the_line_as_read_is_kept_for_every_sample(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text('{"user_input": "Q?", "response": 42}\n{not json\n', encoding="utf-8")
    first, second = load_samples(path)
    assert first.source == '{"user_input": "Q?", "response": 42}' and first.problems["response"].startswith("expected")
    assert second.source == "{not json" and second.problems["row"].startswith("not valid JSON")


# ----------------------------------------------------------------------------- point 1: a field missing is not a rejection


def test_a_line_is_rejected_only_when_no_selected_metric_can_use_it():
    required = {"faithfulness": ("user_input", "response", "retrieved_contexts"),
                "context_recall": ("user_input", "retrieved_contexts", "reference")}
    [no_reference, only_question] = load_samples([FIQA_ROW, {"user_input": "Q?"}])
    assert unusable(no_reference, required) is None
    assert unusable(only_question, required) == ("no selected metric can use it: response: missing; "
                                                 "retrieved_contexts: missing; reference: missing")
    assert unavailable([no_reference, only_question], required) == {
        "context_recall": "no line has a usable 'reference'"}


@pytest.mark.slow  # the offline encoder
def test_evaluate_on_data_without_reference_scores_what_it_can():
    with pytest.warns(UserWarning, match="context_recall cannot run: no line has a usable 'reference'"):
        result = evaluate([FIQA_ROW, dict(FIQA_ROW, response="An ETF is a fund.")],
                          metrics=["faithfulness", "context_recall"])
    by_metric = result.results.groupby("metric")["status"].agg(list).to_dict()
    assert by_metric == {"faithfulness": ["ok", "ok"], "context_recall": ["input_error", "input_error"]}
    reason = result.results.loc[result.results["metric"] == "context_recall", "reason"].iloc[1]
    assert reason.startswith("line 2 (id ") and reason.endswith("field 'reference' missing")


# ----------------------------------------------------------------------------- point 4: no average mixes scales


def test_overall_figures_never_average_counts_or_likert_with_ratios():
    # The 221.09: NDCG averaged with XDCG and counts in one field group.
    frame = results_frame([
        result("ndcg", 0.6, details={"k": 3}), result("xdcg", 56.0, threshold=50.0),
        result("holes_ratio", 0.25, direction=Direction.LOWER, passed=True),
        result("total_retrieved_documents", 4.0, threshold=1.0),
        # The 2.39: a [0, 1] metric averaged with a 1-5 Likert in one group.
        result("factual_correctness", 0.8), result("response_completeness", 4.0, threshold=3.0),
    ])
    summary = summarize(frame)
    groups = summary["metrics_score"]
    assert groups["retrieval_ground_truth,retrieved_documents"]["overall_average"] == 0.675  # (0.6 + (1 - 0.25)) / 2
    assert groups["response,reference"]["overall_average"] == 0.8  # the Likert mean stands alone
    assert groups["response,reference"]["summary"]["response_completeness"] == 4.0
    assert summary["overall_average"] == pytest.approx((0.6 + 0.75 + 0.8) / 3, abs=1e-4)
    assert summary["metrics"]["response_completeness"]["scale"] == "1-5 Likert"
    ten = summarize(frame, scale=10)
    assert ten["metrics_score"]["retrieval_ground_truth,retrieved_documents"]["overall_average"] == 6.75
    assert ten["metrics"]["holes_ratio"]["threshold"] == 5.0 and ten["metrics"]["xdcg"]["threshold"] == 50.0


# ----------------------------------------------------------------------------- point 3: the judge on the rows


def test_the_summary_names_the_judge_on_the_result_rows_and_this_runs_cost():
    frame = results_frame([result("faithfulness", 1.0, judge="llm:gpt-4o-mini")])
    frame["chat_requests"] = 3
    summary = summarize(frame, judge={"judge": "offline-heuristic", "model": "usem3"})
    assert summary["judge"] == {"judge": "llm:gpt-4o-mini"}  # not the resource's current judge
    assert summary["usage"]["chat_requests"] == 3 and summary["usage_earlier_runs"] == {}
    earlier = summarize(frame, earlier={"faithfulness"})
    assert earlier["usage"]["chat_requests"] == 0 and earlier["usage_earlier_runs"]["chat_requests"] == 3


# ----------------------------------------------------------------------------- point 9: the peers' layouts


def test_dingo_layout_reproduces_dingos_worked_summary():
    # dingo 2.5's LocalExecutor with all_labels=True: faithfulness [10, 6.67, 3.33, 0], relevancy [10, 5, 0, 10].
    rows = []
    for row, (faith, relevancy) in enumerate(zip([1.0, 2 / 3, 1 / 3, 0.0], [1.0, 0.5, 0.0, 1.0])):
        rows.append(result("faithfulness", faith, row=row, passed=faith >= 0.5))
        rows.append(result("context_relevancy", relevancy, row=row, passed=relevancy >= 0.5))
    summary = dingo_summary(results_frame(rows), "fiqa")
    key = "user_input,response,retrieved_contexts,reference"
    assert list(summary) == ["task_name", "total", "num_good", "num_bad", "score", "type_ratio", "metrics_score"]
    assert (summary["total"], summary["num_good"], summary["num_bad"], summary["score"]) == (4, 2, 2, 50.0)
    stats = summary["metrics_score"][key]["stats"]
    assert stats["LLMRAGFaithfulness"] == {"score_average": 5.0, "score_count": 4, "score_min": 0.0,
                                           "score_max": 10.0, "score_std_dev": 3.73}
    assert stats["LLMRAGContextRelevancy"]["score_average"] == 6.25
    assert stats["LLMRAGContextRelevancy"]["score_std_dev"] == 4.15
    assert summary["metrics_score"][key]["overall_average"] == 5.62
    assert summary["type_ratio"][key] == {"QUALITY_GOOD.FAITHFULNESS_PASS": 0.5, "QUALITY_BAD.FAITHFULNESS_FAIL": 0.5,
                                          "QUALITY_GOOD.CONTEXT_RELEVANCY_PASS": 0.75,
                                          "QUALITY_BAD.CONTEXT_RELEVANCY_FAIL": 0.25}


def test_azure_document_retrieval_keys_are_flat_with_azures_names_and_types():
    rows = [result("ndcg", 0.595890, details={"k": 5}),
            result("top1_relevance", 2.0, threshold=2.0, details={"k": 5}),
            result("holes", 1.0, threshold=0.0, direction=Direction.LOWER, passed=False, details={"k": 5}),
            result("total_ground_truth_documents", 5.0, threshold=1.0, details={"k": 5}),
            result("fidelity", None, status=Status.NOT_APPLICABLE, reason="no relevant document", details={"k": 5})]
    [row] = azure_rows(results_frame(rows))
    assert row["ndcg@5"] == 0.595890 and row["ndcg@5_result"] == "pass" and row["ndcg@5_threshold"] == 0.5
    assert "ndcg" not in row and "document_retrieval_properties" not in row
    assert row["top1_relevance"] == 2 and isinstance(row["top1_relevance"], int)
    assert isinstance(row["top1_relevance_threshold"], float)
    assert (row["holes"], row["holes_result"], row["holes_threshold"], row["holes_higher_is_better"]) == (1, "fail", 0,
                                                                                                        False)
    assert isinstance(row["holes_threshold"], int)
    assert row["total_ground_truth_documents"] == row["total_groundtruth_documents"] == 5
    assert row["fidelity"] is None and row["fidelity_result"] == "not_applicable"
    assert row["fidelity_reason"] == "no relevant document"


def test_binary_qrels_put_top1_relevance_on_the_binary_scale():
    qrels = [{"document_id": "a", "query_relevance_label": 1}, {"document_id": "b", "query_relevance_label": 0}]
    run = [{"document_id": "a", "relevance_score": 0.9}, {"document_id": "b", "relevance_score": 0.1}]
    result_ = evaluate([{"retrieval_ground_truth": qrels, "retrieved_documents": run}],
                       metrics=["top1_relevance", "top3_max_relevance", "xdcg"])
    frame = result_.results.set_index("metric")
    assert frame.loc["top1_relevance", "passed"] and frame.loc["top1_relevance", "threshold"] == 0.5
    assert frame.loc["top3_max_relevance", "passed"]
    assert frame.loc["xdcg", "value"] == pytest.approx(100 / 1.96)  # label 1 is the top of a binary scale
    graded = evaluate([{"retrieval_ground_truth": [dict(qrels[0], query_relevance_label=3)],
                        "retrieved_documents": run}], metrics=["top1_relevance"]).results
    assert graded["threshold"].tolist() == [2.0]  # graded data keeps Azure's 0-4


# ----------------------------------------------------------------------------- point 2 and 10: the console


def test_control_characters_from_the_data_are_escaped():
    assert printable("Why \x1b[31mred\x1b[0m?\r\n\u202e") == "Why \\x1b[31mred\\x1b[0m?\\r\\n\\u202e"
    stream = io.StringIO()
    print_input_errors([{"line": 3, "id": "a\x1b]0;owned\x07", "fields": {"response": "is malformed: \x1b[2J"},
                         "metrics": ["faithfulness"]}], 1, stream)
    assert "\x1b" not in stream.getvalue() and "\x07" not in stream.getvalue()
    assert "line 3 (id a\\x1b]0;owned\\x07): response is malformed: \\x1b[2J (faithfulness)" in stream.getvalue()


def test_rejected_lines_are_accounted_one_message_per_line_also_under_the_limit():
    stream = io.StringIO()
    rejected = [{"line": n, "id": f"x{n}", "reason": "not valid JSON"} for n in (2, 9, 11, 12, 30, 31, 40)]
    print_rejected(rejected, 7, 400, 0.05, stream)
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("7 line(s) rejected") and "1.8% of 400, limit 5.0%" in lines[0]
    assert lines[1] == "  line 2 (id x2): not valid JSON" and lines[-1] == "  … and 2 more"


def test_progress_prints_plain_lines_when_not_on_a_terminal():
    stream = io.StringIO()
    with ProgressDisplay(stream, every=3600) as show:
        for done in range(1, 5):
            show("faithfulness", done, 4)
    show("answer_relevancy", 1, 1)  # closed: a run that shows no progress tells it too
    assert stream.getvalue().splitlines() == ["faithfulness: 1/4 scored", "faithfulness: 4/4 scored"]


def test_the_table_is_readable_at_80_columns(capsys):
    from rag_eval.metrics.core.registry import builtin_registry

    frame = results_frame([result(name, 1.0, threshold=1.0) for name in builtin_registry()])
    print_table(summarize(frame, task_name="20261130T020000Z-a-long-dataset-name"), width=80)
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "…" not in out and "total_ground_truth_documents" in out and "noise_sensitivity_irrelevant" in out


def test_the_ragas_table_says_why_a_cell_is_empty():
    frame = results_frame([result("faithfulness", 0.75), result("faithfulness", None, row=1, status=Status.INPUT_ERROR,
                                                                reason="line 2 (id s1): field 'response' missing")])
    table = ragas_table(frame)
    assert table["unscored"].tolist() == ["", "faithfulness: input_error: line 2 (id s1): field 'response' missing"]
    assert pd.isna(table["faithfulness"].iloc[1])


def test_a_carriage_return_in_a_field_keeps_its_row_one_csv_record(tmp_path):
    """pandas' default CSV leaves a bare \\r unquoted, and readers split the row there."""
    table = pd.DataFrame({"row": [0, 1], "response": ["Paris \x1b[31mRED\x1b[0m \x07 bell \r carriage", "ok"],
                          "faithfulness": [1.0, 0.5]})
    write_ragas_csv(table, tmp_path / "ragas_scores.csv")
    with open(tmp_path / "ragas_scores.csv", newline="", encoding="utf-8") as handle:
        records = list(csv.reader(handle))
    assert len(records) == 3 and records[1][1] == table["response"][0]
    assert pd.read_csv(tmp_path / "ragas_scores.csv")["faithfulness"].tolist() == [1.0, 0.5]
