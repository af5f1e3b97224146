"""rag_eval.metrics.stats.compare: paired differences by id, direction, scale, Holm, coverage, repeats (values by hand)."""
import math
import re

import numpy as np
import pandas as pd
import pytest

from rag_eval.metrics.stats.compare import compare, default_margin, holm


def frame(metric: str, values: dict[str, float], status: dict[str, str] | None = None, repeat: int | None = None,
          direction: str = "higher_is_better") -> pd.DataFrame:
    status = status or {}
    rows = [{"sample_id": sid, "row": i, "metric": metric, "status": status.get(sid, "ok"),
             "value": None if status.get(sid, "ok") != "ok" else value, "direction": direction,
             "reason": f"{metric} of {sid}: {value}"} for i, (sid, value) in enumerate(values.items())]
    result = pd.DataFrame(rows)
    if repeat is not None:
        result["repeat"] = repeat
    return result


IDS = [f"q{i:02d}" for i in range(12)]
BASE = {sid: 0.3 + 0.05 * i for i, sid in enumerate(IDS)}


def test_rows_pair_by_id_whatever_their_order_and_lower_is_better_is_turned():
    shuffled = {sid: BASE[sid] - 0.1 for sid in reversed(IDS)}  # every row 0.1 worse, in reverse order
    worse_noise = {sid: BASE[sid] + 0.1 for sid in IDS}  # a lower-is-better metric 0.1 higher: also worse
    result = compare(pd.concat([frame("faithfulness", BASE), frame("noise_sensitivity_relevant", BASE,
                                                                   direction="lower_is_better")]),
                     pd.concat([frame("faithfulness", shuffled), frame("noise_sensitivity_relevant", worse_noise,
                                                                       direction="lower_is_better")]))
    for metric in ("faithfulness", "noise_sensitivity_relevant"):
        row = result.metrics[metric]
        assert row.n == 12 and row.difference == pytest.approx(-0.1)
        assert row.low == pytest.approx(-0.1) and row.high == pytest.approx(-0.1)  # every resample is -0.1
        assert row.verdict == "regressed"
    assert not result.passed and len(result.failures) == 2
    assert result.worst_rows["faithfulness"][0]["difference"] == pytest.approx(-0.1)


def test_holm_step_down_by_hand():
    # sorted: a 0.01 * 3 = 0.03; c 0.03 * 2 = 0.06; b 0.04 * 1 = 0.04, raised to the running max 0.06.
    assert holm({"a": 0.01, "b": 0.04, "c": 0.03}) == pytest.approx({"a": 0.03, "c": 0.06, "b": 0.06})


def test_likert_metrics_are_compared_on_their_own_scale():
    base = {sid: 1 + (i % 5) for i, sid in enumerate(IDS)}
    lower = {sid: v - 0.05 for sid, v in base.items()}
    result = compare(frame("groundedness", base), frame("groundedness", lower))
    row = result.metrics["groundedness"]
    # -0.05 on 1-5 is inside its margin 0.02 * 4 = 0.08: no change; the same -0.05 on [0, 1] regresses.
    assert (row.margin, row.difference, row.verdict) == (0.08, pytest.approx(-0.05), "no change detected")
    assert row.baseline_mean == pytest.approx(np.mean(list(base.values())))
    ratio = compare(frame("faithfulness", {k: v / 5 for k, v in base.items()}),
                    frame("faithfulness", {k: v / 5 - 0.05 for k, v in base.items()}))
    assert ratio.metrics["faithfulness"].verdict == "regressed"
    assert [default_margin(m) for m in ("faithfulness", "groundedness", "xdcg", "holes")] == [0.02, 0.08, 2.0, 0.5]


