"""Targets: the RAG system's retriever and generator as assets, incremental re-runs, failures, the sweep CLI."""
import json
import re
from pathlib import Path
from urllib.parse import quote

import dagster as dg
import pandas as pd
import pytest
import tenacity

from rag_eval.assets.resources import JudgeResource, build_resources
from rag_eval.orchestration.location import build_definitions
from rag_eval.assets.targets import register_target_run
from rag_eval.metrics.core.registry import builtin_registry
from rag_eval.metrics.judges.cache import JudgementCache
from rag_eval.metrics.sources.targets.call import call_part
from rag_eval.metrics.sources.targets.config import MAX_CONFIGURATIONS, CallSettings, Part, load_config
from rag_eval.metrics.sources.targets.config_file import TargetConfigError
from rag_eval.orchestration.settings import Paths, RunSettings
from rag_eval.orchestration.sweep import FIELD_LEVEL, judged_by, run_cost, run_incrementally
from tests import target_system
from rag_eval.orchestration.judge_sim import JudgeServer, Reply, oracle
from tests.pipeline.conftest import sweep_cli

GEN_KEY = "sk-generator-SECRET-not-a-real-key"
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
    resources = system["resources"]
    settings = RunSettings(metrics=tuple(METRICS), summary_scope="version", judge=resources["judge"],
                           paths=Paths(resources["dataset_store"].root, resources["io_manager"].root))
    results = run_incrementally(key, settings, system["instance"],
                                build_definitions(builtin_registry(), system["resources"]))
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


def test_a_run_whose_every_call_failed_is_tried_again_by_the_next_sweep(system, monkeypatch):
    """The generator's endpoint down for a whole run: every row is a target_error, and the next sweep of the
    unchanged file, the endpoint up, generates and judges the answers (the run was not up to date)."""
    root = system["root"]
    dead = JudgeServer().start()
    dead.stop()  # nothing listens on its port any more: every call is refused
    monkeypatch.setenv("GEN_URL", dead.url)
    key, ran, counted, _, _ = sweep_once(system, write_config(root))
    assert "system_responses" in ran and counted["generator"] == 0
    samples = [json.loads(line) for line in (root / "datasets" / key / "samples.jsonl").read_text().splitlines()]
    assert ["response" in s["target_error"] for s in samples] == [True] * 4 and "response" not in samples[0]
    monkeypatch.setenv("GEN_URL", system["generator"].url)
    _, ran, counted, cost, _ = sweep_once(system, write_config(root))
    # The retrieval answered three of four: kept. The generation answered none: called again, then what reads it.
    assert ran == {"system_responses", *FIELD_LEVEL, "faithfulness", "answer_relevancy", "eval_summary"}
    assert counted["retriever"] == 0 and counted["generator"] == 3 and counted["judge"] > 0
    assert cost["target_calls"] == 3  # what the sweep reports: the three generations
    results = pd.read_parquet(root / "out" / key / "results.parquet")
    assert set(results.loc[results["row"] < 3, "status"]) == {"ok"}
    # Answered now: the next sweep runs nothing.
    _, ran, counted, _, _ = sweep_once(system, write_config(root))
    assert ran == set() and counted == {"retriever": 0, "generator": 0, "judge": 0}


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


def test_an_http_generator_and_a_system_callable_are_called_as_declared(tmp_path):
    # An HTTP generator: the request template gets the question, the passages (a list, kept as one)
    # and a parameter; the response is read at the configured path.
    server = JudgeServer().start()
    server.script = lambda seen: Reply(body={"data": {"answer": f"{seen.body['q']} from {len(seen.body['ctx'])}"}})
    part = Part("generator", "api", "http", {"url": server.url + "/generate", "response": "data.answer",
                                             "request": {"q": "{user_input}", "ctx": "{retrieved_contexts}",
                                                         "t": "{temperature}"}}, {"temperature": 0.2}, "1")
    [outcome] = call_part(part, [{"user_input": "Where?", "retrieved_contexts": ["Paris.", "France."]}],
                          CallSettings(concurrency=1, timeout=5))
    server.stop()
    assert outcome.value == {"response": "Where? from 2", "usage": {"prompt_tokens": 0, "completion_tokens": 0}}
    assert server.seen[0].body == {"q": "Where?", "ctx": ["Paris.", "France."], "t": 0.2}
    # One callable returning both (tests/target_system.py:answer): contexts with ids and scores (5 words
    # shared: the, eiffel, tower, was, completed), and the response.
    system = Part("system", "app", "callable", {"callable": "tests.target_system:answer"}, {"top_k": 1}, "1")
    [both] = call_part(system, [{"user_input": "When was the Eiffel Tower completed?"}], CallSettings())
    assert both.value == {"retrieved_contexts": [target_system.PASSAGES["eiffel"]],
                          "retrieved_documents": [{"document_id": "eiffel", "relevance_score": 5.0}],
                          "response": target_system.PASSAGES["eiffel"],
                          "usage": {"prompt_tokens": 0, "completion_tokens": 0}}


