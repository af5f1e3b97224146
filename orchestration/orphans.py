"""Honest run records for runs executed in the ``rag-eval`` process itself.

Runs launched by the daemon or the UI run in a worker of the code server, which marks the
run failed when its worker dies; run monitoring in ``dagster.yaml`` fails runs that never
start or outlive ``max_runtime_seconds``. A run that ``rag-eval run`` or ``rag-eval backfill``
executes in-process has no such watcher: when that process is killed, the run would stay
STARTED forever. Those runs carry the process id and host in their tags, and every
``rag-eval`` command first marks failed the ones whose process is gone.
"""
import os
import socket

import dagster as dg

from rag_eval.metrics.judges.cache import process_alive

PID_TAG, HOST_TAG = "rag_eval/pid", "rag_eval/host"


def process_tags() -> dict[str, str]:
    """Tags naming this process, for a run executed in it."""
    return {PID_TAG: str(os.getpid()), HOST_TAG: socket.gethostname()}


def fail_orphaned_runs(instance: dg.DagsterInstance) -> list[str]:
    """Mark FAILURE the runs of this host still STARTING/STARTED whose process is gone.

    Returns the ids of the runs marked. A reused process id keeps a run as it is (never a
    live run marked failed)."""
    records = instance.get_run_records(filters=dg.RunsFilter(
        statuses=[dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED],
        tags={HOST_TAG: socket.gethostname()}))
    failed = []
    for record in records:
        run = record.dagster_run
        pid = int(run.tags.get(PID_TAG, "0"))
        if pid and pid != os.getpid() and not process_alive(pid):
            instance.report_run_failed(run, f"the rag-eval process that ran it (pid {pid}) ended without "
                                            "finishing it (killed or crashed)")
            failed.append(run.run_id)
    return failed
