"""The traffic sample (rag_eval.metrics.stats.sampling): proportional to the strata, seeded, within a row or cost budget."""
import hashlib
import random

import pytest

from rag_eval.metrics.stats.sampling import Budget, priority, score_bands, select, stratum_keys
from rag_eval.metrics.sources.traces import Trace


def trace(i, route="chat", top=None):
    docs = None if top is None else [{"document_id": "d", "relevance_score": top}]
    return Trace(f"t{i:03d}", 0, 1, route=route, retrieved_documents=docs)


def test_priority_is_sha256_of_seed_and_trace_id():
    digest = hashlib.sha256(b"7:abc").digest()
    assert priority(7, "abc") == int.from_bytes(digest[:8], "big") / 2 ** 64


def test_the_budget_is_shared_in_proportion_to_the_strata():
    traces = [trace(i, "chat") for i in range(6)] + [trace(i, "search") for i in range(6, 9)]
    chosen = select(traces, Budget(rows=3), seed=0, by=["route"])
    # positions (k + 1/2) / n: chat 1/12, 3/12, 5/12...; search 1/6, 3/6...: the first three are chat, search, chat.
    assert chosen.stratum == ["chat", "search", "chat"]
    assert chosen.strata == {"chat": {"traces": 6, "sampled": 2}, "search": {"traces": 3, "sampled": 1}}
    # Within a stratum, the traces of lowest priority.
    chat = sorted(range(6), key=lambda i: priority(0, f"t{i:03d}"))
    assert [chosen.rows[0], chosen.rows[2]] == chat[:2]
    six = select(traces, Budget(rows=6), seed=0, by=["route"])
    assert six.strata == {"chat": {"traces": 6, "sampled": 4}, "search": {"traces": 3, "sampled": 2}}


def test_the_same_traces_and_seed_give_the_same_sample_in_any_order():
    traces = [trace(i, random.Random(i).choice(["a", "b", "c"]), top=float(i % 7)) for i in range(200)]
    first = {traces[i].trace_id for i in select(traces, Budget(rows=40), seed=3).rows}
    shuffled = traces[:]
    random.Random(1).shuffle(shuffled)
    assert {shuffled[i].trace_id for i in select(shuffled, Budget(rows=40), seed=3).rows} == first
    assert {traces[i].trace_id for i in select(traces, Budget(rows=40), seed=4).rows} != first
    assert len(first) == 40


def test_a_cost_budget_takes_traces_while_they_fit():
    traces = [trace(i) for i in range(5)]
    costs = {0: 1.0, 1: 1.0, 2: 5.0, 3: 1.0, 4: 1.0}
    chosen = select(traces, Budget(cost=4.5, price=(1.0, 1.0)), by=[], cost_of=costs.__getitem__)
    assert sorted(chosen.rows) == [0, 1, 3, 4] and chosen.total_cost == 4.0  # the 5.0 one never fits
    both = select(traces, Budget(rows=2, cost=100.0, price=(1.0, 1.0)), by=[], cost_of=costs.__getitem__)
    assert len(both.rows) == 2
    with pytest.raises(ValueError, match="cost_of"):
        select(traces, Budget(cost=1.0, price=(1.0, 1.0)))
    with pytest.raises(ValueError, match="needs prices"):
        Budget(cost=1.0)
    with pytest.raises(ValueError, match="rows"):
        Budget(rows=-1)


def test_retrieval_score_bands_are_the_tertiles_of_the_top_scores():
    traces = [trace(i, top=float(i)) for i in range(1, 7)] + [trace(7)]
    # tertiles of 1..6: 2.667 and 4.333
    assert score_bands(traces) == ["low", "low", "mid", "mid", "high", "high", "none"]
    assert stratum_keys(traces[:2], ["route", "score_band"]) == ["chat/low", "chat/high"]
    with pytest.raises(ValueError, match="stratified"):
        stratum_keys(traces, ["user"])


def test_the_cost_of_a_trace_ignores_the_judgement_cache(make_judge, server):
    """The estimate is the dry run's, sending nothing; judged once (its answers cached), the same
    trace costs the same, so a re-run draws the same sample."""
    from rag_eval.metrics.core.registry import build_metrics
    from rag_eval.metrics.stats.sampling import judging_cost
    from rag_eval.metrics.core.scoring import score_all
    from rag_eval.metrics.core.samples import sample_from_dict

    judge = make_judge()
    samples = [sample_from_dict({"user_input": "What is BM25?", "response": "A ranking function. It scores terms.",
                                 "retrieved_contexts": ["BM25 is a ranking function."]}, 0)]
    metrics = build_metrics(["faithfulness", "answer_relevancy"])
    cost_of = judging_cost(samples, metrics, judge, (1.0, 2.0))
    before = cost_of(0)
    assert before > 0 and server.seen == []
    score_all(samples, metrics, judge)
    sent = len(server.seen)
    assert sent > 0 and cost_of(0) == before and len(server.seen) == sent
