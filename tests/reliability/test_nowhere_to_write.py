"""Storage faults where nothing can be written anywhere: the judgement cache, ``--out`` and the
system's temporary folder (``TMPDIR``) all on one small disk that fills mid-run (``tests/small_disk.py``).

What the user must see: every line names its path (pyarrow's and great-expectations' errors name
none), the last one says that the answers paid for could be written nowhere, naming the cache and
both spill folders, the exit status is the storage error's (2), and no empty spill file is left.
And ``--dry-run`` says when the real run would be refused, writing nothing."""
import re

import pytest

from tests.reliability.figures import fault_row
from tests.reliability.test_storage_faults import PER_ROW, Project, errors, fill_at_request
from tests.small_disk import SmallDisk

pytestmark = pytest.mark.slow  # the test server, Dagster runs


@pytest.fixture
def disk(tmp_path):
    mounted = SmallDisk(tmp_path / "disk", "16m")
    yield mounted
    mounted.stop()


def test_cache_out_and_tmpdir_full_is_one_line_naming_them_and_the_storage_status(tmp_path, disk, server):
    tmp = disk.root / "tmp"
    project = Project(tmp_path, disk, server, disk.root / "out", tmp_path / "home", cache=disk.root / "cache.sqlite",
                      tmp=tmp)
    disk.view(tmp).mkdir()
    status, stderr = project.run("a.jsonl", "v1")
    assert status == 0, stderr[-3000:]
    site_id = project.out / "data_docs" / ".validation_results" / ".ge_store_backend_id"
    disk.view(site_id).unlink()  # as on a first run: great-expectations' store has to write its id on the full disk
    fill_at_request(server, disk, PER_ROW * 3 + 9)  # half-way through v2's judging
    status, stderr = project.run("b.jsonl", "v2")
    assert status == 2, stderr[-3000:]
    said = errors(stderr)
    assert "Invalid store configuration" not in stderr, stderr[-3000:]
    assert said and all(str(disk.root) in line for line in said), said  # each line names where it could not write
    assert f"step great_expectations_suite failed: {site_id}: No space left on device; free space on that disk" in \
        stderr, stderr[-3000:]
    assert f"step score_metrics failed: {tmp}/rag-eval-results-" in stderr and "a results file in the temporary " \
        "folder could not be written (No space left on device); TMPDIR names another folder for them" in stderr
    line = said[-1]
    lost = int(re.match(rf"error: {re.escape(str(project.cache))}: (\d+) judgements paid for could not be written to "
                        r"the cache \(no space left on the disk", line)[1])
    assert f"nor to a spill file ({project.out}: no space left on the disk" in line and \
        f"; {tmp}: no space left on the disk" in line and \
        line.endswith("they are lost: free space on one of these disks before the next run; no judgement was bought "
                      "after that (the rest are judge_error: not sent)"), line
    assert not list(disk.view(project.out).glob("judgement-spill-*")) and not list(disk.view(tmp).glob("judgement-spill-*"))
    fault_row("judgement cache, out/ and TMPDIR full mid-run", line, 0, lost, 0, 0)


def test_the_dry_run_says_the_run_would_be_refused_and_writes_nothing(tmp_path, disk, server):
    project = Project(tmp_path, disk, server, tmp_path / "out", tmp_path / "home", cache=disk.root / "cache.sqlite")
    refused = f"the run would be refused before its first request: {project.cache}: the judgement cache cannot take " \
              "writes: {}; nothing was sent: free space on its disk (or make it writable), or put the cache on another " \
              "disk with --cache-path FILE, then run again"
    for make, undo, cause in ((disk.read_only, disk.writable, "read-only file system"),
                              (disk.fill, disk.free, "no space left on the disk")):
        make()
        assert project.run_with("a.jsonl", "v1", "--dry-run") == (0, "")
        assert refused.format(cause) in project.stdout.splitlines(), project.stdout
        undo()
    assert project.run_with("a.jsonl", "v1", "--dry-run") == (0, "")
    assert "refused" not in project.stdout and "total" in project.stdout
    assert sorted(p.name for p in disk.view(disk.root).iterdir()) == [] and server.seen == []  # no cache was made
