"""Results and fields read and written chunk by chunk (rag_eval.assets.stored_results, the ingestion) hold the
same content as the whole frames they replace."""
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import dagster as dg
import duckdb
import pandas as pd
import pytest
import pyarrow.parquet as pq

from rag_eval.assets.evaluation import FieldSamples
from rag_eval.assets.results_store import PartitionFiles, table_file, write_frame
from rag_eval.assets.ingestion import ContentDigest, content_version, samples_from_fields
from rag_eval.assets.stored_results import (READ_ROWS, ResultWriter, StoredTable, write_ragas_csv_by_chunks,
                                   write_results_parquet)
from rag_eval.metrics.reports.formats import ragas_table, write_ragas_csv
from rag_eval.metrics.core.scoring import RESULT_COLUMNS, with_turns

FIQA = Path(__file__).resolve().parents[2] / "examples" / "fiqa" / "samples.jsonl"


def results(metric: str, rows: int, unjudged: int = 0) -> pd.DataFrame:
    """``rows`` results of ``metric``, the last ``unjudged`` of them judge errors (no value, no pass/fail),
    typed as ``results_frame`` types them (single-turn rows: no conversation, no turn)."""
    ok = rows - unjudged
    return with_turns(pd.DataFrame({
        "sample_id": [f"s{i}" for i in range(rows)], "row": range(rows), "metric": metric,
        "status": ["ok"] * ok + ["judge_error"] * unjudged, "value": [i / rows for i in range(ok)] + [None] * unjudged,
        "passed": pd.array([i % 2 == 0 for i in range(ok)] + [None] * unjudged, dtype="boolean"),
        "threshold": 0.5, "direction": "higher_is_better", "reason": [f"reason {i}" for i in range(rows)],
        "details": [f'{{"i": {i}}}' for i in range(rows)], "judge": "offline-heuristic", "chat_requests": 0,
        "embedding_requests": 0, "prompt_tokens": 0, "completion_tokens": 0, "cache_hits": range(rows),
        "shared_hits": 0},
        columns=RESULT_COLUMNS))


def stored(root: Path, name: str, frame: pd.DataFrame) -> StoredTable:
    """``frame`` stored as the results store stores a DataFrame (partition ``v1`` of table ``name`` under
    ``root``), as the store finds it."""
    path = table_file(root, name, "v1")
    path.parent.mkdir(parents=True, exist_ok=True)
    write_frame(frame, path)
    with duckdb.connect() as connection:
        return PartitionFiles(root).stored(connection, "v1", [name])[name]


def test_results_parquet_written_by_chunks_is_the_whole_frames_file(tmp_path):
    # the rows cross read chunks; the second metric has rows without pass/fail (boolean, not bool)
    first = results("faithfulness", READ_ROWS + 4_520).assign(version="v1")
    second = results("context_recall", 3, unjudged=1).assign(version="v1")
    tables = [stored(tmp_path, "faithfulness", first), stored(tmp_path, "recall", second)]
    with duckdb.connect() as connection:
        whole = with_turns(pd.concat([t.frame(connection) for t in tables], ignore_index=True).drop(columns="version"))
        whole.to_parquet(tmp_path / "whole.parquet", index=False)
        write_results_parquet(connection, tables, tmp_path / "chunks.parquet")
    expected, got = pq.read_table(tmp_path / "whole.parquet"), pq.read_table(tmp_path / "chunks.parquet")
    assert got.num_rows == READ_ROWS + 4_523
    assert got.equals(expected) and got.schema.equals(expected.schema, check_metadata=True)
    assert str(pd.read_parquet(tmp_path / "chunks.parquet")["passed"].dtype) == "boolean"


