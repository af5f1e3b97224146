"""Custom metrics from a YAML file (``rag_eval.metrics.core.custom``): every kind judged by the LLM judge over
real HTTP against the project's scripted server (valid; malformed then valid; outside the
allowed set twice → judge_error), cached, counted; offline → not_applicable; errors naming
the file, the metric and the field."""
import json
from pathlib import Path

import pytest

from rag_eval.metrics import OfflineJudge, Status
from rag_eval.metrics.core.custom import load_custom_metrics
from rag_eval.metrics.core.samples import sample_from_dict
from rag_eval.orchestration.judge_sim import Reply

ROOT = Path(__file__).parents[2]
EXAMPLE = ROOT / "examples" / "custom_metrics" / "custom_metrics.yaml"
SAMPLE = sample_from_dict({"id": "q1", "user_input": "你们几点关门？", "response": "我们晚上九点关门。",
                           "retrieved_contexts": ["营业时间：早上八点到晚上九点。"]}, 0)


def example(name: str):
    """A fresh instance of the example file's metric ``name``."""
    [cls] = [c for c in load_custom_metrics(EXAMPLE) if c.name == name]
    return cls()


def answers(*contents):
    """A script replying ``contents`` in turn to chat requests."""
    replies = iter(contents)

    def script(seen):
        return Reply(content=json.dumps(next(replies), ensure_ascii=False))
    return script


# (metric, its reply, value, passed): passed by hand from the example's thresholds and directions.
VALID = [
    ("helpfulness", {"reason": "答了问题", "verdict": 1}, 1.0, True),
    ("politeness", {"reason": "neutral", "score": 3}, 3.0, False),           # threshold 4
    ("answer_kind", {"reason": "answers", "label": "direct_answer"}, 1.0, True),
    ("answer_kind", {"reason": "hedges", "label": "partial_answer"}, 0.0, False),  # not a pass label
    ("padding", {"reason": "some filler", "value": 0.25}, 0.25, True),        # lower is better, threshold 0.3
]


@pytest.mark.parametrize("name, reply, value, passed", VALID)
def test_each_kind_valid_reply_then_cached(name, reply, value, passed, server, make_judge):
    server.script = answers(reply)
    judge, metric = make_judge(), example(name)
    result = metric.score(SAMPLE, judge)
    assert (result.status, result.value, result.passed, result.reason) == (Status.OK, value, passed, reply["reason"])
    assert result.usage["chat_requests"] == 1 and result.details[next(k for k in reply if k != "reason")] == \
        reply[next(k for k in reply if k != "reason")]
    [seen] = server.chat_requests()
    assert seen.kind == f"custom_{name}" and seen.body["response_format"]["json_schema"]["strict"] is True
    again = metric.score(SAMPLE, judge)  # the answer this judge bought, from the cache: nothing sent
    assert (again.value, again.usage["shared_hits"], again.usage["cache_hits"], len(server.chat_requests())) == \
        (value, 1, 0, 1)
    later = metric.score(SAMPLE, make_judge())  # another judge (a later run): paid by an earlier run
    assert (later.value, later.usage["shared_hits"], later.usage["cache_hits"], len(server.chat_requests())) == \
        (value, 0, 1, 1)


def test_prompt_carries_the_users_wording_and_headings_and_a_strict_enum(server, make_judge):
    server.script = answers({"reason": "礼貌", "score": 5})
    example("politeness").score(SAMPLE, make_judge())
    [seen] = server.chat_requests()
    assert seen.prompt.startswith("回答:\n我们晚上九点关门。\n\n回答的语气是否礼貌、专业？") and "5: 礼貌且专业，体贴用户" in seen.prompt
    assert "你们几点关门" not in seen.prompt  # politeness reads the response only
    assert seen.schema["properties"]["score"]["enum"] == [1, 2, 3, 4, 5]
    server.script = answers({"reason": "x", "label": "refusal"})
    example("answer_kind").score(SAMPLE, make_judge())
    assert server.chat_requests()[-1].schema["properties"]["label"]["enum"] == \
        ["direct_answer", "partial_answer", "refusal", "off_topic"]


# (metric, a malformed reply, then a valid one, its value)
MALFORMED = [
    ("helpfulness", "not json at all", {"reason": "ok", "verdict": 0}, 0.0),
    ("politeness", {"reason": "x", "score": "4"}, {"reason": "ok", "score": 4}, 4.0),
    ("answer_kind", {"reason": "x"}, {"reason": "ok", "label": "refusal"}, 0.0),
    ("padding", {"reason": "x", "value": True}, {"reason": "ok", "value": 1}, 1.0),
]


