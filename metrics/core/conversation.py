"""Conversations: one record of messages judged as one sample per assistant turn, and the question
a judge reads for a turn (its own question with the earlier turns).

A record is a conversation when it has ``messages`` (a list: Azure AI Evaluation's shape, each
message ``{"role", "content"}``, an assistant message with its ``context`` or ``retrieved_contexts``
and an optional ``reference``) or a ``user_input`` that is a list holding message objects (RAGAS's
multi-turn names: ``type`` ``human``/``ai`` for role ``user``/``assistant``, a conversation-level
``reference`` for the last assistant turn). :func:`turns` validates the messages and gives each
assistant turn's fields; ``rag_eval.metrics.core.samples`` makes them samples.

:func:`with_history` renders the question a judge reads for a turn: the question, then the latest
:data:`HISTORY_MESSAGES` earlier messages under :data:`HISTORY_HEADING`. The LLM judge's prompts show
it as it is (so the history is part of every request's cache key); the offline judge reads
:func:`resolved` of it instead (the question completed by the earlier turns when it is a follow-up).
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any, Protocol, TypeVar

from rag_eval.metrics.core.field_values import is_null


class _Turn(Protocol):
    """What :func:`distinct` reads and renames of a sample."""

    id: str
    row: int
    turn: int | None
    conversation_id: str | None


T = TypeVar("T", bound=_Turn)

#: What each accepted role (Azure's ``role``, RAGAS's ``type``) is; system and tool messages are kept
#: in the history only.
ROLES = {"user": "user", "human": "user", "assistant": "assistant", "ai": "assistant", "system": "system",
         "tool": "tool"}
#: Earlier messages (the latest ones) a judge reads with a turn's question.
HISTORY_MESSAGES = 6
#: Characters of one earlier message a judge reads; a longer one is clipped with "…".
HISTORY_CHARS = 600
#: The line between a turn's question and its earlier messages in the question a judge reads.
HISTORY_HEADING = "Earlier in this conversation, oldest first:"
_SEPARATOR = f"\n\n{HISTORY_HEADING}\n"
#: The marks of a question that continues an earlier turn (English): an opening that continues ("and …",
#: "what about …") or a reference back ("the second one", "the latter"). None of the 296 single-turn
#: questions of the examples and test data has one.
CONTINUES = re.compile(
    r"^\s*(and|but|also|so|then|what about|how about|what else)\b"
    r"|\b(the )?(first|second|third|fourth|fifth|last|other|next|same) (one|ones)\b|\bthe (latter|former)\b",
    re.IGNORECASE)
#: A third-person pronoun: with earlier turns given, a question holding one is read with them
#: (single-turn questions often hold one and stand on their own: "who directed the film his brother made?").
PRONOUN = re.compile(r"\b(it|its|they|them|their|these|those|he|she|him|her|his)\b", re.IGNORECASE)
#: Why a question that continues an earlier turn is judged without it (added to its results' reason).
NO_HISTORY = "the question continues an earlier turn but none was given: judged as it stands"


def _listed(value: Any) -> Any:
    """``value`` as a list when it is a sequence of items that is not text (a tuple, or a numpy array as
    Parquet and pandas give a list back), else as it is."""
    if isinstance(value, (list, str, bytes, Mapping)) or is_null(value):
        return value
    if hasattr(value, "tolist"):
        return value.tolist()
    return list(value) if isinstance(value, tuple) else value


def _messages(record: Mapping[str, Any]) -> tuple[str, Any]:
    """Where ``record``'s messages are and what they are: ``messages``, or the ``messages`` of Azure's
    ``conversation`` column (``{"conversation": {"messages": [...]}}``), else ``user_input`` (RAGAS)."""
    if not is_null(record.get("messages")):
        return "messages", _listed(record["messages"])
    held = record.get("conversation")
    if isinstance(held, Mapping) and not is_null(held.get("messages")):
        return "conversation.messages", _listed(held["messages"])
    return "user_input", _listed(record.get("user_input"))


def is_conversation(record: Mapping[str, Any]) -> bool:
    """Whether ``record`` is a conversation: it has ``messages`` (or Azure's ``conversation`` column holding
    them), or a ``user_input`` that is a list holding an object; not when it gives ``user_input`` or
    ``response`` as text (a single turn that also logs the prompt's messages)."""
    if isinstance(record.get("user_input"), str) or isinstance(record.get("response"), str):
        return False
    key, messages = _messages(record)
    if key != "user_input":
        return True
    return isinstance(messages, list) and any(isinstance(m, Mapping) for m in messages)


def _context(message: Mapping[str, Any], where: str) -> tuple[Any, str | None]:
    """The message's context (``context`` or its alias ``retrieved_contexts``) as a string or a list, or why not."""
    given = [k for k in ("context", "retrieved_contexts") if message.get(k) is not None]
    if len(given) == 2 and message["context"] != message["retrieved_contexts"]:
        return None, f"{where}: context given twice with different values, as 'context' and 'retrieved_contexts'"
    value = _listed(message[given[0]]) if given else None
    if isinstance(value, Mapping):
        citations = _listed(value.get("citations"))
        if not isinstance(citations, list):
            return None, f"{where}.{given[0]}.citations: not a list"
        for i, citation in enumerate(citations):
            if not isinstance(citation, Mapping) or not isinstance(citation.get("content"), str):
                return None, f"{where}.{given[0]}.citations[{i}].content: not a string"
        return [c["content"] for c in citations], None
    if value is not None and not isinstance(value, (str, list)):
        return None, f"{where}.{given[0]}: not a string, a list of strings or an object with citations"
    return value, None


def turns(record: Mapping[str, Any]) -> tuple[list[dict[str, Any]], str | None]:
    """The assistant turns of the conversation ``record`` (:func:`is_conversation`), oldest first, each
    ``{"turn", "user_input", "response", "retrieved_contexts", "reference", "history"}`` (``history``: the
    messages before the answer but its question, as ``{"role", "content"}``: the latest
    :data:`HISTORY_MESSAGES`, each clipped to :data:`HISTORY_CHARS` characters, what a judge reads), and
    ``None``; or ``[]`` and the first problem, naming the message's index and field (``messages[3].role:
    'bot' is not user or assistant …``, ``messages[1]: an assistant message with no user message before
    it``, ``messages: not a list of messages``, ``no assistant turn``). An assistant message with text
    counts as turn k (from 1) when a user message comes before it; its question is the latest user
    message. An assistant message that only calls tools (``tool_calls``, no text) is kept in the history
    as ``(calls tools: …)``, not a turn. Never raises."""
    key, messages = _messages(record)
    role_key = "type" if key == "user_input" else "role"
    if not isinstance(messages, list):
        return [], f"{key}: not a list of messages"
    found: list[dict[str, Any]] = []
    seen: list[dict[str, str]] = []
    asked: int | None = None  # the index in ``seen`` of the latest user message
    for i, message in enumerate(messages):
        where = f"{key}[{i}]"
        if not isinstance(message, Mapping):
            return [], f"{where}: not an object"
        given = message.get(role_key)
        role = ROLES.get(given) if isinstance(given, str) else None
        if role is None:
            return [], (f"{where}.{role_key}: missing" if given is None else
                        f"{where}.{role_key}: {given!r} is not user or assistant (nor system or tool)")
        content = message.get("content")
        calls = _listed(message.get("tool_calls"))
        if role == "assistant" and calls and not (isinstance(content, str) and content.strip()):
            seen.append({"role": role, "content": f"(calls {_tool_names(calls)})"})  # not a turn: no answer yet
            continue
        if role in ("user", "assistant") and not isinstance(content, str):
            return [], f"{where}.content: not a string"
        text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False, default=str)
        if role == "assistant":
            if asked is None:
                return [], f"{where}: an assistant message with no user message before it"
            contexts, problem = _context(message, where)
            if problem:
                return [], problem
            # What came before the answer but its question: the earlier turns, and between the question and
            # the answer any other message (an earlier answer to it, a tool's result); the latest, clipped.
            before = [m for j, m in enumerate(seen) if j != asked][-HISTORY_MESSAGES:]
            found.append({"turn": len(found) + 1, "user_input": seen[asked]["content"], "response": text,
                          "retrieved_contexts": contexts, "reference": message.get("reference"),
                          "history": [{"role": m["role"], "content": _clipped(m["content"])} for m in before]})
        elif role == "user":
            asked = len(seen)
        seen.append({"role": role, "content": text})
    if not found:
        return [], "no assistant turn"
    if found[-1]["reference"] is None and record.get("reference") is not None:
        found[-1]["reference"] = record["reference"]  # a conversation-level reference: the last turn's
    return found, None


