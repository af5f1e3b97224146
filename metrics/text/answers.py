"""Short answers and statements: bare spans, yes/no, the "Q: … A: …" form, evasive sentences."""
from __future__ import annotations

import re

from rag_eval.metrics.text.memos import memo
from rag_eval.metrics.text.sentences import _LETTER, has_cjk, split_sentences
from rag_eval.metrics.text.tokens import _MONTHS, _WORD, STOPWORDS, content_tokens, names, numbers, quantities

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


# What a question asks for, from its wh-word or its head noun. A quantity: "How many/much/long/old/…",
# "What year/percentage/number", or "what is the <noun> of" with a measured noun ("the boiling point
# of ethanol", "the population of Paris"), "多少", "几", "哪年", a measured noun with "什么" ("沸点是什么").
_MEASURED = ("population height length width depth weight mass temperature speed velocity distance area size "
             "price cost rate age duration capacity volume density altitude elevation budget salary revenue "
             "income gdp percentage proportion amount total score").split()
_MEASURED_ZH = "沸点|熔点|冰点|温度|人口|高度|长度|宽度|深度|重量|面积|价格|速度|距离|年龄|数量|比例|票房|市值|营收|收入|海拔"
_ASKS_NUMBER = re.compile(
    r"\b(?:how (?:many|much|long|old|far|tall|big|high|large|deep|wide|heavy|fast|hot|cold|often)"
    r"|what (?:year|percentage|number)|in (?:what|which) year"
    r"|what(?:'s|\s+(?:is|was|are|were))?\s+(?:the|its|their|his|her|an?)?\s*(?:(?!of\b|in\b|for\b)[a-z-]+\s+){0,2}?"
    rf"(?:{'|'.join(_MEASURED)}|(?:boiling|melting|freezing) point)s?)\b"
    rf"|多少|几|哪一?年|多[长高远重大久深宽]|(?:{_MEASURED_ZH}).*什么", re.IGNORECASE)
_ASKS_DATE = re.compile(r"^\s*when\b|\bwhat (?:date|day|month)\b|何时|什么时候|哪天", re.IGNORECASE)
_ASKS_NAME = re.compile(r"^\s*(?:who|whom|whose)\b|\bby whom\b|谁", re.IGNORECASE)
_ASKS_PLACE = re.compile(r"^\s*where\b|\bin (?:what|which) (?:city|country|state|town|place)\b|哪里|哪儿|在哪", re.IGNORECASE)
_NUMERAL = re.compile(r"\d|[一二三四五六七八九十百千万亿]")


def asked_kind(question: str) -> str | None:
    """The kind of answer ``question`` asks for: ``"a number"`` (a quantity: "How many …?", "What is the
    boiling point of …?", "多少"), ``"a date"`` ("When …?"), ``"a name"`` ("Who …?", "谁"), ``"a place"``
    ("Where …?", "哪里"); ``None`` for a yes/no question or one of no set kind ("Which album …?")."""
    question = question or ""
    if is_polar_question(question):
        return None
    for kind, pattern in (("a number", _ASKS_NUMBER), ("a date", _ASKS_DATE), ("a name", _ASKS_NAME),
                          ("a place", _ASKS_PLACE)):
        if pattern.search(question):
            return kind
    return None


def answer_kind_missed(question: str, span: str) -> str | None:
    """The kind of answer ``question`` asks for (:func:`asked_kind`) that the short answer ``span`` is
    not, by its form, else ``None``. A number and a date need a digit, a number word, a month or a
    CJK numeral ("Marie Curie." and "Paris." are no boiling point); a name needs a capitalised word or
    CJK text, and no digit ("1865年" is nobody); a place needs a word that is not a number or a month
    ("1889" is nowhere). Only a bare span is judged ("Delhi", "Marie Curie.", "78.37 °C"), not a short
    sentence ("The university offers many majors.", "Ethanol boils at 78.37 °C.": a lower-case content
    word before its full stop), nor a yes/no."""
    kind = asked_kind(question)
    if kind is None or not is_bare_span(span) or yes_no(span):
        return None
    if re.search(r"[.!?。！？]\s*$", span) and any(w.islower() and w not in STOPWORDS for w in _WORD.findall(span)):
        return None  # a short sentence
    if kind == "a name":
        fits = not re.search(r"\d", span) and (has_cjk(span) or any(w[:1].isupper() for w in span.split()))
    elif kind == "a place":  # a word left once numbers, numerals, months and 年/月/日 are taken out
        fits = any(w.lower() not in STOPWORDS and w.lower() not in _MONTHS
                   for w in _WORD.findall(re.sub(r"[\d一二三四五六七八九十百千万亿年月日号]", " ", span)))
    else:
        fits = bool(quantities(span)) or bool(_NUMERAL.search(span))
    return None if fits else kind


