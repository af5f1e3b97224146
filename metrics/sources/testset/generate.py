"""Synthetic test questions from a folder's chunks with an LLM: generated, de-duplicated, criticised.

The method of RAGAS's ``TestsetGenerator`` (query synthesizers over a knowledge graph of
chunks, then filters), kept to what the evaluation needs:

1. **Seeds.** ``n`` questions are split over the kinds by ``DISTRIBUTION`` (RAGAS's
   default: half single-hop specific, a quarter each multi-hop specific and abstract;
   largest remainders). A ``single_hop`` seed is one chunk; a ``multi_hop`` seed two
   *related* chunks, the pairs of chunks of the folder (its first ``MAX_PAIR_CHUNKS`` in
   the seeded order) ranked by the Jaccard overlap of their content tokens (at least
   ``MIN_RELATED``; Chinese as character bigrams, so chunks of two languages never pair);
   an ``abstract`` seed two neighbouring chunks of one document (one chunk when the
   document has one). Chunks are taken round-robin over the documents in a seeded order;
   a kind without seeds (no related pair) gives its share to ``single_hop``.
2. **Generation**: one ``question_generation`` request per seed (its reply checked
   strictly and re-asked once when malformed), in the documents' language
   (:func:`language_of`). The first ``FAIL_FAST`` are sent before the others: when they
   all fail with the same endpoint error (500 after every retry, a 400 to an unsupported
   ``response_format``), the run stops there with :class:`EndpointError`.
3. **Near-duplicates removed**: a question whose content tokens overlap a kept (or
   earlier) question's by ``DUPLICATE_JACCARD`` or more is dropped before the critic, so
   it costs no critic request.
4. **Critic**: one ``question_critic`` request per remaining question; kept when it is
   answerable from its contexts and standalone.
5. **Replacement**: questions dropped at any step are replaced by new seeds of the same
   kind (of another, single_hop first, when that kind's seeds run out), round after round,
   until ``n`` are kept, the seeds run out, or ``MAX_GENERATIONS`` × ``n`` generation
   requests were sent.

Requests per kept question: 2 chat requests (1 generation + 1 critic) when nothing is
dropped; each dropped question costs its generation (and its critic request, if it got that
far) on top; a malformed reply costs one re-ask. Every question carries its sources:
``reference_contexts`` (the chunk texts) and ``retrieval_ground_truth`` (the chunk ids,
label 1).
"""
from __future__ import annotations

import asyncio
import itertools
import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, cast

from rag_eval.metrics.judgements.question_critic import Candidate, question_critic
from rag_eval.metrics.judgements.question_generation import Kind, Seed, question_generation
from rag_eval.metrics.judges.base import Judge, JudgeError
from rag_eval.metrics.judges.endpoint import EndpointError, public_url
from rag_eval.metrics.judges.plan import Plan, record
from rag_eval.metrics.judges.prompts import OutputError
from rag_eval.metrics.judges.usage import Usage, current_usage
from rag_eval.metrics.sources.testset.documents import Chunk
from rag_eval.metrics.sources.testset.inverse_cloze import spread
from rag_eval.metrics.text import content_tokens
from rag_eval.metrics.errors import InputError, SettingsError

KINDS = ("single_hop", "multi_hop", "abstract")
#: Share of each kind among the questions asked (RAGAS's default query distribution).
DISTRIBUTION = {"single_hop": 0.5, "multi_hop": 0.25, "abstract": 0.25}
#: Two chunks are related (a multi-hop seed) when their content tokens overlap by this Jaccard or more.
MIN_RELATED = 0.08
#: A question overlapping an earlier one by this Jaccard of content tokens or more is a near-duplicate.
DUPLICATE_JACCARD = 0.7
#: At most this many generation requests per question asked.
MAX_GENERATIONS = 2
#: Multi-hop pairs are searched among this many chunks (the first of the seeded order): 79,800 pairs at most.
MAX_PAIR_CHUNKS = 400
#: The first generations are sent this many first; all failing with the same endpoint error stop the run.
FAIL_FAST = 3
#: The endpoint's part of a failed generation (``rag_eval.metrics.judges.transport``): a 400, or what failed after retries.
_ENDPOINT_FAILURE = re.compile(r"question_generation: (bad_request|context_too_long|[^:]* after \d+ attempts[^:]*)")
#: Passages are in Chinese, Japanese or Korean when at least this share of their letters are of those scripts.
CJK_SHARE = 0.2


