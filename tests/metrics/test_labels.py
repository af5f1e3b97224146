"""Human labels as data (rag_eval.metrics.sources.labels), the export's draw and sheet (rag_eval.metrics.sources.annotate): by hand."""
import csv
import json

import pytest

from rag_eval.metrics.sources.annotate import allocate, draw, label_config, tasks, write_label_studio, write_sheet
from rag_eval.metrics.sources.labels import label_value, labels_frame, merge, read_records, read_stored, validate, write_stored
from rag_eval.metrics.core.samples import sample_from_dict

IDS = [(0, "q1"), (1, "q2"), (2, "q3"), (3, "dup"), (4, "dup")]  # rows 0-4 (lines 1-5); 'dup' is on lines 4 and 5


def _problems(problems):
    return [str(p) for p in problems]


def test_a_filled_csv_sheet_keeps_good_lines_and_names_each_bad_one_by_line_and_field(tmp_path):
    sheet = tmp_path / "labels.csv"
    rows = [["id", "line", "metric", "user_input", "label", "annotator"],
            ["q1", "", "faithfulness", "a question\nover two lines", "pass", "ann"],  # line 2-3 (sheet row 2)
            ["q2", "", "faithfulness", "", "0.25", ""],                               # line 4 (sheet row 3)
            ["q3", "", "faithfulness", "", "", ""],                                   # blank label: not labelled yet
            ["nope", "", "faithfulness", "", "1", ""],                                # line 6: unknown id
            ["q1", "", "faithfullness", "", "1", ""],                                 # line 7: unknown metric
            ["q2", "", "faithfulness", "", "7", ""],                                  # line 8: out of range
            ["q2", "", "groundedness", "", "pass", ""],                               # line 9: a verdict on 1-5
            ["dup", "", "faithfulness", "", "1", ""],                                 # line 10: which 'dup'?
            ["dup", "5", "faithfulness", "", "no", ""],                               # line 11: line 5's dup
            ["q1", "2", "faithfulness", "", "1", ""]]                                 # line 12: line 2 is q2
    with sheet.open("w", encoding="utf-8-sig", newline="") as handle:
        csv.writer(handle).writerows(rows)
    labels, problems, blank = validate(read_records(sheet), IDS)
    assert [(r["id"], r["line"], r["metric"], r["label"]) for r in labels] == [
        ("q1", 1, "faithfulness", 1.0), ("q2", 2, "faithfulness", 0.25), ("dup", 5, "faithfulness", 0.0)]
    assert labels[0]["annotator"] == "ann" and labels[1]["annotator"] is None and blank == 1
    assert labels[1]["source"] == "labels.csv line 4 (sheet row 3)"
    assert _problems(problems) == [
        "labels.csv line 6 (sheet row 5): field 'id': 'nope' is no row of the version",
        "labels.csv line 7 (sheet row 6): field 'metric': unknown metric 'faithfullness'",
        "labels.csv line 8 (sheet row 7): field 'label': '7' lies outside faithfulness's range "
        "(a number in [0, 1] or pass/fail)",
        "labels.csv line 9 (sheet row 8): field 'label': 'pass' is a verdict; groundedness takes a number in [1, 5]",
        "labels.csv line 10 (sheet row 9): field 'line': id 'dup' is on lines 4, 5: say which",
        "labels.csv line 12 (sheet row 11): field 'line': line 2 holds another id than 'q1'"]