@pytest.mark.parametrize("name, bad, good, value", MALFORMED)
def test_malformed_then_valid_is_reasked_once(name, bad, good, value, server, make_judge):
    replies = iter([bad, good])
    server.script = lambda seen: Reply(content=(lambda r: r if isinstance(r, str) else json.dumps(r))(next(replies)))
    result = example(name).score(SAMPLE, make_judge())
    assert (result.status, result.value) == (Status.OK, value)
    _, second = server.chat_requests()
    assert "That answer is invalid" in second.body["messages"][-1]["content"]
    assert result.usage["chat_requests"] == 2


# (metric, a reply outside the allowed set, the validator's message)
OUTSIDE = [
    ("helpfulness", {"reason": "x", "verdict": 2}, "verdict must be one of [0, 1], got 2"),
    ("politeness", {"reason": "x", "score": 2.5}, "score must be an integer from 1 to 5, got 2.5"),
    ("answer_kind", {"reason": "x", "label": "yes"}, "label must be one of ['direct_answer', 'partial_answer', "
                                                     "'refusal', 'off_topic'], got 'yes'"),
    ("padding", {"reason": "x", "value": 1.5}, "value must be a number from 0 to 1, got 1.5"),
]


@pytest.mark.parametrize("name, reply, message", OUTSIDE)
def test_outside_the_allowed_set_twice_is_judge_error(name, reply, message, server, make_judge, tmp_path):
    server.script = answers(reply, reply)
    judge = make_judge()
    result = example(name).score(SAMPLE, judge)
    assert (result.status, result.value, result.passed) == (Status.JUDGE_ERROR, None, None)
    assert result.reason == f"judge failed: custom_{name}: invalid judge output after one re-ask: {message}"
    assert len(server.chat_requests()) == 2 and message in server.chat_requests()[1].body["messages"][-1]["content"]
    server.script = answers({"reason": "fine", "verdict": 1, "score": 5, "label": "refusal", "value": 0.0})
    assert example(name).score(SAMPLE, judge).status is Status.OK  # nothing wrong was cached


def test_offline_judge_is_not_applicable_saying_an_endpoint_is_needed():
    for metric in (cls() for cls in load_custom_metrics(EXAMPLE)):
        result = metric.score(SAMPLE, OfflineJudge())
        assert (result.status, result.value) == (Status.NOT_APPLICABLE, None)
        assert result.reason.startswith(f"{metric.name} is a custom ") and "needs an LLM judge endpoint" in result.reason


def test_editing_the_wording_changes_the_judgement_version_not_the_threshold(tmp_path):
    text = EXAMPLE.read_text(encoding="utf-8")
    edited = tmp_path / "edited.yaml"
    edited.write_text(text.replace("threshold: 4", "threshold: 5").replace("回答的语气", "回复的语气"), encoding="utf-8")
    before = {c.name: c for c in load_custom_metrics(EXAMPLE)}["politeness"]
    after = {c.name: c for c in load_custom_metrics(edited)}["politeness"]
    assert before.judgements[0].version != after.judgements[0].version and before.version != after.version
    only_threshold = tmp_path / "threshold.yaml"
    only_threshold.write_text(text.replace("threshold: 4", "threshold: 5"), encoding="utf-8")
    again = {c.name: c for c in load_custom_metrics(only_threshold)}["politeness"]
    assert again.judgements[0].version == before.judgements[0].version  # the cache still answers
    assert again.version != before.version and again.default_threshold == 5.0  # the asset is stale


