"""A judge cascade from the Python API (issue 38): the offline judge on every row, the LLM judge over
real HTTP to the project's simulated endpoint on a seeded sample; the server counts the requests."""
import json
from pathlib import Path

import pytest

from rag_eval.metrics import evaluate
from rag_eval.metrics.judges.offline import OfflineJudge
from rag_eval.orchestration.judge_sim_command import Simulation, simulated

pytestmark = pytest.mark.slow  # the simulated endpoint

HELD_OUT = Path(__file__).parents[1] / "data" / "halueval_qa" / "rows_400_499.jsonl"


def rows() -> list[dict]:
    """HaluEval QA rows 400-499, each once with its right and once with its hallucinated answer: 200 rows."""
    found = []
    for line in HELD_OUT.read_text(encoding="utf-8").splitlines():
        item = json.loads(line)
        for kind in ("right_answer", "hallucinated_answer"):
            found.append({"id": f"{item['id']}-{kind}", "user_input": item["question"], "response": item[kind],
                          "retrieved_contexts": [item["knowledge"]]})
    return found


def drawn_rows(result) -> set[int]:
    return set(result.results.loc[result.results["strong_status"].notna(), "row"])


def test_a_tenth_costs_a_tenth_of_a_full_strong_run_and_a_larger_budget_only_the_added_rows(server, make_judge,
                                                                                             tmp_path):
    server.script = simulated(Simulation(verdict_p1=0.7))
    data, cheap = rows(), OfflineJudge()
    full = evaluate(data, metrics=["faithfulness"], judge=make_judge(cache_path=str(tmp_path / "full.sqlite")))
    full_requests = len(server.chat_requests())
    assert full_requests == 200  # faithfulness: one chat request a row
    server.seen.clear()

    tenth = evaluate(data, metrics=["faithfulness"], judge=cheap, strong_judge=make_judge(), strong_budget=0.1,
                     seed=7)
    sent = len(server.chat_requests())
    block = tenth.summary["metrics"]["faithfulness"]["cascade"]
    assert sent == block["n"] == len(drawn_rows(tenth)) and 0 < sent <= 0.12 * full_requests
    assert block["rows"] == block["estimate"]["N"] == 200 and block["estimate"]["n"] == sent
    assert block["estimate"]["method"] == "cascade-active" and block["sampling"] == "active"
    assert block["estimate"]["ci_low"] < block["estimate"]["estimate"] < block["estimate"]["ci_high"]
    # A full strong run's chat requests are planned exactly (a fresh cache: one a row), not estimated from the draw.
    assert block["requests"] == {"unit": "chat_requests", "sent": sent, "full_run": 200, "from": "plan",
                                 "saved": 200 - sent, "embeddings_sent": 0, "reused": 0}
    assert tenth.summary["metrics"]["faithfulness"]["published"] == "cascade"
    assert 0.0 <= block["agreement"] <= 1.0
    # The cheap judge's columns are those of a run without the cascade; the strong judge scores a row as a
    # full strong run does.
    alone = evaluate(data, metrics=["faithfulness"], judge=cheap).results
    assert tenth.results[alone.columns].equals(alone)
    strong = tenth.results.dropna(subset=["strong_status"]).set_index("row")["strong_value"]
    assert strong.equals(full.results.set_index("row").loc[strong.index, "value"].rename("strong_value"))
    assert tenth.results["inclusion_probability"].between(0, 1).all()

    server.seen.clear()
    fifth = evaluate(data, metrics=["faithfulness"], judge=cheap, strong_judge=make_judge(), strong_budget=0.2, seed=7)
    added = drawn_rows(fifth) - drawn_rows(tenth)
    assert drawn_rows(tenth) < drawn_rows(fifth) and len(server.chat_requests()) == len(added) > 0
    assert fifth.summary["metrics"]["faithfulness"]["cascade"]["requests"]["reused"] == sent


def test_a_full_strong_run_s_chat_requests_are_planned_exactly_for_a_metric_that_embeds_too(server, make_judge,
                                                                                              tmp_path):
    # answer_relevancy sends chat and embedding requests (one embedding request embeds several texts, each its own
    # cache entry, and the run batches them as it goes): the figures are chat requests, not requests mixed with
    # cached texts, and a full strong run's is the dry run's exact plan: the chat requests the endpoint received
    # for a full strong run (a fresh cache each), not an estimate from the draw.
    server.script = simulated(Simulation(verdict_p1=0.7))
    data = rows()[:60]
    evaluate(data, metrics=["answer_relevancy"], judge=make_judge(cache_path=str(tmp_path / "full.sqlite")))
    full = len(server.chat_requests())
    assert full == 60 and len(server.embedding_requests()) > 0
    server.seen.clear()
    cascade = evaluate(data, metrics=["answer_relevancy"], judge=OfflineJudge(), seed=3, strong_budget=0.2,
                       strong_judge=make_judge(cache_path=str(tmp_path / "cascade.sqlite")))
    requests = cascade.summary["metrics"]["answer_relevancy"]["cascade"]["requests"]
    assert (requests["unit"], requests["from"], requests["full_run"]) == ("chat_requests", "plan", full)
    assert (requests["sent"], requests["embeddings_sent"]) == (len(server.chat_requests()),
                                                               len(server.embedding_requests()))
    assert requests["saved"] == full - requests["sent"] > 0


def test_a_drawn_row_the_strong_judge_fails_on_withholds_the_estimate_until_a_rerun_judges_it(server, make_judge):
    server.script = simulated(Simulation(verdict_p1=0.7, fail_500=0.3))
    data, cheap = rows(), OfflineJudge()
    first = evaluate(data, metrics=["faithfulness"], judge=cheap, strong_judge=make_judge(max_attempts=1),
                     strong_budget=0.1, seed=7)
    failed = first.results[first.results["strong_status"] == "judge_error"]
    assert len(failed) > 0 and failed["strong_reason"].str.contains("500").all()
    block = first.summary["metrics"]["faithfulness"]["cascade"]
    assert block["estimate"] is None and first.summary["metrics"]["faithfulness"]["published"] == "mean"
    assert block["note"].startswith(f"no estimate: the strong judge has no score on drawn line(s) "
                                    f"{int(failed['row'].iloc[0]) + 1} (judge_error)")
    assert first.summary["metrics"]["faithfulness"]["mean"] is not None  # the cheap judge's raw mean stays

    server.script = simulated(Simulation(verdict_p1=0.7))
    server.seen.clear()
    again = evaluate(data, metrics=["faithfulness"], judge=cheap, strong_judge=make_judge(), strong_budget=0.1,
                     seed=7)
    assert len(server.chat_requests()) == len(failed)  # the rows judged before come from the cache
    assert drawn_rows(again) == drawn_rows(first)
    assert again.summary["metrics"]["faithfulness"]["cascade"]["estimate"] is not None