def test_a_semicolon_sheet_and_a_jsonl_file_with_a_bad_line(tmp_path):
    sheet = tmp_path / "excel.csv"
    sheet.write_text("line;metric;label\n3;answer_relevancy;Accept\n9;answer_relevancy;0\n", encoding="utf-8")
    labels, problems, _ = validate(read_records(sheet), IDS)
    assert [(r["id"], r["label"]) for r in labels] == [("q3", 1.0)]
    assert _problems(problems) == ["excel.csv line 3: field 'line': 9 is not a line of the version's file "
                                   "(5 lines, 1 to 5)"]
    lines = tmp_path / "labels.jsonl"
    lines.write_text('{"id": "q1", "metric": "groundedness", "label": 4}\n\n{"id": "q2", "metric"\n'
                     '[1, 2]\n{"id": "q2", "metric": "noise_sensitivity_relevant", "label": "pass"}\n', encoding="utf-8")
    labels, problems, _ = validate(read_records(lines), IDS, version="v1")
    # A verdict on a lower-is-better metric: passing means a low value, 0.
    assert [(r["metric"], r["label"]) for r in labels] == [("groundedness", 4.0), ("noise_sensitivity_relevant", 0.0)]
    assert _problems(problems) == ["labels.jsonl line 3: field 'line': not valid JSON: Expecting ':' delimiter "
                                   "(column 22)", "labels.jsonl line 4: field 'line': a JSON list, not an object"]


def test_label_studio_exports_full_and_min_with_a_cancelled_annotation_and_two_annotators(tmp_path):
    export = [
        {"id": 17, "data": {"sample_id": "q1", "line": 1, "metric": "faithfulness", "version": "v1"},
         "annotations": [
             {"completed_by": {"id": 3, "email": "a@x.org"}, "updated_at": "2026-12-01T10:00:00Z",
              "result": [{"from_name": "label", "to_name": "response", "type": "choices",
                          "value": {"choices": ["fail"]}},
                         {"from_name": "notes", "to_name": "response", "type": "textarea",
                          "value": {"text": ["second claim unsupported"]}}]},
             {"completed_by": 4, "updated_at": "2026-12-02T09:00:00Z",
              "result": [{"from_name": "label", "type": "choices", "value": {"choices": ["pass"]}}]},
             {"completed_by": 5, "was_cancelled": True, "result": []}]},
        {"id": 18, "data": {"sample_id": "q2", "line": 2, "metric": "groundedness", "version": "v1"},
         "annotations": [{"completed_by": 3, "result": [{"type": "number", "value": {"number": 2}}]}]},
        {"id": 19, "data": {"sample_id": "q3", "line": 3, "metric": "faithfulness", "version": "v2"},
         "annotations": [{"completed_by": 3, "result": [{"type": "choices", "value": {"choices": ["pass"]}}]}]}]
    (tmp_path / "project.json").write_text(json.dumps(export), encoding="utf-8")
    labels, problems, _ = validate(read_records(tmp_path / "project.json"), IDS, version="v1")
    assert [(r["line"], r["metric"], r["label"], r["annotator"]) for r in labels] == [
        (1, "faithfulness", 0.0, "a@x.org"), (1, "faithfulness", 1.0, "4"), (2, "groundedness", 2.0, "3")]
    assert labels[0]["notes"] == "second claim unsupported"
    assert _problems(problems) == ["project.json task 3 (Label Studio id 19): field 'version': labels of 'v2', not of v1"]
    # Merged by (line, metric): the later annotation (updated 2 December) wins.
    assert [(r["line"], r["label"]) for r in merge([], labels)] == [(1, 1.0), (2, 2.0)]
    minimal = [{"id": 21, "sample_id": "q2", "line": 2, "metric": "faithfulness", "label": "pass", "annotator": "a@x.org",
                "updated_at": "2026-12-03T08:00:00Z"}]
    (tmp_path / "min.json").write_text(json.dumps(minimal), encoding="utf-8")
    [label], _, _ = validate(read_records(tmp_path / "min.json"), IDS)
    assert (label["id"], label["label"], label["labelled_at"]) == ("q2", 1.0, "2026-12-03T08:00:00Z")