def test_results_stored_before_conversations_read_with_empty_turns_beside_a_conversations(tmp_path):
    older = results("faithfulness", 3).drop(columns=["conversation_id", "turn"]).assign(version="v1")
    turns = results("recall", 2).assign(version="v1", row=[0, 0], conversation_id="c", turn=[1, 2])
    tables = [stored(tmp_path, "faithfulness", older), stored(tmp_path, "recall", turns)]
    with duckdb.connect() as connection:
        write_results_parquet(connection, tables, tmp_path / "results.parquet")
    got = pd.read_parquet(tmp_path / "results.parquet")
    assert str(got["conversation_id"].dtype) == "string" and str(got["turn"].dtype) == "Int64"
    assert got["turn"].isna().tolist() == [True] * 3 + [False] * 2 and got["turn"].tolist()[3:] == [1, 2]
    assert got["conversation_id"].tolist()[3:] == ["c", "c"]


def test_a_lines_turns_are_read_together_whatever_the_slice(tmp_path):
    # line 1 holds three turns, stored out of order: slices of two rows cut through it, and each is read once, in order
    frame = pd.DataFrame({"id": ["a", "c/1", "c/2", "c/3", "b"], "row": [0, 1, 1, 1, 2], "user_input": "q",
                          "problem": None, "unreadable": None, "version": "v1", "conversation_id": [None, "c", "c", "c", None],
                          "turn": pd.array([None, 1, 2, 3, None], dtype="Int64")}).iloc[[0, 2, 3, 1, 4]]
    table = stored(tmp_path, "questions", frame)
    with duckdb.connect() as connection:
        read = [table.rows_at(connection, start, start + 2)["id"].tolist() for start in (0, 2, 4)]
    assert read == [["a", "c/1"], ["c/2", "c/3"], ["b"]]


def test_compact_results_keep_details_of_input_errors_and_reasons_of_unscored_rows_only(tmp_path):
    frame = results("faithfulness", 3).assign(version="v1", status=["ok", "input_error", "ok"])
    table = stored(tmp_path, "faithfulness", frame)
    with duckdb.connect() as connection:
        compact = table.frame(connection, compact=True)
    assert list(compact.columns) == [*RESULT_COLUMNS, "version"]
    assert list(compact["details"]) == [None, '{"i": 1}', None]
    assert list(compact["reason"]) == [None, "reason 1", None]


def test_compact_results_read_by_chunks_are_the_whole_table_with_each_repeated_text_held_once(tmp_path):
    # two read chunks, pass/fail missing in the second only: the whole table's dtypes (passed: boolean)
    first = results("faithfulness", READ_ROWS + 10, unjudged=2).assign(version="v1")
    second = results("context_recall", 5).assign(version="v1")
    tables = [stored(tmp_path, "faithfulness", first), stored(tmp_path, "recall", second)]
    with duckdb.connect() as connection:
        whole, compact = tables[0].frame(connection), tables[0].frame(connection, compact=True)
        other = tables[1].frame(connection, compact=True)
    expected = whole.assign(reason=whole["reason"].where(whole["status"] != "ok", None), details=None)
    assert compact.equals(expected) and list(compact.dtypes) == list(expected.dtypes)
    assert str(compact["passed"].dtype) == "boolean" and len(compact) == READ_ROWS + 10
    assert compact["metric"][0] is compact["metric"][READ_ROWS + 5]  # one object, not one per row
    assert compact["sample_id"][3] is other["sample_id"][3]  # shared between the tables too


def test_result_writer_reads_back_the_frames_it_was_given(tmp_path):
    writer = ResultWriter("v1")
    parts = [results("faithfulness", 4), results("faithfulness", 3, unjudged=1)]
    for part in parts:
        writer.write(part)
    written = writer.close()
    expected = pd.concat(parts, ignore_index=True)
    expected.insert(0, "version", "v1")
    assert len(written) == 7 and written.frame().equals(expected)
    assert dict(written.dtypes)["passed"] == "boolean"
    written.path.unlink()


