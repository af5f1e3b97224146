"""How the offline judge decides that contexts support a statement, rule by rule.

A statement is compared with *passages* (``rag_eval.metrics.judges.passages``): every sentence of
every context and every pair of adjacent sentences, sentences read across the context's line and
paragraph breaks (only punctuation ends one: a statement one chunk supports is supported however the
chunk breaks its lines). Support needs the statement's parts *together in one passage*, not merely
somewhere in the contexts (relation-level evidence); the rules are the English claim rules of
``rag_eval.metrics.judges.claim_rules``:

* a sentence: every number (digits, "two"…"ninety"; rounded or marked approximate within
  ``number_tolerance``), capitalised month and name (``rag_eval.metrics.text.names``) of it in one
  passage, and in that passage a short phrase (``is_fragment``) has every content token,
  a longer sentence has cosine ≥ ``semantic_floor`` and ``0.5·cosine + 0.5·overlap ≥
  support_threshold``, and none of its content words is missing there while another
  passage has it (``borrowed_share``: a relation assembled from two facts); some one
  passage must pass every check (rules 6). It is contradicted, whatever its similarity,
  when a number carries another magnitude ("$5 billion" against "$5 million",
  ``rag_eval.metrics.text.quantities``), when it or its passage denies what the other affirms
  ("did not win the Nobel Prize" against "won the Nobel Prize", ``polarity_clash``), when
  a word of it that no context has stands where a context has another content word between
  the same neighbours ("a narrow gauge track" against "a standard gauge track",
  ``substitution``; a number after the same two words as another number of the contexts,
  never this one: "won the Heisman Trophy in 1953" against "… in 1952", ``changed_number``),
  when it makes a universal claim ("all", "every", "only") that
  its passage does not make, or when it names an agent the contexts give another role
  while a sentence on the same thing names another agent of its verb ("The Kingsmen wrote
  the song" against "a song written by Richard Berry … the hit version by The Kingsmen",
  ``role_clash``); a sentence joining facts with commas is supported clause by clause;
* a short answer with its question (``"Q: … A: …"``, see ``rag_eval.metrics.text.statements``): one
  passage holds every content token and number of the answer (a lower-case word of it outside a
  name there: "brother" is not said by "Band of Brothers", ``common_tokens``; its names
  written as names, in order: "Day of Remembrance" is not "Remembrance Day", ``name_in``)
  and at least ``question_share`` of the question's content tokens; when the question asks who
  did something ("Who wrote …?", "… directed by whom?"), the answer is that agent and the
  role check of sentences applies (``role_clash``). A bare "yes" is judged on the claim
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
consumes O2") pass. Thresholds live in ``rag_eval.metrics.judges.offline.Rules``.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import numpy as np

from rag_eval.metrics.judges.base import Verdict
from rag_eval.metrics.judges.claim_rules import (APPROXIMATION_WORDS, DEMONYM, UNIVERSAL, changed_number, claim_text,
                                                 common_tokens, is_fragment, missing_quantities, name_in,
                                                 polarity_clash, predicate_words, role_clash, same_root, span_tokens,
                                                 substitution, words_of)
from rag_eval.metrics.judges.encoder import DIMENSIONS, Encoder
from rag_eval.metrics.text.roles import agents, asked_verb, listed_names
from rag_eval.metrics.text import (approximate_numbers, content_tokens, has_cjk, is_polar_question, names, numbers,
                          quantities, split_qa, yes_no)

if TYPE_CHECKING:
    from rag_eval.metrics.judges.offline import Rules

_CLAUSE = re.compile(r"[，,；;]\s*")


def _role_verdict(clash: tuple[str, str, str]) -> Verdict:
    """The verdict on a statement whose agent the contexts contradict (``role_clash``)."""
    agent, verb, other = clash
    return Verdict(0, f"contradicted: the contexts name {other} for {verb!r}, not {agent}",
                   {"absent": [], "agent": agent, "verb": verb, "contexts_agent": other})


def question_of(pair: tuple[str, str]) -> str:
    """The question of a short answer's ``(question, answer)`` (``rag_eval.metrics.text.split_qa``), as judged."""
    return pair[0].rstrip("?？ ")


