"""Jobs: the evaluation of a dataset version, whole or by metric group; how a command runs one."""
from collections.abc import Sequence

import dagster as dg
from dagster import AssetSelection

INGESTION = dg.AssetSelection.groups("ingestion")
# The summary, and the human labels with the estimates they correct (nothing without a labels.jsonl).
SUMMARY = dg.AssetSelection.assets("eval_summary") | dg.AssetSelection.groups("labels")
GATE = dg.AssetSelection.groups("gate")  # baseline_comparison and its check no_regression_vs_baseline
CASCADE = dg.AssetSelection.groups("cascade")  # strong_sample: the strong judge on a sample


def evaluation_selection(metrics: AssetSelection, cascade: bool = False) -> AssetSelection:
    """``evaluation_job``'s selection with ``metrics`` (the five core metrics in the job itself):
    ingestion and its checks, the metrics, the summary, the label estimates and the regression gate;
    with ``cascade``, ``cascade_evaluation_job``'s: the strong sample too. ``rag-eval run`` runs
    one of them with the metrics it was given."""
    return INGESTION | metrics | (CASCADE if cascade else dg.AssetSelection.assets()) | SUMMARY | GATE


evaluation_job = dg.define_asset_job(
    "evaluation_job", selection=evaluation_selection(dg.AssetSelection.groups("core_metrics")),
    description="Ingest a version, check it, score the five core metrics, write the summary and compare the "
                "version with its baseline (the regression gate).")
cascade_evaluation_job = dg.define_asset_job(
    "cascade_evaluation_job", selection=evaluation_selection(dg.AssetSelection.groups("core_metrics"), cascade=True),
    # The launchpad shows this config, to change before launching; the two judges are resources: the cheap
    # ``judge`` (``offline: true``, or the environment's small model) and the ``strong_judge`` (another model).
    config={"ops": {"strong_sample": {"config": {"share": 0.1, "sampling": "active", "seed": 0}}}},
    description="evaluation_job as a judge cascade: the judge resource (the cheap judge) scores the five core metrics "
                "on every row, the strong_judge resource a tenth of them; the summary estimates the strong judge's "
                "means with 95 % intervals.")
full_evaluation_job = dg.define_asset_job(
    "full_evaluation_job",
    selection=INGESTION | dg.AssetSelection.groups("core_metrics", "ragas_metrics", "azure_metrics",
                                                   "diagnostics_metrics") | SUMMARY | GATE,
    description="Every RAG metric (core, RAGAS, Azure, RAGChecker's diagnostics); document retrieval metrics have "
                "their own job.")
diagnostics_job = dg.define_asset_job(
    "diagnostics_job",
    selection=INGESTION | dg.AssetSelection.groups("diagnostics_metrics")
    | dg.AssetSelection.assets("noise_sensitivity_relevant", "noise_sensitivity_irrelevant") | SUMMARY,
    description="RAGChecker's claim-level diagnostics of the retriever and the generator (noise sensitivity, "
                "RAGAS's asset, among them) and the summary with the version's diagnosis.")
response_metrics_job = dg.define_asset_job(
    "response_metrics_job", selection=INGESTION | dg.AssetSelection.assets("faithfulness", "answer_relevancy") | SUMMARY,
    description="The metrics that read the responses: faithfulness and answer relevancy (no reference needed).")
retrieval_metrics_job = dg.define_asset_job(
    "retrieval_metrics_job",
    selection=INGESTION | dg.AssetSelection.assets("context_relevancy", "context_recall", "context_precision") | SUMMARY,
    description="The metrics that read the retrieved contexts only: relevancy, recall and precision.")
document_retrieval_job = dg.define_asset_job(
    "document_retrieval_job", selection=INGESTION | dg.AssetSelection.groups("retrieval_metrics") | SUMMARY,
    description="NDCG, XDCG, fidelity, relevance and holes of retrieved documents against graded labels (no LLM).")
ingestion_job = dg.define_asset_job("ingestion_job", selection=INGESTION,
                                    description="Re-ingest a version (new field data versions; nothing judged).")
target_evaluation_job = dg.define_asset_job(
    "target_evaluation_job",
    selection=dg.AssetSelection.groups("target", "ingestion", "core_metrics", "retrieval_metrics") | SUMMARY,
    description="A target run (rag-eval sweep): call the retriever and the generator, ingest, score, summarize. "
                "Backfill it over the partitions of a sweep.")
JOBS = [evaluation_job, cascade_evaluation_job, target_evaluation_job, full_evaluation_job, diagnostics_job,
        response_metrics_job, retrieval_metrics_job, document_retrieval_job, ingestion_job]


def run_in_process(definitions: dg.Definitions, job: str, selection: AssetSelection, version: str,
                   instance: dg.DagsterInstance, run_config: dict | None = None,
                   tags: dict[str, str] | None = None) -> dg.ExecuteInProcessResult:
    """Materialize ``selection`` of ``definitions``' asset graph (and the checks of the assets
    selected) for partition ``version`` in this process, as a run of ``job`` (its name on the run
    record, as a run the UI launches); the result, also when the run failed."""
    keys: Sequence[dg.AssetKey] = sorted(selection.resolve(definitions.resolve_asset_graph()))
    return definitions.resolve_job_def(job).execute_in_process(
        run_config=run_config, instance=instance, partition_key=version, raise_on_error=False, tags=tags,
        asset_selection=keys)


def gate_check(result: dg.ExecuteInProcessResult) -> dg.AssetCheckEvaluation | None:
    """The regression gate's check (``no_regression_vs_baseline``) as a run evaluated it, or ``None``."""
    from rag_eval.assets.gate import CHECK

    return next((c for c in result.get_asset_check_evaluations() if c.check_name == CHECK), None)


def only_the_gate_failed(result) -> bool:
    """Whether a run failed only because its blocking regression gate failed: every asset
    before it was materialized (the version is evaluated; the gate judged it a regression)."""
    gate = gate_check(result)
    steps = {event.step_key for event in result.all_events if event.is_step_failure}
    return gate is not None and not gate.passed and steps <= {"baseline_comparison"}
