"""``RunSettings``: one frozen settings object per command, built from argv or from a run config;
``to_run_config()`` is the only place the Dagster run config is made, and it round-trips."""
import dataclasses
from types import SimpleNamespace

import pytest

from rag_eval.metrics.core.registry import builtin_registry
from rag_eval.metrics.errors import SettingsError
from rag_eval.orchestration.cli import build_parser
from rag_eval.orchestration.settings import Executor, Paths, RunSettings

QUIET = {"console": {"config": {"log_level": "CRITICAL"}}}


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    """No LLM judge in the environment: the judging options are refused unless --base-url is given."""
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL"):
        monkeypatch.delenv(name, raising=False)


def settings(*argv: str, target=None) -> RunSettings:
    args = build_parser().parse_args(list(argv))
    args.registry = builtin_registry()
    return RunSettings.from_args(args, target)


def test_the_run_config_of_run_options_and_its_round_trip():
    s = settings("backfill", "--metrics", "faithfulness,ndcg", "--scale", "10", "--dingo-summary",
                 "--threshold", "faithfulness=7", "--metric-option", "ndcg.k=5", "--max-rejected-share", "0.2",
                 "--datasets", "d", "--out", "o")
    assert s.metrics == ("faithfulness", "ndcg")
    assert s.paths == Paths("d", "o") and s.executor == Executor("local", "local[2]", 2)
    assert s.to_run_config() == {
        "ops": {"eval_summary": {"config": {"scale": 10, "dingo_layout": True}},
                "ingest_dataset": {"config": {"max_rejected_share": 0.2}},
                "score_metrics": {"config": {"faithfulness": {"threshold": 0.7}, "ndcg": {"k": 5}}}},
        "loggers": QUIET}
    back = RunSettings.from_run_config(s.to_run_config(), metrics=s.metrics, judge=s.judge, executor=s.executor,
                                       paths=s.paths)
    assert back == s
    assert dataclasses.replace(back, scale=1) != s  # the comparison sees the fields the run config carries


def test_a_threshold_given_at_scale_10_is_stored_on_0_1_and_a_count_metric_s_is_kept():
    s = settings("run", "--metrics", "faithfulness,xdcg", "--scale", "10", "--threshold", "faithfulness=7",
                 "--threshold", "xdcg=40")
    # faithfulness is on [0, 1]: 7 on the 0-10 table is 0.7; xdcg is on [0, 100]: its threshold is its own.
    assert dict(s.metric_options["faithfulness"]) == {"threshold": 0.7}
    assert dict(s.metric_options["xdcg"]) == {"threshold": 40.0}
    assert settings("run", "--threshold", "faithfulness=0.7").metric_options["faithfulness"]["threshold"] == 0.7


def test_no_option_leaves_the_metric_op_out_and_the_share_to_the_version():
    assert settings("run").to_run_config() == {
        "ops": {"eval_summary": {"config": {"scale": 1, "dingo_layout": False}},
                "ingest_dataset": {"config": {"max_rejected_share": None}}},
        "loggers": QUIET}


