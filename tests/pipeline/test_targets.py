"""Targets: the RAG system's retriever and generator as assets, incremental re-runs, failures, the sweep CLI."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest
import tenacity

from assets.resources import JudgeResource, build_resources
from assets.targets import register_target_run
from metrics.judges.cache import JudgementCache
from metrics.targets.call import call_part
from metrics.targets.config import CallSettings, Part, TargetConfigError, load_config
from orchestration.sweep import FIELD_LEVEL, run_cost, run_incrementally
from tests import target_system
from tests.judge_server import JudgeServer, Reply, oracle

ROOT = Path(__file__).resolve().parents[2]
GEN_KEY = "sk-generator-SECRET-24680"
QUESTIONS = [
    {"id": "q1", "user_input": "Where is the Louvre museum?", "reference": "The Louvre is in Paris.",
     "retrieval_ground_truth": [{"document_id": "louvre", "query_relevance_label": 1}]},
    {"id": "q2", "user_input": "When was the Eiffel Tower completed?", "reference": "It was completed in 1889.",
     "retrieval_ground_truth": [{"document_id": "eiffel", "query_relevance_label": 1}]},
    {"id": "q3", "user_input": "Which sea does the Thames reach?", "reference": "The North Sea.",
     "retrieval_ground_truth": [{"document_id": "thames", "query_relevance_label": 1}]},
    {"id": "q4", "user_input": "What poison is in the Prado museum?", "reference": "None.",
     "retrieval_ground_truth": [{"document_id": "prado", "query_relevance_label": 1}]},
]
METRICS = ["faithfulness", "answer_relevancy", "context_recall"]  # responses+contexts, responses, contexts


def generator_script(seen):
    """The generator endpoint: the prompt's first line and how many passages it was given."""
    prompt = seen.body["messages"][-1]["content"]
    passages = len(re.findall(r"^\[\d+\] ", prompt, flags=re.M))
    return Reply(content=f"{prompt.splitlines()[0]} The passages ({passages}) say so.")


def write_config(folder: Path, top_k: int = 2, prompt: str = "Answer briefly.", version: str = "1") -> Path:
    (folder / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS), encoding="utf-8")
    path = folder / "target.toml"
    path.write_text(f'''questions = "questions.jsonl"
[call]
concurrency = 2
timeout = 10
cache_path = "{folder / 'targets.sqlite'}"
[retriever.overlap]
callable = "tests.target_system:overlap"
version = "1"
parameters = {{ top_k = {top_k} }}
[generator.chat]
model = "gen-test"
base_url = "${{GEN_URL}}"
api_key_env = "GEN_KEY"
prompt = "{prompt}\\nPassages:\\n{{contexts}}\\nQuestion: {{user_input}}"
version = "{version}"
''', encoding="utf-8")
    return path


@pytest.fixture
def system(tmp_path, monkeypatch):
    """A generator endpoint and a judge endpoint (two test servers), resources, an instance."""
    generator, judge = JudgeServer().start(), JudgeServer().start()
    generator.script, judge.script = generator_script, oracle()
    monkeypatch.setenv("GEN_URL", generator.url)
    monkeypatch.setenv("GEN_KEY", GEN_KEY)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-judge-test")
    resource = JudgeResource(base_url=judge.url, model="judge-test", cache_path=str(tmp_path / "judge.sqlite"))
    resources = build_resources(tmp_path / "out", tmp_path / "datasets", resource)
    with dg.instance_for_test() as instance:
        yield {"generator": generator, "judge": judge, "resources": resources, "instance": instance,
               "root": tmp_path}
    resource.get_judge().close()
    generator.stop()
    judge.stop()


def sweep_once(system, config: Path):
    """Register the file's one configuration and run it incrementally: what ran and what it cost."""
    sweep = load_config(config)
    [configuration] = sweep.configurations
    key = register_target_run(system["instance"], system["resources"]["dataset_store"], sweep, configuration)
    before = {"retriever": target_system.calls["retriever"], "generator": len(system["generator"].seen),
              "judge": len(system["judge"].seen)}
    run_config = {"ops": {"eval_summary": {"config": {"scope": "version"}}}}
    results = run_incrementally(key, METRICS, system["instance"], system["resources"], run_config)
    ran = {e.asset_key.to_user_string() for r in results for e in r.get_asset_materialization_events()}
    counted = {"retriever": target_system.calls["retriever"] - before["retriever"],
               "generator": len(system["generator"].seen) - before["generator"],
               "judge": len(system["judge"].seen) - before["judge"]}
    return key, ran, counted, run_cost(results), system["judge"].seen[before["judge"]:]


