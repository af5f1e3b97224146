"""The conversation example (``examples/conversations/``), read with plain json and csv: Azure's
conversation shape, every passage verbatim from the sources SOURCE.md names, a follow-up that needs the
history in each conversation, and ``turns.csv`` (one row per assistant turn, its faults) agreeing with the
conversations and with the counts in the README."""
import csv
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "conversations"
FAULTS = {"unsupported_claim", "wrong_referent", "evasive"}


def sources() -> list[str]:
    """The texts the passages are taken from: HaluEval rows 0-29 (their copy in tests/data) and the
    project's bicycle documents."""
    with (ROOT / "tests" / "data" / "halueval_qa" / "rows_000_029.jsonl").open(encoding="utf-8") as handle:
        texts = [json.loads(line)["knowledge"] for line in handle]
    docs = ROOT / "examples" / "testset" / "docs"
    return texts + [p.read_text(encoding="utf-8") for p in sorted(docs.iterdir()) if p.suffix in (".md", ".txt")]


def problems(conversations: list[dict], turns: list[dict], texts: list[str]) -> list[str]:
    """What breaks the format in ``conversations`` (the JSONL's objects) and ``turns`` (turns.csv's rows)."""
    found, turn_ids = [], []
    ids = [c["id"] for c in conversations]
    if len(set(ids)) != len(ids):
        found.append("duplicate ids")
    for conv in conversations:
        messages = conv["messages"]
        roles = [m["role"] for m in messages]
        if roles != ["user", "assistant"] * (len(messages) // 2) or not 2 <= len(messages) // 2 <= 4:
            found.append(f"{conv['id']}: roles {roles}")
        for i, m in enumerate(messages):
            keys = {"role", "content"} | ({"context", "reference"} if m["role"] == "assistant" else set())
            if set(m) != keys or not all(m[k] for k in keys):
                found.append(f"{conv['id']}: message {i} has keys {sorted(m)} or an empty value")
            elif m["role"] == "assistant" and not (len(m["context"]) <= 3 and all(
                    any(p in text for text in texts) for p in m["context"])):
                found.append(f"{conv['id']}: message {i} has a context not made of 1-3 passages taken verbatim "
                             "from the sources")
        turn_ids += [(conv["id"], k) for k in range(1, len(messages) // 2 + 1)]
    rows = {(r["id"], int(r["turn"])): r for r in turns}
    if len(rows) != len(turns):
        found.append("turns.csv has a turn twice")
    if set(rows) != set(turn_ids):
        found.append(f"turns.csv rows {sorted(set(rows) ^ set(turn_ids))} name no turn or are missing")
    for (conv_id, k), row in rows.items():
        if row["needs_history"] not in ("yes", "no") or (k == 1 and row["needs_history"] == "yes"):
            found.append(f"{conv_id} turn {k}: needs_history {row['needs_history']!r}")
        if row["fault"] not in FAULTS | {""} or bool(row["fault"]) != bool(row["note"]):
            found.append(f"{conv_id} turn {k}: fault {row['fault']!r} with note {row['note']!r}")
        if row["fault"] == "wrong_referent" and row["needs_history"] != "yes":
            found.append(f"{conv_id} turn {k}: a wrong referent on a question that needs no history")
    for conv_id in ids:
        if not any(r["needs_history"] == "yes" for (i, k), r in rows.items() if i == conv_id and k >= 2):
            found.append(f"{conv_id}: no follow-up that needs the history")
    return found


def read_example() -> tuple[list[dict], list[dict]]:
    with (EXAMPLE / "conversations.jsonl").open(encoding="utf-8") as handle:
        conversations = [json.loads(line) for line in handle]
    with (EXAMPLE / "turns.csv").open(encoding="utf-8", newline="") as handle:
        return conversations, list(csv.DictReader(handle))


def test_the_example_keeps_the_format_and_the_readme_counts_its_turns_and_faults():
    conversations, turns = read_example()
    assert problems(conversations, turns, sources()) == []
    assert len(conversations) >= 30 and len(turns) >= 75
    readme = (EXAMPLE / "README.md").read_text(encoding="utf-8")
    counts = dict(re.findall(r"^\| `?(\w+)`? \| (\d+) \|", readme, re.MULTILINE))
    assert counts == {"conversations": str(len(conversations)), "turns": str(len(turns)),
                      "needs_history": str(sum(r["needs_history"] == "yes" for r in turns)),
                      **{f: str(sum(r["fault"] == f for r in turns)) for f in FAULTS}}


def set_row(turns: list[dict], conv_id: str, turn: int, **values: str) -> None:
    next(r for r in turns if r["id"] == conv_id and r["turn"] == str(turn)).update(values)


BROKEN = {  # conv-01: 3 turns, turn 3 a wrong referent; conv-02: 2 turns
    "duplicate ids": lambda c, t: c.append(c[0]),
    "turns.csv has a turn twice": lambda c, t: t.append(t[0]),
    "conv-01: roles ['assistant', 'user', 'user', 'assistant', 'user', 'assistant']":
        lambda c, t: c[0]["messages"].insert(0, c[0]["messages"].pop(1)),
    "conv-02: message 3 has keys ['content', 'context', 'reference', 'role'] or an empty value":
        lambda c, t: c[1]["messages"][3].update(context=[]),
    "conv-02: message 1 has keys ['content', 'role'] or an empty value":
        lambda c, t: [c[1]["messages"][1].pop(k) for k in ("context", "reference")],
    "conv-01: message 1 has a context not made of 1-3 passages taken verbatim from the sources":
        lambda c, t: c[0]["messages"][1]["context"].append("First for Women is a monthly magazine."),
    "turns.csv rows [('conv-01', 4)] name no turn or are missing":
        lambda c, t: t.append({"id": "conv-01", "turn": "4", "needs_history": "yes", "fault": "", "note": ""}),
    "turns.csv rows [('conv-02', 1)] name no turn or are missing": lambda c, t: t.pop(3),
    "conv-02 turn 1: needs_history 'yes'": lambda c, t: set_row(t, "conv-02", 1, needs_history="yes"),
    "conv-02 turn 2: fault 'hallucination' with note 'x'":
        lambda c, t: set_row(t, "conv-02", 2, fault="hallucination", note="x"),
    "conv-01 turn 3: fault 'evasive' with note ''": lambda c, t: set_row(t, "conv-01", 3, fault="evasive", note=""),
    "conv-01 turn 3: a wrong referent on a question that needs no history":
        lambda c, t: set_row(t, "conv-01", 3, needs_history="no"),
    "conv-02: no follow-up that needs the history": lambda c, t: set_row(t, "conv-02", 2, needs_history="no"),
}


@pytest.mark.parametrize("problem", BROKEN)
def test_a_copy_that_breaks_one_rule_is_reported_with_that_rule_alone(problem):
    conversations, turns = read_example()
    BROKEN[problem](conversations, turns)
    assert problems(conversations, turns, sources()) == [problem]
