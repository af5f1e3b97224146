"""Synthetic test sets with an LLM, over the scripted judge server (real HTTP on 127.0.0.1)."""
import json
import re
import shutil
import threading
from pathlib import Path

import pytest

from rag_eval.metrics import evaluate
from rag_eval.metrics.judges.endpoint import EndpointError
from rag_eval.metrics.sources.targets.config import load_config
from rag_eval.metrics.sources.testset import chunk_documents, read_documents
from rag_eval.metrics.sources.testset.baseline import bm25, extractive
from rag_eval.metrics.sources.testset.generate import agenerate, counts
from rag_eval.metrics.text import has_cjk
from rag_eval.orchestration.cli import main
from tests.conftest import TEST_KEY
from rag_eval.orchestration.judge_sim import Reply, embedding_body, oracle, provider_error

DOCS = Path(__file__).resolve().parents[2] / "examples" / "testset" / "docs"
ENGLISH = ["brakes.md", "chain.html", "gears.txt", "safety-check.md", "tyres.md"]
CHINESE = ["链条保养.md", "刹车检查.txt"]


def folder(tmp_path: Path, names: list[str]) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name in names:
        shutil.copy(DOCS / name, docs / name)
    return docs


def passages(prompt: str) -> list[str]:
    """The chunk texts numbered [C1].. in a prompt (chunks hold no blank line)."""
    block = prompt.split("\n\n")[0].removeprefix("Passages:\n")
    return re.split(r"(?:^|\n)\[C\d+\] ", block)[1:]


def scripted_question(prompt: str) -> dict:
    """A question built from the passages' own words, different for every seed: a single-hop
    question from the first words of C1, a multi-hop one from the last words of C1 and C2, an
    abstract one from the middle words of each; Chinese passages give a Chinese question."""
    texts = passages(prompt)
    if has_cjk(texts[0]):
        return {"question": f"关于{texts[0][:14]}和{texts[-1][-14:]}，应该怎么做？", "answer": texts[0][:40]}
    words = [re.findall(r"[A-Za-z]+", t) for t in texts]
    if "needs a fact of passage C1" in prompt:
        chosen = [w for ws in words for w in ws[-10:]]
    elif "broad question" in prompt:
        chosen = [w for ws in words for w in ws[10:20]]
    else:
        chosen = words[0][:10]
    return {"question": f"How does {' '.join(chosen)} matter?", "answer": texts[0].split(". ")[0]}


class Script:
    """The scripted generator and critic: ``generation(n, seen)`` may override the n-th
    generation reply (counted from 1, in arrival order); the critic rejects a question
    saying "the passage" as not standalone."""

    def __init__(self, generation=None):
        self.generation = generation or (lambda n, seen: None)
        self.n = 0
        self.lock = threading.Lock()

    def __call__(self, seen):
        if seen.path.endswith("/embeddings"):
            return Reply(body=embedding_body(seen.body["input"]))
        if seen.kind == "question_generation":
            if len(seen.body["messages"]) > 2:  # the re-ask: answer validly
                return Reply(content=json.dumps(scripted_question(seen.prompt)))
            with self.lock:
                self.n += 1
                n = self.n
            return self.generation(n, seen) or Reply(content=json.dumps(scripted_question(seen.prompt)))
        if seen.kind != "question_critic":
            return oracle()(seen)  # the metrics' judgements, when the set is evaluated
        question = seen.prompt.split("Question:\n", 1)[1].split("\n\nAnswer:\n", 1)[0]
        standalone = int("the passage" not in question)
        return Reply(content=json.dumps({"reason": "scripted critic", "answerable": 1, "standalone": standalone}))


def generation_requests(server):
    return [s for s in server.chat_requests() if s.kind == "question_generation"]


def critic_requests(server):
    return [s for s in server.chat_requests() if s.kind == "question_critic"]


