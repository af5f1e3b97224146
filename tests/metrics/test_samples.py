"""Loading samples: aliases, user mapping, normalisation, problems, ids and file formats."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import ScriptedJudge
from rag_eval.metrics.rag.faithfulness import Faithfulness
from rag_eval.metrics.core.results import Status
from rag_eval.metrics.core.samples import iter_samples, load_samples, sample_from_dict
from rag_eval.metrics.core.usable import unavailable

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parents[1] / "data"


# --------------------------------------------------------------------------- aliases


@pytest.mark.parametrize("alias", ["user_input", "prompt", "question", "query", "input"])
def test_user_input_aliases(alias):
    assert sample_from_dict({alias: "What is RAG?"}, 0).user_input == "What is RAG?"


@pytest.mark.parametrize("alias", ["response", "content", "answer", "actual_output"])
def test_response_aliases(alias):
    assert sample_from_dict({alias: "Retrieval-augmented generation."}, 0).response == "Retrieval-augmented generation."


@pytest.mark.parametrize("alias", ["retrieved_contexts", "context", "contexts", "retrieval_context"])
def test_retrieved_contexts_aliases(alias):
    assert sample_from_dict({alias: ["c1", "c2"]}, 0).retrieved_contexts == ["c1", "c2"]


@pytest.mark.parametrize("alias", ["reference", "expected_output", "ground_truth", "ground_truths"])
def test_reference_aliases(alias):
    assert sample_from_dict({alias: "The answer."}, 0).reference == "The answer."


def test_same_field_given_twice_with_different_values_is_malformed():
    s = sample_from_dict({"question": "alias", "user_input": "canonical"}, 3)
    assert s.user_input is None
    assert s.problems == {"user_input": "given twice with different values, as 'user_input' and 'question'"}


def test_same_field_given_twice_with_equal_values_is_fine():
    assert sample_from_dict({"question": "same", "user_input": "same"}, 0).user_input == "same"


def test_null_canonical_falls_back_to_alias():
    s = sample_from_dict({"user_input": None, "question": "from alias"}, 0)
    assert s.user_input == "from alias"


# --------------------------------------------------------------------------- user mapping


def test_user_field_mapping():
    raw = {"my_q": "Q?", "my_a": "A.", "docs": ["d1"], "gold": "G.", "uid": "row-x",
           "question": "ignored because mapped elsewhere"}
    s = sample_from_dict(raw, 4, fields={"user_input": "my_q", "response": "my_a",
                                         "retrieved_contexts": "docs", "reference": "gold", "id": "uid"})
    assert (s.user_input, s.response, s.retrieved_contexts, s.reference, s.id, s.row) == \
        ("Q?", "A.", ["d1"], "G.", "row-x", 4)
    assert s.problems == {}


def test_mapping_to_absent_column_means_missing():
    s = sample_from_dict({"question": "Q?"}, 0, fields={"user_input": "nope"})
    assert s.user_input is None
    assert s.missing("user_input") == "missing"


def test_unknown_mapping_key_raises():
    with pytest.raises(ValueError, match="unknown fields"):
        sample_from_dict({"q": "x"}, 0, fields={"question_text": "q"})


def test_load_samples_passes_mapping():
    samples = load_samples([{"q": "one"}, {"q": "two"}], fields={"user_input": "q"})
    assert [s.user_input for s in samples] == ["one", "two"]
    assert [s.row for s in samples] == [0, 1]


# --------------------------------------------------------------------------- normalisation


def test_reference_list_is_joined_with_newlines():
    assert sample_from_dict({"reference": ["first.", "second."]}, 0).reference == "first.\nsecond."


def test_reference_list_with_non_string_is_a_problem():
    s = sample_from_dict({"reference": ["ok", 5]}, 0)
    assert s.reference is None
    assert "reference" in s.problems


def test_string_context_is_wrapped_in_a_list():
    assert sample_from_dict({"context": "only one"}, 0).retrieved_contexts == ["only one"]


def test_empty_context_list_is_kept_not_missing():
    s = sample_from_dict({"retrieved_contexts": []}, 0)
    assert s.retrieved_contexts == []
    assert s.missing("retrieved_contexts") is None


def test_given_is_a_present_fields_value_and_a_missing_ones_lookup_error():
    # What a metric reads of its required fields: an empty context list is a value; an absent response is not.
    s = sample_from_dict({"user_input": "Q?", "retrieved_contexts": []}, 0)
    assert s.given("user_input") == "Q?"
    assert s.given("retrieved_contexts") == []
    with pytest.raises(LookupError, match=r"^field 'response' is missing: a metric reading it lists it in required_fields$"):
        s.given("response")


def test_malformed_contexts_recorded_in_problems():
    s = sample_from_dict({"retrieved_contexts": ["text", 3]}, 0)
    assert s.retrieved_contexts is None
    assert s.problems == {"retrieved_contexts": "item 1 is int, expected a string"}
    assert s.missing("retrieved_contexts") == "item 1 is int, expected a string"


def test_non_list_contexts_recorded_in_problems():
    s = sample_from_dict({"retrieved_contexts": {"a": 1}}, 0)
    assert s.retrieved_contexts is None
    assert s.problems["retrieved_contexts"] == "expected a list of strings, got dict"


def test_non_string_response_and_blank_question_are_problems():
    s = sample_from_dict({"user_input": "   ", "response": 42}, 0)
    assert s.user_input is None and s.response is None
    assert s.problems == {"user_input": "empty: no letter or digit", "response": "expected a string, got int"}


def test_nan_cell_is_missing_not_malformed():
    s = sample_from_dict({"reference": float("nan")}, 0)
    assert s.reference is None
    assert s.problems == {}
    assert s.missing("reference") == "missing"


# --------------------------------------------------------------------------- invalid JSON lines


def test_invalid_json_line_is_kept_as_a_row_with_a_problem(tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_text('{"question": "q1", "answer": "a1"}\n'
                    '{"question": "q2", "answer": \n'
                    '\n'
                    '[1, 2]\n'
                    '{"question": "q3", "answer": "a3"}\n', encoding="utf-8")
    samples = load_samples(path)
    assert len(samples) == 4  # the blank line is skipped, nothing else is dropped
    assert [s.row for s in samples] == [0, 1, 3, 4]  # line number minus one
    assert samples[0].user_input == "q1" and samples[0].problems == {}
    assert samples[1].id == "unreadable-line-2"
    assert samples[1].problems["row"].startswith("not valid JSON") and samples[1].line == 2
    assert samples[2].id == "unreadable-line-4"
    assert samples[2].problems["row"] == "a JSON list, not an object" and samples[2].source == "[1, 2]"
    assert samples[3].user_input == "q3"
    # every field of an unreadable row reports the row problem
    assert samples[1].missing("response") == samples[1].problems["row"]


def test_a_file_is_read_line_by_line_and_unavailable_stops_at_the_first_line_with_every_field(tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_text('{"question": "q1"}\n{"question": "q2", "answer": "a2"}\n{not json\n{"question": "q4"}\n',
                    encoding="utf-8")
    samples = iter_samples(path)
    required = {"answer_relevancy": ("user_input", "response"), "context_recall": ("user_input", "reference")}
    assert unavailable(samples, {"answer_relevancy": required["answer_relevancy"]}) == {}
    assert next(samples).row == 2  # lines 1 and 2 read, the rest not yet
    # a file read in chunks: the fields found usable carry over, the last chunk's answer holds for all
    usable: set[str] = set()
    first, second = load_samples(path)[:1], load_samples(path)[1:]
    assert unavailable(first, required, usable) == {"answer_relevancy": "no line has a usable 'response'",
                                                    "context_recall": "no line has a usable 'reference'"}
    assert unavailable(second, required, usable) == {"context_recall": "no line has a usable 'reference'"}


def test_bad_utf8_line_and_lone_surrogate_stay_on_their_row(tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"question": "q1", "answer": "a1"}\n'      # BOM on the first line
                     b'{"question": "Caf\xe9?", "answer": "a2"}\n'              # Latin-1 byte
                     b'{"question": "q3", "answer": "a \\ud800 b."}\n')       # escaped lone surrogate
    first, second, third = load_samples(path)
    assert first.user_input == "q1" and first.problems == {}
    assert second.problems == {"row": "not valid UTF-8 (byte 17)"} and second.source == '{"question": "Caf\\xe9?", "answer": "a2"}'
    assert third.user_input == "q3" and third.problems == {"response": "contains invalid Unicode (a lone surrogate)"}


def test_oversized_fields_are_malformed_not_truncated():
    from rag_eval.metrics.core.field_values import MAX_CHARS, MAX_CONTEXTS

    big = sample_from_dict({"question": "q", "answer": "x" * (MAX_CHARS + 1),
                            "contexts": ["c"] * (MAX_CONTEXTS + 1)}, 0)
    assert big.problems == {"response": f"longer than {MAX_CHARS} characters ({MAX_CHARS + 1})",
                            "retrieved_contexts": f"more than {MAX_CONTEXTS} contexts ({MAX_CONTEXTS + 1})"}


def test_duplicate_ids_stay_separate_rows_in_the_summary():
    from rag_eval.metrics import evaluate

    rows = [{"id": "1", "question": "q", "answer": "a", "contexts": ["a"]},
            {"id": 1, "question": "q", "answer": "b", "contexts": ["a"]}]
    result = evaluate(rows, ["faithfulness"], judge=ScriptedJudge())
    assert result.results["row"].tolist() == [0, 1]
    assert result.summary["total"] == 2


def test_unreadable_row_is_input_error_for_metrics(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text("not json at all\n", encoding="utf-8")
    (s,) = load_samples(path)
    result = Faithfulness().score(s, ScriptedJudge())
    assert result.status is Status.INPUT_ERROR
    assert result.reason.startswith("line 1: unreadable: not valid JSON")


# --------------------------------------------------------------------------- ids


def test_stable_id_same_content_same_id():
    raw = {"question": "q", "answer": "a", "contexts": ["c"], "ground_truth": "g"}
    first = sample_from_dict(raw, 0).id
    assert re.fullmatch(r"[0-9a-f]{16}", first)
    assert sample_from_dict(dict(raw), 5).id == first  # row does not enter the id
    # aliases resolve to the same canonical content, so the same id
    assert sample_from_dict({"user_input": "q", "response": "a", "retrieved_contexts": ["c"],
                             "reference": "g"}, 0).id == first


def test_stable_id_changes_with_content():
    assert sample_from_dict({"question": "q"}, 0).id != sample_from_dict({"question": "q2"}, 0).id


def test_explicit_id_is_kept():
    assert sample_from_dict({"id": "abc-1", "question": "q"}, 0).id == "abc-1"
    assert sample_from_dict({"id": 7, "question": "q"}, 0).id == "7"


def test_blank_explicit_id_falls_back_to_hash():
    assert sample_from_dict({"id": "  ", "question": "q"}, 0).id == sample_from_dict({"question": "q"}, 0).id


# --------------------------------------------------------------------------- BR-16


def br16_samples():
    with (DATA / "regression_cases.jsonl").open(encoding="utf-8") as handle:
        case = next(c for c in map(json.loads, handle) if c["id"] == "BR-16")
    return case, load_samples(case["input"]["rows"])


def test_BR16_row0_faithfulness_is_input_error_naming_retrieved_contexts():
    _, samples = br16_samples()
    result = Faithfulness().score(samples[0], ScriptedJudge())
    assert result.status is Status.INPUT_ERROR
    assert "'retrieved_contexts'" in result.reason
    assert "line 1 (id " in result.reason
    assert result.details == {"field": "retrieved_contexts", "problem": "missing"}
    # the fields it does have were found under their legacy names
    assert samples[0].user_input == "When did the first moon landing happen?"
    assert samples[0].response == "In July 1969."
    assert samples[0].reference == "The first crewed moon landing was on 20 July 1969."


@pytest.mark.parametrize("row", [1, 2])
def test_BR16_rows_1_and_2_contexts_are_a_list(row):
    case, samples = br16_samples()
    s = samples[row]
    assert s.retrieved_contexts == ["Apollo 11 landed on the Moon on 20 July 1969."]
    assert case["expected"][f"row{row}"]["retrieved_contexts"] == s.retrieved_contexts
    assert (s.user_input, s.response, s.reference) == \
        ("When did the first moon landing happen?", "In July 1969.", "20 July 1969.")
    assert s.problems == {}
    assert Faithfulness().score(s, ScriptedJudge()).status is Status.OK


# --------------------------------------------------------------------------- example datasets


def test_load_fiqa_example():
    path = ROOT / "examples" / "fiqa" / "samples.jsonl"
    samples = load_samples(path)
    assert len(samples) == 30
    assert all(isinstance(s.reference, str) for s in samples)
    assert all(s.problems == {} for s in samples)
    first = json.loads(path.read_text(encoding="utf-8").splitlines()[0])
    assert isinstance(first["reference"], list)
    assert samples[0].reference == "\n".join(first["reference"])
    assert len({s.id for s in samples}) == 30


def test_load_amnesty_example():
    samples = load_samples(ROOT / "examples" / "amnesty_qa" / "samples.jsonl")
    assert len(samples) == 20
    assert all(len(s.retrieved_contexts) == 3 for s in samples)
    assert all(isinstance(c, str) for s in samples for c in s.retrieved_contexts)
    assert samples[0].id == "amnesty-00"


# --------------------------------------------------------------------------- other formats


def test_csv_with_json_encoded_list_column(tmp_path):
    path = tmp_path / "data.csv"
    pd.DataFrame({
        "question": ["q1", "q2"],
        "answer": ["a1", "a2"],
        "contexts": [json.dumps(["c1", "c2"]), "just one context"],
        "ground_truth": ["g1", json.dumps(["g2a", "g2b"])],
    }).to_csv(path, index=False)
    samples = load_samples(path)
    assert [s.retrieved_contexts for s in samples] == [["c1", "c2"], ["just one context"]]
    assert [s.reference for s in samples] == ["g1", "g2a\ng2b"]
    assert [s.user_input for s in samples] == ["q1", "q2"]


def test_csv_empty_cell_is_missing(tmp_path):
    path = tmp_path / "data.csv"
    path.write_text("question,answer,contexts\nq1,,\n", encoding="utf-8")
    (s,) = load_samples(path)
    assert s.response is None and s.retrieved_contexts is None
    assert s.problems == {}


def test_column_oriented_json(tmp_path):
    path = tmp_path / "data.json"
    path.write_text(json.dumps({
        "question": ["q1", "q2"],
        "answer": ["a1", "a2"],
        "contexts": [["c1"], ["c2a", "c2b"]],
        "ground_truth": ["g1", "g2"],
    }), encoding="utf-8")
    samples = load_samples(path)
    assert len(samples) == 2
    assert [(s.user_input, s.response, s.retrieved_contexts, s.reference) for s in samples] == [
        ("q1", "a1", ["c1"], "g1"), ("q2", "a2", ["c2a", "c2b"], "g2")]


def test_record_oriented_json(tmp_path):
    path = tmp_path / "data.json"
    path.write_text(json.dumps([{"input": "q", "actual_output": "a", "retrieval_context": ["c"]}]), encoding="utf-8")
    (s,) = load_samples(path)
    assert (s.user_input, s.response, s.retrieved_contexts) == ("q", "a", ["c"])


def test_dataframe_input():
    samples = load_samples(pd.DataFrame({"question": ["q"], "contexts": [["c1", "c2"]], "ground_truth": ["g"]}))
    assert samples[0].retrieved_contexts == ["c1", "c2"]


def test_missing_file_and_unsupported_type(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_samples(tmp_path / "nope.jsonl")
    other = tmp_path / "data.txt"
    other.write_text("x", encoding="utf-8")
    with pytest.raises(ValueError, match="unsupported file type"):
        load_samples(other)


def test_non_record_items_become_problem_rows():
    samples = load_samples([{"question": "q"}, "not a record"])
    assert len(samples) == 2
    assert samples[1].problems == {"row": "a str, not a record"} and samples[1].line == 2


def test_a_string_that_reads_as_a_json_list_of_other_things_stays_a_string():
    # A citation marker as the whole reference or context is text, not a malformed list.
    s = sample_from_dict({"user_input": "q?", "response": "a", "retrieved_contexts": "[1]", "reference": "[1]"}, 0)
    assert (s.reference, s.retrieved_contexts, s.problems) == ("[1]", ["[1]"], {})
    listed = sample_from_dict({"user_input": "q?", "reference": '["a", "b"]', "retrieved_contexts": '["c"]'}, 0)
    assert (listed.reference, listed.retrieved_contexts) == ("a\nb", ["c"])  # JSON lists of strings, as CSV writes them
    wrong = sample_from_dict({"user_input": "q?", "reference": ["a", 1]}, 0)
    assert wrong.problems["reference"] == "expected a string or a list of strings"



def test_an_id_with_a_lone_surrogate_keeps_its_escape_and_the_row(tmp_path):
    # Valid JSON ("\ud800") that no UTF-8 file can hold: it failed the whole run's ingestion.
    path = tmp_path / "s.jsonl"
    path.write_text('{"id": "\\ud800x", "user_input": "q?", "response": "a"}\n{"id": "ok", "user_input": "q?"}\n',
                    encoding="utf-8")
    first, second = load_samples(path)
    assert (first.id, first.problems, second.id) == ("\\ud800x", {}, "ok")
    assert first.id.encode("utf-8") == b"\\ud800x"
