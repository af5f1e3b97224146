"""The selected metrics of a version are judged together in one step (issue 13), keeping
each metric asset's lineage, and the offline judge's batching changes no result."""
import json
from pathlib import Path

import dagster as dg
import pytest

from rag_eval.assets.resources import JudgeResource
from rag_eval.metrics.core.scoring import score_chunks
from rag_eval.metrics.judges.offline import OfflineJudge
from rag_eval.metrics.core.registry import CORE_METRICS, build_metrics
from rag_eval.metrics.core.samples import load_samples
from rag_eval.orchestration.definitions import defs
from rag_eval.orchestration.judge_sim import JudgeServer
from tests.pipeline.conftest import Project, materialized

ROOT = Path(__file__).resolve().parents[2]
FIQA = ROOT / "examples" / "fiqa" / "samples.jsonl"
AMNESTY = ROOT / "examples" / "amnesty_qa" / "samples.jsonl"


def test_each_metric_asset_reads_exactly_its_fields():
    graph = defs.get_repository_def().asset_graph
    parents = {m: {k.to_user_string() for k in graph.get(dg.AssetKey(m)).parent_keys} for m in CORE_METRICS}
    assert parents == {"faithfulness": {"questions", "responses", "retrieved_contexts"},
                       "answer_relevancy": {"questions", "responses"},
                       "context_relevancy": {"questions", "retrieved_contexts"},
                       "context_recall": {"questions", "retrieved_contexts", "references"},
                       "context_precision": {"questions", "retrieved_contexts", "references"}}
    assert {graph.get(dg.AssetKey(m)).group_name for m in CORE_METRICS} == {"core_metrics"}


def test_recall_and_precision_share_one_request_per_row_without_a_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-together-test")
    server = JudgeServer().start()
    judge = JudgeResource(base_url=server.url, model="judge-test", cache_path="")  # no judgement cache at all
    rows = [json.loads(line) for line in FIQA.read_text(encoding="utf-8").splitlines()[:3]]
    try:
        with dg.instance_for_test() as instance:
            project = Project(tmp_path, instance, judge)
            project.write("v1", rows)
            result = project.run("v1", job="retrieval_metrics_job")
    finally:
        judge.get_judge().close()
        server.stop()
    assert result.success
    assert materialized(result) >= {"context_relevancy", "context_recall", "context_precision", "eval_summary"}
    steps = {e.step_key for e in result.all_events if e.is_step_success}
    assert "score_metrics" in steps and not steps & set(CORE_METRICS)  # one step for the three metrics
    kinds = sorted(r.kind for r in server.chat_requests())
    # per row: one attribution request for both recall and precision, two relevance requests
    assert kinds == ["context_relevance_a"] * 3 + ["context_relevance_b"] * 3 + ["reference_attribution"] * 3


def test_chunked_offline_results_equal_the_per_sample_path():
    """Rows judged in chunks, every metric at once with one encoding cache, give the verdicts,
    statuses, values (to 1e-9) and details of each sample scored alone by a fresh judge."""
    samples = load_samples(AMNESTY)[:10]
    metrics = build_metrics(None)
    judge = OfflineJudge()
    batched = [r for part in score_chunks([(m, samples, judge) for m in metrics], rows=4)
               for results in part for r in results]
    batched = {(r.metric, r.row): r for r in batched}
    for metric in metrics:
        alone = OfflineJudge()
        for sample in samples:
            expected, got = metric.score(sample, alone), batched[(metric.name, sample.row)]
            assert (got.status, got.passed) == (expected.status, expected.passed)
            assert got.value == pytest.approx(expected.value, abs=1e-9)
            assert got.details == expected.details
