"""The LLM judge over real HTTP against the project's scripted server on 127.0.0.1."""
import json
import time
from pathlib import Path

import pytest

from rag_eval.metrics import Status, evaluate, score_sample
from rag_eval.metrics.judgements.statement_support import statement_support
from rag_eval.metrics.core.registry import describe_judge
from rag_eval.orchestration.judge_sim import Reply, build_answer, embedding_body, oracle

pytestmark = pytest.mark.slow  # the test server or the offline encoder, in every test

CASES = {json.loads(line)["id"]: json.loads(line)
         for line in (Path(__file__).parents[1] / "data" / "regression_cases.jsonl").read_text().splitlines()}
SECRET = "sk-test-SECRET-not-a-real-key"
ROW = {"id": "r1", "user_input": "Where and when was Einstein born?",
       "response": "Einstein was born in Germany. He was born on 20 March 1879. He was a physicist. He won a Nobel Prize.",
       "retrieved_contexts": ["Albert Einstein was born in Ulm, Germany, on 14 March 1879.",
                              "The Eiffel Tower is in Paris.", "Einstein received the 1921 Nobel Prize in Physics."],
       "reference": "Einstein was born in Ulm. He was born in 1879. He developed relativity."}


def decide(table):
    """``decide`` for :func:`oracle`: ``table[field][key]``, default 1 (0 for noncommittal)."""
    return lambda field, key: table.get(field, {}).get(key, int(field != "noncommittal"))


def test_faithfulness_worked_example_one_request(server, tmp_path, make_judge):
    server.script = oracle(decide({"verdict": {"S2": 0}}))
    result = score_sample(ROW, ["faithfulness"], judge=make_judge())["faithfulness"]
    assert (result.status, result.value) == (Status.OK, 0.75)  # RAGAS worked example: [1, 0, 1, 1]
    [request] = server.chat_requests()
    assert request.kind == "statement_support"
    assert request.schema["required"] == ["S1", "S2", "S3", "S4"]
    assert result.usage["chat_requests"] == 1 and result.usage["prompt_tokens"] == 100
    assert result.details["statements"][1]["reason"] == "scripted reason for S2"


def test_answer_relevancy_worked_example(server, tmp_path, make_judge):
    vectors = {ROW["user_input"]: [1.0, 0.0], "What does Q1 ask?": [1.0, 0.0], "What does Q2 ask?": [0.6, 0.8],
               "What does Q3 ask?": [0.8, 0.6]}
    flags = {}

    def script(seen):
        if seen.path.endswith("/embeddings"):
            return Reply(body=embedding_body(seen.body["input"], lambda t: vectors[t]))
        return oracle(decide({"noncommittal": flags}))(seen)

    server.script = script
    judge = make_judge(cache_path=None)
    result = score_sample(ROW, ["answer_relevancy"], judge=judge)["answer_relevancy"]
    assert result.value == pytest.approx(0.8)  # cosines 1, .6, .8
    assert len(server.chat_requests()) == 1 and len(server.embedding_requests()) == 1
    assert server.embedding_requests()[0].body["input"][0] == ROW["user_input"]
    flags.update({"Q1": 1, "Q2": 1, "Q3": 1})
    assert score_sample(ROW, ["answer_relevancy"], judge=judge)["answer_relevancy"].value == 0.0


def test_context_relevancy_dual_judge(server, tmp_path, make_judge):
    ratings = {"context_relevance_a": {"C1": 2, "C2": 0, "C3": 1}, "context_relevance_b": {"C1": 1, "C2": 0, "C3": 1}}
    server.script = lambda seen: Reply(content=json.dumps(
        build_answer(seen.schema, lambda field, key: ratings[seen.kind][key])))
    result = score_sample(ROW, ["context_relevancy"], judge=make_judge())["context_relevancy"]
    assert result.value == pytest.approx(2 / 3)  # means 1.5, 0, 1 -> two relevant of three
    assert sorted(r.kind for r in server.chat_requests()) == ["context_relevance_a", "context_relevance_b"]


