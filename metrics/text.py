"""Deterministic text helpers: sentence segmentation and content tokens.

Segmentation honours Latin, CJK, Devanagari and Arabic sentence ends (``. ! ? ;``,
``。！？；``, ``। ॥``, ``؟ ۔``) and
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
_BOUNDARY = re.compile(r"(?<=[。！？；!?;।॥؟۔])|(?<=\.)(?=\s|$)")
_LETTER = re.compile(r"[^\W_]", re.UNICODE)
_BARE_MARKER = re.compile(r"\(?\d{1,2}[.)]?")
_WORD = re.compile(r"[^\W\d_][\w'’-]*")
_NUMBER_WORDS = dict(zip("two three four five six seven eight nine ten eleven twelve twenty thirty forty fifty sixty "
                         "seventy eighty ninety".split(), "2 3 4 5 6 7 8 9 10 11 12 20 30 40 50 60 70 80 90".split()))
_MONTHS = frozenset("january february march april may june july august september october november december".split())
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
        without any letter or digit are dropped (a bare ``"2006"`` is a statement). ``"长城很长。它很古老。"`` gives two.
    """
    sentences: list[str] = []
    for line in (text or "").splitlines():
        pending = ""
        for piece in _BOUNDARY.split(_LIST_MARKER.sub("", line)):
            chunk = pending + piece
            words = chunk.strip()[:-1].split()
            if chunk.strip().endswith(".") and words and _is_abbreviation(words[-1]) and len(chunk) < 500:
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
    if _LETTER.search(sentence) and not _BARE_MARKER.fullmatch(sentence):
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


def stem(word: str) -> str:
    """A light English suffix stripper: ``carries``→``carry``, ``kilograms``→``kilogram``,
    ``launched``→``launch``, ``sleeping``→``sleep``; short words and words ending in
    ``-is``, ``-us``, ``-ss`` (``Paris``, ``status``, ``class``) are kept as they are."""
    if len(word) <= 4 or not word.isascii():
        return word
    for suffix, replacement, minimum in (("ies", "y", 5), ("sses", "ss", 5), ("ches", "ch", 5), ("shes", "sh", 5),
                                         ("xes", "x", 5), ("ing", "", 6), ("ed", "", 5), ("s", "", 5)):
        if word.endswith(suffix) and len(word) >= minimum and not (suffix == "s" and word[-2] in "ius"):
            return word[: len(word) - len(suffix)] + replacement
    return word


def content_tokens(text: str) -> set[str]:
    """Content tokens of ``text`` for lexical overlap.

    Latin-script words are lower-cased and lightly stemmed (:func:`stem`), English stop
    words are removed and numbers normalised; runs of CJK characters become character bigrams (a single character
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
            tokens.add(stem(word))
    return tokens


def quantities(text: str) -> set[str]:
    """Numbers in ``text`` (digits, normalised, and the English number words two to
    twelve and the tens, as digits) plus capitalised month names, lower-cased: the tokens whose
    change turns a true statement into a false one."""
    words = re.findall(r"[A-Za-z]+", text or "")
    return (numbers(text) | {_NUMBER_WORDS[w.lower()] for w in words if w.lower() in _NUMBER_WORDS}
            | {w.lower() for w in words if w.istitle() and w.lower() in _MONTHS})


def names(text: str) -> set[str]:
    """Likely proper names of English text, as lower-cased phrases.

    Runs of capitalised words form one phrase ("Mount Kilimanjaro", "Glenn Hughes"). A
    run at the start of a sentence counts only when it has two words or more, since a
    lone first word is capitalised anyway. Stop words and their contractions ("I'll",
    "Don't") break runs; a trailing ``'s`` is dropped. CJK text yields none (its names
    are covered by the bigram overlap instead).
    """
    found = set()
    for sentence in split_sentences(text):
        run: list[str] = []
        run_start = 0
        for i, word in enumerate(_WORD.findall(sentence) + ["."]):
            if word[0].isupper() and re.split(r"['’]", word.lower())[0] not in STOPWORDS:
                run_start = i if not run else run_start
                run.append(re.sub(r"(['’]s)?['’]?$", "", word.lower()))
                continue
            if run and (run_start > 0 or len(run) > 1):
                found.add(" ".join(run))
            run = []
    return found


def has_cjk(text: str) -> bool:
    """True when ``text`` contains Chinese, Japanese or Korean characters."""
    return bool(_CJK_RUN.search(text or ""))
