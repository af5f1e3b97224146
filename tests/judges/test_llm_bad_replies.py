"""Bad replies of the LLM endpoint (content that is not text, a verdict echoing the key, bad
embeddings, a Retry-After over the budget, a 429 whose text mentions 404): each fails one
sample, never the run, and never shows the API key."""
import json

import pytest

from rag_eval.metrics import Status, evaluate, score_sample
from rag_eval.orchestration.judge_sim import Reply, embedding_body, oracle

pytestmark = pytest.mark.slow  # the test server or the offline encoder, in every test

SECRET = "sk-hostile-SECRET-not-a-real-key"
ROW = {"user_input": "Where was Einstein born?", "response": "Einstein was born in Ulm. He was a physicist.",
       "retrieved_contexts": ["Albert Einstein was born in Ulm, Germany."], "reference": "He was born in Ulm."}


@pytest.fixture
def judge(make_judge):
    return make_judge(api_key=SECRET, model="m", embedding_model="text-embedding-3-small", max_attempts=2)


def chat_body(content) -> dict:
    return {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": "12", "completion_tokens": None, "total_tokens": 1}}


def test_content_that_is_not_text_is_reasked_then_judge_error(server, judge):
    server.script = lambda seen: Reply(body=chat_body({"S1": {"verdict": 1}}))
    result = score_sample(ROW, ["faithfulness"], judge=judge)["faithfulness"]
    assert result.status is Status.JUDGE_ERROR
    assert "the reply's content is a dict, not text" in result.reason
    assert len(server.chat_requests()) == 2 and result.usage["prompt_tokens"] == 0  # "12" is not a count


def test_a_verdict_echoing_the_key_is_redacted(server, judge):
    server.script = lambda seen: Reply(content=json.dumps({"S1": {"reason": "x", "verdict": f"Bearer {SECRET}"},
                                                           "S2": {"reason": "x", "verdict": 1}}))
    result = score_sample(ROW, ["faithfulness"], judge=judge)["faithfulness"]
    assert result.status is Status.JUDGE_ERROR and SECRET not in result.reason and "[redacted]" in result.reason


@pytest.mark.parametrize("vectors, message", [
    (lambda texts: [[1.0, 0.0]] * (len(texts) - 1), "vectors for"),
    (lambda texts: [[float("inf"), 0.0]] * len(texts), "non-finite"),
    (lambda texts: [[1.0, 0.0]] + [[1.0, 0.0, 0.0]] * (len(texts) - 1), "different lengths"),
])
def test_bad_embeddings_fail_the_sample(server, judge, vectors, message):
    base = oracle()

    def script(seen):
        if seen.path.endswith("/embeddings"):
            body = embedding_body(seen.body["input"])
            body["data"] = [{"object": "embedding", "index": i, "embedding": v}
                            for i, v in enumerate(vectors(seen.body["input"]))]
            return Reply(body=body)
        return base(seen)

    server.script = script
    frame = evaluate([ROW], ["answer_relevancy", "faithfulness"], judge=judge).results.set_index("metric")
    assert frame.loc["answer_relevancy", "status"] == "judge_error"
    assert message in frame.loc["answer_relevancy", "reason"]
    assert frame.loc["faithfulness", "status"] == "ok"  # the rest of the run goes on


def test_a_retry_after_over_budget_fails_at_once(server, judge):
    server.script = lambda seen: Reply(status=429, body={"error": {"message": "slow"}}, headers={"retry-after": "3600"})
    result = score_sample(ROW, ["faithfulness"], judge=judge)["faithfulness"]
    assert result.status is Status.JUDGE_ERROR and "Retry-After 3600 s is over the 120 s budget" in result.reason
    assert len(server.chat_requests()) == 1


def test_a_429_mentioning_404_does_not_switch_embeddings_off(server, judge):
    base = oracle()
    server.script = lambda seen: (Reply(status=429, body={"error": {"message": "Limit 4050, used 4049"}})
                                  if seen.path.endswith("/embeddings") else base(seen))
    result = evaluate([ROW], ["answer_relevancy"], judge=judge)
    assert result.results["status"].tolist() == ["judge_error"]
    assert result.summary["judge"]["embedding_fallback"] is None