def test_calls_in_flight_never_exceed_the_concurrency():
    part = Part("retriever", "slow", "callable", {"callable": "tests.target_system:slow"}, {"seconds": 0.2}, "1")
    for concurrency in (2, 4):
        target_system.in_flight["peak"] = 0
        outcomes = call_part(part, [{"user_input": f"q{i}"} for i in range(8)], CallSettings(concurrency=concurrency))
        # 8 calls of 0.2 s: the pool keeps exactly `concurrency` busy, never more; answers in input order.
        assert target_system.in_flight["peak"] == concurrency
        assert [o.value["retrieved_contexts"] for o in outcomes] == [[f"passage for q{i}"] for i in range(8)]


def test_a_literal_secret_in_the_file_is_refused(tmp_path):
    path = tmp_path / "t.toml"
    path.write_text('questions = "q.jsonl"\n[retriever.r]\nurl = "http://x"\ncontexts = "a"\n'
                    'headers = { Authorization = "Bearer sk-header-not-a-real-key" }\n[generator.g]\ncallable = "m:f"\n')
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
    done = sweep_cli(tmp_path, "--json", "t.json")
    assert done.returncode == 0, done.stderr
    table = json.loads((tmp_path / "t.json").read_text())["ranking"]
    # NDCG@3 by hand: top_k 2 finds b at rank 2 for the banana question: (1 + 1/log2(3)) / 2 = 0.8155;
    # top_k 1 misses it: (1 + 0) / 2 = 0.5.
    assert [r["configuration"] for r in table] == ["rank-echo-top_k2", "rank-echo-top_k1"]
    assert [r["metrics"]["ndcg"]["mean"] for r in table] == [0.8155, 0.5]
    assert [r["target_calls"] for r in table] == [4, 4] and [r["judge_requests"] for r in table] == [0, 0]
    assert "| 1 | rank-echo-top_k2 | 0.8155 [0.63, 1.00] |" in done.stdout
    assert done.stdout.splitlines()[0] == "no judge: ndcg" and table[0]["metrics"]["ndcg"]["judge"] is None


def test_the_sweep_says_which_judge_scored_each_metric():
    def row(recall, precision):
        return {"metrics": {"context_recall": {"judge": recall}, "context_precision": {"judge": precision},
                            "ndcg": {"judge": None}}}

    offline = {"judge": "offline-heuristic", "rule_version": "7"}
    metrics = ["context_recall", "ndcg", "context_precision"]
    assert judged_by([row("offline-heuristic", "offline-heuristic")] * 2, metrics, offline, builtin_registry()) == \
        "judge offline-heuristic (rule version 7): context_recall, context_precision; no judge: ndcg"
    # Rows naming another judge than the configured one (an LLM's): named as the rows say, without a
    # rule version; a judged metric no row of which was scored says so.
    assert judged_by([row("llm:gpt-4o-mini", None), row("llm:gpt-4o-mini", None)], metrics, offline,
                     builtin_registry()) == \
        "judge llm:gpt-4o-mini: context_recall; no judge: ndcg; nothing scored: context_precision"