def test_status_changes_rows_in_one_version_and_a_coverage_drop_fail_the_gate():
    base = frame("faithfulness", {**BASE, "only-base": 0.5})
    cand_values = {**{sid: BASE[sid] for sid in IDS}, "only-cand": 0.5}
    cand = frame("faithfulness", cand_values, status={"q00": "judge_error", "q01": "judge_error"})
    result = compare(base, cand)
    assert result.only_in_baseline == ["only-base"] and result.only_in_candidate == ["only-cand"]
    assert [(c["id"], c["baseline"], c["candidate"]) for c in result.status_changes["faithfulness"]] == [
        ("q00", "ok", "judge_error"), ("q01", "ok", "judge_error")]
    row = result.metrics["faithfulness"]
    assert row.n == 10 and row.difference == 0.0 and row.verdict == "no change detected"
    # 2 judge errors of 13 rows against none: the error share rose by 15.4 % > 5 %.
    assert result.coverage["faithfulness"]["drop"] == pytest.approx(2 / 13, abs=1e-6)
    assert result.failures == ["faithfulness coverage dropped: not scored on 15.4% of rows vs 0.0% "
                               "(errors 15.4%, not applicable 0.0%; limit +5.0%)"]
    assert compare(base, cand, max_coverage_drop=0.2).passed


def test_a_candidate_that_refuses_to_answer_loses_coverage_and_fails_the_gate():
    # "I don't know" on 2 of 12 rows: faithfulness is not applicable there, and the 10 rows left are as good.
    base = frame("faithfulness", BASE)
    cand = frame("faithfulness", BASE, status={"q00": "not_applicable", "q01": "not_applicable"})
    result = compare(base, cand)
    assert result.metrics["faithfulness"].verdict == "no change detected" and result.metrics["faithfulness"].n == 10
    assert result.coverage["faithfulness"]["drop"] == pytest.approx(2 / 12, abs=1e-6)
    assert result.failures == ["faithfulness coverage dropped: not scored on 16.7% of rows vs 0.0% "
                               "(errors 0.0%, not applicable 16.7%; limit +5.0%)"]
    assert not result.passed


def test_the_interval_matches_normal_theory_and_is_reproducible():
    rng = np.random.default_rng(1)
    ids = [f"r{i}" for i in range(400)]
    base = {sid: float(v) for sid, v in zip(ids, rng.integers(0, 2, 400))}
    cand = {sid: float(v) for sid, v in zip(ids, rng.integers(0, 2, 400))}
    result = compare(frame("faithfulness", base), frame("faithfulness", cand))
    row = result.metrics["faithfulness"]
    diffs = np.array([cand[s] - base[s] for s in ids])
    half = 1.96 * diffs.std() / math.sqrt(len(diffs))  # the normal interval's half width
    assert row.difference == pytest.approx(diffs.mean())
    assert (row.high - row.low) / 2 == pytest.approx(half, rel=0.08)
    assert row.low < diffs.mean() < row.high
    again = compare(frame("faithfulness", base), frame("faithfulness", cand))
    assert (again.metrics["faithfulness"].low, again.metrics["faithfulness"].high) == (row.low, row.high)


def test_too_few_rows_give_no_verdict_and_an_absent_gated_metric_fails():
    few = {sid: BASE[sid] for sid in IDS[:5]}
    result = compare(frame("faithfulness", few), frame("faithfulness", {k: v - 0.3 for k, v in few.items()}))
    assert result.metrics["faithfulness"].verdict == "too few rows" and result.passed
    absent = compare(pd.concat([frame("faithfulness", BASE), frame("answer_relevancy", BASE)]),
                     frame("faithfulness", BASE), metrics=["faithfulness", "answer_relevancy"])
    assert absent.metrics["answer_relevancy"].verdict == "not in candidate"
    assert absent.failures == ["answer_relevancy: not in candidate (no row scored ok in both versions)"]


def test_repeats_average_per_row_and_give_the_judges_test_retest_spread():
    # Candidate judged twice: each row 0.1 below and 0.1 above the baseline, so its mean equals the baseline
    # and the pooled within-row SD is sqrt(0.2**2 / 2) = 0.1414.
    base = frame("faithfulness", BASE)
    cand = pd.concat([frame("faithfulness", {k: v - 0.1 for k, v in BASE.items()}, repeat=0),
                      frame("faithfulness", {k: v + 0.1 for k, v in BASE.items()}, repeat=1)])
    row = compare(base, cand).metrics["faithfulness"]
    assert row.difference == pytest.approx(0.0) and row.n == 12
    assert row.repeats == {"baseline": 1, "candidate": 2}
    assert row.retest_sd == {"baseline": None, "candidate": pytest.approx(math.sqrt(0.02))}


