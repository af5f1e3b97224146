"""The offline judge's English claim rules: pure functions of a statement and the contexts' text, no model.

They read what a statement claims and where the contexts' words contradict it: names found in order
(:func:`name_in`), numbers and months (:func:`missing_quantities`, a changed number:
:func:`changed_number`), a negation against an affirmation (:func:`polarity_clash`), a universal claim
(:func:`claims_universally`), a word substituted between the same neighbours (:func:`substitution`), a
name given the role the context gives another ("directed by Robert Zemeckis and written by Neil Gaiman"
against "Neil Gaiman directed it", :func:`role_clash`), and the claim of a yes/no question
(:func:`claim_text`). They cannot see other reversed roles ("releases CO2, consumes O2") or most wrong
names taken from the right sentence. The offline judge (``rag_eval.metrics.judges.offline``) weighs
them with its encoder's similarity.
"""
from __future__ import annotations

import re
from collections.abc import Set as AbstractSet

from rag_eval.metrics.text.roles import agents
from rag_eval.metrics.text import (approximate_numbers, content_tokens, has_cjk, memo, names, normalise_number, numbers,
                          quantities, same_number, split_sentences)


def is_fragment(statement: str) -> bool:
    """A short phrase rather than a sentence ("Delhi", "Province of Buenos Aires", "2006"):
    at most four content words, or at most ten characters of CJK text."""
    if has_cjk(statement):
        return len(re.sub(r"\W", "", statement)) <= 10
    return len(content_tokens(statement)) <= 4 and not re.search(r"[.!?;]$", statement.strip())


# Capitalised common nouns that open a name ("Mount Kilimanjaro", "President Nixon"):
# a context may name the same thing without them.
_TITLES = frozenset("mount mt lake river cape saint st sir dame dr mr mrs ms prof president king queen prince "
                    "princess general captain pope lord lady".split())


@memo  # asked per passage for each statement's names, by several metrics
def name_in(name: str, lowered_text: str) -> bool:
    """A name is in a text when its words stand there in order, each within two words of the one
    before ("Patrick White" in "Patrick Victor Martindale White"), a leading title aside; its first
    word may be a short form of the text's ("Pam Veasey" in "Pamela Renea Veasey"). Its words
    scattered are another name: "Panama City Air Force Base" is not in "Tyndall Air Force Base, east
    of Panama City", nor "Day of Remembrance" in "Remembrance Day"."""
    words = name.split()
    if len(words) > 1 and words[0] in _TITLES:
        words = words[1:]
    first = re.escape(words[0]) + (r"\w*" if len(words) > 1 and len(words[0]) >= 3 else "")
    rest = "".join(rf"(?:\W+[\w'’-]+){{0,2}}?\W+{re.escape(w)}" for w in words[1:])
    return re.search(rf"(?<!\w){first}{rest}(?!\w)", lowered_text) is not None


def _word_in(word: str, lowered_text: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(word)}(?!\w)", lowered_text) is not None


#: Words marking a number as approximate ("about 21,000", "约21196公里").
APPROXIMATION_WORDS = re.compile(r"\b(?:about|around|approximately|roughly|nearly|almost|circa)\b|大约|大概|将近|约|左右",
                                 re.IGNORECASE)


def missing_quantities(stated: AbstractSet[str], approximate: AbstractSet[str], found: AbstractSet[str],
                       tolerance: float) -> set[str]:
    """The stated numbers and months no found one says (``rag_eval.metrics.text.same_number``: equal,
    rounded, or within ``tolerance`` when marked approximate)."""
    return {q for q in stated if q not in found
            and not any(same_number(q, f, q in approximate, tolerance) for f in found)}


def span_tokens(text: str) -> AbstractSet[str]:
    """Content tokens of an answer span without its numbers (checked as quantities) and
    approximation words ("约21196公里" → {"公里"})."""
    return content_tokens(APPROXIMATION_WORDS.sub(" ", text)) - numbers(text)


#: A lone capitalised word shaped like a nationality adjective ("American", "Swedish", "Chinese",
#: "Korean", "Icelandic"): in a yes/no question it is the claim's predicate, not a subject.
DEMONYM = re.compile(r"[a-z]+(?:ish|ese|ian|ean|can|ic)")


def claim_text(question: str, subjects: set[str]) -> str:
    """The claim of a yes/no question as a statement: its opening auxiliary put after its first subject
    and the subjects joined to it by "and", "or" or a comma (``subjects``: lower-cased names): "Are Pam
    Veasey and Jon Jost both American?" → "Pam Veasey and Jon Jost are both American", "Is X the same
    length as Y?" → "X is the same length as Y"; the question without its auxiliary when no subject
    is found in it."""
    opening = re.match(r"\s*([A-Za-z']+)\s+", question)
    body = question[opening.end():].rstrip("?？ ") if opening else question.rstrip("?？ ")
    lowered, found = body.lower(), []
    for subject in subjects:
        words = subject.split()
        first = lowered.find(words[0])
        last = lowered.find(words[-1], first) if first >= 0 else -1
        if last >= 0:
            found.append((first, last + len(words[-1])))
    end = 0
    for start, stop in sorted(found):
        if end and not re.fullmatch(r"\s*(?:,|and|or|&|, and)\s*", body[end:start]):
            break
        end = max(end, stop)
    return f"{body[:end]} {opening.group(1).lower()}{body[end:]}" if opening and end else body


