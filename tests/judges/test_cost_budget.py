"""Cost bounded and visible before it is spent (issue 10 point 7): over HTTP against the
project's test server."""
import json
import re
from pathlib import Path

import pandas as pd
import pytest

from rag_eval.metrics import build_metrics, evaluate, load_samples
from rag_eval.metrics.judges.cost import estimate_cost

pytestmark = pytest.mark.slow  # the test server or the offline encoder, in every test

ROOT = Path(__file__).resolve().parents[2]
AMNESTY = ROOT / "examples" / "amnesty_qa" / "samples.jsonl"
ROW = {"id": "small", "user_input": "Where was Einstein born?", "response": "Einstein was born in Ulm. He was a physicist.",
       "retrieved_contexts": ["Albert Einstein was born in Ulm, Germany.", "The Eiffel Tower is in Paris."],
       "reference": "He was born in Ulm."}


def huge_row() -> dict:
    """A row at the documented limits: 200 distinct contexts of 99,000 characters."""
    return {"id": "huge", "user_input": "What do the reports say?", "response": "They say a lot. They agree.",
            "retrieved_contexts": [f"report {i}: " + "words " * 16_498 for i in range(200)],
            "reference": "The reports agree."}


def test_a_row_at_the_documented_limits_is_refused_before_anything_is_sent(make_judge, server):
    result = evaluate([ROW, huge_row()], judge=make_judge()).results
    huge = result[result["sample_id"] == "huge"].set_index("metric")
    # Answer relevancy reads no contexts: one chat and one embeddings request, within the budget.
    assert huge.loc["answer_relevancy", "status"] == "ok"
    for metric, requests in {"faithfulness": 200, "context_relevancy": 400, "context_recall": 200,
                             "context_precision": 200}.items():
        assert huge.loc[metric, "status"] == "judge_error"
        reason = huge.loc[metric, "reason"]
        assert f"over the per-row budget: {metric} on this row would send {requests} requests > 50" in reason
        assert "tokens > 200,000 (--max-row-tokens); nothing was sent" in reason
        assert huge.loc[metric, "chat_requests"] == 0
    # Only the small row's 5 chat requests and the huge row's answer_relevancy request were sent (not 801).
    assert len(server.chat_requests()) == 5 + 1
    assert (result[result["sample_id"] == "small"]["status"] == "ok").all()


def test_no_limit_sends_every_batch(make_judge, server):
    row = dict(ROW, retrieved_contexts=[f"passage {i} " + "text " * 14_000 for i in range(3)])  # 3 x 70,000 chars
    made = make_judge(max_row_requests=0, max_row_tokens=0)
    result = evaluate([row], metrics=["faithfulness"], judge=made).results.iloc[0]
    assert result["status"] == "ok" and result["chat_requests"] == 3  # one request per context past 60,000 chars
    made_tight = make_judge(cache_path=None, max_row_requests=2)
    refused = evaluate([row], metrics=["faithfulness"], judge=made_tight).results.iloc[0]
    assert refused["status"] == "judge_error" and "would send 3 requests > 2" in refused["reason"]


def test_the_budget_counts_after_the_cache(make_judge, server):
    evaluate([ROW], metrics=["faithfulness", "context_relevancy"], judge=make_judge())
    sent = len(server.seen)
    tight = make_judge(max_row_requests=1, max_row_tokens=10)
    result = evaluate([ROW], metrics=["faithfulness", "context_relevancy"], judge=tight).results
    assert (result["status"] == "ok").all() and len(server.seen) == sent  # all cached: costs nothing, admitted


def test_dry_run_counts_exactly_what_the_run_then_sends(make_judge, server):
    samples = load_samples(AMNESTY)
    made = make_judge()
    before = estimate_cost(samples, build_metrics(["core"]), made)
    assert server.seen == []  # planning sends nothing
    assert (before.total["chat_requests"], before.total["embedding_requests"]) == (5 * 20, 20)
    assert before.metrics["context_precision"]["chat_requests"] == 0  # shares context_recall's request
    evaluate(AMNESTY, judge=made)
    assert (len(server.chat_requests()), len(server.embedding_requests())) == (100, 20)
    after = estimate_cost(samples, build_metrics(["core"]), made)
    assert after.total == {"chat_requests": 0, "embedding_requests": 0, "prompt_tokens": 0, "completion_tokens": 0}


