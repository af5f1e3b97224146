"""rag_eval.metrics.stats.ppi against the authors' package, Agresti-Coull, Agresti-Min and hand-worked cases.

The reference figures below were computed with ppi-python 0.2.3 (Angelopoulos et al.'s
``ppi_py``), in a separate venv, by (``pseudo=0`` here: plain PPI++, no pseudo-rows)::

    from ppi_py import ppi_mean_ci, ppi_mean_pointestimate
    ppi_mean_pointestimate(Y, YHAT, UNLABELLED, lam=lam)
    ppi_mean_ci(Y, YHAT, UNLABELLED, alpha=0.05, lam=lam)

for lam = None (power-tuned), 1.0 (plain PPI) and 0.0 (classical).
"""
import math

import pytest

from rag_eval.metrics.stats.ppi import classical_mean, difference, power_tuning, ppi_mean, z_value

Z = 1.959963984540054  # the normal quantile of a 95 % interval

Y = [1, 0, 1, 1, 0, 1, 1, 1, 0, 1]
YHAT = [0.9, 0.2, 0.7, 0.4, 0.5, 0.8, 0.95, 0.6, 0.1, 0.85]
UNLABELLED = [0.8, 0.3, 0.9, 0.1, 0.7, 0.65, 0.2, 0.55, 0.9, 0.75, 0.4, 0.85, 0.5, 0.95, 0.05]

PPI_PY = {  # lam: (point estimate, ci low, ci high), ppi-python 0.2.3
    None: (0.68148148, 0.4524962, 0.91046677),
    1.0: (0.67333333, 0.43684966, 0.909817),
    0.0: (0.7, 0.41597423, 0.98402577),
}


@pytest.mark.parametrize("lam", list(PPI_PY))
def test_ppi_mean_without_pseudo_rows_equals_ppi_python(lam):
    estimate = ppi_mean(Y, YHAT, UNLABELLED, lam=lam, pseudo=0)
    assert (estimate.estimate, estimate.ci_low, estimate.ci_high) == pytest.approx(PPI_PY[lam], abs=1e-7)
    assert (estimate.n, estimate.N, estimate.method) == (10, 15, "ppi++")


def test_power_tuning_of_the_reference_data_is_25_36ths():
    # cov(Y, f) over the labelled rows = 0.1 (divided by n); var(f) over all 25 scores (ddof 1) = 0.0864;
    # 0.1 / ((1 + 10/15) * 0.0864) = 0.1 / 0.144 = 25/36, what ppi_py's _calc_lam_glm gives.
    import numpy as np
    assert power_tuning(np.array(Y, float), np.array(YHAT), np.array(UNLABELLED)) == pytest.approx(25 / 36)


def test_hand_worked_two_labels_without_pseudo_rows():
    # Y=[1,0], f=[1,0], unlabelled f=[1,1]: cov = 0.25, var([1,0,1,1], ddof 1) = 0.25,
    # lam = 0.25 / ((1 + 2/2) * 0.25) = 0.5; estimate = 0.5*1 + mean([1-0.5, 0-0]) = 0.75;
    # se^2 = std(0.5*[1,1])^2/2 + std([0.5, 0])^2/2 = 0 + 0.0625/2.
    estimate = ppi_mean([1, 0], [1, 0], [1, 1], pseudo=0)
    assert estimate.lam == pytest.approx(0.5)
    assert estimate.estimate == pytest.approx(0.75)
    assert estimate.se == pytest.approx(math.sqrt(0.03125))
    assert estimate.ci_high - estimate.estimate == pytest.approx(Z * math.sqrt(0.03125))


def test_hand_worked_two_labels_with_the_four_pseudo_rows():
    # As above (lam = 0.5, residuals Y - lam f = [0.5, 0]); the judge's range is [0, 1], the
    # scale [0, 1]: pseudo-rows (0,0), (0,1), (1,0), (1,1) of weight k = z^2/4 have residuals
    # 0, -0.5, 1, 0.5. Total weight W = 2 + 4k; mean = (0.5 + k * 1) / (2 + 4k) = 1/4 exactly;
    # sum of squares about 1/4: 2 * 0.0625 + k * (0.0625 + 0.5625 + 0.5625 + 0.0625)
    # = 0.125 (1 + 10k); se^2 = 0 (the unlabelled part is constant) + 0.125 (1 + 10k) / W^2.
    k = Z * Z / 4
    estimate = ppi_mean([1, 0], [1, 0], [1, 1])
    assert estimate.estimate == pytest.approx(0.5 * 1 + 0.25)
    assert estimate.se == pytest.approx(math.sqrt(0.125 * (1 + 10 * k)) / (2 + 4 * k))
    assert (estimate.n, estimate.N) == (2, 2)


