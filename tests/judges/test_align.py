"""Fitting the verifier (``fitting``) and aligning it to labels (``align``): the group means worked
out by hand, the prior's pull, and cross-fitting that never scores a row with a model fitted on it."""
import math
import re

import numpy as np
import pytest

from rag_eval.metrics import OfflineJudge
from rag_eval.metrics.core.registry import build_metrics
from rag_eval.metrics.core.samples import load_samples
from rag_eval.metrics.core.scoring import score_all
from rag_eval.metrics.judges.align import align
from rag_eval.metrics.judges.fitting import Groups, fit, rescale
from rag_eval.metrics.judges.verifier import FEATURES, Verifier
from tests.conftest import FIQA


def one_hot(**values):
    return dict.fromkeys(FEATURES, 0.0) | values


def test_group_mean_counts_the_rules_verdicts_by_hand():
    # Group 0: a graded statement (word recall 1) and one the rules supported alone; group 1: recall 0.5.
    groups = Groups.of([[one_hot(word_recall=1.0), None], [one_hot(word_recall=0.5)]], [1, 0], [1, 0])
    weights = np.array([2.0 if f == "word_recall" else 0.0 for f in FEATURES])
    sigmoid = lambda z: 1 / (1 + math.exp(-z))  # noqa: E731
    assert groups.means(-1.0, weights) == pytest.approx([(sigmoid(1) + 1) / 2, sigmoid(0)])
    assert list(groups.weight) == [0.5, 0.5]
    assert groups.subset(np.array([1])).means(-1.0, weights) == pytest.approx([0.5])
    # a repeated index repeats its group, in the order given
    assert groups.subset(np.array([1, 0, 1])).means(-1.0, weights) == pytest.approx([0.5, (sigmoid(1) + 1) / 2, 0.5])
    assert list(groups.subset(np.array([1, 0, 1])).target) == [0, 1, 0]
    with pytest.raises(ValueError, match="at least one statement"):
        Groups.of([[]], [0], [1])


def test_fit_learns_the_labels_within_the_signs_and_a_strong_prior_holds():
    # Supported exactly when word recall is high; missing_names may only lower support.
    judged = [[one_hot(word_recall=r, missing_names=m)] for r, m in
              [(1, 0), (0.9, 0), (0.95, 0), (0.2, 0), (0.1, 0), (0.3, 1), (1, 1), (0.9, 1)]]
    groups = Groups.of(judged, [0] * 8, [1, 1, 1, 0, 0, 0, 0, 0])
    bias, w = fit(groups)
    means = groups.means(bias, w)
    assert all(means[:3] > 0.5) and all(means[3:] < 0.5)
    weights = dict(zip(FEATURES, w))
    assert weights["word_recall"] > 0 and weights["missing_names"] < 0 and weights["missing_numbers"] == 0


def test_rescale_keeps_the_shipped_weights_direction_and_fits_the_level():
    shipped = Verifier()
    # A copied statement (shipped probability 0.81) labelled pass, the same with a missing name failed:
    # the rescaled model separates them further, its weights in the shipped proportions.
    groups = Groups.of([[one_hot(word_recall=1.0)], [one_hot(word_recall=1.0, missing_names=1.0)]], [0, 0], [1, 0])
    bias, w = rescale(groups, shipped)
    recall = list(FEATURES).index("word_recall")
    scale = w[recall] / shipped.weights[recall]
    assert scale > 0 and w == pytest.approx(scale * shipped.weights)
    means = groups.means(bias, w)
    assert means[0] > 0.95 and means[1] < 0.05  # the labels, separated by the shipped logit alone
    assert groups.means(shipped.bias, shipped.weights)[0] == pytest.approx(0.81, abs=0.01)


def stand_in(sample) -> float:
    """A person standing in: pass when most of the response's words stand in its contexts."""
    words = set(re.findall(r"\w+", sample.response.lower()))
    shared = words & set(re.findall(r"\w+", " ".join(sample.retrieved_contexts).lower()))
    return 1.0 if len(shared) > 0.6 * len(words) else 0.0


@pytest.mark.slow
def test_align_scores_every_row_out_of_fold():
    samples = load_samples(FIQA)
    labelled = samples[::3] + samples[1::3]  # 20 of 30
    labels = {s.id: stand_in(s) for s in labelled}
    judge = OfflineJudge()
    result = align(samples, labels, judge, folds=5, source="fiqa")
    shipped = {s.id: r.value for s, r in zip(samples, score_all(samples, build_metrics(["faithfulness"]), judge))}
    assert (result.labelled, result.scored) == (20, 30)
    # "before" is the shipped judge's faithfulness against the labels.
    assert result.before.mae == pytest.approx(np.mean([abs(shipped[k] - v) for k, v in labels.items()]))
    assert result.interval_before.n == 20 and result.interval_before.N == 10
    # Flip one label: that row's aligned score comes from models fitted without it and stays; a row
    # of another fold is scored by a model that saw the flipped label and moves.
    first = labelled[0].id
    flipped = align(samples, {**labels, first: 1 - labels[first]}, judge, folds=5, source="fiqa")
    assert flipped.scores[first] == result.scores[first]
    assert sum(flipped.scores[s.id] != result.scores[s.id] for s in labelled) >= 10
    assert all(result.scores[k][0] == pytest.approx(v) for k, v in shipped.items() if k in result.scores)
    assert flipped.model["features"] != result.model["features"]
    assert flipped.model["version"] != result.model["version"]
    again = align(samples, labels, judge, folds=5, source="fiqa")
    assert again.model == result.model  # seeded: the same labels give the same variant
    assert result.model["name"] == "aligned" and result.model["trained_on"].startswith("20 faithfulness labels of fiqa")
    with pytest.raises(ValueError, match="at least 10"):
        align(samples, dict(list(labels.items())[:9]), judge, folds=5)
    with pytest.raises(ValueError, match="every one of the 20 labels passes"):
        align(samples, dict.fromkeys(labels, 1.0), judge, folds=5)
    every = align(samples, {s.id: stand_in(s) for s in samples}, judge, folds=5)
    assert (every.labelled, every.interval_before, every.interval_after) == (30, None, None)
    assert every.before.mae == pytest.approx(np.mean([abs(shipped[s.id] - stand_in(s)) for s in samples]))