def test_recall_and_precision_share_one_request(server, tmp_path, make_judge):
    server.script = oracle(decide({"attributed": {"R3": 0}, "useful": {"C2": 0}}))
    result = evaluate([ROW], ["context_recall", "context_precision"], judge=make_judge())
    values = result.results.set_index("metric")["value"]
    assert values["context_recall"] == pytest.approx(2 / 3)
    assert values["context_precision"] == pytest.approx((1 + 2 / 3) / 2)  # [1, 0, 1]
    assert len(server.chat_requests()) == 1
    # The second metric's judgement was paid by the first's request of this run, not by an earlier run.
    usage = result.summary["usage"]
    assert (usage["chat_requests"], usage["shared_hits"], usage["cache_hits"]) == (1, 1, 0)


def test_five_metrics_cost_five_chat_and_one_embedding_request_per_row(server, tmp_path, make_judge):
    rows = [dict(ROW, id=f"r{i}", user_input=f"{ROW['user_input']} ({i})", response=f"In case {i}, {ROW['response']}")
            for i in range(4)]
    result = evaluate(rows, judge=make_judge())
    assert set(result.results["status"]) == {"ok"}
    assert len(server.chat_requests()) == 5 * 4 and len(server.embedding_requests()) == 4
    assert result.summary["judge"]["judge"] == "llm:judge-test"


def test_second_run_sends_zero_requests(server, tmp_path, make_judge):
    first = evaluate([ROW], judge=make_judge()).results
    sent = len(server.seen)
    second = evaluate([ROW], judge=make_judge()).results
    assert len(server.seen) == sent
    assert first["value"].tolist() == second["value"].tolist()
    assert second["chat_requests"].sum() == 0 and second["cache_hits"].sum() > 0


@pytest.mark.parametrize("wrap", [
    lambda payload: f"```json\n{payload}\n```",
    lambda payload: f"Sure! Here is the result: {payload} Let me know if you need more.",
])
def test_br10_code_fences_and_prose_are_parsed(server, tmp_path, wrap, make_judge):
    # BR-10's replies, re-shaped to our keyed schema, wrapped exactly as the case wraps them.
    payload = json.dumps({"S1": {"reason": "stated", "verdict": 1}, "S2": {"reason": "not stated", "verdict": 0}})
    server.script = lambda seen: Reply(content=wrap(payload))
    sample = {"user_input": "When is the shop open?", "response": "The shop opens at 9. It closes at 5.",
              "retrieved_contexts": ["The shop opens at 9 every day."]}
    result = score_sample(sample, ["faithfulness"], judge=make_judge())["faithfulness"]
    assert (result.status, result.value) == (Status.OK, CASES["BR-10"]["expected"]["parsed_faithfulness"][0])


def test_br10_unrecoverable_reply_is_judge_error_after_one_reask(server, tmp_path, make_judge):
    server.script = lambda seen: Reply(content=CASES["BR-10"]["input"]["judge_replies"][2])
    result = score_sample(ROW, ["faithfulness"], judge=make_judge())["faithfulness"]
    assert result.status is Status.JUDGE_ERROR and result.value is None
    assert "invalid judge output after one re-ask: the reply holds no JSON object" in result.reason
    assert len(server.chat_requests()) == 2


def test_malformed_then_valid(server, tmp_path, make_judge):
    answers = iter(['{"S1": {"reason": "x", "verdict": 1', None])

    def script(seen):
        content = next(answers)
        return Reply(content=content) if content else oracle()(seen)

    server.script = script
    result = score_sample(ROW, ["faithfulness"], judge=make_judge())["faithfulness"]
    assert (result.status, result.value) == (Status.OK, 1.0)
    retry = server.chat_requests()[1].body["messages"]
    assert retry[-1]["content"].startswith("That answer is invalid: the reply holds no JSON object")


def test_wrong_verdict_count_is_reasked_then_judge_error(server, tmp_path, make_judge):
    server.script = lambda seen: Reply(content=json.dumps({"S1": {"reason": "x", "verdict": 1}}))
    result = score_sample(ROW, ["faithfulness"], judge=make_judge())["faithfulness"]
    assert result.status is Status.JUDGE_ERROR
    assert "missing S2; missing S3; missing S4" in result.reason
    assert len(server.chat_requests()) == 2