def same_root(token: str, known: frozenset[str] | set[str]) -> bool:
    """Is ``token`` (a content token) among ``known``, or a word of the same root: one a prefix of the
    other, the shorter of five letters or more ("direct" for "director", "produce" for "producer",
    "write" for "writer")? What a yes/no question's predicate asks of a passage."""
    return token in known or (len(token) >= 5 and any(
        k.startswith(token) or (len(k) >= 5 and token.startswith(k)) for k in known))


def _phrase_in(words: list[str], lowered_text: str) -> bool:
    pattern = r"\W+".join(re.escape(w) for w in words)
    return re.search(rf"(?<!\w){pattern}(?!\w)", lowered_text) is not None


def predicate_words(name: str, lowered_text: str) -> set[str]:
    """Trailing nationality words of a name (:data:`DEMONYM`) that the contexts write apart from
    it: "american" of "spike slawson american" when they say "Spike Slawson is an American …" (a
    capitalised adjective glued to the name). They belong to the claim, not to its subject; a
    surname the contexts write after a middle name ("white" of "Patrick Victor Martindale White")
    stays in the name."""
    words, extra = name.split(), set()
    while (len(words) > 1 and DEMONYM.fullmatch(words[-1]) and not _phrase_in(words, lowered_text)
           and _word_in(words[-1], lowered_text)):
        extra.add(words.pop())
    return extra if extra and _phrase_in(words, lowered_text) else set()


# A negation and what it denies: "did not win the Nobel Prize" denies ("win", "nobel"), the first
# two content words within six words after it; "not only" is no negation.
_NEGATION = re.compile(r"\b(?:not(?! only)|never|no longer|cannot|\w+n['’]t)\b", re.IGNORECASE)


@memo  # asked once per passage a statement is compared with
def negated(text: str) -> tuple[frozenset[str], ...]:
    """What ``text`` denies, one set of two content tokens per negation ("X did not win the
    prize" → ({"win", "prize"},))."""
    denied = []
    for match in _NEGATION.finditer(text):
        words = re.findall(r"[^\W\d_][\w'’]*", text[match.end():match.end() + 100])[:6]
        phrase = [t for w in words for t in sorted(content_tokens(w))][:2]
        if len(phrase) == 2:
            denied.append(frozenset(phrase))
    return tuple(denied)


def polarity_clash(statement: str, tokens: set[str], passage: str, known: set[str]) -> str | None:
    """What one text denies and the other affirms ("X did not win the prize" against "X won the
    prize"): a denied pair of words the other text holds without denying it; or None."""
    said, written = negated(statement), negated(passage)
    for denied, other, others_denied in ((said, known, written), (written, tokens, said)):
        for phrase in denied:
            if phrase <= other and phrase not in others_denied:
                return " ".join(sorted(phrase))
    return None


#: Words of a universal claim; a statement making one needs a passage making one too
#: ("performed all the songs" is not "performed the song").
UNIVERSAL = re.compile(r"\b(?:all|every|everyone|everything|always|only|entire|entirely|sole|solely|exclusively)\b",
                       re.IGNORECASE)


@memo  # asked per passage neighbourhood, once per metric
def claims_universally(text: str) -> bool:
    """Does ``text`` make a universal claim (a word of :data:`UNIVERSAL`)?"""
    return UNIVERSAL.search(text) is not None


def words_of(text: str) -> list[str]:
    """The words of ``text`` as written (case kept, numbers included, punctuation left out):
    "The film's 2 directors" → ["The", "film's", "2", "directors"]."""
    return re.findall(r"[^\W_][\w'’-]*", text)


def common_tokens(text: str) -> AbstractSet[str]:
    """Content tokens of ``text``'s words outside names: lower-case words, and each sentence's
    first word ("Brothers" of "Band of Brothers" is no evidence for "brother")."""
    words = [w for sentence in split_sentences(text) for i, w in enumerate(words_of(sentence)) if i == 0 or w.islower()]
    return content_tokens(" ".join(words))


def neighbours(sentences: list[str]) -> dict[tuple[str, str], list[tuple[str, frozenset[str]]]]:
    """The lower-case content words of ``sentences`` by their two neighbours, lower-cased, in
    order of appearance: what :func:`substitution` looks up."""
    index: dict[tuple[str, str], list[tuple[str, frozenset[str]]]] = {}
    for sentence in sentences:
        for pair, other, tokens in _neighboured(sentence):
            index.setdefault(pair, []).append((other, tokens))
    return index