@pytest.mark.parametrize("entry, message", [
    ({"name": "tone", "kind": "rubric", "fields": ["response"], "prompt": "polite?",
      "levels": {1: "a", 2: "b", 3: "c", 5: "e"}},
     "metric 'tone' (entry 1): field 'levels': describe each of 1, 2, 3, 4, 5, got [1, 2, 3, 5]"),
    ({"name": "tone", "kind": "discrete", "fields": ["response"], "prompt": "kind?", "labels": ["a", "b"],
      "pass_labels": ["c"]}, "metric 'tone' (entry 1): field 'pass_labels': ['c'] not among"),
    ({"name": "tone", "kind": "numeric", "fields": ["answer"], "prompt": "n?", "range": [0, 10], "threshold": 5},
     "metric 'tone' (entry 1): field 'fields.0': Input should be 'user_input', 'response', 'retrieved_contexts' or "
     "'reference' (got 'answer')"),
    ({"name": "tone", "kind": "numeric", "fields": ["response"], "prompt": "n?", "range": [0, 10]},
     "metric 'tone' (entry 1): field 'threshold': Field required"),
    ({"name": "tone", "kind": "numeric", "fields": ["response"], "prompt": "n?", "range": [0, 10], "threshold": 11},
     "metric 'tone' (entry 1): field 'threshold': tone: threshold 11 outside [0, 10]"),
    ({"name": "tone", "kind": "likert", "fields": ["response"], "prompt": "n?"},
     "metric 'tone' (entry 1): field 'kind': Input tag 'likert' found using 'kind' does not match any of the expected "
     "tags: 'aspect_critic', 'rubric', 'discrete', 'numeric'"),
    ({"name": "Tone", "kind": "aspect_critic", "fields": ["response"], "prompt": "ok?", "colour": "red"},
     "metric 'Tone' (entry 1): field 'name': String should match pattern"),
])
def test_a_bad_definition_names_the_file_the_metric_and_the_field(entry, message, tmp_path):
    path = tmp_path / "custom_metrics.yaml"
    path.write_text(json.dumps({"metrics": [entry]}), encoding="utf-8")  # JSON is YAML
    with pytest.raises(ValueError) as caught:
        load_custom_metrics(path)
    assert str(caught.value).startswith(f"{path}: ") and message in str(caught.value)


def test_an_unknown_name_says_which_custom_metrics_file_was_read(monkeypatch):
    from rag_eval.metrics.core.custom import RETIRED_ENV, custom_metrics_file
    from rag_eval.metrics.core.registry import build_registry, resolve_names

    monkeypatch.delenv(RETIRED_ENV, raising=False)
    assert custom_metrics_file() is None  # no file in the working directory (the repository's root)
    with pytest.raises(KeyError, match=r"unknown metric 'helpfulness'; .*; no custom metrics file read "
                                       r"\(--custom-metrics FILE, \[tool.rag_eval.metrics\] custom_metrics of "
                                       r"./pyproject.toml or ./custom_metrics.yaml\)"):
        resolve_names("core,helpfulness", build_registry(custom_metrics_file()))


def test_the_custom_metrics_file_is_the_one_named_else_the_projects_setting_else_the_default(tmp_path, monkeypatch):
    """No environment variable names it (issue 36): the one the setting of ./pyproject.toml names, read where the
    code location and rag-eval run; the variable that used to is refused, saying where the file is named now."""
    from rag_eval.metrics.core.custom import RETIRED_ENV, custom_metrics_file
    from rag_eval.metrics.errors import SettingsError

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(RETIRED_ENV, raising=False)
    assert custom_metrics_file() is None  # neither the setting nor ./custom_metrics.yaml
    (tmp_path / "custom_metrics.yaml").write_text("metrics: []\n", encoding="utf-8")
    assert custom_metrics_file() == tmp_path / "custom_metrics.yaml"
    (tmp_path / "pyproject.toml").write_text('[tool.rag_eval.metrics]\ncustom_metrics = "metrics/mine.yaml"\n',
                                            encoding="utf-8")
    assert custom_metrics_file() == tmp_path / "metrics" / "mine.yaml"  # the setting's, over the default
    assert custom_metrics_file("other.yaml") == tmp_path / "other.yaml"  # the one named, over the setting
    (tmp_path / "pyproject.toml").write_text("[tool.rag_eval.metrics]\ncustom_metrics = 3\n", encoding="utf-8")
    with pytest.raises(SettingsError, match=rf"^{tmp_path / 'pyproject.toml'}: \[tool.rag_eval.metrics\] "
                                            r"custom_metrics must name a file, got 3$"):
        custom_metrics_file()
    (tmp_path / "pyproject.toml").write_text('[tool.rag_eval.metrics]\ncustom = "x.yaml"\n', encoding="utf-8")
    with pytest.raises(SettingsError, match=r"unknown metrics setting\(s\) .*custom.*; known: \['custom_metrics'\]"):
        custom_metrics_file()
    monkeypatch.setenv(RETIRED_ENV, str(tmp_path / "custom_metrics.yaml"))
    with pytest.raises(SettingsError) as retired:
        custom_metrics_file()
    assert str(retired.value) == "$RAG_EVAL_CUSTOM_METRICS is no longer read: name the custom metrics file in " \
        './pyproject.toml ([tool.rag_eval.metrics] custom_metrics = "FILE") or with --custom-metrics FILE, and unset ' \
        "$RAG_EVAL_CUSTOM_METRICS"
    assert custom_metrics_file("other.yaml") == tmp_path / "other.yaml"  # a file named: the variable is not looked at