def test_every_question_carries_its_sources_and_costs_two_requests(server, make_judge, tmp_path):
    server.script = Script()
    chunks = chunk_documents(read_documents(folder(tmp_path, ENGLISH))[0], 128)
    texts = {c.id: c.text for c in chunks}
    judge = make_judge()
    result = judge.run(agenerate(judge, chunks, 8))
    # 8 questions: 4 single-hop, 2 multi-hop, 2 abstract (RAGAS's 0.5 / 0.25 / 0.25), none dropped.
    assert counts(8) == {"single_hop": 4, "multi_hop": 2, "abstract": 2}
    assert [q["synthesizer_name"] for q in result.questions].count("single_hop") == 4
    assert sorted(q["synthesizer_name"] for q in result.questions) == ["abstract"] * 2 + ["multi_hop"] * 2 + \
        ["single_hop"] * 4
    assert result.dropped == [] and [q["id"] for q in result.questions] == [f"q-{i:04d}" for i in range(1, 9)]
    for question in result.questions:
        ids = [g["document_id"] for g in question["retrieval_ground_truth"]]
        assert [texts[i] for i in ids] == question["reference_contexts"]  # the sources, by id and by text
        assert len(ids) == (1 if question["synthesizer_name"] == "single_hop" else 2)
        assert {g["query_relevance_label"] for g in question["retrieval_ground_truth"]} == {1}
        assert question["reference"] and question["user_input"].startswith("How does ")
    # Exactly one generation and one critic request per question, counted by the server and by the judge.
    assert len(generation_requests(server)) == 8 and len(critic_requests(server)) == 8
    assert result.usage["question_generation"].chat_requests == 8 and result.usage["question_critic"].chat_requests == 8
    # The multi-hop prompt shows two passages and asks for both facts; every prompt asks for the documents' language.
    multi = [s for s in generation_requests(server) if "needs a fact of passage C1" in s.prompt]
    assert len(multi) == 2 and all(len(passages(s.prompt)) == 2 for s in multi)
    assert all("Write the question and the answer in the language of the passages." in s.prompt
               for s in generation_requests(server))
    # Every judgement is cached: a second run (a killed run started again) sends nothing and writes the same set.
    sent = len(server.seen)
    restarted = make_judge()  # the run started again: a judge of its own on the same cache
    again = restarted.run(agenerate(restarted, chunks, 8))
    assert len(server.seen) == sent and again.questions == result.questions
    assert again.usage["question_generation"].chat_requests == 0 and again.usage["question_critic"].cache_hits == 8
    assert again.usage["question_critic"].shared_hits == 0  # all 8 paid by the earlier run


def test_near_duplicates_and_critic_rejects_are_dropped_with_their_reason_and_replaced(server, make_judge, tmp_path):
    duplicate = Reply(content=json.dumps({"question": "How long do disc brake pads need to bed in properly?",
                                          "answer": "Ten to twenty firm stops."}))
    leaning = Reply(content=json.dumps({"question": "What does the passage say about chain wear limits?",
                                        "answer": "0.5 percent for 11- and 12-speed chains."}))
    server.script = Script(lambda n, seen: {1: duplicate, 2: duplicate, 3: leaning}.get(n))
    chunks = chunk_documents(read_documents(folder(tmp_path, ENGLISH))[0], 128)
    judge = make_judge()
    result = judge.run(agenerate(judge, chunks, 4))
    # Round 1: 4 generations; one of the two identical questions is a near-duplicate (no critic request), the
    # question leaning on "the passage" is rejected by the critic; round 2 replaces both: 2 + 2 more requests.
    assert len(result.questions) == 4
    assert sorted(d["dropped"] for d in result.dropped) == ["critic_rejected", "near_duplicate"]
    by_cause = {d["dropped"]: d for d in result.dropped}
    assert by_cause["near_duplicate"]["reason"] == ("near-duplicate of 'How long do disc brake pads need to bed in "
                                                    "properly?'")
    assert by_cause["critic_rejected"]["reason"] == "not standalone: scripted critic"
    assert by_cause["critic_rejected"]["user_input"] == "What does the passage say about chain wear limits?"
    assert all(d["retrieval_ground_truth"] and d["reference_contexts"] for d in result.dropped)
    assert len(generation_requests(server)) == 6 and len(critic_requests(server)) == 5
    assert [q["user_input"] for q in result.questions].count(json.loads(duplicate.content)["question"]) == 1
    assert sorted(q["synthesizer_name"] for q in result.questions) == ["abstract", "multi_hop", "single_hop",
                                                                       "single_hop"]


