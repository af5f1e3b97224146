"""The judge endpoint checked before anything is spent, connection failures named, keys
never stored, replies cut at the token limit asked again (issue 10 points 5 and 8)."""
import http.server
import json
import socket
import threading
import time

import pytest

from rag_eval.metrics import Status, evaluate, score_sample
from rag_eval.metrics.judges.endpoint import EndpointError
from rag_eval.metrics.judges.llm import LLMConfig
from tests.conftest import TEST_KEY as SECRET
from rag_eval.orchestration.judge_sim import Reply, oracle
from tests.conftest import readable

pytestmark = pytest.mark.slow  # the test server or the offline encoder, in every test

ROW = {"id": "r1", "user_input": "Where was Einstein born?", "response": "Einstein was born in Ulm. He was a physicist.",
       "retrieved_contexts": ["Albert Einstein was born in Ulm, Germany."], "reference": "He was born in Ulm."}


@pytest.fixture
def judge(make_judge):
    return lambda **options: make_judge(**{"max_attempts": 2, **options})


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_refused_connection_stops_at_once_naming_cause_and_url(judge):
    url = f"http://127.0.0.1:{closed_port()}/v1"
    started = time.monotonic()
    with pytest.raises(EndpointError) as caught:
        evaluate([ROW], metrics=["faithfulness", "answer_relevancy"], judge=judge(base_url=url))
    assert time.monotonic() - started < 3  # was 5 attempts reported as "timeout after 5 attempts of 5 s"
    assert "connection refused" in str(caught.value) and url in str(caught.value)


def test_unknown_host_is_named(judge):
    with pytest.raises(EndpointError, match=r"http://no-such-host\.invalid/v1 cannot be reached: unknown host"):
        judge(base_url="http://no-such-host.invalid/v1").check_endpoint()


def test_a_web_server_that_is_no_llm_endpoint_stops_at_once(judge):
    """A wrong port with a plain web server behind it (404 on GET, 501 on POST) is no endpoint:
    before, the check let it through and every judgement was retried into judge_error."""
    web = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=web.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{web.server_address[1]}/v1"
    try:
        with pytest.raises(EndpointError, match="does not serve chat completions \\(HTTP 501") as caught:
            judge(base_url=url).check_endpoint()
        assert url in str(caught.value)
    finally:
        web.shutdown()
        web.server_close()


def test_refused_key_stops_before_any_judgement(judge, server):
    server.api_key = "sk-the-right-one"
    with pytest.raises(EndpointError) as caught:
        evaluate([ROW], metrics=["faithfulness"], judge=judge())
    message = str(caught.value)
    assert "refused the API key (HTTP 401" in message and server.url in message and SECRET not in message
    assert server.seen == [] and server.probes == ["/v1/models/judge-test"]


def test_unknown_model_stops_naming_the_offered_models(judge, server):
    server.models = ["judge-test", "embed-test"]
    with pytest.raises(EndpointError) as caught:
        evaluate([ROW], metrics=["faithfulness"], judge=judge(model="judge-tset"))
    assert "does not know the model 'judge-tset' (HTTP 404" in str(caught.value)
    assert "it offers: embed-test, judge-test" in str(caught.value)
    # The one POST was the one-token probe, never a judgement.
    assert [s.body.get("max_tokens") for s in server.seen] == [1]


def test_known_model_on_an_endpoint_without_the_model_route_is_found_in_the_list(judge, server):
    server.models, server.model_route = ["judge-test", "embed-test"], False  # vLLM: only GET /models
    result = score_sample(ROW, ["faithfulness"], judge=judge())["faithfulness"]
    assert result.status is Status.OK
    assert server.probes == ["/v1/models/judge-test", "/v1/models"] and len(server.seen) == 1


def test_the_check_is_made_once_per_model(judge, server):
    made = judge()
    report = made.check_endpoint()
    assert report == {"base_url": server.url, "model": "judge-test", "status": "ok", "requests": 1,
                      "by": "GET /models/{model}", "note": None}
    evaluate([ROW, {**ROW, "id": "r2", "response": "Ulm is in Germany."}], metrics=["faithfulness"], judge=made)
    assert server.probes == ["/v1/models/judge-test"]
    assert made.describe()["endpoint_check"]["status"] == "ok"