def mine(path: Path, name: str) -> Path:
    """A custom metrics file of one aspect critic, ``name``, on the response."""
    path.write_text(f"metrics:\n  - {{name: {name}, kind: aspect_critic, fields: [response], prompt: 'Is it {name}?'}}\n",
                    encoding="utf-8")
    return path


def test_two_registries_of_two_files_live_in_one_process_each_with_its_metric(tmp_path, server, make_judge):
    # It was one process-global registry, extended once: a second file "needed a new process".
    from rag_eval.metrics import build_registry, builtin_registry, evaluate
    from rag_eval.metrics.core.registry import resolve_names

    first = build_registry(mine(tmp_path / "first.yaml", "polite"), plugins=False)
    second = build_registry(mine(tmp_path / "second.yaml", "concise"), plugins=False)
    assert (resolve_names("custom", first), resolve_names("custom", second)) == (["polite"], ["concise"])
    assert (first.custom_source, second.custom_source) == (tmp_path / "first.yaml", tmp_path / "second.yaml")
    assert "polite" not in second and "concise" not in first and not {"polite", "concise"} & set(builtin_registry())
    assert list(first)[:len(builtin_registry())] == list(builtin_registry())  # the built-in ones first, in order
    with pytest.raises(TypeError):
        first["concise"] = second["concise"]  # type: ignore[index]  # a value: not to be changed in place
    # Each registry scores its own metric, one after the other (polite: verdict 1; concise: verdict 0).
    server.script = lambda seen: Reply(content=json.dumps({"reason": "r", "verdict": int(seen.kind == "custom_polite")}))
    row = [{"user_input": "Hours?", "response": "Nine to five."}]
    judge = make_judge()
    polite = evaluate(row, metrics=["custom"], judge=judge, registry=first).results
    concise = evaluate(row, metrics=["custom"], judge=judge, registry=second).results
    assert list(zip(polite["metric"], polite["value"])) == [("polite", 1.0)]
    assert list(zip(concise["metric"], concise["value"])) == [("concise", 0.0)]
    assert [s.kind for s in server.chat_requests()] == ["custom_polite", "custom_concise"]
    with pytest.raises(KeyError, match=f"unknown metric 'polite'; .*; custom metrics read from {tmp_path / 'second.yaml'}"):
        evaluate(row, metrics=["polite"], judge=judge, registry=second)


@pytest.mark.parametrize("name", ["judge", "report_store", "dataset_store", "execution", "io_manager"])
def test_the_name_of_a_resource_is_refused_at_load_time(name, tmp_path):
    # `judge` loaded, then eval_summary failed: its input `judge` was handed to the DuckDB IO manager.
    text = f"metrics:\n  - name: {name}\n    kind: aspect_critic\n    fields: [response]\n    prompt: ok?\n"
    assert refusal(tmp_path, text) == f"metric '{name}' (entry 1): field 'name': '{name}' is taken by a resource"


def refusal(tmp_path, text: str) -> str:
    """The error of loading a custom metrics file holding ``text``."""
    path = tmp_path / "custom_metrics.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError) as caught:
        load_custom_metrics(path)
    assert str(caught.value).startswith(f"{path}: ")
    return str(caught.value)[len(f"{path}: "):]


# The asset graph's other assets (assets/): a metric of their name was a duplicate asset key, a
# cycle (eval_summary, system_responses) or a broken code location (retriever, generator).
ASSETS = ["questions", "references", "responses", "retrieved_contexts", "retrieved_documents", "retrieval_ground_truth",
          "eval_summary", "rejected_samples", "question_set", "baseline_comparison", "retriever", "generator",
          "system_contexts", "system_responses"]


@pytest.mark.parametrize("name", ASSETS)
def test_the_name_of_an_asset_is_refused_at_load_time(name, tmp_path):
    text = f"metrics:\n  - name: {name}\n    kind: aspect_critic\n    fields: [response]\n    prompt: ok?\n"
    assert refusal(tmp_path, text) == f"metric '{name}' (entry 1): field 'name': '{name}' is taken by an asset"