def test_field_samples_by_slices_are_the_whole_versions_samples(tmp_path):
    # rows stored out of order and with a gap (a blank line); two fields, one with a problem
    rows = [3, 0, 1, 5]
    questions = pd.DataFrame({"id": [f"q{r}" for r in rows], "row": rows, "user_input": [f"question {r}" for r in rows],
                              "problem": [None, None, "user_input is not a string", None], "unreadable": None,
                              "version": "v1"})
    contexts = pd.DataFrame({"id": [f"q{r}" for r in rows], "row": rows,
                             "retrieved_contexts": [f'["context {r}"]' for r in rows], "problem": None,
                             "unreadable": None, "version": "v1"})
    fields = FieldSamples.stored({"user_input": stored(tmp_path, "questions", questions),
                                  "retrieved_contexts": stored(tmp_path, "contexts", contexts)},
                                 duckdb.connect)
    whole = samples_from_fields({"user_input": questions, "retrieved_contexts": contexts})
    assert [s.row for s in whole] == [0, 1, 3, 5]
    assert len(fields) == 4 and fields[0:2] + fields[2:4] == whole and list(fields) == whole
    assert fields[-1] == whole[3] and fields[1].problems == {"user_input": "user_input is not a string"}
    # one field alone, from the same slices: what that field's table alone builds (no contexts, its problem kept)
    alone = fields.only(("user_input",))
    assert list(alone) == samples_from_fields({"user_input": questions}) != whole
    assert alone[1].retrieved_contexts is None and alone[1].problems == {"user_input": "user_input is not a string"}


def test_ragas_csv_written_by_chunks_is_the_whole_tables_file(tmp_path):
    lines = READ_ROWS + 7  # two chunks; a text with a comma, a quote and a line break must stay one record
    texts = {f: pd.DataFrame({"id": [f"s{i}" for i in range(lines)], "row": range(lines),
                              f: [f'{f} {i}, "quoted"\nnext' for i in range(lines)], "problem": None,
                              "unreadable": None, "version": "v1"})
             for f in ("user_input", "response", "retrieved_contexts", "reference")}
    scored = pd.concat([results("faithfulness", lines, unjudged=3), results("context_recall", lines)], ignore_index=True)
    columns = ["row", "user_input", "retrieved_contexts", "response", "reference"]
    merged = texts["user_input"][["row", "user_input"]]
    for f in ("response", "retrieved_contexts", "reference"):
        merged = merged.merge(texts[f][["row", f]], on="row", how="outer")
    write_ragas_csv(ragas_table(scored, merged[columns]), tmp_path / "whole.csv")
    tables = {f: stored(tmp_path, f, frame) for f, frame in texts.items()}
    with duckdb.connect() as connection:
        write_ragas_csv_by_chunks(connection, scored, tables, columns, tmp_path / "chunks.csv")
    whole = (tmp_path / "whole.csv").read_bytes()
    assert whole.count(b"\r\n") == lines + 1 and (tmp_path / "chunks.csv").read_bytes() == whole


def test_a_version_replaced_while_it_is_judged_fails_the_step_naming_the_change(tmp_path):
    # the metric step reads its fields chunk by chunk: a re-registration between two chunks
    # (3 lines replaced by 2) must stop it, not judge a mix of the two contents or lose a line
    questions = pd.DataFrame({"id": ["a", "b", "c"], "row": [0, 1, 2], "user_input": ["q0", "q1", "q2"],
                              "problem": None, "unreadable": None, "version": "v1"})
    fields = FieldSamples.stored({"user_input": stored(tmp_path, "questions", questions)}, duckdb.connect)
    assert [s.user_input for s in fields[0:1]] == ["q0"]
    stored(tmp_path, "questions", questions[questions["row"] != 2])  # its file replaced, as a new ingestion does
    with pytest.raises(dg.Failure, match=r"changed while it was being evaluated \(user_input: 3 rows at the start, "
                                         r"2 now; was it registered again\?\)"):
        fields[1:3]


