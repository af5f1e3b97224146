"""great-expectations' suite of a version (``rag_eval.assets.expectations``) outside Dagster: the profile
it validates, the expectations that fail and how they name lines and fields, the Data Docs site,
and where great-expectations is imported."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from rag_eval.assets.data_docs import STORE_ID, repair_store_ids
from rag_eval.assets.expectations import CHECKS, profile, suite, validate
from rag_eval.assets.quality_check import failing_lines, relevance_labels

ROOT = Path(__file__).resolve().parents[2]
CORE = ["user_input", "response", "retrieved_contexts", "reference"]
RETRIEVAL = ["retrieval_ground_truth", "retrieved_documents"]


def _write(path: Path, lines: list) -> Path:
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line, ensure_ascii=False)) + "\n"
                            for line in lines), encoding="utf-8")
    return path


def _failing(outcomes: list[dict]) -> dict[str, list[str]]:
    """``{check: messages of its failing lines}`` for the checks that failed."""
    failed: dict[str, list[str]] = {}
    for outcome in outcomes:
        if not outcome["success"]:
            failed.setdefault(outcome["check"], []).extend(f["message"] for f in outcome["failing"])
    return failed


def test_the_profile_reads_each_line_as_written(tmp_path):
    # Line 1: aliases (question, answer, contexts), a reference given as a list, Chinese; line 2 blank (skipped);
    # line 3 not JSON; line 4: a number for a response, a single string for the contexts; line 5: relevance labels.
    path = _write(tmp_path / "samples.jsonl", [
        {"id": "a", "question": "什么是ETF？", "answer": "  一种基金。 ", "contexts": ["x", "y"],
         "ground_truth": ["A", "B"]},
        "",
        "{not json",
        {"id": "c", "user_input": "What is a bond?", "response": 7, "retrieved_contexts": "one context"},
        {"id": "d", "user_input": "q?", "retrieval_ground_truth": [{"document_id": "1", "query_relevance_label": 3},
                                                                 {"document_id": "2"}], "retrieved_documents": []},
    ])
    frame = profile(path, CORE)
    columns = ["line", "id", "record", "user_input_type", "response_type", "retrieved_contexts_type",
               "reference_type", "retrieval_ground_truth_type", "retrieved_documents_type", "user_input_chars", "response_chars",
               "reference_chars", "retrieved_contexts_count", "user_input_script", "relevance_labels"]
    rows = json.loads(frame[columns].astype(object).where(frame[columns].notna(), None).to_json(orient="values"))
    assert rows == [
        [1, "a", "JSON object", "string", "string", "list of strings", "list of strings", None, None, 7, 5, 3, 2,
         "CJK", None],
        [3, "unreadable-line-3", "not valid JSON: Expecting property name enclosed in double quotes (column 2)",
         None, None, None, None, None, None, None, None, None, None, None, None],
        [4, "c", "JSON object", "string", "number", "string", None, None, None, 15, None, None, 1, "Latin", None],
        [5, "d", "JSON object", "string", None, None, None, "list of objects", "empty list", 2, None, None, None,
         "Latin", [3, None]],
    ]
    # The digest covers the fields read: lines that differ only in a field not read are duplicates.
    same = _write(tmp_path / "same.jsonl", [{"user_input": "q", "response": "r", "reference": "x"},
                                            {"user_input": "q", "response": "r", "reference": "y"}])
    assert profile(same, ["user_input", "response"])["sample_digest"].nunique() == 1
    assert profile(same, CORE)["sample_digest"].nunique() == 2


def test_failures_name_the_line_and_the_field_and_count_them(tmp_path):
    # Worked out by hand. Ten lines; line 3 is not JSON; lines 2 and 9 share id "b"; line 4 has no response and
    # line 5 an empty one; line 6 a reference that is a number and 201 contexts; lines 7 and 8 are Chinese
    # questions (7 of 9 questions Latin: 78 % < 90 %); lines 9 and 10 are the same sample.
    good = {"user_input": "What is an ETF?", "response": "A fund.", "retrieved_contexts": ["c"], "reference": "r"}
    lines = [dict(good, id="a", user_input="What is a stock?"), dict(good, id="b"), "[1, 2]",
             {**{k: v for k, v in good.items() if k != "response"}, "id": "d", "user_input": "Why bonds?"},
             dict(good, id="e", response="   ", user_input="Why gold?"),
             dict(good, id="f", reference=12, retrieved_contexts=["c"] * 201, user_input="Why cash?"),
             dict(good, id="g", user_input="什么是股票？"), dict(good, id="h", user_input="什么是债券？"),
             dict(good, id="b", user_input="What is a fund?"), dict(good, id="j", user_input="What is a fund?")]
    frame = profile(_write(tmp_path / "samples.jsonl", lines), CORE)
    expectations = suite(frame, CORE, relevance_labels(["faithfulness"], {}))
    assert len(expectations) == 16
    assert {e.meta["check"] for e in expectations} == set(CHECKS) - {
        "retrieval_ground_truth_typed", "retrieved_documents_typed", "relevance_labels_allowed"}
    outcomes, page = validate(frame, expectations, "v1", "run-1", tmp_path / "data_docs")
    assert _failing(outcomes) == {
        "lines_are_json_objects": ["line 3: a JSON list, not an object"],
        "ids_unique": ["line 2 id: 'b' is also another line's id", "line 9 id: 'b' is also another line's id"],
        "no_duplicate_samples": ["line 9 user_input, response, retrieved_contexts, reference: the same as another "
                                 "line", "line 10 user_input, response, retrieved_contexts, reference: the same as "
                                 "another line"],
        "response_typed": ["line 4 response: missing"],
        "response_length": ["line 5 response: 0 characters, expected 1 to 100000"],
        "reference_typed": ["line 6 reference: type number, expected string or list of strings"],
        "contexts_per_row": ["line 6 retrieved_contexts: 201 contexts, expected 1 to 200"],
        "language_mix": ["line 7 user_input: in CJK script, most questions in Latin",
                         "line 8 user_input: in CJK script, most questions in Latin"],
    }
    severities = {o["check"]: CHECKS[o["check"]].severity for o in outcomes}
    assert severities["language_mix"] == "WARN" and severities["response_typed"] == "ERROR"
    assert page.is_file() and "run-1" in page.parts
    # One Chinese question of nine readable ones: 89 % in the dominant script, still under 90 %; none: it passes.
    lines[7] = dict(good, id="h", user_input="What is a bond?")
    frame = profile(_write(tmp_path / "samples.jsonl", lines), CORE)
    outcomes, _ = validate(frame, suite(frame, CORE, [0]), "v1", "run-2", tmp_path / "data_docs")
    assert _failing(outcomes)["language_mix"] == ["line 7 user_input: in CJK script, most questions in Latin"]
    lines[6] = dict(good, id="g", user_input="What is a share?")
    frame = profile(_write(tmp_path / "samples.jsonl", lines), CORE)
    outcomes, _ = validate(frame, suite(frame, CORE, [0]), "v1", "run-3", tmp_path / "data_docs")
    assert "language_mix" not in _failing(outcomes)


def test_relevance_labels_off_the_metrics_scale_fail_naming_the_line(tmp_path):
    # The document-retrieval metrics' scale is 0-4 by default; label_max=10 in the run config widens it.
    lines = [{"id": "q1", "retrieval_ground_truth": [{"document_id": "1", "query_relevance_label": 3}],
              "retrieved_documents": [{"document_id": "1", "relevance_score": 0.5}]},
             {"id": "q2", "retrieval_ground_truth": [{"document_id": "1", "query_relevance_label": 7},
                                                     {"document_id": "2", "query_relevance_label": "2"}],
              "retrieved_documents": []},
             {"id": "q3", "retrieval_ground_truth": [], "retrieved_documents": {"1": 0.5}}]
    frame = profile(_write(tmp_path / "samples.jsonl", lines), RETRIEVAL)
    assert relevance_labels(["ndcg", "faithfulness"], {}) == [0, 1, 2, 3, 4]
    expectations = suite(frame, RETRIEVAL, relevance_labels(["ndcg"], {}))
    assert len(expectations) == 3 + 2 * 2 + 1
    outcomes, _ = validate(frame, expectations, "v1", "run-1", tmp_path / "data_docs")
    assert _failing(outcomes) == {
        "relevance_labels_allowed": ["line 2 retrieval_ground_truth: labels [7, '2'], allowed 0 to 4"],
        "retrieval_ground_truth_typed": ["line 3 retrieval_ground_truth: type empty list, expected list of objects"],
        "retrieved_documents_typed": [
            "line 3 retrieved_documents: type object, expected list of objects or empty list"],
    }
    wide = relevance_labels(["ndcg"], {"ops": {"score_metrics": {"config": {"ndcg": {"label_max": 10}}}}})
    assert wide == list(range(11))
    outcomes, _ = validate(frame, suite(frame, RETRIEVAL, wide), "v1", "run-2", tmp_path / "data_docs")
    assert _failing(outcomes)["relevance_labels_allowed"] == [
        "line 2 retrieval_ground_truth: labels [7, '2'], allowed 0 to 10"]  # "2" is a string, not a label


def test_the_data_docs_site_lists_every_version_and_run(tmp_path, monkeypatch):
    # One site for every version: the second validation adds its page and keeps the first one's. The site's folder
    # is relative, as the code location's out/ is (GE's stores take absolute folders only).
    path = _write(tmp_path / "samples.jsonl", [{"user_input": "q?", "response": "r", "retrieved_contexts": ["c"],
                                                "reference": "x"}])
    frame = profile(path, CORE)
    monkeypatch.chdir(tmp_path)
    _, first = validate(frame, suite(frame, CORE, [0]), "v1", "run-1", Path("data_docs"))
    _, second = validate(frame, suite(frame, CORE, [0]), "v2", "run-2", Path("data_docs"))
    assert first.is_file() and second.is_file() and first != second
    index = (tmp_path / "data_docs" / "index.html").read_text(encoding="utf-8")
    for page in (first, second):
        assert page.relative_to(tmp_path / "data_docs").as_posix() in index
    text = second.read_text(encoding="utf-8")
    assert "rag_eval_samples" in text and "Evaluated Expectations" in text


@pytest.mark.parametrize("modules", [
    "rag_eval.orchestration.definitions", "rag_eval.orchestration.cli", "rag_eval.assets.quality_check",
])
def test_great_expectations_is_not_imported_until_the_suite_runs(modules):
    # Loading the code location, rag-eval's start-up and the check's module leave it out (~4 s of CPU).
    code = f"import sys, {modules}; print('great_expectations' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["False"]


def test_a_store_id_file_a_fault_left_half_written_is_repaired_on_the_next_run(tmp_path, capsys, caplog):
    good = {"user_input": "What is an ETF?", "response": "A fund.", "retrieved_contexts": ["c"], "reference": "r"}
    frame = profile(_write(tmp_path / "samples.jsonl", [dict(good, id="a"), dict(good, id="b", user_input="Why?")]),
                    CORE)
    site = tmp_path / "data_docs"
    validate(frame, suite(frame, CORE, [0]), "v1", "run-1", site)
    store_id = site / ".validation_results" / STORE_ID
    written = store_id.read_text(encoding="utf-8")
    assert written.startswith("store_backend_id = ")
    for damaged in ("", written[:25]):  # emptied, or cut short, as a full disk leaves it
        store_id.write_text(damaged, encoding="utf-8")
        capsys.readouterr()
        caplog.clear()
        outcomes, page = validate(frame, suite(frame, CORE, [0]), "v1", "run-2", site)
        printed = capsys.readouterr()
        assert "Invalid store configuration" not in printed.out + printed.err + caplog.text
        assert page.is_file() and {o["check"] for o in outcomes if not o["success"]} == set()
        assert repair_store_ids(site) == [] and store_id.read_text(encoding="utf-8").startswith("store_backend_id = ")
    assert len(list((site / ".validation_results").rglob("*.json"))) >= 3  # every run's result kept


def test_a_validation_result_a_fault_left_cut_short_is_set_aside_on_the_next_run(tmp_path, capsys):
    frame = profile(_write(tmp_path / "samples.jsonl", [{"user_input": "q?", "response": "r",
                                                         "retrieved_contexts": ["c"], "reference": "x"}]), CORE)
    site = tmp_path / "data_docs"
    validate(frame, suite(frame, CORE, [0]), "v1", "run-1", site)
    [result] = (site / ".validation_results").rglob("*.json")
    whole = result.read_text(encoding="utf-8")
    result.write_text(whole[:50], encoding="utf-8")  # cut short, as a full disk leaves it
    capsys.readouterr()
    _, page = validate(frame, suite(frame, CORE, [0]), "v1", "run-2", site)
    printed = capsys.readouterr()
    aside = tmp_path / "data_docs.unusable" / result.relative_to(site)
    assert aside.read_text(encoding="utf-8") == whole[:50] and not result.exists()
    assert printed.err == (f"Data Docs: a validation result a fault left cut short was set aside as {aside}; this run "
                           "adds its own\n") and "Validation result not found" not in printed.out
    [kept] = (site / ".validation_results").rglob("*.json")
    assert json.loads(kept.read_text(encoding="utf-8"))["meta"]["run_id"]["run_name"] == "run-2" and page.is_file()


def test_a_check_of_two_expectations_names_its_failing_lines_in_line_order(tmp_path):
    # Ten good lines but line 4's response is a number (response_typed's in-set expectation) and line 10 has
    # none (its not-null expectation, declared first): the check tells line 4, then line 10, as numbers
    # sort, whichever expectation found each (the two expectations' lists one after the other gave 10, 4).
    good = {"response": "A fund.", "retrieved_contexts": ["c"], "reference": "r"}
    lines = [dict(good, id=f"q{i}", user_input=f"What is fund {i}?") for i in range(1, 11)]
    lines[3]["response"] = 7
    del lines[9]["response"]
    frame = profile(_write(tmp_path / "samples.jsonl", lines), CORE)
    outcomes, _ = validate(frame, suite(frame, CORE, [0]), "v1", "run-1", tmp_path / "data_docs")
    failed = [o for o in outcomes if o["check"] == "response_typed" and not o["success"]]
    assert [f["message"] for f in failing_lines(failed)] == ["line 4 response: type number, expected string",
                                                            "line 10 response: missing"]
    assert failing_lines([]) == []