# Names that renamed or duplicated columns of ragas_scores.csv and azure_results.jsonl, or overwrote
# another metric's Azure sub-columns (tone + tone_result; groundedness_reason).
@pytest.mark.parametrize("name, message", [
    *[(n, "is taken by a column of the per-row outputs (a sample field or its alias, id, row, unscored)") for n in
      ("response", "id", "row", "unscored", "sample_id", "user_input", "reference", "answer", "question", "contexts",
       "ground_truth", "actual_output", "groundedness_pro_label", "total_groundtruth_documents")],
    ("tone_result", "ends with '_result', which azure_results.jsonl uses for the columns beside a metric's value"),
    *[(n, f"{word} with {part!r}, which azure_results.jsonl uses for the columns beside a metric's value")
      for n, word, part in (("groundedness_reason", "ends", "_reason"), ("tone_threshold", "ends", "_threshold"),
                            ("tone_status", "ends", "_status"), ("gpt_tone", "starts", "gpt_"))],
])
def test_the_name_of_an_output_column_is_refused(name, message, tmp_path):
    text = f"metrics:\n  - name: {name}\n    kind: aspect_critic\n    fields: [response]\n    prompt: ok?\n"
    assert refusal(tmp_path, text) == f"metric '{name}' (entry 1): field 'name': '{name}' {message}"


@pytest.mark.parametrize("bounds, shown", [("[0, .inf]", "[0.0, inf]"), ("[-.inf, 1]", "[-inf, 1.0]"),
                                           ("[.nan, 1]", "[nan, 1.0]")])
def test_a_range_that_is_not_finite_is_refused_at_load_time(bounds, shown, tmp_path):
    # [0, .inf] used to load, then every row was judge_error "Out of range float values are not JSON compliant".
    text = (f"metrics:\n  - name: length\n    kind: numeric\n    fields: [response]\n    prompt: how long?\n"
            f"    range: {bounds}\n    threshold: 1\n")
    assert refusal(tmp_path, text) == f"metric 'length' (entry 1): field 'range': both ends must be finite numbers, " \
                                      f"got {shown}"


def test_a_bare_string_entry_and_unquoted_yes_no_labels_say_what_to_write(tmp_path):
    assert refusal(tmp_path, "metrics: [helpfulness]\n") == \
        "entry 1: expected a metric definition (name, kind, fields, prompt...), got 'helpfulness'"
    text = ("metrics:\n  - name: answered\n    kind: discrete\n    fields: [response]\n    prompt: answered?\n"
            "    labels: [yes, no]\n    pass_labels: [yes]\n")
    assert refusal(tmp_path, text).endswith("field 'labels.0': Input should be a valid string (got True); field "
                                            "'labels.1': Input should be a valid string (got False); field "
                                            "'pass_labels.0': Input should be a valid string (got True); YAML reads "
                                            "unquoted yes, no, on, off, true and false as booleans: quote them "
                                            "(labels: ['yes', 'no'])")
    quoted = tmp_path / "quoted.yaml"
    quoted.write_text(text.replace("[yes, no]", "['yes', 'no']").replace("[yes]", "['yes']"), encoding="utf-8")
    [cls] = load_custom_metrics(quoted)
    assert cls.definition.labels == ["yes", "no"]


def test_names_that_only_look_like_the_reserved_ones_load(tmp_path):
    path = tmp_path / "custom_metrics.yaml"
    path.write_text("metrics:\n" + "".join(f"  - {{name: {n}, kind: aspect_critic, fields: [response], prompt: ok}}\n"
                                           for n in ("reasoning", "status_of_reply", "question_clarity", "gpt4_style")),
                    encoding="utf-8")
    assert [c.name for c in load_custom_metrics(path)] == ["reasoning", "status_of_reply", "question_clarity",
                                                           "gpt4_style"]


def test_the_core_metrics_constant_is_the_core_family_of_the_built_in_registry():
    # CORE_METRICS is a fixed tuple now (it was a view over the process-global registry).
    from rag_eval.metrics import CORE_METRICS, builtin_registry

    assert builtin_registry().families["core"] == CORE_METRICS == (
        "faithfulness", "answer_relevancy", "context_relevancy", "context_recall", "context_precision")
    assert builtin_registry() is builtin_registry() and not builtin_registry().extended