def test_a_conversation_turn_is_labelled_by_its_id(tmp_path):
    """Line 2 holds a conversation of three turns (ids c/1..c/3): its labels name the turn; a line alone is refused."""
    ids = [(0, "q1"), (1, "c/1"), (1, "c/2"), (1, "c/3")]
    lines = tmp_path / "labels.jsonl"
    lines.write_text('{"id": "c/2", "metric": "faithfulness", "label": 0}\n'
                     '{"id": "c/3", "line": 2, "metric": "faithfulness", "label": 1}\n'
                     '{"line": 2, "metric": "faithfulness", "label": 1}\n'
                     '{"line": 1, "metric": "faithfulness", "label": 1}\n', encoding="utf-8")
    labels, problems, _ = validate(read_records(lines), ids)
    assert [(r["id"], r["line"], r["label"]) for r in labels] == [("c/2", 2, 0.0), ("c/3", 2, 1.0), ("q1", 1, 1.0)]
    assert _problems(problems) == ["labels.jsonl line 3: field 'id': missing: line 2 holds a conversation of 3 "
                                   "turns ('c/1', 'c/2', 'c/3'): give the turn's id"]
    # two turns of one line are two labels, not one replacing the other
    assert [(r["id"], r["label"]) for r in merge([], labels)] == [("q1", 1.0), ("c/2", 0.0), ("c/3", 1.0)]


def test_stored_labels_merge_newest_wins_and_read_back_checked(tmp_path):
    old = [{"id": "q1", "line": 1, "metric": "faithfulness", "label": 0.0},
           {"id": "q2", "line": 2, "metric": "faithfulness", "label": 1.0}]
    write_stored(tmp_path, old)
    new = [{"id": "q1", "line": 1, "metric": "faithfulness", "label": 1.0, "annotator": "b"}]
    write_stored(tmp_path, merge(read_stored(tmp_path), new))
    stored = read_stored(tmp_path)
    assert [(r["line"], r["label"], r["annotator"]) for r in stored] == [(1, 1.0, "b"), (2, 1.0, None)]
    assert all(r["labelled_at"] for r in stored)  # stamped when written without one
    frame, problems = labels_frame(tmp_path, [(0, "q1"), (1, "other")])  # line 2 now holds another id
    assert frame[["line", "label"]].values.tolist() == [[1, 1.0]]
    assert _problems(problems) == ["labels.jsonl line 2: field 'id': 'q2' is no row of the version"]


@pytest.mark.parametrize("value, metric, expected", [
    ("PASS", "faithfulness", 1.0), (True, "faithfulness", 1.0), ("reject", "faithfulness", 0.0), ("0.5", "faithfulness", 0.5),
    ("fail", "noise_sensitivity_relevant", 1.0), (3, "groundedness", 3.0), ("", "faithfulness", None), (None, "groundedness", None)])
def test_label_values(value, metric, expected):
    assert label_value(value, metric) == expected


def test_the_draw_is_a_seeded_shuffle_whose_prefixes_are_draws_too():
    rows = list(range(40))
    first, more = draw(rows, 10, seed=3), draw(rows, 25, seed=3)
    assert more[:10] == first and len(set(more)) == 25 and set(more) <= set(rows)
    assert draw(rows, 10, seed=4) != first and sorted(draw(rows, 100, seed=3)) == rows


def test_proportional_allocation_by_hand():
    # 11 pass, 17 fail, 2 judge_error, n = 10: exact shares 3.67, 5.67, 0.67; floors 3, 5, 0 leave 2 to give,
    # to the largest remainders (all 2/3: ties by name, fail then judge_error).
    assert allocate({"pass": 11, "fail": 17, "judge_error": 2}, 10) == {"pass": 3, "fail": 6, "judge_error": 1}
    strata = {r: "fail" if r < 17 else "judge_error" if r >= 28 else "pass" for r in range(30)}
    drawn = draw(list(range(30)), 10, seed=0, strata=strata)
    assert sorted(strata[r] for r in drawn).count("fail") == 6 and len(set(drawn)) == 10