def test_malformed_generator_output_is_re_asked_then_dropped(server, make_judge, tmp_path):
    # Reply 1 is prose without JSON, re-asked once and then valid; reply 2 has an empty answer on both tries.
    empty = Reply(content=json.dumps({"question": "How is a chain measured?", "answer": ""}))

    class Twice(Script):
        def __call__(self, seen):
            if seen.kind == "question_generation" and "How is a chain" in json.dumps(seen.body["messages"]):
                return empty  # the re-ask of reply 2: still invalid
            return super().__call__(seen)

    server.script = Twice(lambda n, seen: {1: Reply(content="Sure! Here is a good question for you."),
                                           2: empty}.get(n))
    chunks = chunk_documents(read_documents(folder(tmp_path, ENGLISH))[0], 128)
    judge = make_judge()
    result = judge.run(agenerate(judge, chunks, 4))
    assert len(result.questions) == 4
    [failed] = result.dropped
    assert failed["dropped"] == "generation_failed" and failed["user_input"] is None
    assert failed["reason"] == ("generation failed: question_generation: invalid judge output after one re-ask: "
                                "answer must be a non-empty string, got ''")
    assert failed["retrieval_ground_truth"] and failed["reference_contexts"]
    re_asks = [s for s in generation_requests(server) if len(s.body["messages"]) == 4]
    assert len(re_asks) == 2 and {"the reply holds no JSON object" in s.body["messages"][3]["content"]
                                  for s in re_asks} == {True, False}
    # 4 first asks + 2 re-asks + 1 replacement; 4 critic requests (the failed seed never reached the critic).
    assert len(generation_requests(server)) == 7 and len(critic_requests(server)) == 4


def test_chinese_documents_give_chinese_questions(server, make_judge, tmp_path):
    # The first reply of every seed is in English: refused ("must be written in Chinese"), re-asked, then Chinese.
    english = Reply(content=json.dumps({"question": "How should a chain be cleaned?", "answer": "With a rag."}))
    server.script = Script(lambda n, seen: english)
    chunks = chunk_documents(read_documents(folder(tmp_path, CHINESE))[0], 128)
    judge = make_judge()
    result = judge.run(agenerate(judge, chunks, 3))
    assert len(result.questions) == 3 and result.dropped == []
    assert all(has_cjk(q["user_input"]) and has_cjk(q["reference"]) for q in result.questions)
    firsts = [s for s in generation_requests(server) if len(s.body["messages"]) == 2]
    assert len(firsts) == 3 and all("Write the question and the answer in Chinese." in s.prompt for s in firsts)
    re_asks = [s for s in generation_requests(server) if len(s.body["messages"]) == 4]
    assert len(re_asks) == 3 and all("the question must be written in Chinese, the language of the passages"
                                     in s.body["messages"][3]["content"] for s in re_asks)


def test_a_kind_whose_seeds_run_out_gives_its_share_to_another(server, make_judge, tmp_path):
    # Two one-chunk documents on unrelated topics: no multi-hop pair; 2 single-hop seeds and 2 abstract ones
    # (a one-chunk document's abstract seed is that chunk).
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Wax based chain lubricants stay clean for a long time but must be applied again "
                                "every two or three hundred kilometres of riding in dry weather conditions.")
    (docs / "b.txt").write_text("Tubeless sealant dries out within two to six months depending on the climate, "
                                "so riders should top it up with thirty to sixty millilitres twice a year.")
    server.script = Script()
    chunks = chunk_documents(read_documents(docs)[0])
    judge = make_judge()
    result = judge.run(agenerate(judge, chunks, 4))
    # Asked: 2 single-hop, 1 multi-hop (none: single-hop), 1 abstract; single-hop has 2 seeds only, so the third
    # goes to abstract: 2 + 2, all in one round of 4 generations and 4 critic requests.
    assert result.notes == ["no multi_hop seed (no two related chunks): its 1 question(s) are single_hop"]
    assert sorted(q["synthesizer_name"] for q in result.questions) == ["abstract", "abstract", "single_hop",
                                                                       "single_hop"]
    assert len(generation_requests(server)) == 4 and len(critic_requests(server)) == 4


@pytest.fixture
def endpoint(server, monkeypatch, tmp_path):
    """The CLI's judge on the test server (key and cache from the environment / options)."""
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    monkeypatch.setenv("OPENAI_MODEL", "judge-test")
    return ["--cache-path", str(tmp_path / "cache.sqlite")]


