"""Who did what: the agents a text names for its verbs, the agent a statement claims, and the verb
a question asks the agent of. English only; a text without such a relation gives none.

A text names ``B`` as the agent of a verb by the passive ("directed by Robert Zemeckis", "created,
written, and directed by Ricky Gervais and Stephen Merchant", "released on 8 September 1997 by
Wiiija") or by the active voice with a name as subject ("The Kingsmen wrote the song", "Paramount
Pictures also produced …"). Verbs are compared by their stem (``rag_eval.metrics.text.stem``: "wrote" and
"written" are "write"). Used by the offline judge's role check (``rag_eval.metrics.judges.claim_rules.role_clash``).
"""
from __future__ import annotations

import re

from rag_eval.metrics.text.memos import memo
from rag_eval.metrics.text.tokens import _IRREGULAR, STOPWORDS, stem

_IRREGULAR_PAST = "|".join(sorted(_IRREGULAR, key=len, reverse=True))
_PAST = re.compile(rf"(?:[a-z]{{3,}}ed|{_IRREGULAR_PAST})", re.IGNORECASE)
_TOKEN = re.compile(r"[A-Za-z][\w'’&-]*|\d+(?:[.,]\d+)*\w*|[^\w\s]")
_NAME_WORD = re.compile(r"[A-Z][\w'’&-]*")
# Words that may stand between an active subject and its verb ("Paramount Pictures also produced").
_ADVERBS = frozenset("also has have had then later first originally subsequently jointly".split())
# A past form followed by one of these is a participle, not an active verb ("the medals of the
# United States won at the 2010 Games").
_PREPOSITIONS = frozenset("at in on during for from to with as after before under into over between".split())


def _past(token: str) -> bool:
    return _PAST.fullmatch(token) is not None


def _names_at(tokens: list[str], start: int) -> list[str]:
    """The agents listed from ``tokens[start]``: noun phrases holding a capitalised word, split at a
    comma or "and" before a capitalised word ("Domenico Dolce and Stefano Gabbana", "Syco Music,
    Columbia Records"), each ending at punctuation, a function word or a verb, a leading "the"
    dropped ("American country pop artist Garth Brooks", "First Lady of the United States Hillary
    Rodham Clinton", "Richard Berry" of "Richard Berry in 1955")."""
    found: list[list[str]] = []
    current: list[str] = []
    for i in range(start, min(len(tokens), start + 12)):
        token, following = tokens[i], tokens[i + 1] if i + 1 < len(tokens) else ""
        if token in (",", "and") and current and _NAME_WORD.fullmatch(following):
            found.append(current)
            current = []
        elif token in ("of", "the", "&") and (current or token == "the"):
            current.append(token)
        elif re.fullmatch(r"[\w'’-]+", token) and (
                token[0].isupper() or (token not in STOPWORDS and not _past(token))):
            current.append(token)
        else:
            break
    found.append(current)
    phrases = []
    for words in found:
        while words and words[-1] in ("of", "the", "&"):
            words = words[:-1]
        if words and words[0].lower() == "the":
            words = words[1:]
        if any(_NAME_WORD.fullmatch(w) for w in words):
            phrases.append(" ".join(words))
    return phrases


def _subject_before(tokens: list[str], verb: int) -> str | None:
    """The name just before the verb at ``verb`` (adverbs and "has" between allowed), if any; none
    after a pronoun or a form of "be" ("He contributed", "Beowulf was directed by …")."""
    i = verb - 1
    while i >= 0 and tokens[i].lower() in _ADVERBS:
        i -= 1
    if i < 0 or not _NAME_WORD.fullmatch(tokens[i]) or tokens[i].lower() in STOPWORDS:
        return None  # a pronoun or "was" ("He contributed", "Beowulf was directed")
    end = i + 1
    while i >= 0 and (_NAME_WORD.fullmatch(tokens[i]) or (tokens[i] in ("of", "&") and i > 0)):
        i -= 1
    words = tokens[i + 1:end]
    while words and words[0] in ("of", "&"):
        words = words[1:]
    if words and words[0] == "The":
        words = words[1:]
    return " ".join(words) or None


@memo  # a context's sentences are read once per statement judged against them
def agents(sentence: str) -> tuple[tuple[str, str, str], ...]:
    """``(verb stem, agent, verb as written)`` triples ``sentence`` names: passive agents after "by" (the participles
    coordinated before it share them; up to five words may stand between the participle and "by"),
    and names standing as the subject of a past-tense verb that no preposition follows ("the medals
    of the United States won at the 2010 Games" names no winner). Agents keep their case."""
    tokens = _TOKEN.findall(sentence or "")
    found: list[tuple[str, str, str]] = []
    for i, token in enumerate(tokens):
        if token.lower() == "by":
            verbs, j = [], i - 1 - (i > 0 and tokens[i - 1] == ",")  # "released on 18 November 2016, by"
            while j >= 0 and i - j <= 6 and not _past(tokens[j]) and re.fullmatch(r"[\w'’-]+", tokens[j]):
                j -= 1
            while j >= 0 and (_past(tokens[j]) or tokens[j] in (",", "and", "or")):
                if _past(tokens[j]):
                    verbs.append(tokens[j].lower())
                j -= 1
            if verbs:
                named = _names_at(tokens, i + 1)
                found += [(stem(verb), name, verb) for verb in verbs for name in named]
        elif _past(token) and token[0].islower() and (
                i + 1 >= len(tokens) or tokens[i + 1].lower() not in _PREPOSITIONS | {"by"}):
            subject = _subject_before(tokens, i)
            if subject:
                found.append((stem(token.lower()), subject, token))
    return tuple(dict.fromkeys(found))


def listed_names(answer: str) -> list[str]:
    """The names a short answer opens with ("Robert Zemeckis", "The Kingsmen wrote …" → ["Kingsmen"],
    "Syco Music and Columbia Records" → both); none when it opens with a lower-case word."""
    return _names_at(_TOKEN.findall(answer or ""), 0)


_ASKED = (re.compile(rf"^\s*who\s+(?:also\s+|first\s+|originally\s+)?({_PAST.pattern})\b", re.IGNORECASE),
          re.compile(rf"\b({_PAST.pattern})\s+by\s+(?:who|whom|what|which)\b", re.IGNORECASE),
          re.compile(rf"^\s*(?:which|what)\s+(?:[a-z-]+\s+){{1,3}}?(?:has\s+|had\s+|have\s+)?({_PAST.pattern})\b"
                     r"(?!\s+by\b)", re.IGNORECASE))


def asked_verb(question: str) -> str | None:
    """The stem of the verb whose agent ``question`` asks for ("Who wrote …?" → "write", "… directed by
    who?" → "direct", "Which company has published …?" → "publish"), else ``None``."""
    for pattern in _ASKED:
        match = pattern.search(question or "")
        if match:
            return stem(match.group(1).lower())
    return None
