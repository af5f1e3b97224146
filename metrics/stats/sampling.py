"""Which production traces are judged: a stratified, seeded sample within a budget.

A day of traffic may hold far more traces than one wants to pay a judge for. The sample:

* **Seeded**: each trace gets a priority ``u = SHA-256(seed, trace_id)`` read as a number in
  [0, 1); within a stratum traces are taken in increasing ``u``. The same traces and seed
  give the same sample on every run and machine, whatever the order they were read in.
* **Stratified** (e.g. by route and by retrieval score band): the ``k``-th trace (from 0) of
  a stratum of ``n`` gets the position ``(k + 1/2) / n`` and the sample is a prefix of all
  traces in increasing position (ties by ``u``): every prefix holds each stratum in
  proportion to its size, to within one trace (systematic allocation, Cochran 1977 §5.5).
* **Within a budget**: ``rows`` (the first ``rows`` of that order) and/or ``cost``: traces
  are taken in that order while the estimated cost of judging them stays within ``cost``
  (a trace that would pass it is skipped, the next ones still tried).
* **Whole conversations**: given ``groups`` (a chat session's traces,
  ``rag_eval.metrics.sources.traces.sessions.conversations``), the order is of groups (a group
  is placed as its first trace: its id, its stratum) and a group is taken whole or not at all.
  ``rows`` counts turns (traces), as a cost bound counts what is judged: groups are taken in
  order while the turns taken stay within ``rows``, a group that would pass it skipped and the
  next ones still tried (rounded down: never more than ``rows`` turns; a conversation longer than
  ``rows`` is never taken). A group's cost is its traces' summed. Single traces are groups of
  one: without sessions the sample is the traces' as above. The cost of a trace
  is what the dry run (``rag_eval.metrics.judges.cost.estimate_cost``) plans for it at the given prices,
  *without* the judgement cache, so a re-run whose judgements are cached picks the same
  traces. The offline judge costs nothing: a cost budget alone then takes every trace.

Retrieval score bands: the top retrieved document's ``relevance_score``, cut at the
tertiles of the partition's top scores into ``low``, ``mid`` and ``high`` (``none`` for a
trace without scores).
"""
from __future__ import annotations

import copy
import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from rag_eval.metrics.sources.traces import Trace
from rag_eval.metrics.errors import SettingsError

STRATA = ("route", "score_band")


@dataclass
class Budget:
    """What a partition may spend on judging: ``rows`` at most and/or ``cost`` at most (in
    the currency of ``price``: per million prompt and completion tokens). ``None``: no limit.

    Raises
    ------
    ValueError
        For a negative or non-finite limit, or a cost limit without prices.
    """

    rows: int | None = None
    cost: float | None = None
    price: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        if self.rows is not None and (isinstance(self.rows, bool) or not isinstance(self.rows, int) or self.rows < 0):
            raise SettingsError(f"budget rows must be a whole number, 0 or more, got {self.rows!r}")
        if self.cost is not None and (not isinstance(self.cost, int | float) or not math.isfinite(self.cost)
                                      or self.cost < 0):
            raise SettingsError(f"budget cost must be a finite number, 0 or more, got {self.cost!r}")
        if self.cost is not None and self.price is None:
            raise SettingsError("a cost budget needs prices (per million prompt and completion tokens)")


@dataclass
class Selection:
    """The sample: ``rows`` (positions in the input, in sampling order), each one's
    ``stratum`` and estimated ``costs``, the ``total_cost``, and ``strata``: per stratum the
    traces it had and those taken."""

    rows: list[int]
    stratum: list[str]
    costs: list[float]
    total_cost: float
    strata: dict[str, dict[str, int]] = field(default_factory=dict)


