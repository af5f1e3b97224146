"""Repeated judgements for the gate: the LLM judge over real HTTP (rag_eval.orchestration.judge_sim), cached per repeat."""
import math

import pytest

from rag_eval.metrics import evaluate
from rag_eval.metrics.stats.compare import compare
from rag_eval.metrics.stats.gate import effective_repeats, with_repeats
from rag_eval.metrics.judges.offline import OfflineJudge
from rag_eval.metrics.core.samples import load_samples
from rag_eval.orchestration.judge_sim import oracle
from tests.conftest import FIQA


def test_each_repeat_sends_its_own_seed_once_and_the_spread_enters_the_comparison(server, make_judge, tmp_path):
    # The scripted judge says "supported" with request seed 7 (repeat 0) and "not supported" with seed 8
    # (repeat 1): each row's faithfulness is 1.0 then 0.0, its mean 0.5, its within-row SD sqrt(0.5).
    def script(seen):
        if seen.path.endswith("/embeddings"):
            return oracle()(seen)
        supported = seen.body.get("seed") == 7
        return oracle(lambda field, key: int(supported) if field == "verdict" else 1)(seen)

    server.script = script
    path = tmp_path / "samples.jsonl"
    path.write_text("".join(line + "\n" for line in FIQA.read_text(encoding="utf-8").splitlines()[:12]))
    samples = load_samples(path)
    judge = make_judge()
    first = evaluate(samples, metrics=["faithfulness"], judge=judge).results
    assert (first["value"] == 1.0).all() and len(server.chat_requests()) == 12
    repeated = with_repeats(first, samples, judge, 2, ["faithfulness"])
    sent = server.chat_requests()[12:]
    assert len(sent) == 12 and {s.body["seed"] for s in sent} == {8}
    assert sorted(repeated.groupby("repeat")["value"].mean().items()) == [(0, 1.0), (1, 0.0)]
    with_repeats(first, samples, judge, 2, ["faithfulness"])  # again: every repeat from the cache
    assert len(server.chat_requests()) == 24
    row = compare(first, repeated).metrics["faithfulness"]
    assert row.difference == pytest.approx(-0.5) and row.n == 12
    assert row.retest_sd == {"baseline": None, "candidate": pytest.approx(math.sqrt(0.5))}
    assert row.repeats == {"baseline": 1, "candidate": 2}


def test_the_offline_judge_is_deterministic_so_it_judges_once_and_says_so():
    repeats, note = effective_repeats(OfflineJudge(), 3)
    assert repeats == 1 and note.startswith("offline-heuristic is deterministic: each row is judged once")