def language_of(texts: list[str]) -> str:
    """What the prompt asks the questions to be written in: when at least ``CJK_SHARE`` of the
    letters are Chinese, Japanese or Korean (so an English passage naming 长城 stays English),
    ``Korean`` (mostly hangul), ``Japanese`` (a tenth of them kana or more) or ``Chinese``;
    else ``the language of the passages``."""
    letters = [ch for ch in "".join(texts) if ch.isalpha()]
    kana = sum("\u3040" <= ch <= "\u30ff" for ch in letters)
    hangul = sum("\uac00" <= ch <= "\ud7af" for ch in letters)
    han = sum("\u3400" <= ch <= "\u9fff" or "\uf900" <= ch <= "\ufaff" for ch in letters)
    if not letters or kana + hangul + han < CJK_SHARE * len(letters):
        return "the language of the passages"
    if hangul >= kana + han:
        return "Korean"
    return "Japanese" if kana >= 0.1 * (kana + han) else "Chinese"


def jaccard(a: str, b: str) -> float:
    """Jaccard overlap of the content tokens of ``a`` and ``b`` (0 when both have none)."""
    x, y = content_tokens(a), content_tokens(b)
    return len(x & y) / len(x | y) if x | y else 0.0


def counts(n: int) -> dict[str, int]:
    """``n`` split over the kinds by ``DISTRIBUTION``, largest remainders first (ties in ``KINDS`` order)."""
    exact = {k: n * DISTRIBUTION[k] for k in KINDS}
    share = {k: int(v) for k, v in exact.items()}
    for kind in sorted(KINDS, key=lambda k: (share[k] - exact[k], KINDS.index(k)))[:n - sum(share.values())]:
        share[kind] += 1
    return share


def seeds(chunks: list[Chunk], seed: int = 0) -> dict[str, list[tuple[Chunk, ...]]]:
    """Every seed of each kind, in the order they are used (see the module docstring)."""
    ordered = spread(chunks, seed)
    pairs = sorted(((jaccard(a.text, b.text), i, j) for (i, a), (j, b) in
                    itertools.combinations(enumerate(ordered[:MAX_PAIR_CHUNKS]), 2)), key=lambda t: (-t[0], t[1], t[2]))
    related: dict[tuple[Chunk, Chunk], None] = {}
    used: dict[int, int] = defaultdict(int)
    for rounds in range(2):  # each chunk in one pair first, then in a second
        for score, i, j in pairs:
            if score >= MIN_RELATED and used[i] == used[j] == rounds and (ordered[i], ordered[j]) not in related \
                    and ordered[i].text != ordered[j].text:  # two copies of a chunk are no multi-hop pair
                related[ordered[i], ordered[j]] = None
                used[i] += 1
                used[j] += 1
    by_document: dict[str, list[Chunk]] = defaultdict(list)
    for chunk in chunks:
        by_document[chunk.document_id].append(chunk)
    neighbours: list[tuple[Chunk, ...]] = []
    for chunk in ordered:
        siblings = by_document[chunk.document_id]
        at = siblings.index(chunk)
        if len(siblings) == 1:
            neighbours.append((chunk,))
        else:
            neighbours.append((siblings[at], siblings[at + 1]) if at + 1 < len(siblings) else
                              (siblings[at - 1], siblings[at]))
    abstract = list(dict.fromkeys(neighbours))
    return {"single_hop": [(c,) for c in ordered], "multi_hop": list(related), "abstract": abstract}


@dataclass
class Testset:
    """What generation produced: ``questions`` kept; ``dropped``, each with ``dropped`` (the
    cause: ``generation_failed``, ``near_duplicate``, ``critic_rejected``, ``critic_failed``)
    and ``reason``; ``usage`` per request kind; ``notes`` (a kind without seeds...)."""

    questions: list[dict[str, Any]] = field(default_factory=list)
    dropped: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, Usage] = field(default_factory=lambda: {"question_generation": Usage(),
                                                             "question_critic": Usage()})
    notes: list[str] = field(default_factory=list)


