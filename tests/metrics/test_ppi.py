"""metrics.ppi against the authors' package and a hand-worked case.

The reference figures below were computed with ppi-python 0.2.3 (Angelopoulos et al.'s
``ppi_py``), in a separate venv, by::

    from ppi_py import ppi_mean_ci, ppi_mean_pointestimate
    ppi_mean_pointestimate(Y, YHAT, UNLABELLED, lam=lam)
    ppi_mean_ci(Y, YHAT, UNLABELLED, alpha=0.05, lam=lam)

for lam = None (power-tuned), 1.0 (plain PPI) and 0.0 (classical).
"""
import math

import pytest

from metrics.ppi import classical_mean, difference, power_tuning, ppi_mean

Y = [1, 0, 1, 1, 0, 1, 1, 1, 0, 1]
YHAT = [0.9, 0.2, 0.7, 0.4, 0.5, 0.8, 0.95, 0.6, 0.1, 0.85]
UNLABELLED = [0.8, 0.3, 0.9, 0.1, 0.7, 0.65, 0.2, 0.55, 0.9, 0.75, 0.4, 0.85, 0.5, 0.95, 0.05]

PPI_PY = {  # lam: (point estimate, ci low, ci high), ppi-python 0.2.3
    None: (0.68148148, 0.4524962, 0.91046677),
    1.0: (0.67333333, 0.43684966, 0.909817),
    0.0: (0.7, 0.41597423, 0.98402577),
}


@pytest.mark.parametrize("lam", list(PPI_PY))
def test_ppi_mean_equals_ppi_python(lam):
    estimate = ppi_mean(Y, YHAT, UNLABELLED, lam=lam)
    assert (estimate.estimate, estimate.ci_low, estimate.ci_high) == pytest.approx(PPI_PY[lam], abs=1e-7)
    assert (estimate.n, estimate.N, estimate.method) == (10, 15, "ppi++")


def test_power_tuning_of_the_reference_data_is_25_36ths():
    # cov(Y, f) over the labelled rows = 0.1 (divided by n); var(f) over all 25 scores (ddof 1) = 0.0864;
    # 0.1 / ((1 + 10/15) * 0.0864) = 0.1 / 0.144 = 25/36, what ppi_py's _calc_lam_glm gives.
    import numpy as np
    assert power_tuning(np.array(Y, float), np.array(YHAT), np.array(UNLABELLED)) == pytest.approx(25 / 36)


def test_hand_worked_two_labels():
    # Y=[1,0], f=[1,0], unlabelled f=[1,1]: cov = 0.25, var([1,0,1,1], ddof 1) = 0.25,
    # lam = 0.25 / ((1 + 2/2) * 0.25) = 0.5; estimate = 0.5*1 + mean([1-0.5, 0-0]) = 0.75;
    # se^2 = std(0.5*[1,1])^2/2 + std([0.5, 0])^2/2 = 0 + 0.0625/2.
    estimate = ppi_mean([1, 0], [1, 0], [1, 1])
    assert estimate.lam == pytest.approx(0.5)
    assert estimate.estimate == pytest.approx(0.75)
    assert estimate.se == pytest.approx(math.sqrt(0.03125))
    assert estimate.ci_high - estimate.estimate == pytest.approx(1.959963984540054 * math.sqrt(0.03125))


def test_lam_zero_is_the_classical_interval_and_a_constant_judge_gets_lam_zero():
    classical = classical_mean(Y)
    assert (classical.estimate, classical.ci_low, classical.ci_high) == pytest.approx(PPI_PY[0.0], abs=1e-7)
    constant = ppi_mean(Y, [0.5] * 10, [0.5] * 15)
    assert constant.lam == 0.0
    assert (constant.ci_low, constant.ci_high) == pytest.approx((classical.ci_low, classical.ci_high))


def test_a_judge_that_agrees_with_people_narrows_the_interval():
    labels = [1, 0] * 10
    estimate = ppi_mean(labels, labels, [1, 0] * 200)
    assert estimate.lam > 0.9
    assert estimate.ci_high - estimate.ci_low < 0.5 * (classical_mean(labels).ci_high - classical_mean(labels).ci_low)


def test_difference_of_two_versions_adds_the_variances():
    a, b = ppi_mean([1, 0], [1, 0], [1, 1]), classical_mean(Y)
    diff = difference(a, b)
    assert diff.estimate == pytest.approx(0.7 - 0.75)
    assert diff.se == pytest.approx(math.hypot(a.se, b.se))
    assert diff.method == "mixed"


@pytest.mark.parametrize("call, message", [
    (lambda: ppi_mean([1, 0], [1], [1]), "one length"),
    (lambda: ppi_mean([1], [1], [1]), "at least 2 labels"),
    (lambda: ppi_mean([1, 0], [1, 0], []), "no unlabelled row"),
    (lambda: ppi_mean([1, float("nan")], [1, 0], [1]), "labels: every value must be a finite number"),
    (lambda: classical_mean([1, 0], confidence=1.0), "confidence must lie in"),
])
def test_bad_input_is_refused_with_its_reason(call, message):
    with pytest.raises(ValueError, match=message):
        call()
