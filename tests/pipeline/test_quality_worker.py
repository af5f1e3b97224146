"""The great-expectations worker process of the quality suite (``assets.expectations``)."""
import os
import signal

import pandas as pd

from assets import expectations


def test_the_worker_gives_ge_verdicts_and_a_dead_worker_is_replaced():
    # Worked out by hand: ids a, a, b (a duplicate); response sizes 1, 6, 5 against a bound of 5
    # (the second line is over it); every line usable and with a response: 2 of 4 expectations fail.
    frame = pd.DataFrame({"id": ["a", "a", "b"], "row": [0, 1, 2], "usable": [True] * 3,
                          "response_ok": [True] * 3, "response_size": [1, 6, 5]})
    expected = {"failed": ["id", "response_size"],
                "statistics": {"evaluated_expectations": 4, "successful_expectations": 2, "success_percent": 50.0,
                               "failed_expectations": ["expect_column_values_to_be_between[response_size]",
                                                       "expect_column_values_to_be_unique[id]"]}}
    assert expectations.ask(frame, {"response": 5}) == expected
    first = expectations.start_worker()
    # It answered, so it lowered its priority first: it yields the CPU to the run it serves.
    assert os.getpriority(os.PRIO_PROCESS, first.pid) == min(19, os.getpriority(os.PRIO_PROCESS, 0)
                                                             + expectations.WORKER_NICENESS)
    first.kill()
    first.wait()
    assert expectations.ask(frame, {"response": 5}) == expected  # a new worker answered
    assert expectations.start_worker().pid != first.pid


def test_a_stuck_worker_is_given_up_and_the_suite_runs_in_process():
    # The same hand-worked frame as above: the worker is stopped (SIGSTOP) so it never answers.
    frame = pd.DataFrame({"id": ["a", "a", "b"], "row": [0, 1, 2], "usable": [True] * 3,
                          "response_ok": [True] * 3, "response_size": [1, 6, 5]})
    stuck = expectations.start_worker()
    stuck.send_signal(signal.SIGSTOP)
    verdicts = expectations.ask(frame, {"response": 5}, timeout=1)
    assert verdicts["failed"] == ["id", "response_size"]
    assert stuck.poll() == -signal.SIGKILL  # killed, not left behind
    assert expectations.start_worker().pid != stuck.pid
