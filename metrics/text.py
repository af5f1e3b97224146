"""Deterministic text helpers: sentence segmentation and content tokens.

Segmentation honours Latin, CJK, Devanagari and Arabic sentence ends (``. ! ? ;``,
``。！？；``, ``। ॥``, ``؟ ۔``) and
newlines, keeps decimals (``3.5``) and common abbreviations together, and works on
text without spaces (regression case BR-03: only splitting on ``.`` turns Chinese
answers into zero statements).
"""
from __future__ import annotations

import decimal
import functools
import html
import re
from collections.abc import Callable

#: Results each memo (:func:`memo`) of the text and offline-judge code keeps: a text's sentences,
#: statements, stems, passages... Every metric of a row is judged next to the others
#: (``metrics.scoring.score_chunks``), so what they share of a row is asked again within a few
#: rows; the rest keeps texts that many rows share (a passage retrieved for many questions).
#: Bounded, so a long version's memory stays flat.
MEMO_SIZE = 20_000
_MEMOS: list = []


def memo(function: Callable) -> Callable:
    """``function`` (pure, of hashable arguments) remembered for its last :data:`MEMO_SIZE`
    distinct calls (``functools.lru_cache``), and emptied by :func:`forget_memos`."""
    remembered = functools.lru_cache(maxsize=MEMO_SIZE)(function)
    _MEMOS.append(remembered)
    return remembered


def forget_memos() -> None:
    """Empty every :func:`memo` (what they hold never changes a result)."""
    for remembered in _MEMOS:
        remembered.cache_clear()


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
# A number word (any case) or a capitalised month name as a whole run of ASCII letters ("Seven", "May", not "Mayor").
_NUMBER_WORD = re.compile(rf"(?<![A-Za-z])(?:{'|'.join(_NUMBER_WORDS)})(?![A-Za-z])", re.IGNORECASE | re.ASCII)
_MONTH = re.compile(rf"(?<![A-Za-z])(?:{'|'.join(month.title() for month in _MONTHS)})(?![A-Za-z])")
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
        digits = normalise_number(re.match(r"[\d.,]+", match.group()).group())
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
    plain = set(numbers(_NUMBER_WITH_MAGNITUDE.sub(lambda m: " " if m.group(1) or m.group(2) else m.group(), text or "")))
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


@memo
def has_cjk(text: str) -> bool:
    """True when ``text`` contains Chinese, Japanese or Korean characters."""
    return bool(_CJK_RUN.search(text or ""))


# ------------------------------------------------------------------ normalisation of RAG text
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


# ------------------------------------------------------------------ short answers
_AUXILIARIES = frozenset("is are was were be been being am has have had do does did will would can could shall "
                         "should may might must isn't aren't wasn't weren't doesn't didn't won't can't".split())
_YES_NO = re.compile(r"^(yes|no|true|false|correct|incorrect|是的?|不是|否|对|不对|有|没有)(?:[\s.!,，。！]|$)",
                     re.IGNORECASE)
_QA = re.compile(r"^Q: (?P<question>.*) A: (?P<answer>.*)$", re.DOTALL)


def is_bare_span(text: str) -> bool:
    """True when ``text`` is an answer span rather than a sentence: one line, a yes/no
    answer, or at most six words with no auxiliary verb ("85", "Delhi", "May 15, 2012",
    "Province of Buenos Aires"), or at most twelve letters and digits of CJK text ("70", "南希·佩洛西") not closed as a
    sentence of more than four ("中国的首都是北京。" is a sentence; "北京。" a span)."""
    text = (text or "").strip()
    if not text or "\n" in text or not _LETTER.search(text):
        return False
    if yes_no(text) and len(text.split()) <= 2:
        return True
    if re.search(r"[.!?;。！？；](?=\s)", text.rstrip(".!?。！？ ")):
        return False
    if has_cjk(text):  # a CJK sentence closed by its full stop ("中国的首都是北京。") is not a span
        letters = len(re.sub(r"[\W_]", "", text))
        return letters <= 12 and not (letters > 4 and re.search(r"[。！？]\s*$", text))
    words = re.findall(r"[\w'’.-]+", text)
    return len(words) <= 6 and not any(w.lower() in _AUXILIARIES and w != "May" for w in words)


def yes_no(text: str) -> str | None:
    """``"yes"`` or ``"no"`` when ``text`` opens with a yes/no answer (English or Chinese), else ``None``."""
    match = _YES_NO.match((text or "").strip())
    if not match:
        return None
    word = match.group(1).lower()
    return "yes" if word in ("yes", "true", "correct", "是", "是的", "对", "有") else "no"


def is_polar_question(question: str) -> bool:
    """True for a yes/no question: opening with an auxiliary verb ("Are both …", "Did …",
    "Is it true that …"), or in Chinese ending in 吗 or asking 是否/是不是/有没有."""
    question = (question or "").strip()
    first = re.match(r"[A-Za-z']+", question)
    if first and first.group().lower() in _AUXILIARIES:
        return True
    return bool(re.search(r"吗[？?]?$|是否|是不是|有没有|对不对", question))


_ASKS_NUMBER = re.compile(r"\b(?:how (?:many|much|long|old|far|tall|big|high)|what (?:year|percentage|number)"
                          r"|in (?:what|which) year)\b|多少|几|哪一?年", re.IGNORECASE)
_ASKS_DATE = re.compile(r"^\s*when\b|\bwhat (?:date|day|month)\b|何时|什么时候|哪天", re.IGNORECASE)
_ASKS_NAME = re.compile(r"^\s*(?:who|whom|whose)\b|\bby whom\b|谁", re.IGNORECASE)


def answer_kind_missed(question: str, span: str) -> str | None:
    """The kind of answer ``question`` asks for that the bare span ``span`` is not, else ``None``:
    "a number" ("How many …?", "多少") and "a date" ("When …?") need a digit, a number word or a
    month; "a name" ("Who …?", "谁") a capitalised word or CJK text without digits. "Delhi" for "How many
    majors …?" is off the question; a question of another kind, or a span ending like a sentence,
    is never judged."""
    kind = ("a number" if _ASKS_NUMBER.search(question or "") else "a date" if _ASKS_DATE.search(question or "")
            else "a name" if _ASKS_NAME.search(question or "") else None)
    if kind is None or not is_bare_span(span) or yes_no(span) or re.search(r"[.!?。！？]\s*$", span):
        return None
    if kind == "a name":
        fits = not re.search(r"\d", span) and (has_cjk(span) or any(w[:1].isupper() for w in span.split()))
    else:
        fits = bool(quantities(span)) or bool(re.search(r"\d|[一二三四五六七八九十百千万亿]", span))
    return None if fits else kind


def qa_statement(question: str, answer: str) -> str:
    """The statement judged for a short answer: ``"Q: <question> A: <answer>"``."""
    return f"Q: {' '.join(question.split())} A: {answer.strip()}"


def split_qa(statement: str) -> tuple[str, str] | None:
    """``(question, answer)`` of a statement made by :func:`qa_statement`, else ``None``."""
    match = _QA.match(statement)
    return (match["question"], match["answer"]) if match else None
