"""Sentence segmentation and the normalisation of RAG text (citation markers, Markdown, HTML).

Segmentation honours Latin, CJK, Devanagari and Arabic sentence ends (``. ! ? ;``,
``。！？；``, ``। ॥``, ``؟ ۔``) and
newlines, keeps decimals (``3.5``) and common abbreviations together, and works on
text without spaces (regression case BR-03: only splitting on ``.`` turns Chinese
answers into zero statements).
"""
from __future__ import annotations

import html
import re

from rag_eval.metrics.text.memos import memo

_CJK = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_CJK_RUN = re.compile(f"[{_CJK}]+")
_ABBREVIATIONS = {
    "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "vs", "etc", "e.g", "i.e", "inc", "ltd",
    "co", "corp", "no", "fig", "u.s", "u.k", "jan", "feb", "mar", "apr", "jun", "jul", "aug",
    "sep", "sept", "oct", "nov", "dec", "approx", "est", "dept", "mt",
}
# A sentence ends at CJK punctuation, at ! ? ; , or at a period followed by space or end.
_BOUNDARY = re.compile(r"(?<=[。！？；!?;।॥؟۔])|(?<=\.)(?=\s|$)")
_LETTER = re.compile(r"[^\W_]", re.UNICODE)
_BARE_MARKER = re.compile(r"\(?\d{1,2}[.)]?")
_LIST_MARKER = re.compile(r"^\s*(?:[-*•]+|\(?\d{1,2}[.)]|\(?[a-z][.)]|\([A-Z]\))\s+")


def split_sentences(text: str) -> list[str]:
    """Split ``text`` into sentences, deterministically.

    Parameters
    ----------
    text : str
        Any text, English, Chinese or Japanese, with or without spaces.

    Returns
    -------
    list of str
        Stripped sentences in order; list markers (``1.``, ``-``) are removed and pieces
        without any letter or digit are dropped (a bare ``"2006"`` is a statement). ``"长城很长。它很古老。"`` gives two.
    """
    return list(_sentences(text or ""))


@memo  # the same contexts and responses are split once per metric
def _sentences(text: str) -> tuple[str, ...]:
    sentences: list[str] = []
    for line in text.splitlines():
        pending = ""
        for piece in _BOUNDARY.split(_LIST_MARKER.sub("", line)):
            chunk = pending + piece
            words = chunk.strip()[:-1].split()
            if chunk.strip().endswith(".") and words and _is_abbreviation(words[-1]) and len(chunk) < 500:
                pending = chunk
                continue
            if re.search(r"[;；]\s*$", chunk) and chunk.count("(") > chunk.count(")") and len(chunk) < 500:
                pending = chunk  # a semicolon inside parentheses: "Deadwood (Lakota: "…"; "…") is a city"
                continue
            pending = ""
            _keep(chunk, sentences)
        _keep(pending, sentences)
    return tuple(sentences)


def _is_abbreviation(word: str) -> bool:
    word = word.lower().lstrip("(")
    return word in _ABBREVIATIONS or bool(re.fullmatch(r"[a-z]", word))


def _keep(chunk: str, sentences: list[str]) -> None:
    sentence = chunk.strip()
    if _LETTER.search(sentence) and not _BARE_MARKER.fullmatch(sentence):
        sentences.append(sentence)


@memo  # the offline judge reads a context's passages once per metric
def join_lines(text: str) -> str:
    """``text`` with its line and paragraph breaks taken out (list markers dropped as in
    :func:`split_sentences`): a break between two CJK characters goes, any other becomes a space. A
    sentence a chunker, a page or a hard wrap broke across lines is one sentence again; its
    punctuation still ends a sentence ("Marie Curie was born\n\nin Warsaw in 1867." → "Marie Curie
    was born in Warsaw in 1867.")."""
    pieces: list[str] = []
    for line in (_LIST_MARKER.sub("", line).strip() for line in (text or "").splitlines()):
        if line:
            if pieces and not (_CJK_RUN.match(pieces[-1][-1]) and _CJK_RUN.match(line[0])):
                pieces.append(" ")
            pieces.append(line)
    return "".join(pieces)


@memo
def has_cjk(text: str) -> bool:
    """True when ``text`` contains Chinese, Japanese or Korean characters."""
    return bool(_CJK_RUN.search(text or ""))


