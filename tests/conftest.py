import pytest

from metrics.judges.llm import LLMConfig, LLMJudge
from tests.judge_server import JudgeServer

TEST_KEY = "sk-test-SECRET-0123456789abcdef"


@pytest.fixture
def server():
    """A fresh scripted OpenAI-compatible server on 127.0.0.1 for one test."""
    running = JudgeServer().start()
    yield running
    running.stop()


@pytest.fixture
def make_judge(server, tmp_path):
    """``make_judge(**options)``: an LLM judge on the test server (key ``TEST_KEY``, model
    ``judge-test``, a cache in ``tmp_path``, short waits), ``options`` overriding any
    ``LLMConfig`` field; closed after the test."""
    made: list[LLMJudge] = []

    def make(**options) -> LLMJudge:
        settings = dict(base_url=server.url, api_key=TEST_KEY, model="judge-test", embedding_model="embed-test",
                        cache_path=str(tmp_path / "cache.sqlite"), max_retry_wait=0.05, timeout=5)
        made.append(LLMJudge(LLMConfig(**{**settings, **options})))
        return made[-1]

    yield make
    for judge in made:
        judge.close()
