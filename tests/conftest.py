import pytest

from tests.judge_server import JudgeServer


@pytest.fixture
def server():
    """A fresh scripted OpenAI-compatible server on 127.0.0.1 for one test."""
    running = JudgeServer().start()
    yield running
    running.stop()
