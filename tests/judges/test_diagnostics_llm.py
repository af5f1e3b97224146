"""RAGChecker's diagnostics through the LLM judge over real HTTP (rag_eval.orchestration.judge_sim): the hand-worked
row's values from scripted verdicts, and what the diagnostics send beyond the core metrics."""
import json
import re

import pytest

from rag_eval.metrics import evaluate
from rag_eval.metrics.core.registry import builtin_registry
from rag_eval.orchestration.judge_sim import Reply, build_answer, embedding_body
from tests.metrics.test_diagnostics import CHUNKS, CORRECT, EXPECTED, MATRIX, ROW, STATED

pytestmark = pytest.mark.slow  # the test server in every test


def _keyed(prompt: str, section: str, prefix: str) -> dict[str, str]:
    """``{"S1": text, ...}`` of one numbered section of a prompt."""
    part = prompt.split(section, 1)[1]
    return dict(re.findall(rf"^\[({prefix}\d+)\] (.*)$", part, re.MULTILINE))


def claims_script(matrix: dict[str, list[int]], chunks: list[str], correct: dict[str, int] | list[int],
                  stated: dict[str, int] | list[int]):
    """A server script answering the claim checks by the claims' and chunks' text: a matrix cell from
    ``matrix[claim][chunk index]`` (0 for a claim not listed), classification verdicts by position
    (lists) or by claim (dicts); every other judgement as the oracle does (1s), embeddings hashed."""
    def pick(verdicts, key, texts):
        return verdicts[int(key[1:]) - 1] if isinstance(verdicts, list) else verdicts[texts[key]]

    def script(seen):
        if seen.path.endswith("/embeddings"):
            return Reply(body=embedding_body(seen.body["input"]))
        decide = lambda field, key: int(field != "noncommittal")  # noqa: E731
        if seen.kind == "context_support_matrix":
            claims = _keyed(seen.prompt, "Statements:\n", "S")
            contexts = _keyed(seen.prompt.split("Statements:\n")[0], "Contexts:\n", "C")
            decide = lambda claim, context: matrix.get(claims[claim], [0] * len(chunks))[  # noqa: E731
                chunks.index(contexts[context])]
        elif seen.kind == "statement_classification":
            response = _keyed(seen.prompt.split("Reference statements:")[0], "Response statements:\n", "S")
            reference = _keyed(seen.prompt, "Reference statements:\n", "R")
            decide = lambda field, key: pick(correct, key, response) if field == "supported" \
                else pick(stated, key, reference)  # noqa: E731
        return Reply(content=json.dumps(build_answer(seen.schema, decide)))
    return script


def test_the_hand_worked_row_three_requests_for_every_diagnostic(server, make_judge):
    server.script = claims_script(MATRIX, CHUNKS, CORRECT, STATED)
    result = evaluate([ROW], ["diagnostics"], judge=make_judge())
    values = result.results.set_index("metric")["value"]
    assert {name: values[name] for name in EXPECTED} == pytest.approx(EXPECTED)
    # G x chunks, A x chunks, and the two texts' claims against each other: 3 requests for 11 metrics.
    assert sorted(r.kind for r in server.chat_requests()) == ["context_support_matrix"] * 2 + \
        ["statement_classification"]
    assert not server.embedding_requests()
    # 18 judgements asked by the 11 metrics (noise sensitivity 3 each, utilization, hallucination and
    # self-knowledge 2, the others 1): 3 sent, 15 answered by the one in flight or put by this run (shared
    # within it), none paid by an earlier run (the cache was empty).
    assert result.results["chat_requests"].sum() == 3 and result.results["shared_hits"].sum() == 15
    assert result.results["cache_hits"].sum() == 0


def test_diagnostics_add_three_requests_a_row_beyond_the_core_metrics(server, make_judge, tmp_path):
    rows = [ROW, dict(ROW, id="tower-2", response=ROW["response"].replace("gold", "silver")),
            dict(ROW, id="tower-3", retrieved_contexts=CHUNKS[:2])]
    server.script = claims_script(MATRIX, CHUNKS, CORRECT, STATED)
    evaluate(rows, ["core"], judge=make_judge(cache_path=str(tmp_path / "core.sqlite")))
    core_chat, core_embeddings = len(server.chat_requests()), len(server.embedding_requests())
    server.seen.clear()
    evaluate(rows, ["core", "diagnostics"], judge=make_judge(cache_path=str(tmp_path / "both.sqlite")))
    # No extraction; one matrix request per (claims, chunks) set and one classification per (response,
    # reference): 3 for the first row; the second (another response) shares the reference's matrix, the
    # third (other chunks) the classification: 2 each. Never more than 3 a row.
    assert len(server.chat_requests()) - core_chat == 3 + 2 + 2
    assert len(server.embedding_requests()) == core_embeddings
    # The RAGAS metrics asking the same checks add none: their requests are the diagnostics'.
    server.seen.clear()
    evaluate(rows, [*builtin_registry().families["diagnostics"], "factual_correctness"],
             judge=make_judge(cache_path=str(tmp_path / "ragas.sqlite")))
    assert len(server.chat_requests()) == 3 + 2 + 2


def test_chunks_past_the_prompt_budget_one_request_per_batch_same_values(server, make_judge):
    server.script = claims_script(MATRIX, CHUNKS, CORRECT, STATED)
    result = evaluate([ROW], ["diagnostics"], judge=make_judge(max_prompt_chars=60))  # one chunk a batch
    values = result.results.set_index("metric")["value"]
    assert {name: values[name] for name in EXPECTED} == pytest.approx(EXPECTED)
    kinds = sorted(r.kind for r in server.chat_requests())
    assert kinds == ["context_support_matrix"] * 6 + ["statement_classification"]  # 2 claim sets x 3 batches


def test_nothing_retrieved_one_request_the_claims_against_each_other(server, make_judge):
    server.script = claims_script(MATRIX, CHUNKS, CORRECT, STATED)
    result = evaluate([dict(ROW, retrieved_contexts=[])], ["diagnostics"], judge=make_judge())
    assert [r.kind for r in server.chat_requests()] == ["statement_classification"]
    values = result.results.set_index("metric")["value"]
    assert values["claim_recall"] == 0.0 and values["hallucination"] == pytest.approx(3 / 5)
