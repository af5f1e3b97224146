"""Build corpus.jsonl and questions.jsonl of the example RAG system from the shipped examples.

The corpus is every distinct passage of ``examples/fiqa`` and ``examples/amnesty_qa``
(``retrieved_contexts``), with an id; the question set is their questions with
``reference`` and, as ``retrieval_ground_truth``, the passages that came with each
question (label 1). Run from the repository root: ``.venv/bin/python examples/rag_system/build_corpus.py``.
"""
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> None:
    passages: dict[str, str] = {}
    questions = []
    for name in ("fiqa", "amnesty_qa"):
        lines = (HERE.parent / name / "samples.jsonl").read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines, start=1):
            row = json.loads(line)
            ids = []
            for text in row["retrieved_contexts"]:
                if text not in passages.values():
                    passages[f"{name}-p{len(passages):03d}"] = text
                ids.append(next(k for k, v in passages.items() if v == text))
            reference = row["reference"] if isinstance(row["reference"], str) else "\n".join(row["reference"])
            questions.append({"id": row.get("id", f"{name}-{number:02d}"), "user_input": row["user_input"],
                              "reference": reference,
                              "retrieval_ground_truth": [{"document_id": i, "query_relevance_label": 1}
                                                         for i in dict.fromkeys(ids)]})
    (HERE / "corpus.jsonl").write_text("".join(json.dumps({"id": k, "text": v}, ensure_ascii=False) + "\n"
                                               for k, v in passages.items()), encoding="utf-8")
    (HERE / "questions.jsonl").write_text("".join(json.dumps(q, ensure_ascii=False) + "\n" for q in questions),
                                          encoding="utf-8")
    print(f"{len(passages)} passages, {len(questions)} questions")


if __name__ == "__main__":
    main()