def test_the_sheet_is_blind_to_the_judge_and_reads_back_as_labels(tmp_path):
    samples = [sample_from_dict({"id": "q1", "user_input": "Where is the Louvre?", "response": "In Paris.",
                                 "retrieved_contexts": ["The Louvre is in Paris.", "第二段"]}, 0),
               sample_from_dict({"id": "q2", "user_input": "Who?", "response": "Marie Curie."}, 1)]
    records = tasks(samples, ["faithfulness", "answer_relevancy"], "v1")
    assert "judge_score" not in records[0] and records[0]["retrieved_contexts"] == "[1] The Louvre is in Paris.\n\n[2] 第二段"
    assert records[1]["retrieved_contexts"] == ""  # answer_relevancy does not read the contexts
    sheet = write_sheet(records, tmp_path / "v1.csv")
    with sheet.open(encoding="utf-8-sig", newline="") as handle:
        filled = list(csv.DictReader(handle))
    filled[0]["label"], filled[3]["label"] = "pass", "0"
    with sheet.open("w", encoding="utf-8-sig", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(filled[0]))
        writer.writeheader()
        writer.writerows(filled)
    labels, problems, blank = validate(read_records(sheet), [(0, "q1"), (1, "q2")], version="v1")
    assert [(r["id"], r["metric"], r["label"]) for r in labels] == [("q1", "faithfulness", 1.0),
                                                                   ("q2", "answer_relevancy", 0.0)]
    assert (problems, blank) == ([], 2)
    judged = tasks(samples[:1], ["faithfulness"], "v1", {(0, 0, "faithfulness"): (0.5, "1/2 statements supported")})
    assert (judged[0]["judge_score"], judged[0]["judge_reason"]) == (0.5, "1/2 statements supported")
    tasks_path, config_path = write_label_studio(records, ["faithfulness", "groundedness"], tmp_path, "v1")
    task = json.loads(tasks_path.read_text(encoding="utf-8"))[0]["data"]
    assert (task["sample_id"], task["line"], task["metric"]) == ("q1", 1, "faithfulness") and "label" not in task
    config = config_path.read_text(encoding="utf-8")
    assert '<Choice value="pass"/>' in config and '<Number name="label_groundedness" toName="response" min="1" max="5"/>' \
        in config and label_config(["faithfulness"]).count("<Number") == 0