def test_refused_connection_during_a_run_is_named(judge, server):
    made = judge()
    made.check_endpoint()
    server.stop()
    result = score_sample(ROW, ["faithfulness"], judge=made)["faithfulness"]
    assert result.status is Status.JUDGE_ERROR
    assert f"connection refused at {server.url} after 2 attempts" in result.reason
    # Neither refused attempt reached the endpoint: none is counted as sent.
    assert (result.usage["chat_requests"], result.usage["embedding_requests"]) == (0, 0)


@pytest.mark.parametrize("url", ["http://user:sk-in-url-not-a-real-key@127.0.0.1:8000/v1",
                                 "http://127.0.0.1:8000/v1?api_key=sk-in-url-not-a-real-key"])
def test_a_base_url_with_credentials_is_refused_without_echoing_them(url):
    with pytest.raises(ValueError) as caught:
        LLMConfig(base_url=url)
    assert "OPENAI_API_KEY" in str(caught.value) and "sk-in-url" not in str(caught.value)
    assert "http://127.0.0.1:8000/v1 carries credentials" in str(caught.value)


def test_a_key_echoed_in_a_successful_reply_is_stored_nowhere(judge, server, tmp_path):
    def echo(seen):
        key = {k.lower(): v for k, v in seen.headers.items()}["authorization"].removeprefix("Bearer ")
        if seen.path.endswith("/embeddings"):
            return oracle()(seen)
        return Reply(content=json.dumps({"S1": {"reason": f"the header said {key}", "verdict": 1},
                                         "S2": {"reason": "fine", "verdict": 1}}))

    server.script = echo
    made = judge()
    result = score_sample(ROW, ["faithfulness"], judge=made)["faithfulness"]
    assert result.status is Status.OK and result.value == 1.0
    assert result.details["statements"][0]["reason"] == "the header said [redacted]"
    stored = b" ".join(readable(tmp_path / "cache.sqlite"))  # every value of every table
    assert b"[redacted]" in stored and SECRET.encode() not in stored


def test_a_reply_cut_at_the_token_limit_is_asked_again_with_a_larger_budget(judge, server):
    answer = json.dumps({"S1": {"reason": "stated", "verdict": 1}, "S2": {"reason": "stated", "verdict": 0}})
    server.script = lambda seen: Reply(content=answer if seen.body.get("max_tokens") else answer[:20],
                                       finish_reason="stop" if seen.body.get("max_tokens") else "length")
    result = score_sample(ROW, ["faithfulness"], judge=judge())["faithfulness"]
    assert (result.status, result.value) == (Status.OK, 0.5)
    # The provider's default first, then max(2 x the 20 tokens it wrote, 1024).
    assert [s.body.get("max_tokens") for s in server.chat_requests()] == [None, 1024]
    assert result.usage["chat_requests"] == 2 and result.usage["completion_tokens"] == 40


def test_a_reply_always_cut_becomes_its_own_judge_error(judge, server):
    server.script = lambda seen: Reply(content='{"S1": {"reason": "sta', finish_reason="length")
    result = score_sample(ROW, ["faithfulness"], judge=judge(max_output_tokens=4096))
    result = result["faithfulness"]
    assert result.status is Status.JUDGE_ERROR
    assert "finish_reason length: the reply was cut at the token limit 3 times (max_tokens the provider's " \
           "default, 1024, 2048" in result.reason
    assert [s.body.get("max_tokens") for s in server.chat_requests()] == [None, 1024, 2048]


def test_a_separate_embeddings_endpoint_that_refuses_stops_the_run(judge, server):
    url = f"http://127.0.0.1:{closed_port()}/v1"
    with pytest.raises(EndpointError, match=f"the judge endpoint {url} cannot be reached: connection refused"):
        evaluate([ROW], metrics=["answer_relevancy"], judge=judge(embedding_base_url=url))
    assert [s.path for s in server.seen] == ["/v1/chat/completions"]  # the chat endpoint, checked and used
