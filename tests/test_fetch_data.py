"""tools/fetch_data.py without the network: what ``--list`` prints, the digest checks, HaluEval's
conversion (its held-out lines 101-300 never written) and the skip of files already in place."""
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import fetch_data  # noqa: E402


def test_list_prints_sources_destinations_and_licences_without_fetching(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "fetch_data.py"), "--list", "--dest", str(tmp_path),
                           "--only", "halueval_qa", "rgb"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "halueval_qa: MIT (knowledge, questions and right answers from HotpotQA: CC BY-SA 4.0); read by "
        "offline_judge_accuracy, calibrate_judges, gate_bench, diagnostics_meta_eval",
        "  https://raw.githubusercontent.com/RUCAIBox/HaluEval/b7253db3cdaa0ab2c382f92b26b390109174f77e/"
        "generation/qa/qa_one-turn_data.json",
        f"  -> {tmp_path}/halueval_qa/halueval_qa_rows_000_099.jsonl",
        f"  -> {tmp_path}/halueval_qa/halueval_qa_rows_300_499.jsonl",
        "rgb: CC BY-NC-SA 4.0: non-commercial; measure with it, never commit it; read by offline_judge_accuracy, "
        "calibrate_judges, llm_judge_bench, diagnostics_meta_eval",
        "  https://raw.githubusercontent.com/chen700564/RGB/d2293eec8c76467c1572b3ebedcaca4e9b4e82f4/data/en_fact.json",
        "  https://raw.githubusercontent.com/chen700564/RGB/d2293eec8c76467c1572b3ebedcaca4e9b4e82f4/data/zh_fact.json",
        f"  -> {tmp_path}/rgb/en_fact.json",
        f"  -> {tmp_path}/rgb/zh_fact.json",
    ]
    assert list(tmp_path.iterdir()) == []


def test_every_dataset_the_benches_read_is_listed_with_a_pinned_commit_and_digests():
    names = {d.name for d in fetch_data.DATASETS}
    assert {"halueval_qa", "rgb", "ragas_annotated", "trec_eval_known_answers"} <= names
    for dataset in fetch_data.DATASETS:
        assert len(dataset.commit) == 40 and all(len(d) == 64 for d in [*dataset.files.values(),
                                                                           *dataset.outputs().values()])


def demo(content: bytes) -> fetch_data.Dataset:
    return fetch_data.Dataset("demo", "owner/repo", "c" * 40, "MIT", "a test", {"data/a.txt": hashlib.sha256(
        content).hexdigest()})


def test_a_file_with_its_digest_is_written_then_found_in_place(tmp_path):
    asked = []
    written = fetch_data.fetch(demo(b"hello\n"), tmp_path, lambda url: asked.append(url) or b"hello\n")
    assert asked == [f"https://raw.githubusercontent.com/owner/repo/{'c' * 40}/data/a.txt"]
    assert written == [tmp_path / "demo" / "a.txt"] and written[0].read_bytes() == b"hello\n"
    assert fetch_data.present(demo(b"hello\n"), tmp_path) and not fetch_data.present(demo(b"other\n"), tmp_path)


def test_a_file_with_another_digest_is_refused_and_nothing_is_written(tmp_path):
    with pytest.raises(ValueError, match=r"data/a.txt: SHA-256 [0-9a-f]{64}, expected [0-9a-f]{64}: not written"):
        fetch_data.fetch(demo(b"hello\n"), tmp_path, lambda url: b"tampered\n")
    assert not (tmp_path / "demo").exists()


def test_halueval_keeps_lines_1_to_100_and_301_to_500_with_their_ids():
    source = "".join(json.dumps({"knowledge": f"k{i}", "question": f"q{i}", "right_answer": "r",
                                 "hallucinated_answer": "h"}) + "\n" for i in range(500)).encode()
    parts = {name: [json.loads(line) for line in data.decode().splitlines()]
             for name, data in fetch_data.halueval_rows(source).items()}
    first, later = parts["halueval_qa_rows_000_099.jsonl"], parts["halueval_qa_rows_300_499.jsonl"]
    assert [r["id"] for r in first] == [f"halueval-qa-{i:03d}" for i in range(100)]
    assert [r["id"] for r in later] == [f"halueval-qa-{i:03d}" for i in range(300, 500)]
    assert first[0] == {"id": "halueval-qa-000", "knowledge": "k0", "question": "q0", "right_answer": "r",
                        "hallucinated_answer": "h"}
    assert later[0]["question"] == "q300" and later[-1]["question"] == "q499"