# Citation markers a RAG system appends to its sentences: [1], [1, 2], [1-3], [ID:3], [doc2],
# [^1], ^[2], 【1†source】, 【3:0†file.pdf】, (Source: …), [Source: …].
_CITATIONS = re.compile(
    r"\s*(?:\^?\[\^?(?:\d+(?:\s*[-–,]\s*\d+)*|(?:id|doc|source|ref|chunk|passage|context)\s*[:#]?\s*[\w.-]+)\]"
    r"|【[^】]{0,80}】"
    r"|[(\[](?:sources?|refs?|references?|citations?|来源|出处)\s*[:：][^)\]]{0,200}[)\]])",
    re.IGNORECASE)
_CODE_FENCE = re.compile(r"^\s*(```|~~~).*$", re.MULTILINE)
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$", re.MULTILINE)
_HEADER = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$", re.MULTILINE)
_BLOCK_MARKER = re.compile(r"^\s*(?:>\s*)+|^\s*(?:[-*+•]|\d{1,3}[.)])\s+", re.MULTILINE)
_EMPHASIS = re.compile(r"(?<![A-Za-z0-9])(\*\*|__|\*|_|~~|`)(?=\S)(.+?)(?<=\S)\1(?![A-Za-z0-9])")
_LINK = re.compile(r"!?\[([^\]]*)\]\((?:[^)\s]+)(?:\s+\"[^\"]*\")?\)")
_BREAK_TAGS = re.compile(r"<\s*(?:br|/?p|/?li|/?div|/?tr|/?h[1-6]|/?ul|/?ol|/?table|/?blockquote)\b[^>]*>",
                         re.IGNORECASE)
_TAG = re.compile(r"</?[A-Za-z][\w:-]*(?:\s+[^<>]*)?/?>")
# A sentence end glued to the next sentence: "(OUD).The bill", "rate.It".
_GLUED = re.compile(r"(?<=[a-z0-9)\]\"'’%])([.!?])(?=[A-Z][a-z])")


@memo  # every metric of a row normalises the same fields
def normalise_rag_text(text: str) -> str:
    """Plain text of a RAG response, context or reference, ready for segmentation.

    Removes citation markers (``[1]``, ``[1, 2]``, ``[ID:3]``, ``[^1]``, ``^[2]``,
    ``【1†source】``, ``(Source: …)``); turns Markdown into plain lines (bullets, numbered
    lists, block quotes and headers become lines of their own; emphasis, inline code and
    links keep their text; table rows become lines with cells separated by ``; ``; code
    fences and table rules go); turns HTML into text (block tags become line breaks, other
    tags go, entities are decoded); turns literal two-character ``\\n``/``\\r``/``\\t``
    into real ones; puts a space after a sentence end glued to the next sentence
    (``"(OUD).The bill"``); collapses repeated spaces. Chinese text is left as it is apart
    from these marks. Idempotent: normalising twice changes nothing.

    Parameters
    ----------
    text : str

    Returns
    -------
    str
        The normalised text (``""`` for ``None``).
    """
    if not text:
        return ""
    text = text.replace("\\r\\n", "\n").replace("\\n", "\n").replace("\\r", "\n").replace("\\t", " ")
    if "<" in text or "&" in text:
        text = _TAG.sub(" ", _BREAK_TAGS.sub("\n", text))
        text = html.unescape(text)
    text = _CODE_FENCE.sub("", text)
    text = _TABLE_RULE.sub("", text)
    text = _HEADER.sub(lambda m: m.group(1) + ("" if re.search(r"[.!?:。！？：]$", m.group(1)) else "."), text)
    text = _LINK.sub(r"\1", text)
    text = _CITATIONS.sub("", text)
    text = _BLOCK_MARKER.sub("", text)
    for _ in range(2):  # nested emphasis: ***x***
        text = _EMPHASIS.sub(r"\2", text)
    lines = []
    for line in text.splitlines():
        if line.count("|") >= 2:  # a Markdown table row: its cells as one line
            line = "; ".join(cell.strip() for cell in line.strip().strip("|").split("|") if cell.strip())
        line = _GLUED.sub(r"\1 ", line)
        line = re.sub(r"[ \t\u00a0]+", " ", line).strip()
        line = re.sub(r" (?=[.,;:!?。，；：！？)])", "", line)
        lines.append(line)
    return "\n".join(line for line in lines if line)