def _tool_names(calls: Any) -> str:
    """The names of an assistant message's tool calls (OpenAI's ``{"function": {"name"}}``, RAGAS's ``{"name"}``)."""
    names = [c.get("function", {}).get("name") or c.get("name") if isinstance(c, Mapping) else None
             for c in (calls if isinstance(calls, list) else [])]
    return "tools: " + ", ".join(str(n) for n in names if n) if any(names) else "tools"


def _clipped(text: str) -> str:
    return text if len(text) <= HISTORY_CHARS else text[:HISTORY_CHARS].rstrip() + "…"


def with_history(question: str, history: list[dict[str, str]] | None) -> str:
    """The question a judge reads for a turn: ``question`` alone when there is no earlier message;
    else ``question``, a blank line, :data:`HISTORY_HEADING` and the latest :data:`HISTORY_MESSAGES`
    messages of ``history``, one a line as ``User: …`` / ``Assistant: …`` (each clipped to
    :data:`HISTORY_CHARS` characters)."""
    if not history:
        return question
    lines = [f"{m['role'].capitalize()}: {' '.join(_clipped(m['content']).split())}" for m in history[-HISTORY_MESSAGES:]]
    return question + _SEPARATOR + "\n".join(lines)


def split(text: str) -> tuple[str, list[tuple[str, str]]]:
    """:func:`with_history` read back: the question and the earlier messages as ``(role, content)``."""
    question, _, earlier = text.partition(_SEPARATOR)
    messages = [line.split(": ", 1) for line in earlier.splitlines() if ": " in line]
    return question, [(role.lower(), content) for role, content in messages]