def test_a_bearer_token_echoed_by_the_endpoint_is_written_nowhere(tmp_path, monkeypatch):
    # The token alone (without "Bearer"), as servers echo it: in a passage of a 200 reply, raw in a
    # 401's body, URL-quoted in another's. + / = change under URL quoting.
    token = "tok+SECRET/97531="
    server = JudgeServer().start()

    def search(seen):
        echoed = seen.headers["Authorization"].split()[-1]
        if "Louvre" in seen.body["q"]:
            return Reply(body={"hits": [{"text": f"The Louvre is in Paris. debug: {echoed}", "id": "a"}]})
        echoed = echoed if "Eiffel" in seen.body["q"] else quote(echoed, safe="")
        return Reply(status=401, body={"error": f"invalid token {echoed}"})

    server.script = search
    (tmp_path / "tiny.py").write_text("def echo(user_input, retrieved_contexts):\n"
                                      "    return ' '.join(retrieved_contexts)\n")
    (tmp_path / "q.jsonl").write_text("".join(json.dumps({"user_input": q, "retrieval_ground_truth": [
        {"document_id": "a", "query_relevance_label": 1}]}) + "\n" for q in
        ["Where is the Louvre?", "When was the Eiffel Tower built?", "Which sea does the Thames reach?"]))
    (tmp_path / "sweep.toml").write_text(
        f'questions = "q.jsonl"\nmetrics = ["ndcg"]\n[call]\ncache_path = "targets.sqlite"\n'
        f'[retriever.search]\nurl = "{server.url}/search"\nrequest = {{ q = "{{user_input}}" }}\n'
        'contexts = "hits.*.text"\nids = "hits.*.id"\nheaders = { Authorization = "Bearer ${SEARCH_TOKEN}" }\n'
        '[generator.echo]\ncallable = "tiny:echo"\n')
    monkeypatch.setenv("SEARCH_TOKEN", token)
    done = sweep_cli(tmp_path)
    server.stop()
    assert done.returncode == 0, done.stderr
    assert all(s.headers["Authorization"] == f"Bearer {token}" for s in server.seen) and len(server.seen) == 3
    [folder] = (tmp_path / "datasets").iterdir()
    samples = [json.loads(line) for line in (folder / "samples.jsonl").read_text().splitlines()]
    assert samples[0]["retrieved_contexts"] == ["The Louvre is in Paris. debug: [redacted]"]
    assert samples[0]["response"] == "The Louvre is in Paris. debug: [redacted]"
    assert [s["target_error"]["retrieved_contexts"] for s in samples[1:]] == \
        ['OutputError: HTTP 401 from the retriever: {"error": "invalid token [redacted]"}'] * 2
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert {"samples.jsonl", "results.parquet", "rag_eval.duckdb", "targets.sqlite"} <= {p.name for p in written}
    assert any(p.is_relative_to(tmp_path / "home") for p in written)  # Dagster's run storage
    for form in (token, quote(token, safe="")):
        assert [p for p in written if form.encode() in p.read_bytes()] == []
        assert form not in done.stdout + done.stderr


def test_sweep_configuration_names_are_unique_and_stable(tmp_path):
    path = tmp_path / "sweep.toml"
    head = 'questions = "q.jsonl"\n[retriever.py]\ncallable = "m:f"\n[generator.g]\ncallable = "m:g"\n[sweep]\n'
    path.write_text(head + '"retriever.mode" = ["a b", "a_b", "a/b", 1, "1"]\n')
    names = [c.name for c in load_config(path).configurations]
    # "a_b" keeps its plain name; "a b" and "a/b" lose characters, so carry 6 hex of their JSON;
    # 1 and "1" spell the same and are told apart by their parts' version hashes.
    assert names[1] == "py-g-modea_b" and len(set(names)) == 5
    assert re.fullmatch(r"py-g-modea_b_[0-9a-f]{6}", names[0]) and re.fullmatch(r"py-g-modea_b_[0-9a-f]{6}", names[2])
    assert re.fullmatch(r"py-g-mode1-[0-9a-f]{6}", names[3]) and re.fullmatch(r"py-g-mode1-[0-9a-f]{6}", names[4])
    # A name does not depend on the rest of the grid (its partition, hence incremental re-runs, stays).
    path.write_text(head + '"retriever.mode" = ["a b"]\n')
    assert [c.name for c in load_config(path).configurations] == names[:1]
    # The same configuration twice is refused.
    path.write_text(head + '"retriever.top_k" = [3, 5, 3]\n')
    with pytest.raises(TargetConfigError, match=r"yields the same configuration more than once \(py-g-top_k3-"):
        load_config(path)