def test_odd_files_and_records_are_named_never_a_traceback(tmp_path):
    # What an attacker tried: a fractional line, Label Studio tasks of other shapes, an empty, a
    # non-UTF-8 and an empty CSV, an empty .json, a decimal comma from a ';' spreadsheet.
    export = [{"id": 1, "data": {"sample_id": "q1", "metric": "faithfulness"}, "annotations": ["oops"]},
              {"id": 2, "data": {"sample_id": "q2", "metric": "faithfulness"}, "annotations": {"a": 1}},
              {"id": 3, "data": {"sample_id": "q3", "metric": "faithfulness"}, "annotations": [{"result": ["x"]}]},
              {"id": 4, "data": {"sample_id": "q3", "metric": "faithfulness"},
               "annotations": [{"result": [{"value": {"choices": ["pass"]}}, {"value": {"text": "good one"}}]}]},
              {"line": 2.5, "metric": "faithfulness", "label": "pass"}]
    (tmp_path / "ls.json").write_text(json.dumps(export), encoding="utf-8")
    labels, problems, _ = validate(read_records(tmp_path / "ls.json"), IDS)
    assert [(r["id"], r["label"], r["notes"]) for r in labels] == [("q3", 1.0, "good one")]
    assert _problems(problems) == [
        "ls.json task 1: field 'line': annotations: expected a list of objects, as Label Studio exports them",
        "ls.json task 2: field 'line': annotations: expected a list of objects, as Label Studio exports them",
        "ls.json task 3: field 'line': annotations.result: expected a list of objects, as Label Studio exports them",
        "ls.json task 5: field 'line': '2.5' is not a line number"]
    (tmp_path / "empty.json").write_text("", encoding="utf-8")
    with pytest.raises(ValueError, match=r"empty\.json line 1: not valid JSON: Expecting value"):
        read_records(tmp_path / "empty.json")
    (tmp_path / "latin.csv").write_bytes(b"id,metric,label\nq1,faithfulness,pass\nq2,faithfulness,caf\xe9\n")
    with pytest.raises(ValueError, match=r"latin\.csv line 3: not UTF-8 \(byte 56\); save it as UTF-8"):
        list(read_records(tmp_path / "latin.csv"))
    (tmp_path / "latin.jsonl").write_bytes(b'{"id": "q1", "metric": "faithfulness", "label": 1}\n{"x": "\xff"}\n')
    labels, problems, _ = validate(read_records(tmp_path / "latin.jsonl"), IDS)
    assert len(labels) == 1 and _problems(problems) == ["latin.jsonl line 2: field 'line': not UTF-8 (byte 7 of the line)"]
    (tmp_path / "deep.jsonl").write_text('{"id": "q1", "metric": "faithfulness", "label": 1}\n'
                                         + "[" * 100_000 + "]" * 100_000 + "\n", encoding="utf-8")
    labels, problems, _ = validate(read_records(tmp_path / "deep.jsonl"), IDS)
    assert len(labels) == 1 and _problems(problems) == [
        "deep.jsonl line 2: field 'line': not readable: JSON nested too deeply"]
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    with pytest.raises(ValueError, match=r"deep\.json: not readable: JSON nested too deeply"):
        read_records(tmp_path / "deep.json")
    (tmp_path / "blank.csv").write_text("\ufeff", encoding="utf-8")
    assert _problems(validate(read_records(tmp_path / "blank.csv"), IDS)[1]) == [
        "blank.csv line 1: field 'line': empty file: expected a header row (id or line, metric, label)"]
    (tmp_path / "eu.csv").write_text("line;metric;label\n1;faithfulness;0,5\n", encoding="utf-8")
    assert [r["label"] for r in validate(read_records(tmp_path / "eu.csv"), IDS)[0]] == [0.5]


def test_numbers_python_reads_but_a_person_does_not_write_are_refused(tmp_path):
    # The second attacker's: a 401-digit label, '4_0' and a fullwidth '４' as lines, more than 4,300 digits.
    lines = tmp_path / "labels.jsonl"
    lines.write_text(f'{{"line": 1, "metric": "faithfulness", "label": 1{"0" * 400}}}\n'
                     '{"line": "4_0", "metric": "faithfulness", "label": 1}\n'
                     '{"line": "\uff14", "metric": "faithfulness", "label": 1}\n'
                     '{"line": 2, "metric": "faithfulness", "label": "1_0"}\n'
                     f'{{"line": 3, "metric": "faithfulness", "label": {"9" * 4400}}}\n', encoding="utf-8")
    labels, problems, _ = validate(read_records(lines), IDS)
    assert labels == [] and _problems(problems) == [
        f"labels.jsonl line 1: field 'label': {'1' + '0' * 39}… lies outside faithfulness's range "
        "(a number in [0, 1] or pass/fail)",
        "labels.jsonl line 2: field 'line': '4_0' is not a line number",
        "labels.jsonl line 3: field 'line': '\uff14' is not a line number",
        "labels.jsonl line 4: field 'label': '1_0' is not a label of faithfulness (a number in [0, 1] or pass/fail)",
        "labels.jsonl line 5: field 'line': not readable: Exceeds the limit (4300 digits) for integer string "
        "conversion: value has 4400 digits; use sys.set_int_max_str_digits() to increase the limit"]
    (tmp_path / "ls.json").write_text(f'[{{"line": 1, "metric": "faithfulness", "label": {"9" * 4400}}}]',
                                      encoding="utf-8")
    with pytest.raises(ValueError, match=r"ls\.json: not readable: Exceeds the limit \(4300 digits\)"):
        read_records(tmp_path / "ls.json")
