"""The cascade's draw from cheap results, its summary blocks (``add_cascade_estimates``) on hand-made frames,
values worked by hand, and ``evaluate``'s refusals of a bad cascade setting."""
import math
import re
from pathlib import Path

import pandas as pd
import pytest

from rag_eval.metrics import OfflineJudge, build_metrics, evaluate
from rag_eval.metrics.core.custom import load_custom_metrics
from rag_eval.metrics.errors import SettingsError
from rag_eval.metrics.core.strong import STRONG_COLUMNS, draw_strong
from rag_eval.metrics.reports.aggregate import summarize
from rag_eval.metrics.stats.cascade_estimates import add_cascade_estimates
from tests.conftest import ScriptedJudge

SETTINGS = {"sampling": "uniform", "budget": 0.5, "seed": 0}


def frames(cheap: list, strong: list) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A faithfulness results frame from ``(status, value)`` per row and its strong frame from
    ``(pi, strong status or None, strong value)`` per row (one chat request per drawn row)."""
    results = pd.DataFrame([{"sample_id": f"s{i}", "row": i, "metric": "faithfulness", "status": status,
                             "value": value, "passed": None if value is None else value >= 0.5, "threshold": 0.5,
                             "direction": "higher_is_better", "reason": "r", "details": "{}", "judge": "offline",
                             "chat_requests": 0, "embedding_requests": 0, "prompt_tokens": 0,
                             "completion_tokens": 0, "cache_hits": 0} for i, (status, value) in enumerate(cheap)])
    results["value"] = results["value"].astype(float)
    rows = []
    for i, (pi, status, value) in enumerate(strong):
        rows.append({"row": i, "metric": "faithfulness", "inclusion_probability": pi, "strong_status": status,
                     "strong_value": value, "strong_passed": None, "strong_reason": status and "judged",
                     "strong_details": None, "strong_judge": status and "llm:strong",
                     "strong_chat_requests": 1 if status else math.nan,
                     "strong_embedding_requests": 0 if status else math.nan,
                     "strong_prompt_tokens": math.nan, "strong_completion_tokens": math.nan,
                     "strong_cache_hits": 0 if status else math.nan})
    return results, pd.DataFrame(rows, columns=STRONG_COLUMNS)


def test_a_cheap_judge_exact_on_the_drawn_rows_gives_its_mean_with_the_failed_row_s_strong_score():
    # Four times: rows scored 0.2, 0.4, 0.6, 0.8, 1.0, 0.0 by the cheap judge, a cheap judge_error (pi = 1) and an
    # input_error (outside the cascade). The 0.2, 0.6 and 1.0 rows drawn (pi 0.5: 12 strong rows), the strong
    # judge agreeing exactly: lam = 1, b = 0, so theta = 4 * (3.0 + 1.0 (the judge_error row's strong score)) / 28
    # = 4 / 7; the raw (cheap) mean is 12.0 / 24 = 0.5. Every residual is 0: Laplace's spread, a residual of
    # rate q = 1 / 14 on each of the 12 rows: se² = 2 * 12 * q (1 - q) * 12 / 10 / 28², the Hajek factor
    # (24 scored rows over 12 / 0.5) being 1; the interval takes t with 10 degrees of freedom, 2.228.
    pattern = [("ok", 0.2), ("ok", 0.4), ("ok", 0.6), ("ok", 0.8), ("ok", 1.0), ("ok", 0.0), ("judge_error", None),
               ("input_error", None)]
    drawn = [(0.5, "ok", 0.2), (0.5, None, None), (0.5, "ok", 0.6), (0.5, None, None), (0.5, "ok", 1.0),
             (0.5, None, None), (1.0, "ok", 1.0), (math.nan, None, None)]
    results, strong_frame = frames(pattern * 4, drawn * 4)
    summary = summarize(results)
    blocks = add_cascade_estimates(summary, results, strong_frame, SETTINGS)
    row = summary["metrics"]["faithfulness"]
    assert row["mean"] == 0.5 and row["cascade"] is blocks["faithfulness"] and row["published"] == "cascade"
    block = row["cascade"]
    se = math.sqrt(2 * 12 * (1 / 14) * (13 / 14) * 12 / 10) / 28
    assert block["estimate"]["estimate"] == pytest.approx(4 / 7, abs=1e-6)
    assert block["estimate"]["se"] == pytest.approx(se, abs=1e-6)
    assert block["estimate"]["ci_low"] == pytest.approx(4 / 7 - 2.228 * se, abs=1e-3 * se)
    assert (block["estimate"]["n"], block["estimate"]["N"], block["estimate"]["lam"]) == (16, 28, 1.0)
    assert block["estimate"]["method"] == "cascade-uniform"
    assert (block["n"], block["rows"], block["sampling"], block["strong_judge"]) == (16, 28, "uniform", "llm:strong")
    assert block["agreement"] == 1.0  # 0.2 fails, 0.6 and 1.0 pass for both judges
    # Chat requests: one sent per drawn row; a full strong run's, not planned here, is the Horvitz-Thompson total of
    # the chat requests sent, 12 / 0.5 + 4 / 1 = 28.
    assert block["requests"] == {"unit": "chat_requests", "sent": 16, "full_run": 28, "from": "estimate",
                                 "saved": 12, "embeddings_sent": 0, "reused": 0}
    assert summary["cascade"] == {**SETTINGS, "strong_judge": "llm:strong", "metrics": {"faithfulness": 16},
                                  "usage": {"chat_requests": 16, "embedding_requests": 0, "prompt_tokens": 0,
                                            "completion_tokens": 0, "cache_hits": 0, "shared_hits": 0}}


#: Four times: cheap 0.5 on every row, the first three rows drawn (pi 0.5) with strong 1, 0, 1.
CONSTANT = frames([("ok", 0.5)] * 16, [(0.5, "ok", 1.0), (0.5, "ok", 0.0), (0.5, "ok", 1.0), (0.5, None, None)] * 4)


def test_a_constant_cheap_judge_leaves_the_strong_sample_s_own_interval_on_the_0_10_scale():
    # Cheap 0.5 everywhere: lam = 0, b = the drawn strong scores' mean 2/3 = theta. se² = sum w (y - b)²
    # * m / (m - 2) * (N / sum 1/pi)² / N², w = (1 - 0.5) / 0.5² = 2, m = 12: 2 * 4 * (1/9 + 4/9 + 1/9) * 12 / 10
    # * (16 / 24)² / 256 = 0.011111, se = 0.105409; on the 0-10 scale, times 10, with t at 10 degrees of
    # freedom (2.228).
    results, strong_frame = CONSTANT
    summary = summarize(results, scale=10)
    estimate = add_cascade_estimates(summary, results, strong_frame, SETTINGS)["faithfulness"]["estimate"]
    se = 10 * math.sqrt(2 * 4 * (6 / 9) * 12 / 10 * (16 / 24) ** 2) / 16
    assert estimate["estimate"] == pytest.approx(20 / 3, abs=1e-5) and estimate["se"] == pytest.approx(se, abs=1e-5)
    assert estimate["ci_low"] == pytest.approx(20 / 3 - 2.228 * se, abs=1e-3)
    assert estimate["ci_high"] == pytest.approx(20 / 3 + 2.228 * se, abs=1e-3)
    assert (estimate["lam"], estimate["n"], estimate["N"]) == (0.0, 12, 16)


def test_a_drawn_row_the_strong_judge_failed_on_gives_no_estimate_and_names_its_line():
    results, strong_frame = frames([("ok", 0.5)] * 4, [(0.5, "ok", 1.0), (0.5, "judge_error", None),
                                                       (0.5, "ok", 1.0), (0.5, None, None)])
    summary = summarize(results)
    summary["metrics"]["faithfulness"]["ppi"] = None  # labels too few for an estimate: not the published figure
    block = add_cascade_estimates(summary, results, strong_frame, SETTINGS)["faithfulness"]
    assert block["estimate"] is None and block["n"] == 3 and (block["judge_error"], block["not_applicable"]) == (1, 0)
    assert block["note"].startswith("no estimate: the strong judge has no score on drawn line(s) 2 (judge_error);")
    assert summary["metrics"]["faithfulness"]["published"] == "mean"


def test_a_drawn_row_the_strong_judge_finds_not_applicable_is_outside_the_population_not_a_missing_estimate():
    # CONSTANT with row 1 (strong 0) not applicable to the strong judge: 11 drawn rows scored, 8 of them 1. Cheap 0.5
    # everywhere: lam = 0, b = 8/11 = theta (the population, N_d = 16 - 1 / 0.5 = 14 rows, predicted 8/11 each).
    # se² = 2 * (8 (3/11)² + 3 (8/11)²) * 11 / 9 (m = 11, two fitted) * (14 / 22)² / 14²: the Hajek factor's scored
    # rows are the population's, 14 estimated, over the 22 their drawn rows stand for; the outside row's residual,
    # theta - g, is 0.
    results, strong_frame = CONSTANT
    strong_frame = strong_frame.copy()
    strong_frame.loc[1, ["strong_status", "strong_value"]] = ["not_applicable", math.nan]
    block = add_cascade_estimates(summarize(results), results, strong_frame, SETTINGS)["faithfulness"]
    se = math.sqrt(2 * (8 * 9 + 3 * 64) / 121 * 11 / 9 * (14 / 22) ** 2) / 14
    assert "note" not in block and (block["n"], block["rows"], block["not_applicable"]) == (12, 16, 1)
    assert block["estimate"]["estimate"] == pytest.approx(8 / 11, abs=1e-6)
    assert block["estimate"]["se"] == pytest.approx(se, abs=1e-6)


def test_a_drawn_row_the_strong_judge_gives_an_input_error_says_why_without_advising_a_rerun():
    results, strong_frame = frames([("ok", 0.5)] * 4, [(0.5, "ok", 1.0), (0.5, "input_error", None),
                                                       (0.5, "ok", 1.0), (0.5, None, None)])
    block = add_cascade_estimates(summarize(results), results, strong_frame, SETTINGS)["faithfulness"]
    assert block["note"] == ("no estimate: the strong judge has no score on drawn line(s) 2 (input_error); leaving "
                             "them out would bias the interval")


def test_labels_estimate_stays_the_published_figure_beside_the_cascade():
    results, strong_frame = CONSTANT
    summary = summarize(results)
    summary["metrics"]["faithfulness"]["ppi"] = {"estimate": 0.7}
    add_cascade_estimates(summary, results, strong_frame, SETTINGS)
    row = summary["metrics"]["faithfulness"]
    assert row["published"] == "ppi" and row["ppi"] == {"estimate": 0.7}
    assert row["cascade"]["estimate"]["estimate"] == pytest.approx(2 / 3, abs=1e-6)


def test_a_likert_metric_is_drawn_actively_on_its_score_rescaled_to_0_1():
    # groundedness (1-5) scored 1, 3, 5: rescaled 0, 0.5, 1, uncertainties 0, 0.5, 0. A budget of half the
    # 3 rows is B = 1.5; the floor is 0.9 * 1.5 / 3 = 0.45, so the middle row gets 1.5 - 2 * 0.45 = 0.6.
    results, _ = frames([("ok", 1.0), ("ok", 3.0), ("ok", 5.0)], [])
    results["metric"] = "groundedness"
    uniforms = pd.Series([0.5, 0.5, 0.5], index=[0, 1, 2])
    draws, notes = draw_strong(results, build_metrics(["groundedness"]), uniforms, 0.5, "active")
    assert draws["inclusion_probability"].tolist() == pytest.approx([0.45, 0.6, 0.45])
    assert draws["drawn"].tolist() == [False, True, False] and notes == {}


def test_more_cheap_failures_than_the_budget_draw_no_sample_and_say_why():
    results, _ = frames([("judge_error", None), ("judge_error", None), ("ok", 0.5), ("not_applicable", None)], [])
    draws, notes = draw_strong(results, build_metrics(["faithfulness"]), pd.Series([0.1] * 4), 1, "uniform")
    assert draws["inclusion_probability"].isna().all() and not draws["drawn"].any()
    assert notes["faithfulness"].startswith("no strong sample drawn: 2 row(s) must be strong-judged")


def test_a_rows_budget_above_a_metric_s_covered_rows_strong_judges_every_covered_row():
    # 4 rows, one an input_error (not covered): a budget of 4 rows is capped at the 3 covered rows, each drawn
    # for sure (pi = 1: a census), whatever its uniform; the input_error row stays outside (no probability).
    results, _ = frames([("ok", 0.5), ("input_error", None), ("ok", 0.9), ("judge_error", None)], [])
    draws, notes = draw_strong(results, build_metrics(["faithfulness"]), pd.Series([0.99] * 4), 4, "active")
    assert notes == {}
    assert draws["inclusion_probability"].tolist()[0::2] == [1.0, 1.0] and draws["inclusion_probability"][3] == 1.0
    assert math.isnan(draws["inclusion_probability"][1])
    assert draws["drawn"].tolist() == [True, False, True, True]


@pytest.mark.parametrize("options, message", [
    ({"strong_judge": ScriptedJudge()}, "a judge cascade needs both strong_judge and strong_budget"),
    ({"strong_judge": None, "strong_budget": 0.1}, "a judge cascade needs both strong_judge and strong_budget"),
    ({"strong_budget": 1.5}, "strong budget share must be at most 1, got 1.5"),
    ({"strong_budget": 3}, "strong budget of 3 rows exceeds the 2 rows"),
    ({"strong_budget": 1, "strong_sampling": "random"}, "strong_sampling must be one of active, uniform, got 'random'"),
])
def test_a_bad_cascade_setting_is_refused_before_anything_is_scored(options, message):
    cheap = ScriptedJudge()
    rows = [{"id": f"r{i}", "user_input": "q", "response": "The answer.", "retrieved_contexts": ["c"]} for i in range(2)]
    with pytest.raises(ValueError, match=f"^{re.escape(message)}"):
        evaluate(rows, metrics=["faithfulness"], judge=cheap, **{"strong_judge": ScriptedJudge(), **options})
    assert cheap.calls == []


def test_two_rows_with_one_id_are_refused_before_anything_is_scored():
    cheap = ScriptedJudge()
    rows = [{"id": "a", "user_input": "q", "response": "The answer.", "retrieved_contexts": ["c"]}] * 2
    with pytest.raises(ValueError, match=r"^line 2: id 'a' repeats line 1's"):
        evaluate(rows, metrics=["faithfulness"], judge=cheap, strong_judge=ScriptedJudge(), strong_budget=1)
    assert cheap.calls == []


def test_a_metric_the_offline_cheap_judge_has_no_rule_for_is_refused_before_anything_is_scored():
    # A custom metric needs an LLM judge: the offline cheap judge would find every row not applicable, leaving the
    # metric outside the cascade with no strong row. Refused up front, naming the metric and the ways out.
    custom = load_custom_metrics(Path(__file__).parents[2] / "examples" / "custom_metrics" / "custom_metrics.yaml")[0]
    cheap, strong = OfflineJudge(), ScriptedJudge()
    rows = [{"id": f"r{i}", "user_input": "q", "response": "The answer.", "retrieved_contexts": ["c"]} for i in range(4)]
    message = (f"{custom.name}: the cheap judge ({cheap.name}) has no rule for it (it needs an LLM judge), so the "
               "cascade would give it no strong row: give a smaller model as the cheap judge (--cheap-model), or "
               "evaluate it without the cascade")
    with pytest.raises(SettingsError, match=f"^{re.escape(message)}$"):
        evaluate(rows, metrics=["faithfulness", custom()], judge=cheap, strong_judge=strong, strong_budget=2)
    assert strong.calls == []
    result = evaluate(rows, metrics=[custom()], judge=ScriptedJudge(), strong_judge=strong, strong_budget=2)
    assert result.summary["metrics"][custom.name]["cascade"]["rows"] == 4  # a cheap LLM judge: in the cascade


def test_with_labels_too_the_summary_publishes_the_labels_estimate_beside_the_cascade_s(tmp_path):
    # The cheap judge passes every statement (faithfulness 1 on every row), the strong judge none (0): the
    # cascade estimates the strong mean as 0 exactly (a constant cheap judge leaves the strong sample's mean,
    # every drawn residual 0). People labelled 12 rows, half 1 and half 0: the labels' estimate corrects the
    # cheap judge and is the published figure.
    rows = [{"id": f"r{i}", "user_input": "q", "response": "The answer.", "retrieved_contexts": ["c"]} for i in range(30)]
    labels = tmp_path / "labels.csv"
    labels.write_text("id,metric,label\n" + "".join(f"r{i},faithfulness,{i % 2}\n" for i in range(12)))
    result = evaluate(rows, metrics=["faithfulness"], judge=ScriptedJudge(), labels=labels,
                      strong_judge=ScriptedJudge(support=lambda item: 0), strong_budget=0.5, seed=3)
    row = result.summary["metrics"]["faithfulness"]
    assert row["mean"] == 1.0 and row["published"] == "ppi" and row["ppi"]["method"] == "ppi++"
    assert row["ppi"]["n"] == 12 and row["ppi"]["ci_low"] < 0.5 < row["ppi"]["ci_high"]
    assert row["cascade"]["estimate"]["estimate"] == 0.0 and row["cascade"]["agreement"] == 0.0
    assert result.summary["labels"]["metrics"] == {"faithfulness": 12}
    n = row["cascade"]["n"]  # a judge reporting no usage: the saving is counted in rows
    assert row["cascade"]["requests"] == {"unit": "rows", "used": n, "full_run": 30, "saved": 30 - n} and 0 < n < 30


def test_agreement_of_a_lower_is_better_metric_passes_scores_at_or_below_the_threshold():
    # Threshold 0.5, lower is better: cheap 0.5 passes and strong 0.6 fails on row 1 (disagree), both 0.2 pass
    # on row 2 (agree): agreement 1/2 (read as higher-is-better, 0.5 and 0.6 would both pass: 1). Every row
    # drawn for sure: the estimate is the strong mean 0.4.
    results, strong_frame = frames([("ok", 0.5), ("ok", 0.2)], [(1.0, "ok", 0.6), (1.0, "ok", 0.2)])
    results["direction"] = "lower_is_better"
    block = add_cascade_estimates(summarize(results), results, strong_frame, SETTINGS)["faithfulness"]
    assert block["agreement"] == 0.5 and block["estimate"]["estimate"] == pytest.approx(0.4)