def test_another_question_set_is_no_decision_but_rows_all_failing_are_a_failure():
    other = {f"x{i:02d}": v for i, v in enumerate(BASE.values())}  # the same values under other ids
    result = compare(frame("faithfulness", BASE), frame("faithfulness", other), names=("fiqa", "new"))
    row = result.metrics["faithfulness"]
    assert (row.n, row.verdict, result.passed, result.decided) == (0, "no rows in common", True, False)
    assert result.verdict == "no decision: the candidate shares no row id with baseline fiqa; nothing was compared"
    from rag_eval.metrics.reports.gate_report import markdown_report

    assert markdown_report(result).splitlines()[0] == (
        "## Regression gate: no decision: `new` shares no row id with baseline `fiqa`; nothing was compared")
    assert len(result.only_in_baseline) == len(result.only_in_candidate) == 12
    failing = compare(frame("faithfulness", BASE), frame("faithfulness", BASE, status=dict.fromkeys(IDS, "judge_error")))
    assert failing.metrics["faithfulness"].verdict == "not measured" and not failing.passed


def test_metrics_that_did_not_move_on_any_row_do_not_dilute_the_holm_correction():
    # faithfulness: alternating -0.05 and -0.15 (mean -0.1); every bootstrap mean of 12 such rows lies in
    # [-0.15, -0.05], below -0.02, so its p is 1/4001. Three metrics identical row for row cannot be
    # decided (p = 1 for certain): Holm corrects over faithfulness alone, not over four.
    worse = {sid: BASE[sid] - (0.05 if i % 2 else 0.15) for i, sid in enumerate(IDS)}
    same = ["answer_relevancy", "context_recall", "context_precision"]
    result = compare(pd.concat([frame("faithfulness", BASE), *(frame(m, BASE) for m in same)]),
                     pd.concat([frame("faithfulness", worse), *(frame(m, BASE) for m in same)]),
                     gated=["faithfulness", *same])
    row = result.metrics["faithfulness"]
    assert row.p_regression == pytest.approx(1 / 4001) and row.p_regression_holm == row.p_regression
    assert [result.metrics[m].verdict for m in same] == ["no change detected"] * 3
    assert row.verdict == "regressed" and not result.passed


def test_report_md_renders_the_data_inert():
    from rag_eval.metrics.reports.gate_report import markdown_report

    hostile = "x1` <img src=x onerror=alert(1)> [a](javascript:alert(2))"
    worse = {sid: v - 0.2 for sid, v in BASE.items()}
    base, cand = frame("faithfulness", BASE), frame("faithfulness", worse)
    cand["sample_id"] = base["sample_id"] = [hostile if s == IDS[0] else s for s in base["sample_id"]]
    cand["reason"] = "<script>alert(3)</script> **bold** [x](javascript:y)"
    text = markdown_report(compare(base, cand, gated=["faithfulness"]), [])
    assert "<img" not in text and "<script" not in text and "](javascript" not in text and "**bold**" not in text
    assert "&lt;script&gt;alert\\(3\\)&lt;/script&gt; \\*\\*bold\\*\\*" in text


@pytest.mark.parametrize("bad", [{"margins": {"faithfulness": float("nan")}}, {"margins": {"faithfulness": math.inf}},
                                 {"max_coverage_drop": float("nan")}, {"max_coverage_drop": 2.0}, {"repeats": "3"},
                                 {"repeats": 2.5}, {"blocking": "no"}, {"metrics": []},
                                 # the third attacker's: a margin table of another type, metrics not names, a baseline
                                 # of another type (each was a traceback)
                                 {"margins": 3}, {"metrics": [["faithfulness"]]}, {"metrics": [{"a": 1}]},
                                 {"baseline": 3}])
def test_gate_settings_refuse_values_that_would_switch_the_gate_off_or_crash_it(bad):
    from rag_eval.metrics.stats.gate import GateConfig

    with pytest.raises(ValueError, match="gate config"):
        GateConfig(**bad)