def test_a_change_reruns_exactly_what_depends_on_it(system):
    root = system["root"]
    key, ran, counted, cost, _ = sweep_once(system, write_config(root))
    # First run: every question retrieved once (q4 fails: a ValueError is not retried), the three
    # others generated once; the judge is asked; the cost the sweep reports is what the servers saw.
    assert counted["retriever"] == 4 and counted["generator"] == 3 and counted["judge"] > 0
    assert (cost["target_calls"], cost["judge_requests"]) == (7, counted["judge"])
    # The failing row is kept, with its cause, in every per-row output.
    samples = [json.loads(line) for line in (root / "datasets" / key / "samples.jsonl").read_text().splitlines()]
    assert samples[3]["target_error"]["retrieved_contexts"] == \
        "ValueError: the index has no entry for this question"
    assert samples[3]["target_error"]["response"].startswith("not generated: retrieval failed (ValueError")
    results = pd.read_parquet(root / "out" / key / "results.parquet")
    q4 = results[results["row"] == 3]
    assert len(q4) == len(METRICS) and set(q4["status"]) == {"target_error"}
    assert q4["reason"].str.contains("the index has no entry").all()
    assert set(results.loc[results["row"] < 3, "status"]) == {"ok"}

    # Unchanged: nothing runs, nothing is called, nothing is judged.
    _, ran, counted, cost, _ = sweep_once(system, write_config(root))
    assert ran == set() and counted == {"retriever": 0, "generator": 0, "judge": 0}

    # Generator only (a new prompt and version): generation and the metrics reading responses.
    _, ran, counted, cost, judged = sweep_once(system, write_config(root, prompt="Answer in one line.", version="2"))
    assert ran == {"generator", "system_responses", *FIELD_LEVEL, "faithfulness", "answer_relevancy",
                   "eval_summary"}
    assert counted["retriever"] == 0 and counted["generator"] == 3 and counted["judge"] > 0
    assert {s.kind for s in judged if s.path.endswith("/chat/completions")} == {"statement_support",
                                                                               "answer_questions"}

    # top_k 2 -> 3: retrieval and everything below it (the responses name the passage count, so they change).
    _, ran, counted, cost, _ = sweep_once(system, write_config(root, top_k=3, prompt="Answer in one line.",
                                                               version="2"))
    assert ran == {"retriever", "system_contexts", "system_responses", *FIELD_LEVEL, *METRICS, "eval_summary"}
    assert counted["retriever"] == 4 and counted["generator"] == 3
    everything = b"".join(p.read_bytes() for p in root.rglob("*") if p.is_file())
    assert GEN_KEY.encode() not in everything  # the generator's key: nowhere in datasets, out, caches, DuckDB


def test_a_500_then_success_is_retried_and_a_timeout_is_the_rows_target_error(tmp_path, monkeypatch):
    server = JudgeServer().start()
    monkeypatch.setenv("SEARCH_TOKEN", "tok-SECRET-13579")
    replies = iter([Reply(status=500, body={"error": "busy"}),
                    Reply(body={"hits": [{"text": "Paris.", "id": "d1", "score": 2.5}]})])
    server.script = lambda seen: next(replies)
    part = Part("retriever", "search", "http", {"url": server.url + "/search", "request": {"q": "{user_input}",
                                                                                         "k": "{top_k}"},
                                                "contexts": "hits.*.text", "ids": "hits.*.id",
                                                "scores": "hits.*.score",
                                                "headers": {"Authorization": "Bearer ${SEARCH_TOKEN}"}},
                {"top_k": 1}, "1")
    settings = CallSettings(concurrency=1, timeout=0.5, max_attempts=2)
    cache = JudgementCache(tmp_path / "targets.sqlite")
    [outcome] = call_part(part, [{"user_input": "Where?"}], settings, cache, wait=tenacity.wait_none())
    assert outcome.error is None and outcome.calls == 2
    assert outcome.value == {"retrieved_contexts": ["Paris."],
                             "retrieved_documents": [{"document_id": "d1", "relevance_score": 2.5}]}
    assert server.seen[1].body == {"q": "Where?", "k": 1}  # a whole-string placeholder keeps its type
    assert server.seen[1].headers["Authorization"] == "Bearer tok-SECRET-13579"
    # The same inputs again: from the cache, no call.
    [again] = call_part(part, [{"user_input": "Where?"}], settings, cache)
    assert again.cached and again.calls == 0 and len(server.seen) == 2
    # A reply slower than the timeout, twice: the row's target_error, the run goes on.
    server.script = lambda seen: Reply(body={"hits": []}, delay=1.0)
    [slow] = call_part(part, [{"user_input": "Slow?"}], settings, cache, wait=tenacity.wait_none())
    assert slow.value is None and slow.calls == 2
    assert slow.error == "timeout: no answer within 0.5 s (timeout) after 2 attempts"
    # A client error that echoes the token: not retried, the token redacted from the cause.
    server.script = lambda seen: Reply(status=403, body={"error": f"token {seen.headers['Authorization']} refused"})
    [refused] = call_part(part, [{"user_input": "Who?"}], settings, cache, wait=tenacity.wait_none())
    assert refused.calls == 1 and "tok-SECRET" not in refused.error and "[redacted]" in refused.error
    server.stop()


