"""The nightly evaluation, declared: Dagster's automation conditions on the assets, evaluated by
the daemon's automation condition sensor ``nightly_evaluation``.

At each tick of ``RAG_EVAL_CRON`` (default ``0 2 * * *``, timezone ``RAG_EVAL_TIMEZONE``) the
sensor requests, per dataset version, one run of:

* the ingestion, when the version was never ingested or its ingestion changed;
* each metric whose partition changed since it was materialized: a new code version, or an
  input field with a new data version (the field assets' data versions are hashes of their
  content, so new responses reach faithfulness and answer_relevancy only);
* the core metrics, summary and regression gate of a version never evaluated (its ingestion
  requested with them), and a core metric whose last run failed (a dead endpoint) — never
  past a failed blocking check of the ingestion (``rejected_share_within_limit``);
* the summary when one of its metrics or fields is re-run or changed, the regression gate
  and the label estimates (of a version with labels) when its summary is.

What Dagster's UI shows as "Unsynced" is what the next night re-runs, for what changed since
the sensor's first tick (the sensor keeps what it saw in its cursor: a change made before it
ever ran shows as Unsynced but waits for the next change or a materialization in the UI);
nothing changed, nothing is requested. Other assets (time-partitioned ones too) take these
conditions from :func:`nightly`, :func:`changed` and :func:`ready`. The sensor's runs are tagged ``rag_eval/summary_scope=version``: a
re-run of some metrics still summarizes the whole version (``rag_eval.assets.summary``).
"""
import os

import dagster as dg

from rag_eval.assets.summary import SCOPE_TAG

NIGHTLY_CRON = os.environ.get("RAG_EVAL_CRON", "0 2 * * *")
NIGHTLY_TIMEZONE = os.environ.get("RAG_EVAL_TIMEZONE", "UTC")
#: Seconds between two evaluations of the sensors ``new_dataset_versions`` and ``new_traffic`` by the daemon.
SENSOR_INTERVAL = int(os.environ.get("RAG_EVAL_SENSOR_INTERVAL", "60"))

AC = dg.AutomationCondition


def nightly(cron: str = NIGHTLY_CRON, timezone: str = NIGHTLY_TIMEZONE) -> dg.AutomationCondition:
    """A tick of ``cron`` passed since the asset partition was last requested or updated."""
    tick: dg.AutomationCondition = AC.cron_tick_passed(cron, timezone)  # of an asset or a check, as the next step takes
    return tick.since_last_handled().with_label(f"nightly ({cron}, {timezone})")


def changed() -> dg.AutomationCondition:
    """Materialized, and since then its code version changed or an asset it reads got a new data version."""
    return (~AC.missing() & (AC.code_version_changed() | AC.any_deps_match(AC.data_version_changed()))
            .since(AC.newly_updated())).with_label("changed since materialized")


def ready() -> dg.AutomationCondition:
    """Neither the asset partition nor one of its inputs is being materialized."""
    return (~AC.in_progress() & ~AC.any_deps_in_progress()).with_label("nothing in progress")


def ingestion_passed() -> dg.AutomationCondition:
    """The version's ingestion is requested too (its blocking check then guards the run), or its
    blocking check passed when it last ran."""
    return (AC.any_deps_match(AC.will_be_requested())
            | AC.asset_matches("rejected_samples", AC.all_checks_match(AC.check_passed(), blocking_only=True))
            ).with_label("ingestion passed its blocking check")


def requested_with_inputs() -> dg.AutomationCondition:
    """An asset it reads is requested on this tick."""
    return AC.any_deps_match(AC.will_be_requested()).with_label("an input is re-run")


def condition_of(spec: dg.AssetSpec) -> dg.AutomationCondition | None:
    """The automation condition of an asset, by its group (the target group's assets run with
    ``rag-eval sweep`` only)."""
    due = nightly() & ready()
    if spec.group_name == "ingestion":
        return (due & (AC.missing() | changed())).with_label("nightly ingestion")
    if spec.group_name == "core_metrics":
        never_done = AC.missing() & (requested_with_inputs() | AC.execution_failed())
        return (due & ingestion_passed() & (changed() | never_done)).with_label("nightly core metric")
    if spec.group_name and spec.group_name.endswith("_metrics"):
        return (due & ingestion_passed() & changed()).with_label("nightly metric")
    if spec.group_name == "summary":
        return (due & AC.all_deps_blocking_checks_passed() & (changed() | requested_with_inputs())
                ).with_label("nightly summary")
    if spec.key == dg.AssetKey("label_estimates"):  # human_labels reads a file: rag-eval run notices it
        return (due & ~AC.missing() & (changed() | requested_with_inputs())).with_label("nightly label estimates")
    if spec.group_name == "gate":
        return (due & (changed() | requested_with_inputs())).with_label("nightly regression gate")
    return None


def automated(assets: list) -> list:
    """``assets`` (definitions of assets) with :func:`condition_of` on each of their assets that has
    one; the others keep their own (the traffic group's)."""
    checks = [a for a in assets if isinstance(a, dg.AssetChecksDefinition)]  # no asset of their own
    return [*dg.map_asset_specs(lambda spec: spec.replace_attributes(
        automation_condition=condition_of(spec) or spec.automation_condition),
        [a for a in assets if not isinstance(a, dg.AssetChecksDefinition)]), *checks]


nightly_evaluation = dg.AutomationConditionSensorDefinition(
    "nightly_evaluation", target=dg.AssetSelection.all(), default_status=dg.DefaultSensorStatus.RUNNING,
    # Runs, not an asset backfill: one run per version holding every asset the night requests for it
    # (a backfill ran the gate in a run of its own after the summary's).
    emit_backfills=False, run_tags={SCOPE_TAG: "version"},
    description=f"Evaluates the assets' automation conditions (orchestration/automation.py): at each tick of "
                f"{NIGHTLY_CRON} ({NIGHTLY_TIMEZONE}; RAG_EVAL_CRON, RAG_EVAL_TIMEZONE), evaluates the versions "
                "never evaluated and re-runs what changed (Dagster's Unsynced).")