@pytest.mark.parametrize(("argv", "line"), [
    (["--metric-option", "faithfulness.bogus=1"],
     "bad metric option 'faithfulness.bogus=1': use METRIC.OPTION=VALUE with OPTION one of threshold, "),
    (["--threshold", "nosuch=0.5"],
     "bad metric option 'nosuch.threshold=0.5': use METRIC.OPTION=VALUE with METRIC a metric name (see --metrics)"),
    (["--metric-option", "answer_relevancy.strictness=x"], "bad metric option 'answer_relevancy.strictness=x': "),
    (["--scale", "10", "--threshold", "faithfulness=11"],
     "bad metric option for faithfulness: "),
    (["--max-rejected-share", "1.5"], "--max-rejected-share 1.5: give a share between 0 and 1"),
    (["--model", "m"], "model apply to the LLM judge only: set OPENAI_BASE_URL or OPENAI_API_KEY, or pass --base-url"),
    (["--metric-option", "faithfulness.temperature=0.5"],
     "faithfulness.temperature apply to the LLM judge only: set OPENAI_BASE_URL or OPENAI_API_KEY, or pass --base-url"),
    (["--base-url", "http://127.0.0.1:9/v1", "--strictness", "0"],
     "--strictness 0: Input should be greater than or equal to 1"),
])
def test_a_bad_option_is_one_settings_error_line_naming_it(argv, line):
    with pytest.raises(SettingsError) as refused:
        settings("run", *argv)
    message = str(refused.value)
    assert message.startswith(line) and "\n" not in message
    if "--scale" in argv:  # the scale the threshold was read on is said
        assert message.endswith("(at --scale 10, thresholds of [0, 1] metrics are given on the 0-10 scale)")


def test_the_settings_cannot_be_changed_in_passing():
    s = settings("run", "--metric-option", "ndcg.k=5")
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.scale = 10
    with pytest.raises(TypeError):
        s.metric_options["ndcg"]["k"] = 6
    with pytest.raises(TypeError):
        s.metric_options["faithfulness"] = {}
    assert s.to_run_config()["ops"]["score_metrics"] == {"config": {"ndcg": {"k": 5}}}


def test_a_selection_keeps_the_config_of_the_ops_it_runs_only():
    s = settings("run", "--metrics", "faithfulness", "--metric-option", "faithfulness.threshold=0.6")
    ops = {"eval_summary": {"config": {"scale": 1, "dingo_layout": False}},
           "ingest_dataset": {"config": {"max_rejected_share": None}},
           "score_metrics": {"config": {"faithfulness": {"threshold": 0.6}}}}
    assert s.to_run_config(["human_labels", "label_estimates", "baseline_comparison"])["ops"] == {}
    assert s.to_run_config(["questions", "rejected_samples"])["ops"] == {"ingest_dataset": ops["ingest_dataset"]}
    assert s.to_run_config(["faithfulness", "eval_summary"])["ops"] == {
        "eval_summary": ops["eval_summary"], "score_metrics": ops["score_metrics"]}
    assert s.to_run_config(["answer_relevancy"])["ops"] == {}  # not a metric of these settings


def test_a_sweep_s_settings_come_from_its_target_file_and_arguments():
    target = SimpleNamespace(metrics=["context_recall", "faithfulness"],
                             metric_options={"faithfulness": {"threshold": 0.8}})
    s = settings("sweep", "t.toml", target=target)
    assert s.metrics == ("context_recall", "faithfulness")  # the file's order: the ranking's
    assert s.to_run_config() == {
        "ops": {"eval_summary": {"config": {"scale": 1, "dingo_layout": False, "scope": "version"}},
                "ingest_dataset": {"config": {"max_rejected_share": 0.05}},
                "score_metrics": {"config": {"faithfulness": {"threshold": 0.8}}}},
        "loggers": QUIET}
    assert settings("sweep", "t.toml", "--metrics", "ndcg", target=target).metrics == ("ndcg",)
    back = RunSettings.from_run_config(s.to_run_config(), metrics=s.metrics, judge=s.judge, executor=s.executor,
                                       paths=s.paths)
    assert back == s


def test_the_traffic_settings_are_its_sample_and_its_seed_is_not_the_judge_s():
    s = settings("traffic", "traces", "--budget-rows", "5", "--seed", "3", "--out", "o")
    assert s.to_run_config() == {"ops": {"traffic_sample": {"config": {"budget_rows": 5, "seed": 3}}}, "loggers": QUIET}
    assert s.judge.seed is None and s.executor is None and s.paths == Paths(None, "o")
    assert RunSettings.from_run_config(s.to_run_config(), judge=s.judge, paths=s.paths) == s
    assert settings("traffic").to_run_config()["ops"] == {"traffic_sample": {"config": {}}}


