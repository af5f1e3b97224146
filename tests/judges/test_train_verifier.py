"""tools/train_verifier.py's choice of the verdict rule (``verdict_rule``), on groups made by hand."""
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from rag_eval.metrics.judges.verifier import FEATURES

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))

import train_verifier


def judged(p: float) -> dict[str, float]:
    """Features whose probability is ``p`` under bias 0 and a weight of 1 on word_recall alone."""
    return dict.fromkeys(FEATURES, 0.0) | {"word_recall": math.log(p / (1 - p))}


def test_the_verdict_rule_is_the_best_mean_of_the_three_sources_figures():
    made = train_verifier.Examples()
    # HaluEval and synthetic: a supported statement of 5 words at 0.85 and an unsupported one at 0.70, each a group.
    for source in (0, 1):
        made.add([judged(0.85)], [5], 1.0, source, True)
        made.add([judged(0.70)], [5], 0.0, source, True)
    # The sweep: a fully consistent answer of one 20-word statement at 0.60, a half consistent one at 0.50.
    made.add([judged(0.60)], [20], 1.0, 2, False)
    made.add([judged(0.50)], [20], 0.5, 2, False)
    weights = np.array([float(f == "word_recall") for f in FEATURES])
    # Both accuracies are 1 only with the short threshold in (0.70, 0.85]: the first such of the grid is 0.725.
    # The sweep's AUROC is 1 only when the 20-word statements are long (more than 8 words, the first count
    # tried) and judged at a threshold in (0.50, 0.60]: the first is 0.525. Every rule tried before it (lower
    # thresholds first, then fewer words) scores less than 1, and ties go to the first.
    assert train_verifier.verdict_rule(made, 0.0, weights) == (pytest.approx(0.725), 8, pytest.approx(0.525))
    assert made.words == [5, 5, 5, 5, 20, 20]