def test_a_metric_labelled_in_both_versions_is_decided_on_their_ppi_estimates_and_says_so():
    from rag_eval.metrics.stats.ppi import MeanEstimate

    # The judge finds every row 0.1 worse (a paired interval of exactly -0.1: regressed); people's labels say
    # 0.70 (se 0.05) then 0.55 (se 0.05): difference -0.15, se sqrt(0.05² + 0.05²) = 0.070711, interval
    # -0.15 ± 1.959964 x 0.070711 = [-0.288590, -0.011410], whose top lies above -0.02: no regression.
    # One-sided p of a drop beyond the margin: Phi((-0.15 + 0.02) / 0.070711) = Phi(-1.838478) = 0.032996.
    def estimate(value, se=0.05, n=20):
        return MeanEstimate(value, value - 1.959964 * se, value + 1.959964 * se, se, n, 10, 0.5, "ppi++", 0.95)

    worse = {sid: BASE[sid] - 0.1 for sid in IDS}
    judge_only = compare(frame("faithfulness", BASE), frame("faithfulness", worse))
    assert judge_only.metrics["faithfulness"].verdict == "regressed" and not judge_only.passed
    result = compare(frame("faithfulness", BASE), frame("faithfulness", worse),
                     estimates=({"faithfulness": estimate(0.70)}, {"faithfulness": estimate(0.55, n=18)}))
    row = result.metrics["faithfulness"]
    assert (row.baseline_mean, row.candidate_mean, row.difference) == (0.70, 0.55, pytest.approx(-0.15))
    assert (row.low, row.high) == (pytest.approx(-0.288590, abs=1e-6), pytest.approx(-0.011410, abs=1e-6))
    assert row.p_regression == pytest.approx(0.032996, abs=1e-6) and row.verdict == "no change detected"
    assert row.basis == "ppi (n=20/30 vs 18/28)" and result.passed
    assert row.estimates["candidate"]["estimate"] == 0.55
    # 0.70 then 0.50: -0.20 [-0.338590, -0.061410] lies below -0.02, p = Phi(-0.18 / 0.070711) = Phi(-2.545584).
    regressed = compare(frame("faithfulness", BASE), frame("faithfulness", BASE),
                        estimates=({"faithfulness": estimate(0.70)}, {"faithfulness": estimate(0.50)}))
    row = regressed.metrics["faithfulness"]
    assert row.verdict == "regressed" and row.p_regression == pytest.approx(0.005455, abs=1e-6)
    assert regressed.failures == ["faithfulness regressed: -0.200 [-0.339, -0.061] lies below -0.02 "
                                  "(ppi (n=20/30 vs 20/30), Holm p=0.0055)"]
    # Lower is better: a rise of the estimate is the drop. Only one version labelled: the judge decides.
    noisy = compare(frame("noise_sensitivity_relevant", BASE), frame("noise_sensitivity_relevant", BASE),
                    estimates=({"noise_sensitivity_relevant": estimate(0.30)}, {"noise_sensitivity_relevant": estimate(0.50)}))
    assert noisy.metrics["noise_sensitivity_relevant"].difference == pytest.approx(-0.20)
    assert noisy.metrics["noise_sensitivity_relevant"].verdict == "regressed"
    one_side = compare(frame("faithfulness", BASE), frame("faithfulness", BASE),
                       estimates=({"faithfulness": estimate(0.70)}, {}))
    assert one_side.metrics["faithfulness"].basis == "judge"


def test_a_metric_scored_on_neither_side_is_not_applicable_and_decides_nothing():
    from rag_eval.metrics.reports.gate_report import markdown_report

    no_reference = dict.fromkeys(IDS, "input_error")
    base = pd.concat([frame("faithfulness", BASE), frame("context_recall", BASE, no_reference)])
    result = compare(base, base.copy(), names=("a.jsonl", "b.jsonl"))
    recall = result.metrics["context_recall"]
    assert (recall.verdict, recall.p_regression, recall.p_regression_holm) == ("not applicable", None, None)
    assert result.passed and result.decided and result.not_applicable == ["context_recall"]
    assert result.verdict == ("gate passed (context_recall: not applicable, no row scored ok in either version)")
    assert "- not applicable, no row scored ok in either version: context_recall" in markdown_report(result)
    # Measured in the baseline, in neither row of the candidate: still a failure.
    lost = compare(base, pd.concat([frame("faithfulness", BASE, dict.fromkeys(IDS, "judge_error")),
                                    frame("context_recall", BASE, no_reference)]))
    assert lost.metrics["faithfulness"].verdict == "not measured" and not lost.passed
    # Every gated metric not applicable: no decision, not a pass of anything.
    alone = compare(frame("context_recall", BASE, no_reference), frame("context_recall", BASE, no_reference))
    assert (alone.passed, alone.decided) == (True, False)
    assert alone.verdict == "no decision: no gated metric can be measured (context_recall: not applicable)"


