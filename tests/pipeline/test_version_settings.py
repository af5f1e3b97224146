"""A version's ``settings.json`` is read bounded and validated: a hostile or broken file (not JSON, not an
object, a share out of [0, 1], a symbolic link, a device, a huge file) is one ``error:`` line naming the
file and the fix, exit status 2, never a traceback or a nonsense limit; inside a Dagster step it fails the
step with that line."""
import os

import pytest

from rag_eval.assets.resources import MAX_SETTINGS_BYTES
from rag_eval.metrics.errors import EXIT_USER, command

from tests.pipeline import test_errors_and_bugs

project = test_errors_and_bugs.project  # the fixture: a folder with s.jsonl, the working directory, its own DAGSTER_HOME


def fix(folder) -> str:
    """The fix each refusal ends with (``command``: the hint as it can be typed in the working directory)."""
    return f"delete it, then give the share again: {command(f'register {folder} --max-rejected-share SHARE')}"


SHARE = "max_rejected_share must be a number from 0 to 1, got {got}"


@pytest.mark.parametrize(("content", "problem"), [
    ("not json", "not valid JSON (Expecting value: line 1 column 1 (char 0))"),
    ('"0.3"', 'must hold a JSON object such as {"max_rejected_share": 0.3}, got str'),
    ("[1]", 'must hold a JSON object such as {"max_rejected_share": 0.3}, got list'),
    ('{"max_rejected_share": "abc"}', SHARE.format(got='"abc"')),
    ('{"max_rejected_share": -1}', SHARE.format(got="-1")),
    ('{"max_rejected_share": NaN}', SHARE.format(got="NaN")),
    ('{"max_rejected_share": Infinity}', SHARE.format(got="Infinity")),
    ('{"max_rejected_share": 1.5}', SHARE.format(got="1.5")),
    ('{"max_rejected_share": true}', SHARE.format(got="true")),
    ("\xff", "not valid JSON ('utf-8' codec can't decode byte 0xff in position 0: invalid start byte)"),
])
def test_a_broken_settings_file_is_one_line_naming_it_and_the_fix(project, capsys, content, problem):
    from rag_eval.orchestration import cli

    assert cli.main(["register", "s.jsonl", "--dataset-version", "v1"]) == 0
    path = project / "datasets" / "v1" / "settings.json"
    path.write_bytes(content.encode("latin-1"))
    capsys.readouterr()
    assert cli.main(["run", "s.jsonl", "--dataset-version", "v1", "--force"]) == EXIT_USER
    folder = project / "datasets" / "v1"
    assert capsys.readouterr().err == f"error: {path}: {problem}; {fix(folder)}\n"


@pytest.mark.parametrize("target", ["/etc/passwd", "/dev/zero", "a real settings file"])
def test_a_settings_file_that_is_a_symbolic_link_is_refused_unread(project, capsys, target):
    from rag_eval.orchestration import cli

    assert cli.main(["register", "s.jsonl", "--dataset-version", "v1"]) == 0
    folder = project / "datasets" / "v1"
    if target == "a real settings file":  # even to a valid file: rag-eval writes this file itself, never a link
        target = str(project / "elsewhere.json")
        (project / "elsewhere.json").write_text('{"max_rejected_share": 0.3}', encoding="utf-8")
    (folder / "settings.json").symlink_to(target)
    capsys.readouterr()
    assert cli.main(["run", "s.jsonl", "--dataset-version", "v1", "--force"]) == EXIT_USER
    assert capsys.readouterr().err == (f"error: {folder / 'settings.json'}: a symbolic link, which rag-eval does not "
                                       f"follow here: refused; {fix(folder)}\n")


def test_a_huge_settings_file_or_a_folder_is_refused_without_reading_it(project, capsys):
    from rag_eval.orchestration import cli

    assert cli.main(["register", "s.jsonl", "--dataset-version", "v1"]) == 0
    folder = project / "datasets" / "v1"
    path = folder / "settings.json"
    with open(path, "wb") as file:  # 300 MB, sparse: reading it whole would take 300 MB of memory
        file.truncate(300 * 1024 * 1024)
    capsys.readouterr()
    assert cli.main(["run", "s.jsonl", "--dataset-version", "v1", "--force"]) == EXIT_USER
    assert capsys.readouterr().err == (f"error: {path}: 314,572,800 bytes, more than a configuration file may hold "
                                       f"({MAX_SETTINGS_BYTES:,}): refused; {fix(folder)}\n")
    os.remove(path)
    path.mkdir()
    assert cli.main(["run", "s.jsonl", "--dataset-version", "v1", "--force"]) == EXIT_USER
    assert capsys.readouterr().err == (f"error: {path}: not a regular file (a folder, a device or a pipe): refused; "
                                       f"{fix(folder)}\n")


def test_the_bounds_of_the_share_and_null_are_accepted(project):
    from rag_eval.assets.resources import DatasetStore

    store = DatasetStore(root=str(project / "datasets"))
    (project / "datasets" / "v1").mkdir(parents=True)
    path = project / "datasets" / "v1" / "settings.json"
    for text, values in [('{"max_rejected_share": 0}', {"max_rejected_share": 0}),
                         ('{"max_rejected_share": 1}', {"max_rejected_share": 1}),
                         ('{"max_rejected_share": null}', {"max_rejected_share": None}), ("{}", {})]:
        path.write_text(text, encoding="utf-8")
        assert store.settings("v1") == values
    assert store.settings("v2") == {}  # no settings file: none


def test_a_launch_without_the_cli_fails_the_ingestion_step_with_the_same_line(project):
    """A launch from the UI, a backfill or the automation reads settings.json in the ingestion step: the step
    fails with the one line (not a retry, not a nonsense limit); the rows it stored before stay stored."""
    import dagster as dg

    from rag_eval.orchestration.failures import run_failures
    from tests.pipeline.conftest import Project

    with dg.instance_for_test() as instance:
        pipeline = Project(project, instance)
        pipeline.write("v1", [{"id": "a", "user_input": "What is an ETF?", "response": "A fund."}])
        path = pipeline.datasets / "v1" / "settings.json"
        path.write_text('{"max_rejected_share": -1}', encoding="utf-8")
        result = pipeline.run("v1")
        [(where, error)] = run_failures(result)
        assert not result.success and where == "step ingest_dataset"
        assert error.message.rstrip("\n").endswith(
            f"{path}: {SHARE.format(got='-1')}; {fix(path.parent)}")
        assert result.output_for_node("ingest_dataset", "questions") is not None


def test_register_takes_its_arguments_as_values_and_keeps_the_share_with_the_version(project):
    """``register`` reads no command line: the file, key and share are values (issue 36)."""
    import dagster as dg

    from rag_eval.assets.resources import DatasetStore
    from rag_eval.orchestration.commands import register

    store = DatasetStore(root=str(project / "datasets"))
    with dg.DagsterInstance.ephemeral() as instance:
        assert register(instance, "datasets", "s.jsonl", "v1", max_rejected_share=0.3) == ("v1", True)
        assert store.settings("v1") == {"max_rejected_share": 0.3}
        assert register(instance, "datasets", "s.jsonl", "v1") == ("v1", False)  # the same file: already registered
        assert store.settings("v1") == {"max_rejected_share": 0.3}  # no share given: the version's is kept
        assert register(instance, "datasets", "s.jsonl", "v1", max_rejected_share=0) == ("v1", False)
        assert store.settings("v1") == {"max_rejected_share": 0} and instance.get_dynamic_partitions(
            "dataset_version") == ["v1"]