def test_half_weight_pseudo_rows_at_lam_one_are_agresti_and_mins_wald_plus_2_interval():
    # 20 labelled rows: 10 (Y=1, f=1), 6 (0, 0), b = 3 (1, 0), c = 1 (0, 1); lam = 1 and pseudo-rows of
    # weight 1/2 put 1/2 in each cell. Agresti & Min (2005), Wald+2 (Agresti's R code diffpropci):
    # difference (b - c) / (n + 2) = 2/22, sd sqrt((b + c + 1) - (b - c)^2 / (n + 2)) / (n + 2)
    # = sqrt(5 - 4/22) / 22 = 0.0997744. The unlabelled scores are constant: they add 0.5, no variance.
    labels = [1] * 10 + [0] * 6 + [1] * 3 + [0]
    judged = [1] * 10 + [0] * 6 + [0] * 3 + [1]
    estimate = ppi_mean(labels, judged, [0.5, 0.5], lam=1.0, pseudo=0.5)
    assert estimate.estimate == pytest.approx(0.5 + 2 / 22)
    assert estimate.se == pytest.approx(math.sqrt(5 - 4 / 22) / 22)
    assert estimate.se == pytest.approx(0.0997744, abs=1e-7)
    # The default weight z^2/4 puts 0.96 in each cell: mean (2 + 0) / (20 + z^2), sum of squares
    # 4 + 2 * 0.96 - (20 + z^2) mean^2, se^2 = that / (20 + z^2)^2.
    default = ppi_mean(labels, judged, [0.5, 0.5], lam=1.0)
    weight = 20 + Z * Z
    assert default.se == pytest.approx(math.sqrt(4 + Z * Z / 2 - 4 / weight) / weight)


def test_classical_mean_is_the_agresti_coull_interval():
    # 7 of 10 labels are 1: n~ = 10 + z^2, p~ = (7 + z^2/2) / n~ = 0.644493, se = sqrt(p~ (1 - p~) / n~)
    # (Agresti & Coull 1998): (0.392325, 0.896662).
    n_tilde = 10 + Z * Z
    p_tilde = (7 + Z * Z / 2) / n_tilde
    estimate = classical_mean(Y)
    assert estimate.estimate == pytest.approx(p_tilde)
    assert estimate.se == pytest.approx(math.sqrt(p_tilde * (1 - p_tilde) / n_tilde))
    assert (estimate.ci_low, estimate.ci_high) == pytest.approx((0.392325, 0.896662), abs=1e-6)


def test_pseudo_rows_reach_the_scale_and_the_judges_range():
    # Grades on 1..5, all labels 4: the pseudo-rows' labels sit at 1 and 5 (scale), so the
    # classical interval is not the zero-width one of four equal labels. Judge scores 2..4:
    # with lam = 0 the judge's range plays no part, and ppi_mean is the classical interval.
    classical = classical_mean([4, 4, 4, 4], scale=(1, 5))
    k = Z * Z / 4
    weight = 4 + 4 * k
    mean = (16 + 2 * k * (1 + 5)) / weight
    variance = (4 * (4 - mean) ** 2 + 2 * k * ((1 - mean) ** 2 + (5 - mean) ** 2)) / weight
    assert classical.estimate == pytest.approx(mean)
    assert classical.se == pytest.approx(math.sqrt(variance / weight))
    judged = ppi_mean([4, 4, 4, 4], [2, 3, 4, 3], [2, 4], lam=0.0, scale=(1, 5))
    assert (judged.estimate, judged.se) == pytest.approx((classical.estimate, classical.se))


def test_lam_zero_is_the_classical_interval_and_a_constant_judge_gets_lam_zero():
    plain = classical_mean(Y, pseudo=0)
    assert (plain.estimate, plain.ci_low, plain.ci_high) == pytest.approx(PPI_PY[0.0], abs=1e-7)
    classical = classical_mean(Y)
    constant = ppi_mean(Y, [0.5] * 10, [0.5] * 15)
    assert constant.lam == 0.0
    assert (constant.ci_low, constant.ci_high) == pytest.approx((classical.ci_low, classical.ci_high))


def test_a_judge_that_agrees_with_people_narrows_the_interval():
    labels = [1, 0] * 10

    def width(estimate):
        return estimate.ci_high - estimate.ci_low

    plain = ppi_mean(labels, labels, [1, 0] * 200, pseudo=0)
    assert plain.lam > 0.9
    assert width(plain) < 0.5 * width(classical_mean(labels, pseudo=0))
    # With the pseudo-rows, 20 agreeing labels cannot rule out a disagreement rate of a few
    # per cent: still narrower than the labels alone, by less.
    adjusted = ppi_mean(labels, labels, [1, 0] * 200)
    assert width(plain) < width(adjusted) < 0.7 * width(classical_mean(labels))


def test_difference_of_two_versions_adds_the_variances():
    a, b = ppi_mean([1, 0], [1, 0], [1, 1], pseudo=0), classical_mean(Y, pseudo=0)
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
    (lambda: ppi_mean([1, 0], [1, 0], [1], pseudo=-1), "pseudo must be a weight >= 0"),
])
def test_bad_input_is_refused_with_its_reason(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_z_value_is_the_normal_table_s_two_sided_quantile():
    # The normal table: 95 % of the mass within ± 1.95996, 90 % within ± 1.64485, 99 % within ± 2.57583.
    assert z_value(0.95) == pytest.approx(1.959964, abs=1e-6)
    assert z_value(0.90) == pytest.approx(1.644854, abs=1e-6)
    assert z_value(0.99) == pytest.approx(2.575829, abs=1e-6)
    for outside in (0.0, 1.0, 1.5):
        with pytest.raises(ValueError, match=f"confidence must lie in \\(0, 1\\), got {outside}"):
            z_value(outside)