def test_out_of_range_and_string_verdicts_are_refused(server, tmp_path, make_judge):
    server.script = lambda seen: Reply(content=json.dumps(
        {f"S{i}": {"reason": "x", "verdict": v} for i, v in enumerate([2, "1", True, 1], start=1)}))
    result = score_sample(ROW, ["faithfulness"], judge=make_judge())["faithfulness"]
    assert result.status is Status.JUDGE_ERROR
    assert "S1.verdict must be one of [0, 1], got 2; S2.verdict must be one of [0, 1], got '1'" in result.reason


def test_429_with_retry_after_then_success(server, tmp_path, make_judge):
    replies = iter([Reply(status=429, body={"error": {"message": "slow down"}}, headers={"retry-after": "0.3"})])
    server.script = lambda seen: next(replies, None) or oracle()(seen)
    start = time.monotonic()
    result = score_sample(ROW, ["faithfulness"], judge=make_judge())["faithfulness"]
    assert (result.status, result.value) == (Status.OK, 1.0)
    assert time.monotonic() - start >= 0.3  # Retry-After honoured over the 0.05 s backoff cap
    assert result.usage["chat_requests"] == 2


def test_hung_request_times_out_and_becomes_judge_error(server, tmp_path, make_judge):
    server.script = lambda seen: Reply(content="{}", delay=3)
    judge = make_judge(timeout=0.3, max_attempts=2)
    result = score_sample(ROW, ["faithfulness"], judge=judge)["faithfulness"]
    assert result.status is Status.JUDGE_ERROR
    assert "timeout after 2 attempts of 0.3 s" in result.reason


def test_5xx_storm_turns_rows_into_judge_errors_and_the_run_completes(server, tmp_path, make_judge):
    server.script = lambda seen: Reply(status=503, body={"error": {"message": "overloaded"}})
    rows = [dict(ROW, id=f"r{i}") for i in range(3)]
    result = evaluate(rows, judge=make_judge(max_attempts=3))
    assert len(result.results) == 15
    assert set(result.results["status"]) == {"judge_error"}
    assert result.results["reason"].str.contains("request failed after 3 attempts").all()
    assert result.summary["coverage"]["faithfulness"]["judge_error"] == 3
    assert result.summary["metrics"]["faithfulness"]["mean"] is None


def test_concurrency_limit_is_shared_by_rows_and_metrics(server, tmp_path, make_judge):
    base = oracle()
    server.script = lambda seen: Reply(**{**base(seen).__dict__, "delay": 0.05})
    rows = [dict(ROW, id=f"r{i}", user_input=f"q{i}") for i in range(6)]
    evaluate(rows, judge=make_judge(concurrency=3))
    assert server.peak == 3


def test_json_object_mode_puts_the_schema_in_the_prompt(server, tmp_path, make_judge):
    result = score_sample(ROW, ["faithfulness"], judge=make_judge(response_format="json_object"))
    request = server.chat_requests()[0]
    assert request.body["response_format"] == {"type": "json_object"}
    assert request.schema["required"] == ["S1", "S2", "S3", "S4"]
    assert result["faithfulness"].value == 1.0


def test_endpoint_without_embeddings_falls_back_to_offline_encoder(server, tmp_path, make_judge):
    base = oracle()
    server.script = lambda seen: (Reply(status=404, body={"error": {"message": "no such route"}})
                                  if seen.path.endswith("/embeddings") else base(seen))
    judge = make_judge()
    result = evaluate([ROW], ["answer_relevancy"], judge=judge)
    assert result.results["status"].tolist() == ["ok"]
    assert "offline encoder used" in result.summary["judge"]["embedding_fallback"]


@pytest.mark.parametrize("message, falls_back", [("embeddings not supported", True),
                                                 ("This model does not support embeddings", True),
                                                 ("input is too long for embedding", False)])
def test_a_400_saying_embeddings_are_not_supported_falls_back_and_any_other_400_is_an_error(
        server, make_judge, message, falls_back):
    base = oracle()
    refusal = {"error": {"message": message, "type": "invalid_request_error"}}
    server.script = lambda seen: (Reply(status=400, body=refusal) if seen.path.endswith("/embeddings") else base(seen))
    result = evaluate([ROW], ["answer_relevancy"], judge=make_judge())
    assert result.results["status"].tolist() == (["ok"] if falls_back else ["judge_error"])
    fallback = result.summary["judge"]["embedding_fallback"]
    assert (fallback is not None and "offline encoder used" in fallback and message in fallback) if falls_back \
        else fallback is None
    assert len([s for s in server.seen if s.path.endswith("/embeddings")]) == 1  # a 400 is not asked again


