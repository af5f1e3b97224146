"""A run the daemon launches has no command around it: the code location's job and resources on a judgement
cache that cannot take writes keep every answer paid for in a spill file, say so in the run's log, and the next
``rag-eval run`` with that cache folds it in and buys nothing again (issue 36)."""
import shutil
import warnings

import dagster as dg

from rag_eval.metrics.core.registry import builtin_registry
from rag_eval.orchestration import cli
from rag_eval.orchestration.location import build_definitions
from tests.conftest import FIQA, TEST_KEY


def test_a_code_location_run_on_a_full_cache_spills_says_so_and_the_next_run_buys_nothing_again(
        tmp_path, monkeypatch, server, capsys):
    monkeypatch.chdir(tmp_path)
    for name, value in {"OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": TEST_KEY, "OPENAI_MODEL": "judge-test",
                        "EMBEDDING_MODEL": "embed-test", "DAGSTER_HOME": str(tmp_path / "home")}.items():
        monkeypatch.setenv(name, value)
    (tmp_path / "datasets" / "v1").mkdir(parents=True)
    (tmp_path / "rows.jsonl").write_text("".join(FIQA.read_text(encoding="utf-8").splitlines(True)[:3]),
                                         encoding="utf-8")
    shutil.copyfile(tmp_path / "rows.jsonl", tmp_path / "datasets" / "v1" / "samples.jsonl")
    definitions = build_definitions(builtin_registry())  # as the code location loads in this folder
    judge = definitions.resources["judge"].get_judge()  # the one the run's copy of the resource uses
    judge.cache._db.execute("PRAGMA max_page_count = 1")  # SQLITE_FULL, as a full disk
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("dataset_version", ["v1"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = definitions.resolve_job_def("evaluation_job").execute_in_process(
            partition_key="v1", instance=instance, raise_on_error=False)
    judge.close()
    assert result.success
    paid = len(server.seen)
    [spill] = (tmp_path / "out").glob("judgement-spill-*.jsonl")
    spilled = len(spill.read_text(encoding="utf-8").splitlines()) - 1  # the header, then an answer a line
    assert paid > 0 and spilled > 0
    [said] = [e.user_message for e in instance.all_logs(result.run_id) if e.level == 30 and "spill" in e.user_message]
    assert said.startswith("the judgement cache could not take every judgement paid for (its disk is full or "
                           f"read-only): they are in the spill file(s) {spill}; the next `")

    # The same rows as another version, by rag-eval: the spill is folded in first, and nothing is bought again.
    assert cli.main(["run", "rows.jsonl", "--dataset-version", "v2"]) == 0
    assert len(server.seen) == paid
    assert f"note: {spilled} judgements paid for by an earlier run folded from the spill file {spill}" in \
        capsys.readouterr().err and not spill.exists()