class StatementSupport:
    """The offline judge's verdicts on statements against passages (see the module's notes), and the
    embeddings they read: a base of ``rag_eval.metrics.judges.offline.OfflineJudge``, which sets
    :attr:`rules` and the encoder."""

    #: The thresholds.
    rules: Rules
    _encoder: Encoder

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

    def _sentence(self, statement: str, passages: dict[str, Any]) -> Verdict:
        """Verdict on one sentence: its names and numbers together in one passage, and that
        passage close enough in meaning and words (see the module's notes)."""
        rules = self.rules
        statement_quantities, statement_names = quantities(statement), names(statement)
        approximate = approximate_numbers(statement)
        absent = sorted(missing_quantities(statement_quantities, approximate, passages["all_quantities"],
                                           rules.number_tolerance)
                        | {n for n in statement_names if not name_in(n, passages["all_lower"])})
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
                    or (statement_names and not all(name_in(n, lower) for n in statement_names))):
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
        statement_facts = (tokens, checked, fragment, UNIVERSAL.search(statement))
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
        """Does passage ``i`` support the sentence? (the checks of the module's notes, in order);
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
        predicate; a word of the same root will do: "direct" in "director", ``same_root``);
        without, the question is judged as a sentence."""
        subjects = {n for n in names(question) if not DEMONYM.fullmatch(n)}
        if not subjects:
            return self._sentence(question, passages)
        # A name's nationality word the contexts write apart ("american" of "kings of leon american")
        # belongs to the predicate.
        subjects = {" ".join(w for w in n.split() if w not in predicate_words(n, passages["all_lower"]))
                    for n in subjects}
        claim = {"claim": claim_text(question, subjects)}
        absent = sorted(n for n in subjects if not name_in(n, passages["all_lower"]))
        if absent:
            return Verdict(0, f"not in the contexts: {', '.join(absent)}", {"absent": absent, **claim})
        subject_tokens = set().union(*map(content_tokens, subjects))
        predicate = content_tokens(question) - subject_tokens - {"both", "same", "either"}
        shares = {}
        for subject in sorted(subjects):  # a tie names the same subject in every process
            shares[subject] = max((sum(same_root(t, known) for t in predicate) / len(predicate) if predicate else 1.0)
                                  for known, lower in zip(passages["tokens"], passages["lower"])
                                  if name_in(subject, lower)) if any(
                name_in(subject, lower) for lower in passages["lower"]) else 0.0
        weakest = min(shares, key=shares.__getitem__)
        evidence = {"absent": [], **claim, "predicate": sorted(predicate),
                    "shares": {k: round(v, 4) for k, v in shares.items()}}
        if shares[weakest] >= self.rules.predicate_share:
            return Verdict(1, f"each of {', '.join(sorted(subjects))} is in a passage with the predicate", evidence)
        return Verdict(0, f"no passage holds {weakest} with {shares[weakest]:.0%} of the predicate "
                          f"(< {self.rules.predicate_share:.0%})", evidence)

    def _answer(self, question: str, answer: str, windows: dict[str, Any],
                passages: dict[str, Any]) -> Verdict:
        """Verdict on a short answer judged with its question (see the module's notes): the
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
                on_topic = (all(name_in(n, passages["all_lower"]) for n in subjects) if subjects else max(
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
        common = content_tokens(" ".join(w for w in words_of(core) if w.islower())) - answer_quantities
        answer_names = names(core)  # each written as a name in its window: "Day of Remembrance" is no "Remembrance Day"
        shares = {}  # window -> share of the question's words in it, for the windows holding the answer
        for i, (unit, known, found_quantities, lower) in enumerate(zip(windows["units"], windows["tokens"],
                                                                       windows["quantities"], windows["lower"])):
            plain = common_tokens(unit) if common else known
            held = (sum((t in plain if t in common else t in known) or (has_cjk(t) and t in unit)
                        for t in answer_tokens) / len(answer_tokens) if answer_tokens else 1.0)
            if (missing_quantities(answer_quantities, approximate, found_quantities, self.rules.number_tolerance)
                    or held < self.rules.answer_share or not all(name_in(n, lower) for n in answer_names)):
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
                      if question.strip() and not APPROXIMATION_WORDS.fullmatch(t)}
        if missing or words:
            return Verdict(0, f"does not say the answer {answer!r}: {', '.join(sorted(missing | words))}",
                           {"absent": sorted(missing | words)})
        return Verdict(1, f"says the answer {answer!r}")

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
