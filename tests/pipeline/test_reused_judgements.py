"""The run's cost line tells the judgements shared within the run (another request of the run paid for
them) from those reused from the cache (paid by earlier runs), over real HTTP to the scripted server."""
import pytest

from rag_eval.metrics import evaluate
from rag_eval.metrics.judges.cache_file import CacheWarning
from tests.conftest import FIQA, TEST_KEY

pytestmark = pytest.mark.slow


def test_a_first_run_shares_within_itself_and_a_second_reuses_what_the_first_paid(server, tmp_path, monkeypatch,
                                                                                   capsys):
    # Two lines, context_recall and context_precision: the two metrics of a line ask one judgement
    # (attribution), so the first run sends 2 requests (100 prompt + 20 completion tokens each, the
    # server's usage) and the other metric of each line shares the answer: 2 shared, none from the cache.
    # The same lines again (--force): nothing sent, each of the 4 (line, metric) pairs finds the answer
    # the first run paid for in the cache: 4 reused, none shared.
    from rag_eval.orchestration import cli

    dataset = tmp_path / "two.jsonl"
    dataset.write_text("\n".join(FIQA.read_text(encoding="utf-8").splitlines()[:2]) + "\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    command = ["run", str(dataset), "--base-url", server.url, "--model", "judge-test",
               "--metrics", "context_recall,context_precision"]

    assert cli.main(command) == 0
    first = [line for line in capsys.readouterr().out.splitlines() if line.startswith("this run sent:")]
    assert first == ["this run sent: 2 chat + 0 embeddings requests, 200 prompt + 40 completion tokens; "
                     "judgements not bought again: 2 shared within this run"]
    assert len(server.chat_requests()) == 2

    assert cli.main([*command, "--force"]) == 0
    second = [line for line in capsys.readouterr().out.splitlines() if line.startswith("this run sent:")]
    assert second == ["this run sent: 0 chat + 0 embeddings requests, 0 prompt + 0 completion tokens; "
                      "judgements not bought again: 4 reused from the cache (paid by earlier runs)"]
    assert len(server.chat_requests()) == 2


def test_answers_kept_in_memory_by_an_unusable_cache_are_shared_within_the_run_not_paid_earlier(server, tmp_path,
                                                                                                 make_judge):
    # The cache's folder is a file: the cache cannot be used and keeps this judge's answers in memory. The
    # first evaluation sends one request (context_recall and context_precision ask one judgement) and shares
    # it once; the second, on the same judge, finds both answers in memory: 2 shared within the run (this
    # judge bought them), 0 paid by earlier runs (nothing came from a cache file).
    (tmp_path / "blocked").write_text("not a folder", encoding="utf-8")
    row = {"id": "r1", "user_input": "Where was Einstein born?", "response": "In Ulm.",
           "retrieved_contexts": ["Einstein was born in Ulm.", "Paris is in France."],
           "reference": "Einstein was born in Ulm. He was born in 1879."}
    with pytest.warns(CacheWarning, match="cannot be used"):
        judge = make_judge(cache_path=str(tmp_path / "blocked" / "cache.sqlite"))
        first = evaluate([row], ["context_recall", "context_precision"], judge=judge).summary["usage"]
    assert (first["chat_requests"], first["shared_hits"], first["cache_hits"]) == (1, 1, 0)
    again = evaluate([row], ["context_recall", "context_precision"], judge=judge).summary["usage"]
    assert (again["chat_requests"], again["shared_hits"], again["cache_hits"]) == (0, 2, 0)
    assert len(server.chat_requests()) == 1
