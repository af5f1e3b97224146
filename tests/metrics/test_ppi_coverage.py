"""The trust bench's machinery (bench/trust_bench.py) on synthetic pools whose truth is
analytic, so a broken bench (a wrong truth, a wrong width, a judge transform that does not
do what it says) cannot pass silently; and the coverage that made rag_eval.metrics.stats.ppi add its
pseudo-rows. Pure numpy, no encoder: a few seconds."""
import math

import numpy as np
import pytest

from bench import trust_bench as bench

Z = 1.959963984540054


def test_a_mixture_of_right_and_hallucinated_answers_has_the_mixing_proportion_as_truth():
    # Two questions; the judge accepts both right answers and the second hallucinated one.
    # p = 0.7: judge mean = 0.7 * 1 + 0.3 * mean([0, 1]) = 0.85, bias +0.15.
    pool = bench.mixture(np.array([1.0, 1.0]), np.array([0.0, 1.0]), 0.7)
    assert pool.truth == pytest.approx(0.7)
    assert pool.judge_bias == pytest.approx(0.15)
    # Squashed: 0.5 + 0.5 * 0.85 = 0.925, bias +0.225.
    assert bench.squashed(pool).judge_bias == pytest.approx(0.225)
    # Lenient: a hallucinated answer scores 1 with probability 0.3, else as before:
    # mean over hallucinated = 0.3 + 0.7 * 0.5 = 0.65; judge mean 0.7 + 0.3 * 0.65 = 0.895.
    lenient = bench.lenient(pool)
    assert lenient.truth == pytest.approx(0.7)
    assert lenient.judge_bias == pytest.approx(0.195)
    assert lenient.w.sum() == pytest.approx(1.0)


def test_a_constant_judge_gives_the_classical_interval():
    pool = bench.Pool(np.array([1.0, 0.0]), np.array([0.5, 0.5]), np.array([0.5, 0.5]))
    result = bench.simulate(pool, ns=(100,), rows=2000, draws=1000, seed=0)[100]
    assert result["lam"] == 0.0
    assert result["width_ratio"] == pytest.approx(1.0)
    assert result["coverage"] == result["classical_coverage"]
    # Agresti-Coull at p = 0.5, n = 100 covers close to 95 %; a wrong truth would give ~0.
    assert 0.92 <= result["coverage"] <= 0.98
    # Its mean width is about 2 z sqrt(0.25 / (100 + z^2)).
    assert result["classical_width"] == pytest.approx(2 * Z * math.sqrt(0.25 / (100 + Z * Z)), rel=0.02)


def test_a_perfect_judge_narrows_plain_ppi_to_the_width_of_all_rows():
    # Y = f, p = 0.5, N = 2000 rows of which n = 100 labelled: with lam = N'/(N' + n) plain
    # PPI++'s variance is var / (n + N') = var / 2000; the classical (Agresti-Coull) one is
    # var / (100 + z^2): width ratio sqrt((100 + z^2) / 2000) = 0.228.
    pool = bench.Pool(np.array([1.0, 0.0]), np.array([1.0, 0.0]), np.array([0.5, 0.5]))
    result = bench.simulate(pool, ns=(100,), rows=2000, draws=400, seed=0)[100]
    assert result["plain_ratio"] == pytest.approx(math.sqrt((100 + Z * Z) / 2000), abs=0.01)
    assert result["plain_ratio"] < result["width_ratio"] < 0.5
    assert result["coverage"] >= 0.95


def test_pseudo_rows_restore_coverage_when_the_labels_rarely_show_the_judges_errors():
    # The judge accepts 1 row in 20 that people reject (all its errors one way): 25 labels
    # show none of them 28 % of the time. Plain PPI++ then sits on the judge's biased mean
    # with a tiny interval (coverage near 72 %); the product's interval covers.
    pool = bench.one_sided(0.05, truth=0.7)
    assert (pool.truth, pool.judge_bias) == pytest.approx((0.7, 0.05))
    assert pool.w @ (pool.y != pool.f) == pytest.approx(0.05)  # the rows where judge and people disagree
    result = bench.simulate(pool, ns=(25,), rows=2000, draws=1000, seed=0)[25]
    assert result["plain_coverage"] < 0.85
    assert result["coverage"] >= 0.95


def test_n_must_leave_unlabelled_rows():
    pool = bench.Pool(np.array([1.0, 0.0]), np.array([1.0, 0.0]), np.array([0.5, 0.5]))
    with pytest.raises(ValueError, match="must be below the version's rows"):
        bench.simulate(pool, ns=(100,), rows=100, draws=1)