def test_a_killed_writers_results_file_is_removed_by_the_next_writer(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    orphan = tmp_path / f"rag-eval-results-{int(dead.stdout)}-x.parquet"  # a process that is gone
    alive = tmp_path / f"rag-eval-results-{os.getppid()}-y.parquet"  # one that still runs
    orphan.write_bytes(b"judged rows"), alive.write_bytes(b"judged rows")
    writer = ResultWriter("v1")
    assert not orphan.exists() and alive.exists()
    assert writer.path.parent == tmp_path and writer.path.name.startswith(f"rag-eval-results-{os.getpid()}-")
    writer.discard()


def test_ingestion_by_chunks_stores_every_line_and_each_bad_line_with_its_reason(tmp_path, monkeypatch):
    # read two lines at a time: an unreadable line, a line lacking its response, a blank line (no row) and a
    # line no metric can use fall in different chunks; the tables and data versions are those of one chunk
    import rag_eval.assets.ingestion
    from rag_eval.orchestration.records import DATA_VERSION_TAG, latest_record
    from tests.pipeline.conftest import Project

    good = [json.loads(line) for line in FIQA.read_text(encoding="utf-8").splitlines()[:3]]
    lines = [json.dumps(good[0]), "{not json", json.dumps({k: v for k, v in good[1].items() if k != "response"}), "",
             json.dumps({"id": "nothing-usable", "user_input": "What is an ETF?"}), json.dumps(good[2])]
    fields = ["questions", "responses", "retrieved_contexts", "references"]
    tables, versions = {}, {}
    with dg.instance_for_test() as instance:
        project = Project(tmp_path, instance)
        for version, lines_at_once in (("chunks", 2), ("whole", 10_000)):
            monkeypatch.setattr(rag_eval.assets.ingestion, "READ_LINES", lines_at_once)
            project.write(version, [])
            (project.datasets / version / "samples.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
            result = project.materialize(version, dg.AssetSelection.groups("ingestion"), run_config={
                "ops": {"ingest_dataset": {"config": {"max_rejected_share": 0.5}}}})
            assert result.success
            tables[version] = {t: project.query(f"select * exclude (version) from eval.{t} where version = '{version}' "
                                                "order by row") for t in [*fields, "rejected_samples"]}
            versions[version] = {t: latest_record(instance, t, version).asset_materialization.tags[DATA_VERSION_TAG]
                                 for t in fields}
    chunked = tables["chunks"]
    for table in fields:
        assert chunked[table]["row"].tolist() == [0, 1, 2, 4, 5] and chunked[table].equals(tables["whole"][table])
        assert chunked[table]["unreadable"].notna().tolist() == [False, True, False, False, False]
    assert chunked["questions"]["unreadable"][1].startswith("not valid JSON")
    assert chunked["responses"]["response"].isna().tolist() == [False, True, True, True, False]
    assert versions["chunks"] == versions["whole"] and None not in versions["chunks"].values()
    rejected = chunked["rejected_samples"]
    assert rejected[["row", "line", "id"]].to_dict("records") == [{"row": 1, "line": 2, "id": "unreadable-line-2"},
                                                                   {"row": 4, "line": 5, "id": "nothing-usable"}]
    assert rejected["reason"][0].startswith("not valid JSON") and rejected["sample"][0] == "{not json"
    assert rejected["reason"][1] == ("no selected metric can use it: response: missing; retrieved_contexts: missing; "
                                     "reference: missing")
    assert rejected.equals(tables["whole"]["rejected_samples"])


def test_a_content_digest_fed_by_chunks_is_the_whole_frames(tmp_path):
    frame = pd.DataFrame({"id": ["a", "b", "c", "d"], "text": pd.array(["x", None, "中文", "y"], dtype="string")})
    pairs = [["a", "x"], ["b", pd.NA], ["c", "中文"], ["d", "y"]]
    expected = hashlib.sha256(json.dumps(pairs, ensure_ascii=True, default=str).encode()).hexdigest()[:16]
    assert content_version(frame, ["text"]) == dg.DataVersion(expected)
    digest = ContentDigest().update(frame[:1], ["text"]).update(frame[1:1], ["text"]).update(frame[1:], ["text"])
    assert digest.version() == dg.DataVersion(expected)