def test_api_key_never_appears_in_outputs_or_errors(server, tmp_path, capsys, caplog, make_judge):
    server.script = lambda seen: Reply(status=401, body={"error": {"message": f"Incorrect API key provided: {SECRET}"}})
    judge = make_judge()
    result = evaluate([ROW], judge=judge)
    headers = {k.lower(): v for k, v in server.chat_requests()[0].headers.items()}
    assert headers["authorization"] == f"Bearer {SECRET}"
    assert set(result.results["status"]) == {"judge_error"}
    everything = (result.results.to_json() + json.dumps(result.summary) + repr(judge) + repr(judge.config)
                  + capsys.readouterr().out + capsys.readouterr().err + caplog.text)
    assert "[redacted]" in result.results["reason"].iloc[0]
    assert SECRET not in everything and SECRET[:12] not in everything


def test_per_metric_options_share_the_cache_and_limit(server, tmp_path, make_judge):
    judge = make_judge()
    strict = judge.with_options(model="bigger-model", strictness=5)
    result = score_sample(ROW, ["answer_relevancy"], judge=strict)["answer_relevancy"]
    assert result.judge == "llm:bigger-model" and len(result.details["questions"]) == 5
    assert server.chat_requests()[0].body["model"] == "bigger-model"
    with pytest.raises(ValueError, match="per-metric options"):
        judge.with_options(api_key="x")


def test_br01_refusal(server, tmp_path, make_judge):
    server.script = oracle(decide({"noncommittal": {"Q1": 1, "Q2": 1, "Q3": 1}}))
    results = score_sample(CASES["BR-01"]["input"], ["faithfulness", "answer_relevancy"], judge=make_judge())
    assert results["faithfulness"].status is Status.NOT_APPLICABLE and results["faithfulness"].usage["chat_requests"] == 0
    assert results["answer_relevancy"].value <= CASES["BR-01"]["expected"]["answer_relevancy_max"]


def test_br03_chinese_statements(server, tmp_path, make_judge):
    case = CASES["BR-03"]
    results = score_sample(case["input"], ["faithfulness", "context_recall"], judge=make_judge())
    assert server.chat_requests()[0].schema["required"] == ["S1", "S2"]
    assert results["faithfulness"].value == case["expected"]["faithfulness"]
    assert results["context_recall"].value == case["expected"]["context_recall"]


def test_br04_empty_contexts_score_zero_without_requests(server, tmp_path, make_judge):
    case = CASES["BR-04"]
    results = score_sample(case["input"], ["faithfulness", "context_recall", "context_precision"],
                           judge=make_judge())
    assert {m: r.value for m, r in results.items()} == {k: case["expected"][k] for k in results}
    assert server.chat_requests() == []


def test_br12_failures_stay_per_sample(server, tmp_path, make_judge):
    case = CASES["BR-12"]
    samples = case["input"]["samples"]

    def script(seen):
        if samples[1]["response"] in seen.prompt:
            return Reply(content="{}", delay=2)
        if samples[2]["response"] in seen.prompt:
            return Reply(status=400, body={"error": {"message": "This model's maximum context length is 8192 tokens",
                                                     "code": "context_length_exceeded"}})
        return oracle()(seen)

    server.script = script
    result = evaluate(samples, ["faithfulness"], judge=make_judge(timeout=0.3, max_attempts=2))
    frame = result.results
    assert frame["status"].tolist() == ["ok", "judge_error", "judge_error", "ok"]
    assert frame["value"].iloc[[0, 3]].tolist() == case["expected"]["faithfulness_scored"]
    assert "timeout after 2 attempts" in frame["reason"].iloc[1]
    assert "context_too_long" in frame["reason"].iloc[2]
    assert frame["chat_requests"].iloc[1] - 1 >= case["expected"]["retries_attempted_for_1_min"]
    assert result.summary["metrics"]["faithfulness"]["measured"] == case["expected"]["mean_over"]