def test_cli_dry_run_prints_requests_tokens_and_price_and_registers_nothing(server, tmp_path, monkeypatch, capsys):
    from rag_eval.orchestration import cli

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    assert cli.main(["run", str(AMNESTY), "--dry-run", "--base-url", server.url, "--price", "0.15,0.60"]) == 0
    lines = capsys.readouterr().out.splitlines()
    total = next(line for line in lines if line.startswith("total")).split()
    chat, embeddings, prompt, completion = (int(v.replace(",", "")) for v in total[1:])
    assert (chat, embeddings) == (100, 20)
    cost = next(line for line in lines if line.startswith("cost:")).split()[1]
    assert float(cost) == pytest.approx((prompt * 0.15 + completion * 0.60) / 1e6, abs=5e-5)
    assert server.seen == [] and server.probes == [] and not (tmp_path / "datasets").exists()


def test_cli_dry_run_takes_the_files_run_takes_and_refuses_the_others(server, tmp_path, monkeypatch, capsys):
    # A version folder holding samples.jsonl is planned like its file; a CSV, which `run` refuses, is refused too.
    from rag_eval.orchestration import cli

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    (tmp_path / "v1").mkdir()
    (tmp_path / "v1" / "samples.jsonl").write_bytes(AMNESTY.read_bytes())
    assert cli.main(["run", "v1", "--dry-run", "--base-url", server.url]) == 0
    total = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("total")).split()
    assert total[1:3] == ["100", "20"]
    pd.DataFrame([{"user_input": "q", "response": "a"}]).to_csv(tmp_path / "s.csv", index=False)
    assert cli.main(["run", "s.csv", "--dry-run", "--base-url", server.url]) == 2
    assert "s.csv: a dataset version is a JSONL file (one JSON object a line)" in capsys.readouterr().err
    assert server.seen == [] and not (tmp_path / "datasets").exists()


@pytest.mark.parametrize("text", ["nan", "inf", "0.15,nan", "-1", "a,b", "1,2,3"])
def test_a_price_that_is_not_a_finite_non_negative_number_is_refused(text):
    # The third attacker's --price nan printed "cost: nan at nan per million".
    from rag_eval.orchestration.dry_run import parse_price

    with pytest.raises(ValueError, match=f"--price {re.escape(repr(text))}: give PROMPT"):
        parse_price(text)
    assert parse_price("0.15,0.60") == (0.15, 0.6) and parse_price("2") == (2.0, 2.0)


def test_cli_dry_run_only_reads_the_cache_and_creates_none(make_judge, server, tmp_path, monkeypatch, capsys):
    """The dry run counts after the cache, reading it: a cache it names but that does not exist is not made
    (nor its folder), an existing one keeps its bytes and gets no -wal or -shm beside it."""
    from rag_eval.orchestration import cli

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("OPENAI_MODEL", "judge-test")  # make_judge's: the same cache keys
    (tmp_path / "one.jsonl").write_text(f"{json.dumps(ROW)}\n", encoding="utf-8")
    dry = ["run", "one.jsonl", "--dry-run", "--base-url", server.url, "--metrics", "faithfulness", "--cache-path"]
    assert cli.main([*dry, str(tmp_path / "new" / "cache.sqlite")]) == 0
    assert not (tmp_path / "new").exists() and "total" in capsys.readouterr().out
    cache = tmp_path / "cache.sqlite"
    judge = make_judge(cache_path=str(cache))
    evaluate([ROW], metrics=["faithfulness"], judge=judge)  # its answers cached
    judge.close()
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    assert cli.main([*dry, str(cache)]) == 0
    total = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("total")).split()
    assert total[1:3] == ["0", "0"]  # read from the cache
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before
    assert len(server.seen) == 1  # the evaluation's one request; the dry runs sent nothing
