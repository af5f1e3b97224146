"""Content tokens, numbers, quantities and names: the lexical evidence of the offline rules."""
from __future__ import annotations

import decimal
import functools
import re
from collections.abc import Callable

from rag_eval.metrics.text.memos import memo
from rag_eval.metrics.text.sentences import _CJK_RUN, split_sentences

_LATIN_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_WORD = re.compile(r"(?<!\w)[^\W_][\w'’-]*")  # a word, digits first included ("3E" is no "E")
_NUMBER_WORDS = dict(zip("two three four five six seven eight nine ten eleven twelve twenty thirty forty fifty sixty "
                         "seventy eighty ninety".split(), "2 3 4 5 6 7 8 9 10 11 12 20 30 40 50 60 70 80 90".split()))
_MONTHS = frozenset("january february march april may june july august september october november december".split())
# A number word (any case) or a capitalised month name as a whole run of ASCII letters ("Seven", "May", not "Mayor").
_NUMBER_WORD = re.compile(rf"(?<![A-Za-z])(?:{'|'.join(_NUMBER_WORDS)})(?![A-Za-z])", re.IGNORECASE | re.ASCII)
_MONTH = re.compile(rf"(?<![A-Za-z])(?:{'|'.join(month.title() for month in _MONTHS)})(?![A-Za-z])")
STOPWORDS = frozenset(
    """a an the and or but if then else of to in on at by for with from as is are was were be been
    being am do does did doing have has had having it its this that these those there here which who
    whom whose what when where why how i me my we our you your he him his she her they them their
    not no nor so than too very can could should would may might must will shall just also only
    into onto about over under again further once all any both each few more most other some such
    own same s t don now up down out off""".split()
)


def normalise_number(token: str) -> str:
    """``"5,895"`` → ``"5895"``; ``"3.50"`` → ``"3.5"``."""
    token = token.replace(",", "")
    if "." in token:
        token = token.rstrip("0").rstrip(".")
    return token


def numbers(text: str) -> set[str]:
    """The numbers written in digits in ``text``, normalised; a year glued to the next number
    by a period (``"2012.12:01"``) also gives its parts."""
    found = set()
    for match in re.findall(r"\d+(?:[.,]\d+)*", text or ""):
        found.add(normalise_number(match))
        if re.fullmatch(r"\d{4}\.\d+", match):
            found.update(normalise_number(part) for part in match.split("."))
    return found


def _memoised(function: Callable[[str], set[str]]) -> Callable[[str], frozenset[str]]:
    """``function``, a pure function of one text returning a set, remembered (:func:`memo`) for
    the last texts (the offline judge asks for the same passages and statements once per
    metric and per context); the result is frozen, so no caller can change another's."""
    @memo
    @functools.wraps(function)
    def remembered(text: str) -> frozenset[str]:
        return frozenset(function(text))
    return remembered


# A number the text marks as approximate: "about 21,000", "约21196公里", "21196公里左右", "~3.5".
_APPROXIMATE_BEFORE = re.compile(r"(?:\b(?:about|around|approximately|approx|roughly|nearly|almost|circa|some|close to)"
                                 r"|约|大约|大概|将近|近|~|≈)\W{0,2}$", re.IGNORECASE)
_APPROXIMATE_AFTER = re.compile(r"^\s*[^\d\s]{0,2}?(?:左右|上下|多|余)")


def approximate_numbers(text: str) -> set[str]:
    """The numbers of ``text`` (normalised as in :func:`numbers`) marked as approximate by a
    word just before them ("about", "around", "approximately", "roughly", "nearly", "约",
    "大约", "将近", "~", "≈") or after them, a unit between ("21196公里左右", "3万多")."""
    text = text or ""
    return {value for m, value in _values(text)
            if _APPROXIMATE_BEFORE.search(text[max(0, m.start() - 16):m.start()])
            or _APPROXIMATE_AFTER.match(text[m.end():m.end() + 6])}


def same_number(stated: str, found: str, approximate: bool, tolerance: float) -> bool:
    """Does the number ``stated`` say the number ``found`` (both normalised)? Equal; or
    ``found`` rounded to ``stated``'s decimals ("21196" for "21196.18", "3.1" for "3.14");
    or, when ``stated`` is marked approximate, within ``tolerance`` of it relatively
    ("约21000" for "21196.18" at 0.05). Words (month names) only when equal."""
    if stated == found:
        return True
    try:
        value, truth = float(stated), float(found)
    except ValueError:
        return False
    decimals = len(stated.partition(".")[2])
    if len(found.partition(".")[2]) > decimals and abs(truth - value) <= 0.5 * 10 ** -decimals:
        return True
    return approximate and abs(truth - value) <= tolerance * max(abs(truth), 1e-9)