def test_br18_reruns_are_identical_and_record_the_judge_config(server, tmp_path, make_judge):
    sample = CASES["BR-18"]["input"]["sample"]
    judge = make_judge(cache_path=None, temperature=0, seed=7)
    first = score_sample(sample, ["faithfulness"], judge=judge)["faithfulness"]
    second = score_sample(sample, ["faithfulness"], judge=judge)["faithfulness"]
    assert first.value == second.value == CASES["BR-18"]["expected"]["faithfulness"]
    assert server.chat_requests()[0].body["seed"] == 7 and server.chat_requests()[0].body["temperature"] == 0
    described = describe_judge(judge)
    assert {"model", "temperature", "seed", "prompt_versions"} <= set(described)
    assert described["prompt_versions"]["statement_support"] == statement_support.version


def test_br21_thirty_contexts_one_request_one_verdict_each(server, tmp_path, make_judge):
    case = CASES["BR-21"]
    server.script = oracle(lambda field, key: int(field not in ("useful", "noncommittal") or key == "C17"))
    results = score_sample(case["input"], ["context_precision", "context_recall", "faithfulness"],
                           judge=make_judge())
    reference_request = next(r for r in server.chat_requests() if r.kind == "reference_attribution")
    assert len(reference_request.schema["properties"]["contexts"]["required"]) == case["expected"]["n_context_verdicts"]
    assert results["context_precision"].value == pytest.approx(case["expected"]["context_precision"], abs=1e-6)
    assert results["context_recall"].value == case["expected"]["context_recall"]
    assert results["faithfulness"].value == case["expected"]["faithfulness"]


def test_a_run_that_failed_half_way_resends_only_what_it_had_not_finished(server, tmp_path, make_judge):
    rows = [dict(ROW, id=f"r{i}", response=f"In case {i}, {ROW['response']}") for i in range(4)]
    healthy = oracle()
    server.script = lambda seen: (Reply(status=500, body={}) if "In case 3" in seen.prompt else healthy(seen))
    first = evaluate(rows, ["faithfulness"], judge=make_judge(max_attempts=1)).results
    assert first["status"].tolist() == ["ok", "ok", "ok", "judge_error"]
    server.script, server.seen = healthy, []
    second = evaluate(rows, ["faithfulness"], judge=make_judge()).results
    assert second["status"].tolist() == ["ok"] * 4
    assert [("In case 3" in s.prompt) for s in server.chat_requests()] == [True]


def test_a_closed_judge_releases_its_loop_connections_and_cache_file(server, tmp_path, make_judge):
    import os
    import threading

    def descriptors() -> int:
        return len(os.listdir("/proc/self/fd"))

    server.script = oracle(decide({}))
    before, threads = descriptors(), threading.active_count()
    for _ in range(3):  # a notebook evaluating again and again
        judge = make_judge()
        assert score_sample(ROW, ["faithfulness"], judge=judge)["faithfulness"].status == Status.OK
        judge.close()
    # Before: each judge left its loop's selector and pipe and the cache's file, WAL and shared memory open.
    assert (descriptors(), threading.active_count()) == (before, threads)


def test_a_provider_allowing_fewer_requests_in_flight_gets_them_and_no_row_is_lost(server, tmp_path, make_judge):
    refused = []

    def provider(seen):  # 3 requests in flight at most, like a small deployment's rate limit
        if seen.path.endswith("/chat/completions") and server.in_flight > 3:
            refused.append(seen)
            return Reply(status=429, body={"error": {"message": "too many requests in flight"}})
        reply = oracle()(seen)
        reply.delay = 0.05
        return reply

    server.script = provider
    rows = [dict(ROW, id=f"r{i}", response=f"Einstein was born in Ulm in 1879. Answer {i}.") for i in range(24)]
    result = evaluate(rows, ["faithfulness"], judge=make_judge(concurrency=16, max_attempts=4))
    # Before: each 429 was retried at 16 in flight, and rows ran out of attempts (judge_error).
    assert result.results["status"].tolist() == ["ok"] * 24
    # The first burst of 16 meets up to 13 refusals; halved to 8, 4, 2 it meets a few more (19-21 measured),
    # where retrying at 16 in flight met hundreds (bench/llm_judge_bench.py: 544 for 30 rows).
    assert len(refused) < 2 * len(rows)