def is_follow_up(question: str) -> bool:
    """Whether ``question`` is read with the earlier turns when they are given (:data:`CONTINUES` or
    :data:`PRONOUN`)."""
    return CONTINUES.search(question) is not None or PRONOUN.search(question) is not None


def unresolved(question: str, history: list[dict[str, str]] | None) -> str | None:
    """:data:`NO_HISTORY` when ``question`` continues an earlier turn (:data:`CONTINUES`) and no earlier
    message is given (a single-turn record, a conversation's first turn), else ``None``."""
    return NO_HISTORY if not history and CONTINUES.search(question) else None


#: The names and numbers of a text: capitalised words past a sentence's start, and numbers.
_NAMED = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][\w'-]*(?:\s+[A-Z][\w'-]*)*|\b\d[\d.,]*\b")


def resolved(text: str) -> str:
    """The question the offline judge reads for ``text`` (:func:`with_history`'s rendering): the question
    alone when it has no history or stands on its own (not :func:`is_follow_up`); else the question
    followed, in parentheses, by the earlier user questions back to the latest one that stands on its own
    and the names and numbers of the latest assistant message."""
    question, history = split(text)
    if not history or not is_follow_up(question):
        return question
    asked: list[str] = []
    for role, content in reversed(history):
        if role == "user":
            asked.insert(0, content)
            if not is_follow_up(content):
                break
    answer = next((content for role, content in reversed(history) if role == "assistant"), "")
    named = list(dict.fromkeys(m.group(0) for m in _NAMED.finditer(answer)))
    return f"{question} {_COMPLETED}({' '.join([*asked, *named])})"


#: Between a follow-up and what :func:`resolved` completes it with (U+2063, an invisible separator no
#: question holds): :func:`asked` finds the question by it.
_COMPLETED = "\u2063"


def asked(text: str) -> str:
    """The question of a :func:`resolved` text, without what completes it: what the rules on a question's
    form read (does an answer only restate it, which kind of answer does it ask for), where the completion's
    names, taken from the previous answer, would make an answer repeating them look like a restatement."""
    return text.partition(f" {_COMPLETED}")[0]


def distinct(samples: Iterator[T]) -> Iterator[T]:
    """``samples`` (``rag_eval.metrics.core.samples.Sample``) with a conversation id already used on an
    earlier line taken as ``<id>#<k>`` on its k-th line (k from 2), its turns' ids with it: two conversations are never summed as one (a scripted
    conversation run twice without ids hashes alike)."""
    lines: dict[str, list[int]] = {}  # a conversation id's rows, in the order read
    for sample in samples:
        if sample.conversation_id is not None:
            rows = lines.setdefault(sample.conversation_id, [])
            if sample.row not in rows:
                rows.append(sample.row)
            if (k := rows.index(sample.row) + 1) > 1:
                sample.conversation_id = f"{sample.conversation_id}#{k}"
                sample.id = f"{sample.conversation_id}/{sample.turn}"
        yield sample