def test_a_literal_secret_in_the_file_is_refused(tmp_path):
    path = tmp_path / "t.toml"
    path.write_text('questions = "q.jsonl"\n[retriever.r]\nurl = "http://x"\ncontexts = "a"\n'
                    'headers = { Authorization = "Bearer sk-live-123" }\n[generator.g]\ncallable = "m:f"\n')
    with pytest.raises(TargetConfigError, match=r"\[retriever.r\]: header Authorization holds a literal secret"):
        load_config(path)
    path.write_text('questions = "q.jsonl"\n[retriever.r]\nurl = "https://search.example/q?api_key=abc"\n'
                    'contexts = "a"\n[generator.g]\ncallable = "m:f"\n')
    with pytest.raises(TargetConfigError, match=r"\[retriever.r\]: url holds credentials"):
        load_config(path)


def test_sweep_cli_ranks_the_grid(tmp_path):
    (tmp_path / "tiny.py").write_text(
        "def rank(user_input, top_k=1):\n"
        "    docs = [('a', 'Apples are red.'), ('b', 'Bananas are yellow.')]\n"
        "    if 'banana' in user_input: docs = [('c', 'Cherries.'), ('b', 'Bananas are yellow.')]\n"
        "    return [{'id': i, 'text': t} for i, t in docs[:top_k]]\n"
        "def echo(user_input, retrieved_contexts):\n"
        "    return ' '.join(retrieved_contexts)\n")
    (tmp_path / "q.jsonl").write_text(
        json.dumps({"user_input": "What colour are apples?",
                    "retrieval_ground_truth": [{"document_id": "a", "query_relevance_label": 1}]}) + "\n" +
        json.dumps({"user_input": "What colour is a banana?",
                    "retrieval_ground_truth": [{"document_id": "b", "query_relevance_label": 1}]}) + "\n")
    (tmp_path / "sweep.toml").write_text(
        'questions = "q.jsonl"\nmetrics = ["ndcg"]\n[call]\ncache_path = "targets.sqlite"\n'
        '[retriever.rank]\ncallable = "tiny:rank"\n[generator.echo]\ncallable = "tiny:echo"\n'
        '[sweep]\n"retriever.top_k" = [1, 2]\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "EMBEDDING_"))}
    env["DAGSTER_HOME"] = str(tmp_path / "home")
    done = subprocess.run([sys.executable, "-m", "orchestration.cli", "sweep", "sweep.toml", "--json", "t.json"],
                          cwd=tmp_path, env={**env, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    table = json.loads((tmp_path / "t.json").read_text())["ranking"]
    # NDCG@3 by hand: top_k 2 finds b at rank 2 for the banana question: (1 + 1/log2(3)) / 2 = 0.8155;
    # top_k 1 misses it: (1 + 0) / 2 = 0.5.
    assert [r["configuration"] for r in table] == ["rank-echo-top_k2", "rank-echo-top_k1"]
    assert [r["metrics"]["ndcg"]["mean"] for r in table] == [0.8155, 0.5]
    assert [r["target_calls"] for r in table] == [4, 4] and [r["judge_requests"] for r in table] == [0, 0]
    assert "| 1 | rank-echo-top_k2 | 0.8155 [0.63, 1.00] |" in done.stdout
