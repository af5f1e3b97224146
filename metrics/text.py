"""Deterministic text helpers: sentence segmentation and content tokens.

Segmentation honours Latin and CJK sentence ends (``. ! ? ;`` and ``。！？；``) and
newlines, keeps decimals (``3.5``) and common abbreviations together, and works on
text without spaces (regression case BR-03: only splitting on ``.`` turns Chinese
answers into zero statements).
"""
from __future__ import annotations

import re

_CJK = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_CJK_RUN = re.compile(f"[{_CJK}]+")
_LATIN_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_ABBREVIATIONS = {
    "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "vs", "etc", "e.g", "i.e", "inc", "ltd",
    "co", "corp", "no", "fig", "u.s", "u.k", "jan", "feb", "mar", "apr", "jun", "jul", "aug",
    "sep", "sept", "oct", "nov", "dec", "approx", "est", "dept", "mt",
}
# A sentence ends at CJK punctuation, at ! ? ; , or at a period followed by space or end.
_BOUNDARY = re.compile(r"(?<=[。！？；!?;])|(?<=\.)(?=\s|$)")
_LETTER = re.compile(r"[^\W\d_]", re.UNICODE)
_LIST_MARKER = re.compile(r"^\s*(?:[-*•]+|\(?\d{1,2}[.)]|\(?[a-z][.)]|\([A-Z]\))\s+")
STOPWORDS = frozenset(
    """a an the and or but if then else of to in on at by for with from as is are was were be been
    being am do does did doing have has had having it its this that these those there here which who
    whom whose what when where why how i me my we our you your he him his she her they them their
    not no nor so than too very can could should would may might must will shall just also only
    into onto about over under again further once all any both each few more most other some such
    own same s t don now up down out off""".split()
)


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
        without any letter are dropped. ``"长城很长。它很古老。"`` gives two.
    """
    sentences: list[str] = []
    for line in (text or "").splitlines():
        pending = ""
        for piece in _BOUNDARY.split(_LIST_MARKER.sub("", line)):
            chunk = pending + piece
            words = chunk.strip()[:-1].split()
            if chunk.strip().endswith(".") and words and _is_abbreviation(words[-1]):
                pending = chunk
                continue
            pending = ""
            _keep(chunk, sentences)
        _keep(pending, sentences)
    return sentences


def _is_abbreviation(word: str) -> bool:
    word = word.lower().lstrip("(")
    return word in _ABBREVIATIONS or bool(re.fullmatch(r"[a-z]", word))


def _keep(chunk: str, sentences: list[str]) -> None:
    sentence = chunk.strip()
    if _LETTER.search(sentence):
        sentences.append(sentence)


def normalise_number(token: str) -> str:
    """``"5,895"`` → ``"5895"``; ``"3.50"`` → ``"3.5"``."""
    token = token.replace(",", "")
    if "." in token:
        token = token.rstrip("0").rstrip(".")
    return token


def numbers(text: str) -> set[str]:
    """The numbers written in digits in ``text``, normalised."""
    return {normalise_number(m) for m in re.findall(r"\d+(?:[.,]\d+)*", text or "")}


def content_tokens(text: str) -> set[str]:
    """Content tokens of ``text`` for lexical overlap.

    Latin-script words are lower-cased, English stop words are removed and numbers
    normalised; runs of CJK characters become character bigrams (a single character
    stays a unigram), so Chinese text without spaces still yields tokens.
    """
    text = text or ""
    tokens: set[str] = set()
    for run in _CJK_RUN.findall(text):
        tokens.update(run[i : i + 2] for i in range(max(1, len(run) - 1)))
    latin = _CJK_RUN.sub(" ", text)
    for number in numbers(latin):
        tokens.add(number)
    for word in _LATIN_WORD.findall(re.sub(r"\d+(?:[.,]\d+)*", " ", latin).lower()):
        if word not in STOPWORDS:
            tokens.add(word)
    return tokens


def proper_nouns(text: str) -> set[str]:
    """Capitalised Latin words that do not start a sentence, lower-cased.

    A cheap proper-noun detector for English; CJK text yields none (its names are
    covered by the bigram overlap instead).
    """
    found: set[str] = set()
    for sentence in split_sentences(text):
        words = re.findall(r"[A-Za-z][A-Za-z'’-]*", sentence)
        for word in words[1:]:
            if word[0].isupper() and word.lower() not in STOPWORDS:
                found.add(re.sub(r"['’]s$", "", word.lower()))
    return found


def has_cjk(text: str) -> bool:
    """True when ``text`` contains Chinese, Japanese or Korean characters."""
    return bool(_CJK_RUN.search(text or ""))