def test_cli_dry_run_prints_requests_and_tokens_and_sends_nothing(server, endpoint, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")  # OPENAI_BASE_URL alone configures the LLM (a local vLLM needs no key)
    docs = folder(tmp_path, ENGLISH)
    assert main(["testset", str(docs), "-n", "4", "--chunk-tokens", "128", "--dry-run", "--out",
                 str(tmp_path / "set"), *endpoint]) == 0
    out = capsys.readouterr().out
    assert f"model judge-test at {server.url}; nothing is sent or written" in out
    assert re.search(r"^question_generation\s+4\s+[1-9][\d,]+\s+[1-9][\d,]*$", out, re.MULTILINE), out
    assert re.search(r"^question_critic\s+4\s+[1-9][\d,]+\s+[1-9][\d,]*$", out, re.MULTILINE), out
    assert re.search(r"^total\s+8\s", out, re.MULTILINE)
    assert server.seen == [] and server.probes == [] and not (tmp_path / "set").exists()
    assert not (tmp_path / "cache.sqlite").exists()  # nor the judgement cache: a dry run writes nothing


def test_cli_dry_run_after_a_finished_run_plans_nothing(server, endpoint, tmp_path, capsys):
    server.script = Script()
    argv = ["testset", str(folder(tmp_path, ENGLISH)), "-n", "4", "--chunk-tokens", "128", "--out",
            str(tmp_path / "set"), *endpoint]
    assert main(argv) == 0
    sent = len(server.seen)
    capsys.readouterr()
    assert main([*argv, "--dry-run"]) == 0
    out = capsys.readouterr().out
    # Every generation and every critique of the first round is cached: a real run would send nothing.
    assert re.search(r"^question_generation\s+0\s+0\s+0$", out, re.MULTILINE), out
    assert re.search(r"^question_critic\s+0\s+0\s+0$", out, re.MULTILINE), out
    assert len(server.seen) == sent


def test_cli_writes_the_set_with_its_counts_and_it_is_evaluated(server, endpoint, make_judge, tmp_path, capsys):
    server.script = Script()
    docs = folder(tmp_path, ENGLISH)
    out_dir = tmp_path / "set"
    assert main(["testset", str(docs), "-n", "4", "--chunk-tokens", "128", "--out", str(out_dir), *endpoint]) == 0
    lines = [json.loads(line) for line in (out_dir / "questions.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(lines) == 4 and all(q["reference"] and q["retrieval_ground_truth"] for q in lines)
    report = json.loads((out_dir / "testset.json").read_text(encoding="utf-8"))
    assert report["kept"] == 4 and report["dropped"] == 0 and report["requests_per_kept_question"] == 2.0
    assert report["usage"]["question_generation"]["chat_requests"] == 4
    # The scripted server answers every chat request with 100 prompt + 20 completion tokens: 240 per question.
    assert report["tokens_per_kept_question"] == 240.0
    corpus = (out_dir / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    corpus_ids = {json.loads(line)["id"] for line in corpus}
    assert {g["document_id"] for q in lines for g in q["retrieval_ground_truth"]} <= corpus_ids
    assert 'metrics = ["context_recall", "context_precision", "ndcg", "answer_correctness"]' in \
        (out_dir / "sweep.toml").read_text(encoding="utf-8")
    assert "4 questions kept of 4 asked (single_hop 2, multi_hop 1, abstract 1); 0 dropped" in capsys.readouterr().out
    # The set is evaluated with built-in metrics as its sweep.toml says: the baseline's answers, the LLM judge.
    config = load_config(out_dir / "sweep.toml")
    [configuration] = config.configurations
    assert config.questions == out_dir / "questions.jsonl" and configuration.name == "bm25-extractive"
    corpus = configuration.parts["retriever"].parameters["corpus"]
    samples = []
    for question in lines:
        hits = bm25(question["user_input"], 10, corpus)
        contexts = [h["text"] for h in hits]
        samples.append({**question, "retrieved_contexts": contexts,
                        "response": extractive(question["user_input"], contexts),
                        "retrieved_documents": [{"document_id": h["id"], "relevance_score": h["score"]} for h in hits]})
    judge = make_judge()
    result = evaluate(samples, metrics=config.metrics, judge=judge)
    assert set(result.results["status"]) == {"ok"} and len(result.results) == 4 * 4
    # The oracle attributes every reference statement to the contexts: context_recall 1.0 on every row.
    assert result.results.loc[result.results["metric"] == "context_recall", "value"].tolist() == [1.0] * 4


def test_json_object_endpoints_get_the_schema_in_the_prompt(server, make_judge, tmp_path):
    server.script = Script()
    chunks = chunk_documents(read_documents(folder(tmp_path, ["brakes.md"]))[0], 128)
    judge = make_judge(response_format="json_object")
    result = judge.run(agenerate(judge, chunks, 2))
    assert len(result.questions) == 2
    assert [s.body["response_format"] for s in server.chat_requests()] == [{"type": "json_object"}] * 4
    assert sorted(s.kind for s in server.chat_requests()) == ["question_critic"] * 2 + ["question_generation"] * 2
    assert all(set(s.schema["required"]) in ({"question", "answer"}, {"reason", "answerable", "standalone"})
               for s in server.chat_requests())


def test_cli_offline_and_its_refusals(tmp_path, monkeypatch, capsys):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    docs = folder(tmp_path, ENGLISH)
    assert main(["testset", str(docs), "-n", "3", "--out", str(tmp_path / "ict")]) == 0
    assert "inverse-cloze retrieval set (offline, no request): 3 questions of 3 asked" in capsys.readouterr().out
    assert json.loads((tmp_path / "ict" / "testset.json").read_text())["method"] == "inverse_cloze"
    assert not (tmp_path / "ict" / "dropped.jsonl").exists()
    # No usable sentence: exit 1 and why, on stderr and in testset.json.
    (tmp_path / "short").mkdir()
    (tmp_path / "short" / "rules.txt").write_text("Ride safe. Check the brakes. Pump the tyres.\n")
    assert main(["testset", str(tmp_path / "short"), "--out", str(tmp_path / "none")]) == 1
    why = "no question: no chunk of two sentences or more has a sentence of at least 5 content words"
    assert f"note: {why}" in capsys.readouterr().err
    assert json.loads((tmp_path / "none" / "testset.json").read_text())["notes"] == [why]
    (tmp_path / "empty").mkdir()
    for argv, message in (([str(tmp_path / "missing")], "documents folder not found"),
                          ([str(tmp_path / "empty")], "no document with text"),
                          ([str(docs), "-n", "0"], "-n 0: ask for 1 question or more"),
                          ([str(docs), "--chunk-tokens", "8"], "chunk size 8: give at least 32 tokens"),
                          ([str(docs), "--out", str(tmp_path / "ict" / "testset.json")], "is a file")):
        assert main(["testset", *argv]) == 2
        assert message in capsys.readouterr().err


def test_cli_a_dead_endpoint_stops_before_anything_is_written(server, endpoint, tmp_path, capsys):
    server.stop()
    assert main(["testset", str(folder(tmp_path, ["gears.txt"])), "-n", "2", "--out", str(tmp_path / "set"),
                 *endpoint]) == 2
    assert f"the judge endpoint {server.url} cannot be reached: connection refused" in capsys.readouterr().err
    assert not (tmp_path / "set").exists()


def test_an_endpoint_failing_every_generation_stops_after_the_first_three(server, make_judge, tmp_path):
    server.script = lambda seen: Reply(status=500, body={"error": {"message": "upstream overloaded"}})
    chunks = chunk_documents(read_documents(folder(tmp_path, ENGLISH))[0], 128)
    judge = make_judge()
    with pytest.raises(EndpointError, match=r"failed the first 3 question_generation request\(s\) alike, stopped "
                                            r"before sending more: question_generation: request failed after 5 "
                                            r"attempts \(InternalServerError 500\).*upstream overloaded"):
        judge.run(agenerate(judge, chunks, 8))
    # 3 generations of 5 attempts each, not the 16 generations (80 requests) that -n 8 allows; no critic request.
    assert len(generation_requests(server)) == 15 and critic_requests(server) == []


def test_cli_an_endpoint_refusing_every_request_exits_2_at_once_with_the_cause(server, endpoint, tmp_path, capsys):
    server.script = lambda seen: provider_error(400, "response_format json_schema is not supported", "bad_format")
    assert main(["testset", str(folder(tmp_path, ENGLISH)), "-n", "8", "--chunk-tokens", "128", "--out",
                 str(tmp_path / "set"), *endpoint]) == 2
    err = capsys.readouterr().err
    assert "failed the first 3 question_generation request(s) alike, stopped before sending more: " \
           "question_generation: bad_request: " in err and "json_schema is not supported" in err
    assert err.rstrip().endswith("answers 400 to every request: try --response-format json_object")
    assert len(server.chat_requests()) == 3 and not (tmp_path / "set").exists()  # a 400 is not retried