@memo  # the same context sentences are indexed once per metric
def _neighboured(sentence: str) -> tuple[tuple[tuple[str, str], str, frozenset[str]], ...]:
    """Each lower-case content word of ``sentence`` (its words: :func:`words_of`) with its two
    neighbours, lower-cased, and its content tokens."""
    written = words_of(sentence)
    return tuple(((written[j - 1].lower(), written[j + 1].lower()), other, tokens)
                 for j, other in enumerate(written[1:-1], start=1)
                 if other.islower() and (tokens := content_tokens(other)))


def substitution(statement: str, known: set[str],
                 written: dict[tuple[str, str], list[tuple[str, frozenset[str]]]]) -> tuple[str, str] | None:
    """A word of the statement that no context has, where a context has another content word
    between the same two neighbours ("via a narrow gauge track" against "with a standard gauge
    track" → ("narrow", "standard")), one neighbour at least a content word or a number. Both words
    are common words, not names: "the museum holds" says "the Louvre holds" in other words; or None.
    ``written`` is the contexts' :func:`neighbours`."""
    words = words_of(statement)
    for i in range(1, len(words) - 1):
        word, left, right = words[i], words[i - 1].lower(), words[i + 1].lower()
        if (not word.islower() or not (tokens := content_tokens(word)) or tokens <= known
                or not (content_tokens(left) or content_tokens(right))):
            continue
        for other, others in written.get((left, right), ()):
            if not others & tokens:
                return word, other
    return None


_NUMBER_OR_WORD = re.compile(r"\d+(?:[.,]\d+)*|[^\W\d_][\w'’-]*")
_MAGNITUDE_WORDS = frozenset("thousand million billion trillion bn 万 亿".split())


@memo  # a context's sentences are indexed once per metric
def number_slots(sentence: str) -> tuple[tuple[tuple[str, str], str], ...]:
    """Each number of ``sentence`` (normalised) with the two words before it, lower-cased, one of them
    at least a content word ("won the Heisman Trophy in 1952" → (("trophy", "in"), "1952")); a number
    with a magnitude word after it ("5 million", checked as a quantity) is left out."""
    words = [*_NUMBER_OR_WORD.findall(sentence), ""]
    return tuple(((words[i - 2].lower(), words[i - 1].lower()), normalise_number(words[i]))
                 for i in range(2, len(words) - 1) if words[i][0].isdigit() and not words[i - 1][0].isdigit()
                 and not words[i - 2][0].isdigit() and words[i + 1].lower() not in _MAGNITUDE_WORDS
                 and content_tokens(f"{words[i - 2]} {words[i - 1]}"))


def changed_number(statement: str, slots: dict[tuple[str, str], set[str]], tolerance: float) -> tuple[str, str] | None:
    """A number of the statement where the contexts write other numbers after the same two words and
    never this one ("won the Heisman Trophy in 1953" against "won the Heisman Trophy in 1952" →
    ("1953", "1952"); rounded, or within ``tolerance`` when marked approximate, it is the same:
    ``rag_eval.metrics.text.same_number``): :func:`substitution` for numbers; or None. ``slots``: the
    contexts' :func:`number_slots`, merged."""
    approximate = approximate_numbers(statement)
    for pair, number in number_slots(statement):
        written = slots.get(pair)
        if written and not any(same_number(number, other, number in approximate, tolerance) for other in written):
            return number, sorted(written)[0]
    return None


def _same_agent(first: str, second: str) -> bool:
    """Do two agents name the same one ("Kingsmen" and "The Kingsmen", "Dennis Publishing" and "Dennis
    Publishing Ltd")?"""
    first, second = first.lower(), second.lower()
    return name_in(first, second) or name_in(second, first)


def role_clash(claimed: list[tuple[str, ...]], about: str, sentences: list[str]) -> tuple[str, str, str] | None:
    """A claimed ``(verb stem, agent)`` the contexts' ``sentences`` contradict: a sentence on the same
    thing (sharing a name or a number of ``about`` other than the agent, or half its content words)
    names the claimed agent in another role and another agent of that verb ("film directed by Robert
    Zemeckis and written by Neil Gaiman" against "Neil Gaiman directed it"), and no sentence names the
    claimed one its agent (``rag_eval.metrics.text.roles.agents``). Returns (agent, the verb as the contexts
    write it, the agent they name), or None."""
    for verb, agent, *_ in claimed:
        named = [(other, sentence, written) for sentence in sentences for v, other, written in agents(sentence)
                 if v == verb]
        if not named or any(_same_agent(agent, other) for other, *_ in named):
            continue
        own = content_tokens(agent)
        facts = {n for n in names(about) if not _same_agent(n, agent)}, quantities(about) - quantities(agent)
        words = content_tokens(about) - own - {verb}
        for other, sentence, written in named:
            lower = sentence.lower()
            if not name_in(agent.lower(), lower):
                continue
            if (any(name_in(n, lower) for n in facts[0]) or facts[1] & quantities(sentence)
                    or (words and len(words & content_tokens(sentence)) >= 0.5 * len(words))):
                return agent, written, other
    return None

