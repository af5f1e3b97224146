"""The great-expectations worker process of the quality suite (``assets.expectations``)."""
import pickle
import signal
import subprocess
import sys

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


def test_a_worker_whose_parent_is_gone_before_its_answer_ends_quietly():
    # A run that ends before GE answers (rag-eval exits at once): the worker finds nobody reading its answer
    # and ends with status 0, printing no traceback on the user's terminal.
    frame = pd.DataFrame({"id": ["a", "b"], "row": [0, 1], "usable": [True] * 2, "response_ok": [True] * 2,
                          "response_size": [1, 2]})
    worker = subprocess.Popen([sys.executable, "-m", "assets.expectations"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    pickle.dump((frame, {"response": 5}), worker.stdin)
    worker.stdin.flush()
    worker.stdout.close()  # the parent is gone: the answer's pipe has no reader
    worker.stdin.close()
    assert worker.wait(timeout=120) == 0
    assert b"Traceback" not in worker.stderr.read()