# Irregular past forms of common verbs, read as their base form ("won" says "win").
_IRREGULAR = dict(pair.split(":") for pair in (
    "won:win wrote:write written:write made:make took:take taken:take gave:give given:give went:go gone:go "
    "became:become began:begin begun:begin held:hold led:lead sold:sell bought:buy paid:pay said:say told:tell "
    "knew:know known:know saw:see seen:see grew:grow grown:grow ran:run came:come brought:bring kept:keep "
    "met:meet lost:lose spent:spend chose:choose chosen:choose rose:rise risen:rise fell:fall fallen:fall "
    "drove:drive driven:drive broke:break broken:break spoke:speak spoken:speak drew:draw drawn:draw "
    "sang:sing sung:sing built:build sent:send taught:teach fought:fight caught:catch").split())


@memo  # every text's words are stemmed, and texts share words
def stem(word: str) -> str:
    """A light English suffix stripper: ``carries``→``carry``, ``kilograms``→``kilogram``,
    ``launched``→``launch``, ``sleeping``→``sleep``, irregular past forms of common verbs
    to their base (``won``→``win``, ``written``→``write``); short words and words ending in
    ``-is``, ``-us``, ``-ss`` (``Paris``, ``status``, ``class``) are kept as they are."""
    if word in _IRREGULAR:
        return _IRREGULAR[word]
    if len(word) <= 4 or not word.isascii():
        return word
    for suffix, replacement, minimum in (("ies", "y", 5), ("sses", "ss", 5), ("ches", "ch", 5), ("shes", "sh", 5),
                                         ("xes", "x", 5), ("ing", "", 6), ("ed", "", 5), ("s", "", 5)):
        if word.endswith(suffix) and len(word) >= minimum and not (suffix == "s" and word[-2] in "ius"):
            return word[: len(word) - len(suffix)] + replacement
    return word


@_memoised
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


# Magnitude words after a number: "$5 billion" is 5000000000, "3万" 30000, "1.2亿" 120000000.
_MAGNITUDES = {"thousand": 3, "million": 6, "billion": 9, "trillion": 12, "bn": 9, "万": 4, "亿": 8}
_NUMBER_WITH_MAGNITUDE = re.compile(r"\d+(?:[.,]\d+)*(?:\s*(?:(thousand|million|billion|trillion|bn)\b|(万|亿)))?",
                                    re.IGNORECASE)


def _values(text: str) -> list[tuple[re.Match, str]]:
    """Each number of ``text`` with its value, normalised: a magnitude word after it scales it
    ("5 billion" → "5000000000", "5 million" → "5000000", "3万" → "30000")."""
    found = []
    for match in _NUMBER_WITH_MAGNITUDE.finditer(text or ""):
        number = re.match(r"[\d.,]+", match.group())
        assert number is not None  # the pattern starts with a digit
        digits = normalise_number(number.group())
        word = (match.group(1) or match.group(2) or "").lower()
        if word:
            digits = normalise_number(format(decimal.Decimal(digits).scaleb(_MAGNITUDES[word]), "f"))
        found.append((match, digits))
    return found


@_memoised
def quantities(text: str) -> set[str]:
    """Numbers in ``text`` (digits, normalised, scaled by a magnitude word after them: "$5
    billion" → "5000000000", "3万" → "30000"; and the English number words two to twelve and
    the tens, as digits) plus capitalised month names, lower-cased: the tokens whose change
    turns a true statement into a false one ("$5 billion" is not "$5 million")."""
    scaled = {value for match, value in _values(text) if match.group(1) or match.group(2)}
    plain = set(numbers(_NUMBER_WITH_MAGNITUDE.sub(lambda m: " " if m.group(1) or m.group(2) else m.group(),
                                                            text or "")))
    return (plain | scaled | {_NUMBER_WORDS[w.lower()] for w in _NUMBER_WORD.findall(text or "")}
            | {w.lower() for w in _MONTH.findall(text or "")})


@_memoised
def names(text: str) -> set[str]:
    """Likely proper names of English text, as lower-cased phrases.

    Runs of capitalised words, "of" included between two ("Kings of Leon"), form one phrase
    ("Mount Kilimanjaro", "Glenn Hughes"). A
    run at the start of a sentence counts only when it has two words or more, since a
    lone first word is capitalised anyway. Stop words and their contractions ("I'll",
    "Don't") break runs; a trailing ``'s`` is dropped. CJK text yields none (its names
    are covered by the bigram overlap instead).
    """
    found = set()
    for sentence in split_sentences(text):
        run: list[str] = []
        run_start = 0
        words = _WORD.findall(sentence) + ["."]
        for i, word in enumerate(words):
            if run and word == "of" and words[i + 1][0].isupper():
                run.append(word)  # "Kings of Leon", "University of Texas": one name
                continue
            if word[0].isupper() and re.split(r"['’]", word.lower())[0] not in STOPWORDS:
                run_start = i if not run else run_start
                run.append(re.sub(r"(['’]s)?['’]?$", "", word.lower()))
                continue
            if run and (run_start > 0 or len(run) > 1):
                found.add(" ".join(run))
            run = []
    return found