def _record(kind: str, chunks: tuple[Chunk, ...], question: dict[str, Any]) -> dict[str, Any]:
    return {"user_input": question["user_input"], "reference": question["reference"],
            "reference_contexts": [c.text for c in chunks],
            "retrieval_ground_truth": [{"document_id": c.id, "query_relevance_label": 1} for c in chunks],
            "synthesizer_name": kind}


async def _counted(usage: Usage, coroutine):
    """``coroutine`` with its requests counted in ``usage`` (this task's own context)."""
    current_usage.set(usage)
    return await coroutine


def _seed(kind: str, chunks: tuple[Chunk, ...]) -> Seed:
    texts = [c.text for c in chunks]
    return Seed(kind=cast(Kind, kind), contexts=texts, language=language_of(texts))


async def agenerate(judge: Judge, chunks: list[Chunk], n: int, seed: int = 0) -> Testset:
    """Generate up to ``n`` questions (see the module docstring) with ``judge`` (an LLM judge).

    Raises
    ------
    ValueError
        For ``n`` below 1 or no chunks.
    EndpointError
        When the first ``FAIL_FAST`` generations all fail with the same endpoint error (nothing more is sent).
    """
    if n < 1:
        raise SettingsError(f"-n {n}: ask for 1 question or more")
    if not chunks:
        raise InputError("no chunk to write questions from")
    result = Testset()
    pools = seeds(chunks, seed)
    wanted = counts(n)
    for kind in KINDS[1:]:
        if wanted[kind] and not pools[kind]:
            result.notes.append(f"no {kind} seed ({'no two related chunks' if kind == 'multi_hop' else 'no chunk'}): "
                                f"its {wanted[kind]} question(s) are single_hop")
            wanted["single_hop"] += wanted.pop(kind)
    queues = {kind: iter(pools[kind]) for kind in wanted}
    kept: defaultdict[str, int] = defaultdict(int)
    generations = 0
    while generations < MAX_GENERATIONS * n:
        batch, short = [], 0
        for kind in list(wanted):
            need = max(0, wanted[kind] - kept[kind])
            taken = list(itertools.islice(queues[kind], need))
            batch += [(kind, chunks_) for chunks_ in taken]
            wanted[kind] -= need - len(taken)  # a kind whose seeds ran out gives the rest of its share away
            short += need - len(taken)
        for kind in KINDS:  # ... to the kinds that still have seeds, single_hop first
            if short and kind in wanted:
                more = list(itertools.islice(queues[kind], short))
                batch += [(kind, chunks_) for chunks_ in more]
                wanted[kind] += len(more)
                short -= len(more)
        batch = batch[:MAX_GENERATIONS * n - generations]
        if not batch:
            break
        written = []
        if not generations:  # the first few alone: an endpoint that fails them all alike fails the rest too
            written = await _written(judge, result, batch[:FAIL_FAST])
            _fail_fast(judge, written)
        generations += len(batch)
        written += await _written(judge, result, batch[len(written):])
        candidates: list[tuple[dict[str, Any], tuple[Chunk, ...]]] = []
        for (kind, chunks_), question in zip(batch, written):
            if isinstance(question, str):
                result.dropped.append({**_record(kind, chunks_, {"user_input": None, "reference": None}),
                                       "dropped": "generation_failed", "reason": question})
                continue
            record_ = _record(kind, chunks_, question)
            twin = next((q for q in [*result.questions, *(c for c, _ in candidates)]
                         if jaccard(q["user_input"], question["user_input"]) >= DUPLICATE_JACCARD), None)
            if twin is not None:
                result.dropped.append({**record_, "dropped": "near_duplicate",
                                       "reason": f"near-duplicate of {twin['user_input']!r}"})
                continue
            candidates.append((record_, chunks_))
        critiques = await asyncio.gather(*(_counted(result.usage["question_critic"], _criticise(judge, record_))
                                           for record_, _ in candidates))
        for (record_, _), critique in zip(candidates, critiques):
            if isinstance(critique, str):
                result.dropped.append({**record_, "dropped": "critic_failed", "reason": critique})
            elif not critique.kept:
                why = " and ".join(w for w, ok in (("not answerable from its contexts", critique.answerable),
                                                  ("not standalone", critique.standalone)) if not ok)
                result.dropped.append({**record_, "dropped": "critic_rejected", "reason": f"{why}: {critique.reason}"})
            else:
                result.questions.append(record_)
                kept[record_["synthesizer_name"]] += 1
    if len(result.questions) < n:
        result.notes.append(f"{len(result.questions)} of {n} questions kept: "
                            + ("the seeds ran out" if generations < MAX_GENERATIONS * n else
                               f"{generations} generation requests sent, the limit of {MAX_GENERATIONS} per question"))
    for number, question in enumerate(result.questions, start=1):
        question["id"] = f"q-{number:04d}"
    return result


