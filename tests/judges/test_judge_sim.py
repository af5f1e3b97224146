"""The simulated provider of ``rag-eval serve-judge-sim`` (rag_eval.orchestration.judge_sim) in
process: its verdicts, malformed answers, concurrency limit, request counts and option checks."""
import json
import threading
import urllib.error
import urllib.request

import pytest

from rag_eval.metrics import Status, score_sample
from rag_eval.orchestration.judge_sim import Reply
from rag_eval.orchestration.judge_sim_command import Simulation, simulated

ROW = {"user_input": "Where was Einstein born?", "response": "Einstein was born in Ulm. He was a physicist.",
       "retrieved_contexts": ["Albert Einstein was born in Ulm, Germany."], "reference": "He was born in Ulm."}


def post(url: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return reply.status, json.load(reply)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


@pytest.mark.parametrize(("p1", "expected"), [(1.0, 1.0), (0.0, 0.0)])
def test_verdict_p1_decides_every_verdict(server, make_judge, p1, expected):
    # Two statements ("Einstein was born in Ulm.", "He was a physicist."), each verdict 1 (p1 = 1) or
    # 0 (p1 = 0): faithfulness 2/2 or 0/2.
    server.script = simulated(Simulation(verdict_p1=p1))
    result = score_sample(ROW, ["faithfulness"], judge=make_judge())["faithfulness"]
    assert (result.status, result.value) == (Status.OK, expected)
    assert server.stats()["requests"] == {"chat.completions": 1, "models": 1}  # and the judge's endpoint check


def test_malformed_answers_are_reasked_then_judge_error_and_counted(server, make_judge):
    server.script = simulated(Simulation(malformed=1.0))
    result = score_sample(ROW, ["faithfulness"], judge=make_judge(max_attempts=2))["faithfulness"]
    assert result.status is Status.JUDGE_ERROR
    sent = len(server.chat_requests())
    assert sent >= 2 and server.stats()["faults"] == {"malformed": sent} and server.stats()["status"] == {"200": sent}


def test_a_request_above_max_concurrency_gets_429_at_once_and_reset_clears_the_counts(server):
    server.max_concurrency = 1
    server.script = lambda seen: Reply(content="{}", delay=0.5)
    statuses = []
    first = threading.Thread(target=lambda: statuses.append(post(f"{server.url}/chat/completions", {})[0]))
    first.start()
    while server.in_flight == 0:
        pass
    status, body = post(f"{server.url}/chat/completions", {})
    first.join()
    assert (status, body["error"]["code"], statuses) == (429, "rate_limit_exceeded", [200])
    stats = json.load(urllib.request.urlopen(server.url.removesuffix("/v1") + "/stats", timeout=10))
    assert stats == {"requests": {"chat.completions": 2}, "status": {"200": 1, "429": 1},
                     "faults": {"concurrency_429": 1}, "peak": 1, "in_flight": 0}
    post(server.url.removesuffix("/v1") + "/reset", {})
    assert server.stats() == {"requests": {}, "status": {}, "faults": {}, "peak": 0, "in_flight": 0}


def test_rate_limit_faults_are_retried_and_counted(server, make_judge):
    # Seed 4's first fault draws are 0.10, 0.07, 0.80: against fail_429 = 0.5, two 429s, then the answer.
    server.script = simulated(Simulation(fail_429=0.5, retry_after_s=0.01, seed=4))
    result = score_sample(ROW, ["faithfulness"], judge=make_judge(max_attempts=10))["faithfulness"]
    assert (result.status, result.value) == (Status.OK, 1.0)
    assert server.stats() == {"requests": {"chat.completions": 3, "models": 1}, "status": {"200": 1, "429": 2},
                              "faults": {"random_429": 2}, "peak": 1, "in_flight": 0}


@pytest.mark.parametrize(("options", "message"), [
    (["--fail-429", "0.8", "--fail-500", "0.5"], "--fail-429 + --fail-500 + --fail-timeout must not exceed 1"),
    (["--malformed", "1.5"], "--malformed must be within 0..1, not 1.5"),
    (["--latency-ms", "-1"], "--latency-ms must be a finite number, not negative"),
    (["--latency-ms", "nan"], "--latency-ms must be a finite number, not negative"),
    (["--retry-after-s", "inf"], "--retry-after-s must be a finite number, not negative"),
    (["--verdict-p1", "nan"], "--verdict-p1 must be within 0..1, not nan"),
])
def test_the_command_refuses_bad_options_with_status_2(options, message, capsys):
    from rag_eval.orchestration import cli

    assert cli.main(["serve-judge-sim", *options]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == f"error: {message}"


def test_a_request_without_a_judges_schema_gets_400_not_a_dropped_connection(server):
    # The third attacker's plain curl: an IndexError on the simulator's console and a dropped connection.
    server.script = simulated(Simulation())
    status, body = post(f"{server.url}/chat/completions", {"model": "x", "messages": [{"role": "user", "content": "hi"}]})
    assert (status, body["error"]["code"]) == (400, "invalid_request_error")
    assert "a JSON schema in the request" in body["error"]["message"]


@pytest.mark.parametrize("option", [["--port", "70000"], ["--port", "-1"], ["--max-concurrency", "-1"]])
def test_a_port_or_limit_outside_its_range_is_refused_by_name(option, capsys):
    from rag_eval.orchestration import cli

    with pytest.raises(SystemExit) as stopped:
        cli.main(["serve-judge-sim", *option])
    assert stopped.value.code == 2
    assert f"argument {option[0]}: {option[1]}: give a whole number from 0 to" in capsys.readouterr().err
