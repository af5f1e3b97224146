"""The strong judge's half of a judge cascade (issue 38): which rows it scores, and its results.

The cheap judge has scored every row (``rag_eval.metrics.core.scoring.score_all``); per metric,
:func:`draw_strong` draws the rows the strong judge scores (``rag_eval.metrics.stats.cascade``: seeded,
nested across budgets) from the cheap judge's results, and :func:`score_strong` scores them and
returns the **strong frame**: one row per (row, metric) with ``inclusion_probability`` and the strong
judge's result on the drawn rows (:data:`STRONG_COLUMNS`). ``rag_eval.metrics.stats.cascade_estimates``
turns the two frames into the summary's estimates.

**Which rows a metric's cascade covers.** The rows whose cheap result is ``ok`` or ``judge_error``
(:data:`IN_CASCADE`): a ``judge_error`` row has no cheap score, so it is always drawn (``pi = 1``).
Rows the cheap judge found ``not_applicable``, ``input_error`` or ``target_error`` have nothing a
judge can score (the row's input decides it): they are outside the cascade, with no inclusion
probability, as they are outside the raw mean. The budget (a share, or a number of rows) is of the
covered rows; a number of rows above a metric's covered rows strong-judges every covered row (a census).

**Scale.** Active sampling's uncertainty is ``sqrt(f (1 - f))`` of the cheap score rescaled to [0, 1]
by the metric's ``value_range`` (a Likert 1-5 score ``v`` as ``(v - 1) / 4``); the estimate stays on
the metric's own scale.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np
import pandas as pd

from rag_eval.metrics.core.base import Metric
from rag_eval.metrics.reports.aggregate import USAGE_COLUMNS
from rag_eval.metrics.core.results import MetricResult, Status
from rag_eval.metrics.core.samples import Sample
from rag_eval.metrics.core.scoring import CHUNK_ROWS, RESULT_COLUMNS, results_frame, score_all, score_chunks
from rag_eval.metrics.errors import SettingsError
from rag_eval.metrics.judges.base import Judge
from rag_eval.metrics.judges.cost import estimate_cost
from rag_eval.metrics.judges.offline import OfflineJudge
from rag_eval.metrics.stats.cascade import budget_rows, inclusion_probabilities, row_uniforms, score_uncertainty

#: How the strong sample is drawn (``rag_eval.metrics.stats.cascade``).
SAMPLINGS = ("active", "uniform")
#: Cheap statuses of the rows a metric's cascade covers: scored, or failed (then always strong-judged).
IN_CASCADE = (Status.OK.value, Status.JUDGE_ERROR.value)
#: The strong judge's result columns: a results frame's, prefixed ``strong_``.
STRONG_RESULT_COLUMNS = [f"strong_{c}" for c in RESULT_COLUMNS if c not in ("sample_id", "row", "conversation_id",
                                                                             "turn", "metric", "threshold", "direction")]
#: The strong frame: per (row, metric), the inclusion probability (NaN outside the cascade or when no
#: sample could be drawn) and, on drawn rows, the strong judge's result (empty on the others).
STRONG_COLUMNS = ["row", "metric", "inclusion_probability", *STRONG_RESULT_COLUMNS]
#: The strong frame's types: empty cells are NA of the column's type, so that frames of other draws
#: (and the chunks of a Parquet file written from them) share one schema.
STRONG_DTYPES = {"row": "int64", "metric": "string", "inclusion_probability": "float64", "strong_value": "float64",
                 "strong_passed": "boolean", **{f"strong_{c}": "Int64" for c in USAGE_COLUMNS},
                 **dict.fromkeys(("strong_status", "strong_reason", "strong_details", "strong_judge"), "string")}


def check_cascade(samples: Sequence[Sample], budget: float | int, sampling: str, seed: int,
                  stream: str = "") -> pd.Series:
    """Refuse a bad cascade setting before anything is scored; the rows' seeded uniforms (by ``row``;
    ``stream``: ``rag_eval.metrics.stats.cascade.row_uniforms``'s).

    Raises
    ------
    ValueError
        A sampling other than :data:`SAMPLINGS`; a budget that is not a share in [0, 1] or a whole
        number of rows up to the rows (``rag_eval.metrics.stats.cascade.budget_rows``); two rows with
        one id (naming the later line); a conversation's turns on one row (:func:`single_turn_lines`).
    """
    if sampling not in SAMPLINGS:
        raise ValueError(f"strong_sampling must be one of {', '.join(SAMPLINGS)}, got {sampling!r}")
    budget_rows(budget, len(samples))
    ids, rows = [], []
    for sample in single_turn_lines(samples):  # once: a version's samples are read from its tables as asked for
        ids.append(sample.id)
        rows.append(sample.row)
    return pd.Series(row_uniforms(ids, seed, stream), index=rows)


def single_turn_lines(samples: Iterable[Sample]) -> Iterator[Sample]:
    """``samples`` as they come, refusing a conversation's turns on one row (a file's line): a cascade's draw
    is keyed by row, so its turns would share one draw (a traffic day's turns, a trace each, have rows of their
    own). :func:`check_cascade`, the CLI (before it registers a file) and the Dagster metric step (before the
    cheap judge scores) read a version through it.

    Raises
    ------
    SettingsError
        Naming the first line that holds two turns, and its conversation."""
    seen: set[int] = set()
    for sample in samples:
        if sample.turn is not None and sample.row in seen:
            raise SettingsError(f"a judge cascade is not offered on conversations yet: line {sample.line} holds the "
                                f"turns of conversation {sample.conversation_id!r}; judge them with one judge")
        seen.add(sample.row)
        yield sample


def refuse_unscorable(metrics: Sequence[Metric], cheap: Judge) -> None:
    """Refuse, before anything is scored, a cascade of a metric the cheap judge cannot score at all: one whose
    judgements the offline judge has no rule for (a custom metric: ``Judgement.needs_endpoint``). Its every row
    would be ``not_applicable``, outside the cascade, so it would get no strong row and no estimate; sending
    all its rows to the strong judge instead would spend a full strong run on it, beyond the budget.

    Raises
    ------
    SettingsError
        Naming the metric and the two ways out: a cheap LLM judge (a smaller model), or the metric evaluated
        without the cascade.
    """
    if not isinstance(cheap, OfflineJudge):
        return
    for metric in metrics:
        if any(judgement.needs_endpoint for judgement in metric.judgements):
            raise SettingsError(f"{metric.name}: the cheap judge ({cheap.name}) has no rule for it (it needs an LLM "
                                "judge), so the cascade would give it no strong row: give a smaller model as the "
                                "cheap judge (--cheap-model), or evaluate it without the cascade")


def judge_cascade(samples: list[Sample], metrics: list[Metric], cheap: Judge, strong: Judge,
                  budget: float | int, sampling: str, seed: int, stream: str = "",
                  progress: Callable[[int], None] | None = None, plan: bool = True
                  ) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, int]]:
    """A judge cascade of ``samples``, all in one process (``evaluate``, the traffic sampler): the settings
    checked before anything is scored (:func:`check_cascade`, :func:`refuse_unscorable`), ``cheap`` on every
    row, each metric's sample drawn (:func:`draw_strong`) and scored by ``strong`` (:func:`score_strong`);
    ``progress(1)`` after each pair of either judge; ``plan=False`` (a caller without use for a full strong
    run's requests) plans none.

    Returns
    -------
    (DataFrame, DataFrame, dict)
        The cheap judge's results frame with the strong columns beside each (row, metric), the strong frame,
        and per metric the chat requests a full strong run would send (:func:`plan_full_runs`, before the
        strong judge's requests; ``{}`` without ``plan``).

    Raises
    ------
    SettingsError
        A setting :func:`check_cascade` or :func:`refuse_unscorable` refuses (nothing scored yet).
    """
    try:
        uniforms = check_cascade(samples, budget, sampling, seed, stream)
    except ValueError as exc:
        raise SettingsError(str(exc)) from None
    refuse_unscorable(metrics, cheap)
    frame = results_frame(score_all(samples, metrics, cheap, progress))
    draws, notes = draw_strong(frame, metrics, uniforms, budget, sampling)
    by_metric, judges = {m.name: samples for m in metrics}, {m.name: strong for m in metrics}
    full = plan_full_runs(by_metric, metrics, judges) if plan else {}  # before the strong judge sends
    found = score_strong(by_metric, metrics, judges, draws, notes, progress)
    return frame.merge(found, on=["row", "metric"], how="left"), found, full


def plan_full_runs(samples: Mapping[str, Sequence[Sample]], metrics: Sequence[Metric],
                   judges: Mapping[str, Judge]) -> dict[str, int]:
    """Per metric, the chat requests a full strong run of it would send: ``rag_eval.metrics.judges.cost``'s exact
    plan of every row (``samples``, per metric name, read :data:`CHUNK_ROWS` rows at a time) with its judge
    (``judges``, per metric name), after the judgement cache as it stands; each metric planned alone (a request
    two metrics share counts for each). Sends nothing; nothing raised."""
    full = {}
    for metric in metrics:
        rows = samples[metric.name]
        full[metric.name] = sum(estimate_cost(list(rows[start:start + CHUNK_ROWS]), [metric],
                                              judges[metric.name]).total["chat_requests"]
                                for start in range(0, len(rows), CHUNK_ROWS))
    return full


def draw_strong(results: pd.DataFrame, metrics: Sequence[Metric], uniforms: pd.Series, budget: float | int,
                sampling: str) -> tuple[pd.DataFrame, dict[str, str]]:
    """Per metric, the strong sample drawn from the cheap judge's ``results`` (a results frame).

    ``uniforms`` are :func:`check_cascade`'s (by ``row``: kept across budgets, so samples nest). A budget
    in rows above a metric's covered rows (rows with input errors are not covered) is capped at them: every
    covered row is strong-judged (``pi = 1``, a census). Returns a frame of ``row``, ``metric``,
    ``inclusion_probability`` (NaN outside the cascade) and ``drawn``, and ``{metric: why}`` for the
    metrics no sample could be drawn for (more cheap failures than the budget): their rows have no
    probability. Nothing raised.
    """
    parts, notes = [], {}
    for metric in metrics:
        rows = results[results["metric"] == metric.name].sort_values("row")
        inside = rows["status"].isin(IN_CASCADE).to_numpy()
        f = np.where(rows["status"] == Status.OK.value, rows["value"].to_numpy(float), np.nan)[inside]
        low, high = metric.value_range
        uncertainty = score_uncertainty((f - low) / (high - low)) if sampling == "active" else None
        pi, drawn = np.full(len(rows), np.nan), np.zeros(len(rows), bool)
        try:
            pi[inside] = inclusion_probabilities(len(f), min(budget, len(f)) if isinstance(budget, int) else budget,
                                                 uncertainty, forced=np.isnan(f))
        except ValueError as error:
            notes[metric.name] = f"no strong sample drawn: {error}"
        else:
            drawn[inside] = uniforms.loc[rows["row"].to_numpy(int)[inside]].to_numpy() < pi[inside]
        parts.append(pd.DataFrame({"row": rows["row"].to_numpy(int), "metric": metric.name,
                                   "inclusion_probability": pi, "drawn": drawn}))
    return pd.concat(parts, ignore_index=True), notes


def score_strong(samples: Mapping[str, Sequence[Sample]], metrics: Sequence[Metric], judges: Mapping[str, Judge],
                 draws: pd.DataFrame, notes: dict[str, str],
                 progress: Callable[[int], None] | None = None) -> pd.DataFrame:
    """Score each metric's drawn rows (``draws`` from :func:`draw_strong`) with its strong judge
    (``judges``, per metric name: the strong judge, with a metric's own judging options), every metric
    at once under the judges' limits; ``progress(1)`` after each pair. ``samples``: per metric name,
    the version's samples as the metric reads them (only the drawn rows are kept), read once: chunk by chunk
    for every metric at once, so metrics built from one store share each chunk's read. The metrics
    are the cheap run's instances (already fitted to every row, so a row scores as in a full strong run).

    Returns
    -------
    DataFrame
        :data:`STRONG_COLUMNS`, one row per row of ``draws``, typed alike whichever rows were drawn
        (:data:`STRONG_DTYPES`); a failed strong judgement is a ``judge_error`` row with its reason,
        never dropped; the rows of a metric in ``notes`` carry its note as ``strong_reason``.
    """
    wanted = {m.name: set(draws.loc[(draws["metric"] == m.name) & draws["drawn"], "row"]) for m in metrics}
    wanted = {name: rows for name, rows in wanted.items() if rows}
    picked: dict[str, list[Sample]] = {name: [] for name in wanted}
    for start in range(0, max((len(samples[name]) for name in wanted), default=0), CHUNK_ROWS):
        for name, rows in wanted.items():
            picked[name] += [s for s in samples[name][start:start + CHUNK_ROWS] if s.row in rows]
    tasks = [(metric, picked[metric.name], judges[metric.name]) for metric in metrics if metric.name in wanted]
    scored: list[MetricResult] = []
    if tasks:
        for part in score_chunks(tasks, progress and (lambda _: progress(1))):
            scored += [result for results in part for result in results]
    strong = results_frame(scored).drop(columns=["sample_id", "threshold", "direction"])
    strong = strong.rename(columns={c: f"strong_{c}" for c in strong.columns if c not in ("row", "metric")})
    frame = draws.drop(columns="drawn").merge(strong, on=["row", "metric"], how="left")
    for name, note in notes.items():
        frame.loc[frame["metric"] == name, "strong_reason"] = note
    return frame[STRONG_COLUMNS].astype(STRONG_DTYPES)