def test_a_grid_over_the_cap_is_refused_unless_allowed(tmp_path):
    (tmp_path / "sweep.toml").write_text(
        'questions = "q.jsonl"\n[retriever.py]\ncallable = "m:f"\n[generator.g]\ncallable = "m:g"\n[sweep]\n'
        f'"retriever.a" = {list(range(17))}\n"retriever.b" = {list(range(16))}\n')  # 272 configurations
    with pytest.raises(TargetConfigError, match=f"expands to 272 configurations, more than the cap of "
                                                f"{MAX_CONFIGURATIONS}: .* --max-configurations 272"):
        load_config(tmp_path / "sweep.toml")
    assert len(load_config(tmp_path / "sweep.toml", 272).configurations) == 272
    done = sweep_cli(tmp_path, "--max-configurations", "271")
    assert done.returncode == 2 and "272 configurations, more than the cap of 271" in done.stderr


@pytest.mark.parametrize("text, said", [
    ('questions = "q.jsonl"\nmetrics = "context_recall"\n', "metrics: Input should be a valid list, got 'context_recall'"),
    ('questions = "q.jsonl"\nmetrics = [5]\n', "metrics.0: Input should be a valid string, got 5"),
    ('questions = 5\n', "questions: Input should be a valid string, got 5"),
    ('questions = "q.jsonl"\nsweep = [1]\n', "sweep: Input should be a valid dictionary, got [1]"),
    ('questions = "q.jsonl"\nretriever = 5\n', "retriever: Input should be a valid dictionary, got 5"),
    ('questions = "q.jsonl"\n[call]\nconcurrency = "many"\n', "call.concurrency: Input should be a valid integer, got 'many'"),
    ('questions = "q.jsonl"\n[call]\ntimeout = -1\n', "call.timeout: Input should be greater than 0, got -1"),
    ('questions = "q.jsonl"\ncall = 5\n', "call: Input should be a valid dictionary or instance of _Call, got 5"),
    ('questions = "q.jsonl"\n[retriever.r]\ncallable = "m:f"\nrequires_env = 5\n',
     "retriever.r.requires_env: Input should be a valid list, got 5"),
    ('questions = "q.jsonl"\n[retriever.r]\ncallable = "m:f"\nheaders = "x"\n',
     "retriever.r.headers: Input should be a valid dictionary, got 'x'"),
    ('questions = "q.jsonl"\n[retriever.r]\ncallable = "m:f"\n[generator.g]\ncallable = "m:g"\n[sweep]\nretriever = [["r"]]\n',
     "sweep.retriever: names of declared retrievers, got [['r']]"),
    ('questions = "q.jsonl"\n[retriever.r]\ncallable = "m:f"\n[generator.g]\ncallable = "m:g"\n[sweep]\nretriever = []\n',
     "[sweep] names no value for ['retriever']: the grid is empty"),
    ('questions = "q.jsonl"\nmetric_options = { context_recall = { nonsense = 1 } }\n'
     '[retriever.r]\ncallable = "m:f"\n[generator.g]\ncallable = "m:g"\n',
     "metric_options.context_recall.nonsense: no such metric or option (write { ndcg = { k = 10 } })"),
    ('questions = "q.jsonl"\nmetric_options = { ndcg = { k = 0 } }\n[retriever.r]\ncallable = "m:f"\n'
     '[generator.g]\ncallable = "m:g"\n', "metric_options.ndcg: ndcg: k: Input should be greater than or equal to 1 (got 0)"),
])
def test_a_sweep_file_of_other_shapes_is_named_by_file_and_key(tmp_path, text, said):
    # The third attacker's: each of these was a Python traceback, an empty grid passing, or a Dagster config error.
    from rag_eval.metrics.sources.targets.config import load_config
    from rag_eval.metrics.sources.targets.config_file import TargetConfigError

    path = tmp_path / "sweep.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(TargetConfigError) as raised:
        load_config(path)
    assert str(raised.value) == f"{path}: {said}"