def priority(seed: int, trace_id: str) -> float:
    """The trace's sampling priority in [0, 1): the first 8 bytes of SHA-256 of
    ``"<seed>:<trace_id>"`` over 2**64."""
    digest = hashlib.sha256(f"{seed}:{trace_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2 ** 64


def score_bands(traces: Sequence[Trace]) -> list[str]:
    """Each trace's retrieval score band: ``low``/``mid``/``high`` by the tertiles of the
    top document scores of ``traces`` (``none`` without scores; one band, ``mid``, when every
    top score is the same)."""
    tops = [max(d["relevance_score"] for d in t.retrieved_documents) if t.retrieved_documents else None
            for t in traces]
    known = np.array([s for s in tops if s is not None], dtype=float)
    if not len(known):
        return ["none"] * len(traces)
    low, high = np.quantile(known, [1 / 3, 2 / 3])
    if low == high:
        return ["none" if s is None else "mid" for s in tops]
    return ["none" if s is None else "low" if s < low else "mid" if s < high else "high" for s in tops]


def stratum_keys(traces: Sequence[Trace], by: Sequence[str] = STRATA) -> list[str]:
    """Each trace's stratum: the values of ``by`` (``route``, ``score_band``) joined by ``/``.

    Raises
    ------
    ValueError
        For a stratification other than ``route`` and ``score_band``.
    """
    unknown = [b for b in by if b not in STRATA]
    if unknown:
        raise SettingsError(f"traces are stratified by {list(STRATA)}, not {unknown}")
    bands = score_bands(traces) if "score_band" in by else []  # read only when stratified by score band
    keys = []
    for i, trace in enumerate(traces):
        parts = [trace.route or "-" if b == "route" else bands[i] for b in by]
        keys.append("/".join(parts) or "all")
    return keys


def sampling_order(ids: Sequence[str], strata: Sequence[str], seed: int) -> list[int]:
    """Positions of ``ids`` in sampling order (see the module's notes): by ``(k + 1/2) / n``
    within the stratum, ties by priority."""
    groups: dict[str, list[int]] = {}
    for i, stratum in enumerate(strata):
        groups.setdefault(stratum, []).append(i)
    keyed = []
    for members in groups.values():
        ranked = sorted(members, key=lambda i: (priority(seed, ids[i]), ids[i]))
        keyed += [((k + 0.5) / len(ranked), priority(seed, ids[i]), ids[i], i) for k, i in enumerate(ranked)]
    return [i for *_, i in sorted(keyed)]


def select(traces: Sequence[Trace], budget: Budget, seed: int = 0, by: Sequence[str] = STRATA,
           cost_of: Callable[[int], float] | None = None, groups: Sequence[Sequence[int]] | None = None) -> Selection:
    """The sample of ``traces`` within ``budget`` (see the module's notes).

    Parameters
    ----------
    traces : sequence of Trace
    budget : Budget
        ``rows`` counts traces (turns), taken by whole groups.
    seed : int
    by : sequence of str
        Strata: ``route`` and/or ``score_band`` (empty: one stratum).
    cost_of : callable, optional
        ``cost_of(i)``: the estimated cost of judging trace ``i`` (needed for a cost budget;
        :func:`judging_cost` makes one).
    groups : sequence of sequences of int, optional
        Positions of ``traces`` taken together (a conversation's turns, in order), covering each
        position once; default each trace alone. ``Selection.rows`` lists a group's positions in
        its order, and ``Selection.strata`` counts a group's traces in its first trace's stratum.

    Raises
    ------
    ValueError
        For a cost budget without ``cost_of``, or an unknown stratification.
    """
    if budget.cost is not None and cost_of is None:
        raise ValueError("a cost budget needs the cost of each trace (cost_of)")
    units = [list(g) for g in groups] if groups is not None else [[i] for i in range(len(traces))]
    strata = stratum_keys(traces, by)
    unit_strata = [strata[unit[0]] for unit in units]
    order = sampling_order([traces[unit[0]].trace_id for unit in units], unit_strata, seed)
    rows: list[int] = []
    costs: list[float] = []
    stratum: list[str] = []
    total = 0.0
    for u in order:
        if budget.rows is not None and len(rows) >= budget.rows:
            break
        if budget.rows is not None and len(rows) + len(units[u]) > budget.rows:
            continue
        cost = [cost_of(i) if cost_of is not None else 0.0 for i in units[u]]
        if budget.cost is not None and total + sum(cost) > budget.cost + 1e-12:
            continue
        rows += units[u]
        costs += cost
        stratum += [unit_strata[u]] * len(units[u])
        total += sum(cost)
    counts: dict[str, dict[str, int]] = {}
    for unit, key in zip(units, unit_strata):
        counts.setdefault(key, {"traces": 0, "sampled": 0})["traces"] += len(unit)
    for key in stratum:
        counts[key]["sampled"] += 1
    return Selection(rows, stratum, costs, total, dict(sorted(counts.items())))


def judging_cost(samples: Sequence, metrics: Sequence, judge, price: tuple[float, float]) -> Callable[[int], float]:
    """``cost_of(i)``: the price of judging ``samples[i]`` with ``metrics``, as the dry run
    plans it (``rag_eval.metrics.judges.cost.estimate_cost``) with ``judge`` *without* its judgement cache,
    at ``price`` (per million prompt and completion tokens). Nothing is sent."""
    from rag_eval.metrics.judges.cost import estimate_cost

    planner = copy.copy(judge)  # the same client and limits (planning sends nothing), no cache
    planner.cache = None

    def cost_of(i: int) -> float:
        return estimate_cost([samples[i]], metrics, planner).cost(*price)

    return cost_of