@pytest.mark.parametrize("text, said", [
    ("tool = 3\n", "tool must be a table, got int"), ('[tool]\nrag_eval = "x"\n', "tool.rag_eval must be a table, got str"),
    ("[tool.rag_eval]\ngate = 5\n", "tool.rag_eval.gate must be a table, got int")])
def test_a_settings_file_of_other_shapes_is_named_with_the_key(tmp_path, text, said):
    from rag_eval.metrics.stats.gate import GateConfig

    path = tmp_path / "gate.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=f"^{re.escape(f'{path}: {said}')}$"):
        GateConfig.load(path)
    path.write_bytes(b"metrics = ['faithfulness']\n# caf\xe9\n")
    with pytest.raises(ValueError, match=f"^{re.escape(f'{path}: not UTF-8 (byte 32)')}$"):
        GateConfig.load(path)
    path.write_text("margins = 3\n", encoding="utf-8")
    with pytest.raises(ValueError, match=f"margins is a table of metric = margin, got 3 \\(settings: {re.escape(str(path))}\\)$"):
        GateConfig.load(path)


@pytest.mark.parametrize("name", ["\x1b[31mRED", "a\nb", "a\tb", "..", ".hidden", "x:y", ""])
def test_a_tag_name_is_what_its_message_says(tmp_path, name):
    # The third attacker's: escapes, a newline, a tab and '..' were accepted though the message allowed none.
    from rag_eval.metrics.stats.gate import read_tags, set_tag

    with pytest.raises(ValueError, match=r"use letters, digits, '\.', '_' or '-'"):
        set_tag(tmp_path, name, "v1")
    set_tag(tmp_path, "prod-1.2_x", "v1")
    assert read_tags(tmp_path) == {"prod-1.2_x": "v1"}


def test_a_dataset_in_parquet_is_not_taken_for_results(tmp_path):
    from rag_eval.metrics.stats.gate import load_version

    pd.DataFrame([{"user_input": "q", "response": "a"}]).to_parquet(tmp_path / "samples.parquet")
    with pytest.raises(ValueError, match=r"samples\.parquet: not a results file \(no column 'metric', 'row', "
                                         r"'status', 'value'\)"):
        load_version(str(tmp_path / "samples.parquet"), tmp_path / "out", tmp_path / "datasets", None, [])


def test_the_trend_legend_names_a_baseline_only_when_there_is_one():
    from rag_eval.metrics.reports.gate_report import trend_svg

    history = [{"version": v, "metrics": {"faithfulness": {"mean": m, "low": m - 0.1, "high": m + 0.1}}}
               for v, m in (("2026-11-01", 0.8), ("2026-11-02", 0.6))]
    gate = trend_svg(history, ["faithfulness"], "2026-11-01", "2026-11-02")
    traffic = trend_svg(history, ["faithfulness"], "", "2026-11-02")  # the traffic report's call
    assert "blue: baseline (dashed line), red: candidate" in gate
    assert "baseline" not in traffic and "red: the day or version shown" in traffic


def test_versions_judged_by_different_judges_are_named_in_a_warning():
    from rag_eval.metrics.stats.gate import judged_apart

    shipped = pd.DataFrame({"judge": ["offline-heuristic", "offline-heuristic", None]})
    aligned = pd.DataFrame({"judge": ["offline-heuristic+aligned-64b32b38a9.36fed5b6"] * 2})
    assert judged_apart(shipped, shipped) == [] and judged_apart(shipped, pd.DataFrame({"x": [1]})) == []
    (note,) = judged_apart(shipped, aligned)
    assert note.startswith("WARNING: the versions were judged by different judges (baseline: offline-heuristic; "
                           "candidate: offline-heuristic+aligned-64b32b38a9.36fed5b6)")
