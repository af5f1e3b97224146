"""Storage faults in great-expectations' step (issue 37): ``out/data_docs`` on a real small disk
(``tests/small_disk.py``: a tmpfs mounted at that folder in a private namespace) fills up as judging
ends, so the expectation step meets a full disk while the rows, the reports and the judgement cache
(elsewhere) are written. One line names the path and the way out; no row and no paid judgement is
lost; once space returns the next run succeeds, sends nothing, and the site is whole again."""
import pytest

from tests.reliability.figures import fault_row
from tests.reliability.test_storage_faults import PER_ROW, Project, cached, errors, fill_at_request, rows
from tests.small_disk import SmallDisk

pytestmark = pytest.mark.slow  # the test server, Dagster runs

METRICS = ("faithfulness", "context_recall", "answer_relevancy", "context_precision", "context_relevancy")


@pytest.fixture
def docs_disk(tmp_path):
    mounted = SmallDisk(tmp_path / "out" / "data_docs", "32m")
    yield mounted
    mounted.stop()


def test_out_filling_during_the_expectation_step_loses_nothing_and_the_next_run_succeeds(tmp_path, docs_disk,
                                                                                        server):
    project = Project(tmp_path, docs_disk, server, tmp_path / "out", tmp_path / "home")
    fill_at_request(server, docs_disk, PER_ROW * 3)  # the last judgement of a.jsonl: the expectation step runs after
    status, stderr = project.run("a.jsonl", "v1")
    paid = cached(project)
    assert status == 1 and len(server.seen) == PER_ROW * 3 and paid >= PER_ROW * 3 - 3, stderr[-3000:]
    [line] = errors(stderr)
    site = tmp_path / "out" / "data_docs"
    assert line.startswith(f"step great_expectations_suite failed: {site}") and \
        ": No space left on device; free space on that disk, then run the same command again (every judgement " \
        "already answered is kept in the judgement cache)" in line and "Errno" not in line, stderr[-3000:]
    for table in METRICS:  # every row scored and stored, beside the full disk
        assert rows(project, table) == {"v1": 3}, table
    fault_row("out/ (data_docs/) fills during the expectation step", line, 0, 0, 0, 0)
    docs_disk.free()
    status, stderr = project.run("a.jsonl", "v1")
    assert status == 0 and errors(stderr) == [], stderr[-3000:]
    assert len(server.seen) == PER_ROW * 3 and cached(project) == paid  # nothing asked again, nothing lost
    assert "<html" in docs_disk.view(site / "index.html").read_text(encoding="utf-8").lower()