def test_a_run_config_launched_elsewhere_reads_back_with_the_config_classes_defaults():
    paths = Paths("d", "o")
    s = RunSettings.from_run_config({"ops": {"score_metrics": {"config": {"ndcg": {"k": 4}}}}}, paths=paths)
    assert (s.scale, s.dingo_layout, s.summary_scope, s.max_rejected_share, s.sample) == (1, False, None, None, None)
    assert dict(s.metric_options["ndcg"]) == {"k": 4}
    with pytest.raises(SettingsError) as refused:
        RunSettings.from_run_config({"ops": {"eval_summary": {"config": {"scale": "ten"}}}}, paths=paths)
    assert str(refused.value).startswith("ops.eval_summary.config.scale 'ten': ")
    assert "\n" not in str(refused.value)
    with pytest.raises(SettingsError, match=r"^ops\.traffic_sample\.config\.budget_rows 'many': "):
        RunSettings.from_run_config({"ops": {"traffic_sample": {"config": {"budget_rows": "many"}}}}, paths=paths)


def test_a_cascade_s_sample_is_the_strong_sample_op_s_config_and_its_judges_the_offline_and_the_llm_one():
    s = settings("run", "--metrics", "faithfulness", "--base-url", "http://127.0.0.1:9/v1", "--model", "big",
                 "--strong-budget", "10%", "--strong-sampling", "uniform", "--strong-seed", "3")
    assert dict(s.strong) == {"share": 0.1, "sampling": "uniform", "seed": 3}
    assert s.to_run_config()["ops"]["strong_sample"] == {"config": {"share": 0.1, "sampling": "uniform", "seed": 3}}
    assert s.judge.offline and s.judge.code_version().startswith("offline:")
    assert s.strong_judge is not None and s.strong_judge.code_version() == "llm:big"
    assert s.judges() == [s.judge, s.strong_judge]
    back = RunSettings.from_run_config(s.to_run_config(), metrics=s.metrics, judge=s.judge, executor=s.executor,
                                       paths=s.paths, strong_judge=s.strong_judge)
    assert back == s
    # A selection without the strong sample leaves its config out (Dagster refuses an op it does not run).
    assert "strong_sample" not in s.to_run_config(["faithfulness", "eval_summary"])["ops"]
    cheap = settings("run", "--base-url", "http://127.0.0.1:9/v1", "--model", "big", "--strong-budget", "200",
                     "--cheap-model", "small")
    assert dict(cheap.strong) == {"rows": 200, "sampling": "active", "seed": 0}
    assert cheap.judge.code_version() == "llm:small" and cheap.strong_judge.code_version() == "llm:big"


@pytest.mark.parametrize(("text", "budget"), [("0.1", {"share": 0.1}), ("10%", {"share": 0.1}), ("1", {"rows": 1}),
                                              ("1.0", {"share": 1.0}), (".5", {"share": 0.5}),
                                              ("2.5usd", {"cost": 2.5, "currency": "usd"})])
def test_a_strong_budget_is_a_share_a_number_of_rows_or_a_sum(text, budget):
    from rag_eval.orchestration.settings import strong_budget

    assert strong_budget(text) == budget


@pytest.mark.parametrize("text", ["0", "0.0", "150%", "1.01", "-3", "abc", "5 dollars", "0usd", ""])
def test_a_strong_budget_that_buys_nothing_or_cannot_be_read_is_refused(text):
    from rag_eval.orchestration.settings import strong_budget

    with pytest.raises(SettingsError, match="--strong-budget"):
        strong_budget(text)


def test_a_strong_sample_config_the_op_refuses_is_named():
    with pytest.raises(SettingsError, match=r"ops\.strong_sample\.config\.share 'a tenth'"):
        RunSettings.from_run_config({"ops": {"strong_sample": {"config": {"share": "a tenth"}}}}, paths=Paths("d", "o"))
