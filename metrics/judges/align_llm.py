"""Aligning an LLM judge to a team's own faithfulness labels (``rag-eval align`` with an LLM judge).

The LLM judge has no weights to refit: :func:`align_examples` adds to its ``statement_support`` prompts
up to ``k`` labelled rows it got wrong (its pass/fail at the metric's threshold not the label's), as
few-shot examples (``rag_eval.metrics.judges.examples``), the way MLflow's and DeepEval's judge alignment
do. It is measured as the offline verifier's alignment is (``rag_eval.metrics.judges.align``), by k-fold
cross-fitting: each labelled row is judged with examples drawn only from the other folds (never itself),
each unlabelled row by the mean of its judgements with each fold's examples (cross-prediction-powered
inference); agreement and the prediction-powered interval of the mean label are printed default against
aligned. Every judgement goes through the judge's cache: the default judge's answers are those of a run
without the variant, and running ``align`` again asks nothing new.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from rag_eval.metrics.core.base import nothing_retrieved
from rag_eval.metrics.core.registry import build_metrics
from rag_eval.metrics.core.samples import Sample
from rag_eval.metrics.core.scoring import score_all
from rag_eval.metrics.judges.align import Alignment, Labelled, labelled_rows
from rag_eval.metrics.judges.base import JudgeError
from rag_eval.metrics.judges.examples import Example, Examples
from rag_eval.metrics.judges.llm import LLMJudge
from rag_eval.metrics.errors import InputError, SettingsError


def mistakes(rows: Labelled) -> list[int]:
    """Positions of the labelled rows the judge got wrong (its pass/fail is not the label's) and that
    retrieved a context, the largest error ``|score - label|`` first, then in row order."""
    passed, labelled = rows.before >= rows.threshold, rows.target >= rows.threshold
    wrong = [int(i) for i in rows.labelled if passed[i] != labelled[i]
             and not nothing_retrieved(rows.scored[i][0].retrieved_contexts)]
    return sorted(wrong, key=lambda i: (-abs(rows.before[i] - rows.target[i]), i))


def examples_of(rows: Labelled, positions: Sequence[int], k: int) -> Examples | None:
    """The first ``k`` of ``positions`` (rows of ``rows``) as examples; ``None`` for none."""
    chosen = [Example(tuple(item["statement"] for item in rows.scored[i][1].details["statements"]),
                      tuple(c for c in rows.scored[i][0].given("retrieved_contexts") if c.strip()),
                      float(rows.target[i]), float(rows.before[i])) for i in positions[:k]]
    return Examples(chosen) if chosen else None


def _judged(samples: list[Sample], judge: LLMJudge) -> np.ndarray:
    """``judge``'s faithfulness of ``samples``.

    Raises
    ------
    JudgeError
        When a row could not be judged (the first error; the cache keeps the rest for the next try).
    """
    results = score_all(samples, build_metrics(["faithfulness"]), judge)
    if failed := [r for r in results if r.value is None]:
        raise JudgeError(f"{len(failed)} of {len(samples)} rows could not be judged with the examples "
                         f"({failed[0].reason}); run align again: the judgements made are cached")
    return np.array([r.value for r in results])


def align_examples(samples: Sequence[Sample], labels: Mapping[str, float], judge: LLMJudge, k: int = 4,
                   folds: int = 5, seed: int = 0, source: str = "") -> Alignment:
    """Align the LLM ``judge`` to faithfulness ``labels`` with up to ``k`` examples of its mistakes.

    Parameters
    ----------
    samples : list of Sample
        The version's rows; those whose faithfulness is not measured are left out.
    labels : mapping of sample id to float in [0, 1]
        People's faithfulness labels of some of ``samples`` (1 pass, 0 fail, or a share).
    judge : LLMJudge
        The judge (its examples, if any, are set aside: it is aligned from its default prompts).
    k : int
        Examples at most, 1 or more.
    folds : int
        Cross-fitting folds, at least 2.
    source : str
        Where the labels come from (a dataset version), written in the variant file.

    Returns
    -------
    Alignment
        Scores before (the default prompts) and after (with examples from the other folds), both on
        [0, 1]; ``model`` is the variant file's content, the examples drawn from every fold.

    Raises
    ------
    ValueError
        ``k`` below 1, as :func:`rag_eval.metrics.judges.align.labelled_rows`, or when the judge got no
        labelled row wrong (there is no example to add).
    JudgeError
        When a row could not be judged with the examples.
    """
    if k < 1:
        raise SettingsError(f"k (examples) must be at least 1, got {k}")
    default = judge.with_examples(None)
    rows = labelled_rows(samples, labels, default, folds, seed)
    wrong = mistakes(rows)
    final = examples_of(rows, wrong, k)
    if final is None:
        raise InputError(f"the judge's pass/fail agrees with all {len(rows.labelled)} labels: there is no mistake "
                         "to add as an example")
    unlabelled = [rows.scored[i][0] for i in rows.unlabelled]
    after, rest = np.empty(len(rows.scored)), np.zeros(len(unlabelled))
    for test in rows.folds:
        twin = default.with_examples(examples_of(rows, [i for i in wrong if i not in set(test)], k))
        scores = _judged([rows.scored[i][0] for i in test] + unlabelled, twin)
        after[test], rest = scores[:len(test)], rest + scores[len(test):] / folds
    after[rows.unlabelled] = rest
    model = final.model(trained_on=f"{len(final)} of the {len(wrong)} rows {default.name} got wrong among "
                                   f"{len(rows.labelled)} faithfulness labels of {source or 'a dataset version'}",
                        script="rag-eval align")
    return rows.alignment(after, model)
