"""great-expectations' suite of a version (``rag_eval.assets.expectations``) as Dagster asset checks.

One step, ``great_expectations_suite``, after the version's ingestion: it profiles the
version's file, validates the profile under the suite for the fields the run's selected
metrics read, adds the result to the Data Docs site (``<out>/data_docs/``) and reports each
of :data:`rag_eval.assets.expectations.CHECKS` that has expectations for those fields as an asset
check on the ingested asset it concerns (with its severity; the others, e.g.
``relevance_labels_allowed`` when no document-retrieval metric is selected, have no
result). A failing check names the first failing lines (from 1) and fields, and counts them;
every check links its Data Docs page. None is blocking: ``rejected_share_within_limit``
(``rag_eval.assets.ingestion``) is, and when it fails this step is skipped with the metrics. The step
runs last among the steps ready (``dagster/priority`` -1): the metrics and the summary do not
wait for great-expectations' import.
"""
import functools
from collections.abc import Mapping
from typing import Any

import dagster as dg

from rag_eval.assets.evaluation import METRICS_OP
from rag_eval.assets.run_config import op_config
from rag_eval.assets.expectations import CHECKS, profile, suite, validate
from rag_eval.assets.ingestion import selected_metrics
from rag_eval.assets.partitions import dataset_versions
from rag_eval.assets.resources import DatasetStore, ReportStore
from rag_eval.metrics.core.base import Family
from rag_eval.metrics.core.registry import Registry, given
from rag_eval.metrics.errors import storage_error
from rag_eval.metrics.retrieval.document_retrieval import RankingSettings

#: Failing lines told in a check's ``failures`` (all are counted; GE's page lists more).
SHOWN = 5


def relevance_labels(metrics: list[str], run_config: Mapping[str, Any], registry: Registry | None = None) -> list[int]:
    """The relevance labels the selected document-retrieval ``metrics`` (of ``registry``, default the built-in
    ones) take: each one's scale
    ``[label_min, label_max]`` from the run config of the metric step (its defaults, Azure's
    0-4, else), all of them together."""
    options = op_config(run_config, METRICS_OP)
    labels: set[int] = set()
    for metric in metrics:
        if given(registry)[metric].family == Family.DOCUMENT_RETRIEVAL:
            chosen = options.get(metric) or {}
            scale = RankingSettings(**{k: chosen[k] for k in ("label_min", "label_max") if chosen.get(k) is not None})
            labels.update(range(scale.label_min, scale.label_max + 1))
    return sorted(labels) or list(range(RankingSettings().label_min, RankingSettings().label_max + 1))


def failing_lines(failed: list[dict]) -> list[dict]:
    """The failing lines of a check's ``failed`` outcomes (:func:`rag_eval.assets.expectations.validate`'s,
    each ``failing`` a list of ``{"line", "value", "message"}``), in the order of their line numbers: a check
    of several expectations (a field missing on one line, of the wrong type on another) lists line 4 before
    line 10, whichever expectation found it. Raises nothing; ``[]`` for no outcome."""
    return sorted((entry for outcome in failed for entry in outcome["failing"]), key=lambda entry: entry["line"])


@functools.cache
def quality_check(registry: Registry) -> dg.AssetChecksDefinition:
    """The ``great_expectations_suite`` checks, on the fields of the selected metrics of ``registry``;
    built once per set of metrics."""

    @dg.multi_asset_check(
        specs=[dg.AssetCheckSpec(check.name, asset=check.asset, description=check.description,
                                 partitions_def=dataset_versions) for check in CHECKS.values()],
        can_subset=True,  # a check without expectations for the run's fields has no result
        op_tags={"dagster/priority": "-1"},
        description="great-expectations' suite on the version's lines, one asset check per group of expectations.",
    )
    def great_expectations_suite(context: dg.AssetCheckExecutionContext, dataset_store: DatasetStore,
                                 report_store: ReportStore):
        """Validate the version's profile under the suite; one result per check with expectations."""
        version = context.partition_key
        required = selected_metrics(context.run.asset_selection or context.job_def.asset_layer.selected_asset_keys,
                                    registry)
        fields = list(dict.fromkeys(f for needs in required.values() for f in needs))
        frame = profile(dataset_store.samples_path(version), fields)
        expectations = suite(frame, fields, relevance_labels(list(required), context.run.run_config, registry))
        site = report_store.data_docs_site()
        try:
            outcomes, page = validate(frame, expectations, version, context.run.run_id, site)
        except OSError as exc:  # GE names no file: the site's folder, and the way out
            raise storage_error(site, exc) from None
        docs = {"data_docs": dg.MetadataValue.url(report_store.link(page)),
                "data_docs_path": dg.MetadataValue.path(str(page))}
        selected = {key.name for key in context.selected_asset_check_keys}
        for name, check in CHECKS.items():
            mine = [o for o in outcomes if o["check"] == name]
            if not mine or name not in selected:
                continue
            failed = [o for o in mine if not o["success"]]
            failing = failing_lines(failed)
            count = sum(o["unexpected_count"] for o in failed)
            told = [f["message"] for f in failing[:SHOWN]] + ([f"… {count - SHOWN} more"] if count > SHOWN else [])
            yield dg.AssetCheckResult(
                asset_key=check.asset, check_name=name, passed=not failed, severity=dg.AssetCheckSeverity(check.severity),
                description="; ".join(told) or None,
                metadata={"failing_lines": count, "failures": dg.MetadataValue.json(failing),
                          "expectations": dg.MetadataValue.json([{k: o[k] for k in (
                              "expectation", "column", "field", "success", "unexpected_count")} for o in mine]),
                          "metrics": list(required), **docs})

    return great_expectations_suite


