"""A tiny RAG retriever for the target tests: word overlap over four passages, counting its calls."""
import re
import threading
import time

PASSAGES = {
    "louvre": "The Louvre museum is located in Paris, France. It holds the Mona Lisa.",
    "eiffel": "The Eiffel Tower was completed in 1889 for the World's Fair in Paris.",
    "thames": "The Thames flows through London and reaches the North Sea.",
    "prado": "The Prado museum in Madrid holds works by Velazquez and Goya.",
}
calls = {"retriever": 0}
in_flight = {"now": 0, "peak": 0}
_lock = threading.Lock()


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def overlap(user_input: str, top_k: int = 2) -> list[dict]:
    """The ``top_k`` passages sharing the most words with the question (ties by id); a
    question containing "poison" raises ValueError (a row the system fails on)."""
    with _lock:
        calls["retriever"] += 1
    if "poison" in user_input:
        raise ValueError("the index has no entry for this question")
    ranked = sorted(PASSAGES, key=lambda k: (-len(_words(user_input) & _words(PASSAGES[k])), k))[:top_k]
    return [{"id": k, "text": PASSAGES[k], "score": float(len(_words(user_input) & _words(PASSAGES[k])))}
            for k in ranked]


def answer(user_input: str, top_k: int = 2) -> dict:
    """A whole RAG system in one callable: :func:`overlap`'s passages and, as the response, the first."""
    hits = overlap(user_input, top_k)
    return {"retrieved_contexts": [h["text"] for h in hits],
            "retrieved_documents": [{"document_id": h["id"], "relevance_score": h["score"]} for h in hits],
            "response": hits[0]["text"]}


def slow(user_input: str, seconds: float = 0.2) -> list[str]:
    """One passage after ``seconds``, recording the most calls ever in flight at once (``in_flight``)."""
    with _lock:
        in_flight["now"] += 1
        in_flight["peak"] = max(in_flight["peak"], in_flight["now"])
    time.sleep(seconds)
    with _lock:
        in_flight["now"] -= 1
    return [f"passage for {user_input}"]
