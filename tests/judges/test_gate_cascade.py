"""The regression gate on judge-cascade estimates at a 10 % budget (issue 38's "Done when"): the offline judge on
every row, the LLM judge over real HTTP to the project's simulated endpoint on a seeded tenth of them."""
import json
import re
from pathlib import Path

import pytest

from rag_eval.metrics import evaluate
from rag_eval.metrics.judges.offline import OfflineJudge
from rag_eval.metrics.stats.gate import GateConfig, load_version, run_comparison
from rag_eval.orchestration.judge_sim import Seen, oracle

pytestmark = pytest.mark.slow  # the simulated endpoint

HELD_OUT = Path(__file__).parents[1] / "data" / "halueval_qa" / "rows_400_499.jsonl"
GATE = GateConfig(metrics=["faithfulness"])


def words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


def strict_reader(seen: Seen):
    """The strong judge the simulated endpoint plays: a statement (``Q: <question> A: <answer>``, the
    statements of a short answer) is supported when every word of its answer is a word of the contexts;
    any other request as the oracle answers it."""
    if seen.path.endswith("/embeddings") or seen.kind != "statement_support":
        return oracle()(seen)
    contexts, statements = seen.prompt.split("Contexts:\n", 1)[1].split("\n\nStatements:\n", 1)
    known = words(contexts)
    said = dict(re.findall(r"^\[(S\d+)\] (.*)$", statements.split("\n\nFor every statement id", 1)[0], re.M))

    def decide(field: str, key: str | None):
        if field != "verdict":
            return int(field != "noncommittal")
        return int(words(said[key].split(" A: ", 1)[-1]) <= known)
    return oracle(decide)(seen)


def rows(truncated: bool = False) -> list[dict]:
    """HaluEval QA rows 400-499, each with its right and its hallucinated answer (200 rows, as
    test_cascade_run's); ``truncated``: each answer cut to its first half (characters, rounded up), as a
    generation stopped by its token limit leaves it."""
    found = []
    for line in HELD_OUT.read_text(encoding="utf-8").splitlines():
        item = json.loads(line)
        for kind in ("right_answer", "hallucinated_answer"):
            answer = item[kind][: (len(item[kind]) + 1) // 2] if truncated else item[kind]
            found.append({"id": f"{item['id']}-{kind}", "user_input": item["question"], "response": answer,
                          "retrieved_contexts": [item["knowledge"]]})
    return found


def test_the_gate_catches_truncated_answers_from_cascade_estimates_at_a_tenth_of_the_strong_requests(
        server, make_judge, tmp_path):
    """Why "regressed" is right: the strong judge passes a HaluEval answer when each of its words is in the
    knowledge passage: 93 of the 100 right answers and 9 of the 100 hallucinated ones, a full strong run's
    faithfulness 102 / 200 = 0.51. Cut to its first half, an answer ends inside a word the passage does not
    hold ("Bart Conner" -> "Bart C"), except where the cut falls between words ("Vancouver Canucks" ->
    "Vancouver"): 25 right and 10 hallucinated answers stay supported, 35 / 200 = 0.175. The truth is a drop
    of 0.335, far beyond the margin of 0.02 (the cheap offline judge's means, 0.647 and 0.378, are not the strong
    judge's: the cascade corrects them on its sample). At a
    10 % budget each version's cascade draws about 20 rows (seed 0: 21 and 22), whose estimates differ by
    -0.437 [-0.589, -0.284]: the interval lies below -0.02, and holds the truth. An unmodified candidate
    drawn with another seed (another night's sample, 23 rows) differs by sampling noise alone, +0.010
    [-0.161, 0.182]: no change detected. The three cascades send 64 chat requests, 11 % of three full runs' (two rows drawn for
    both samples of the unmodified rows come from the judgement cache)."""
    server.script = strict_reader
    cheap = OfflineJudge()
    versions = {}
    for name, data, seed in (("baseline", rows(), 0), ("truncated", rows(truncated=True), 0),
                             ("unmodified", rows(), 1)):
        run = evaluate(data, metrics=["faithfulness"], judge=cheap, strong_judge=make_judge(), strong_budget=0.1,
                       seed=seed)
        run.results.to_parquet(tmp_path / f"{name}.parquet")  # the gate reads the stored results alone
        versions[name] = load_version(str(tmp_path / f"{name}.parquet"), tmp_path, tmp_path, cheap, GATE.metrics)
    sent = len(server.chat_requests())
    # One chat request a drawn row, about a tenth of three full runs; the rows both samples of the unmodified
    # rows drew are answered by the judgement cache.
    cached = int(versions["unmodified"].results["strong_cache_hits"].sum())
    assert sent + cached == 21 + 22 + 23 and sent <= 0.12 * 3 * 200

    comparison, notes = run_comparison(versions["baseline"], versions["truncated"], GATE, cheap)
    row = comparison.metrics["faithfulness"]
    assert row.basis == "cascade (n=21/200 vs 22/200)" and row.verdict == "regressed" and not comparison.passed
    assert (row.difference, row.low, row.high) == pytest.approx((-0.437, -0.589, -0.284), abs=5e-4)
    assert any(n.startswith("decided on the versions' judge cascades") for n in notes)

    same = run_comparison(versions["baseline"], versions["unmodified"], GATE, cheap)[0].metrics["faithfulness"]
    assert same.basis == "cascade (n=21/200 vs 23/200)" and same.verdict == "no change detected"
    assert (same.difference, same.low, same.high) == pytest.approx((0.010, -0.161, 0.182), abs=5e-4)

    # The truth the estimates stand for: the strong judge on every row of both versions.
    full = [evaluate(data, metrics=["faithfulness"], judge=make_judge(cache_path=str(tmp_path / "full.sqlite")))
            for data in (rows(), rows(truncated=True))]
    means = [run.summary["metrics"]["faithfulness"]["mean"] for run in full]
    assert means == [0.51, 0.175] and row.low < means[1] - means[0] < row.high