def qa_statement(question: str, answer: str) -> str:
    """The statement judged for a short answer: ``"Q: <question> A: <answer>"``."""
    return f"Q: {' '.join(question.split())} A: {answer.strip()}"


def split_qa(statement: str) -> tuple[str, str] | None:
    """``(question, answer)`` of a statement made by :func:`qa_statement`, else ``None``."""
    match = _QA.match(statement)
    return (match["question"], match["answer"]) if match else None


# Evasive or refusing sentences: they state nothing checkable (regression case BR-01).
_NONCOMMITTAL = re.compile(
    r"\b(i (?:do not|don't|cannot|can't|could not|couldn't) (?:know|find|answer|say|tell|help|determine|provide)"
    r"|(?:could|can)(?: ?not|n't) (?:find|locate|determine|answer)|not (?:sure|certain)"
    r"|no (?:relevant )?information|not (?:mentioned|provided|available|specified) in"
    r"|unable to (?:find|answer|determine|provide)|i(?:'m| am) (?:sorry|afraid)"
    r"|sorry|it depends|there is no way to know"
    r"|(?:has|have|had|was|were|is|are) not been (?:provided|mentioned|specified|disclosed|given|stated|reported)"
    r"|(?:is|are|was|were) not (?:provided|mentioned|specified|given|stated|disclosed|known|available)"
    r"|(?:does|do|did) not (?:say|mention|specify|state|provide|contain|include)"
    r"|(?:doesn't|don't|didn't) (?:say|mention|specify|state|provide|contain|include)"
    r"|no (?:details?|mention|data) (?:is |are )?(?:given|provided|available|of))\b"
    r"|无法(?:回答|确定|找到|提供|得知)|不知道|不清楚|没有(?:找到|相关|提供|提到|说明)(?:的)?(?:信息|资料)?|抱歉|对不起|不确定"
    r"|(?:未|并未|没有)(?:提供|提及|提到|说明|给出|披露)|不得而知",
    re.IGNORECASE,
)


def is_noncommittal(sentence: str) -> bool:
    """True for an evasive or refusing sentence ("I don't know", "The date has not been
    provided.", "抱歉，无法回答", "文中未提及")."""
    return bool(_NONCOMMITTAL.search(sentence or ""))


# Vague words that add nothing to a restated question ("… was completed at some point", "That is
# a good question about …"), as content tokens.
_VAGUE = frozenset("point good question thing something anything many people various certain time interesting "
                   "topic matter regard aspect".split())


def restates(question: str, response: str) -> bool:
    """True when ``response`` only restates ``question``: no number or name the question lacks
    and at least 80 % of its content tokens, vague words aside (``_VAGUE``: "at some point",
    "a good question"), taken from the question ("The Eiffel Tower was completed." for "When
    was the Eiffel Tower completed?"). Short spans, and any answer to a yes/no question (which
    affirms or denies its claim: "The Eiffel Tower is made of iron." for "Is the Eiffel Tower
    made of iron?"), never count."""
    if is_bare_span(response) or is_polar_question(question):
        return False
    said, asked = content_tokens(response) - _VAGUE, content_tokens(question)
    asked_words = set(re.findall(r"\w+", (question or "").lower()))
    new_facts = (numbers(response) - numbers(question)) | {
        n for n in names(response) if not set(re.findall(r"\w+", n)) <= asked_words}
    return len(said) >= 2 and not new_facts and len(said & asked) >= 0.8 * len(said)


def statements(text: str, question: str | None = None) -> list[str]:
    """Checkable statements of ``text``: its sentences minus evasive ones.

    Deterministic segmentation (``rag_eval.metrics.text.split_sentences``), so the number of
    statements never depends on a judge's mood (RAGAS's is what its LLM extracted). A bare span ("85",
    "Delhi", "yes"; ``rag_eval.metrics.text.is_bare_span``) is one statement, judged together with
    its ``question`` when there is one: ``"Q: <question> A: 85"``; a bare yes/no without a
    question is none. A first sentence opening with yes/no that answers a yes/no question
    ("No, only X is …") is judged with the question too.
    """
    return list(_statements(text, question))


@memo  # every metric reading the response asks for its statements
def _statements(text: str, question: str | None) -> tuple[str, ...]:
    asked = question if question and question.strip() else None  # the question, when one was asked
    if is_bare_span(text) and not is_noncommittal(text):
        if yes_no(text) and asked is None:
            return ()  # a bare "yes" or "no" says nothing checkable without its question
        return (qa_statement(asked, text) if asked is not None else text.strip(),)
    sentences = [s for s in split_sentences(text) if not is_noncommittal(s)]
    if asked is not None and sentences and yes_no(sentences[0]) and is_polar_question(asked):
        sentences[0] = qa_statement(asked, sentences[0])  # "No, only X is …": the "no" answers the question
    return tuple(sentences)