async def _written(judge: Judge, result: Testset, batch: list[tuple[str, tuple[Chunk, ...]]]) -> list:
    """The generations of ``batch``, at once (each a question or why there is none)."""
    return list(await asyncio.gather(*(_counted(result.usage["question_generation"], _generate(judge, kind, chunks_))
                                       for kind, chunks_ in batch)))


def _fail_fast(judge: Judge, written: list) -> None:
    """Raise :class:`EndpointError` when every one of the first generations failed with the same endpoint error
    (every request answered 500, or 400 to a ``response_format`` the endpoint lacks): the rest would fail alike."""
    causes = {m[1] if isinstance(w, str) and (m := _ENDPOINT_FAILURE.search(w)) else None for w in written}
    if len(causes) != 1 or None in causes:
        return
    hint = ""
    config = judge.config  # type: ignore[attr-defined]  # question generation asks an LLM judge only
    if causes == {"bad_request"} and config.response_format == "json_schema":
        hint = "; an endpoint without json_schema answers 400 to every request: try --response-format json_object"
    raise EndpointError(f"the judge endpoint {public_url(config.base_url) or 'api.openai.com'} failed the "
                        f"first {len(written)} question_generation request(s) alike, stopped before sending more: "
                        f"{written[0].removeprefix('generation failed: ')}{hint}")


async def _generate(judge: Judge, kind: str, chunks: tuple[Chunk, ...]) -> dict[str, Any] | str:
    """The generated question, or why there is none (a judge error, e.g. malformed after the re-ask)."""
    try:
        return (await judge.ask(question_generation, _seed(kind, chunks))).model_dump()
    except JudgeError as exc:
        return f"generation failed: {exc}"


async def _criticise(judge: Judge, question: dict[str, Any]):
    """The critique, or why there is none."""
    try:
        return await judge.ask(question_critic, Candidate(user_input=question["user_input"],
                                                          reference=question["reference"],
                                                          contexts=question["reference_contexts"]))
    except JudgeError as exc:
        return f"critic failed: {exc}"


async def aplan(judge: Judge, chunks: list[Chunk], n: int, seed: int = 0) -> dict[str, Plan]:
    """The requests the first round of :func:`agenerate` would send after the cache, per
    kind (``question_generation``, ``question_critic``), with estimated tokens; nothing is
    sent. A cached question's critic request is planned on that question (cached too after
    a finished run); the others' on a stand-in question of the chunks (its prompt is mostly
    the contexts), one per generation."""
    pools = seeds(chunks, seed)
    wanted = counts(n)
    for kind in KINDS[1:]:
        if not pools[kind]:
            wanted["single_hop"] += wanted.pop(kind)
    plans = {"question_generation": Plan(), "question_critic": Plan()}

    async def generation(kind: str, chunks_: tuple[Chunk, ...], written: list) -> None:
        try:
            written.append(await judge.ask(question_generation, _seed(kind, chunks_)))
        except OutputError:
            pass  # the stand-in reply is not in the documents' script; the request is planned all the same

    for kind, number in wanted.items():
        for chunks_ in pools[kind][:number]:
            texts = [c.text for c in chunks_]
            written: list = []
            planned = (await record(generation(kind, chunks_, written))).planned
            plans["question_generation"].planned.update(planned)
            candidate = Candidate(user_input=written[0].user_input, reference=written[0].reference, contexts=texts) \
                if written and not planned else \
                Candidate(user_input=f"{kind}: {texts[0][:120]}", reference=texts[0][:240], contexts=texts)
            plans["question_critic"].planned.update((await record(judge.ask(question_critic, candidate))).planned)
    return plans
