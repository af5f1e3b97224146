"""The judge cascade's draw and estimate (rag_eval.metrics.stats.cascade): inclusion probabilities,
the nested seeded draw, exact unbiasedness by enumeration, hand-worked values, the relation to
PPI++ under uniform sampling, and coverage on a synthetic population. Pure numpy: fast."""
import itertools
import math

import numpy as np
import pytest

from rag_eval.metrics.stats.cascade import (StrongSample, cascade_mean, draw, inclusion_probabilities,
                                            score_uncertainty)
from rag_eval.metrics.stats.cascade_fit import t_value
from rag_eval.metrics.stats.ppi import ppi_mean, z_value

Z = 1.959963984540054
UNCERTAINTY = [0.5, 0.5, 0.4, 0, 0, 0, 0, 0, 0, 0.1]


def test_active_probabilities_are_proportional_to_uncertainty_above_the_floor():
    # Budget 4 of 10 rows, floor 0.5 of the uniform rate 0.4: every pi >= 0.2. The six rows of
    # uncertainty 0 and the one of 0.1 sit at the floor (1.4); the other three share 2.6 in
    # proportion: c = 2.6 / 1.4 = 13/7, so pi = 13/14, 13/14 and 0.4 * 13/7 = 26/35 (0.1 c < 0.2).
    pi = inclusion_probabilities(10, 4, UNCERTAINTY, floor=0.5)
    assert pi == pytest.approx([13 / 14, 13 / 14, 26 / 35] + [0.2] * 7)
    assert pi.sum() == pytest.approx(4.0)


def test_probabilities_capped_at_one_give_their_excess_to_the_other_rows():
    # Budget 5: the floor is 0.25; c s >= 1 for the three most uncertain rows (capped at 1), so
    # the rest, 5 - 3 - 6 * 0.25 = 0.5, goes to the 0.1 row (c = 5: 0.5 c and 0.4 c pass 1).
    assert inclusion_probabilities(10, 5, UNCERTAINTY, floor=0.5) == pytest.approx([1, 1, 1] + [0.25] * 6 + [0.5])
    # Budget 6: the four uncertain rows all reach 1 (4), so the six certain ones share the other 2.
    assert inclusion_probabilities(10, 6, UNCERTAINTY, floor=0.5) == pytest.approx([1, 1, 1] + [1 / 3] * 6 + [1])
    # A share is of the rows: 0.3 of 10 is 3 rows; uniform sampling gives each row 3/10.
    assert inclusion_probabilities(10, 0.3) == pytest.approx([0.3] * 10)


def test_rows_without_a_cheap_score_are_always_drawn_and_count_toward_the_budget():
    # Two rows with no cheap score (NaN uncertainty): pi = 1; the other 8 share 4 - 2 = 2 rows
    # at least at the floor 0.5 * 2 / 8 = 0.125.
    uncertainty = [np.nan, np.nan, 0.5, 0.5, 0, 0, 0, 0, 0, 0]
    pi = inclusion_probabilities(10, 4, uncertainty, floor=0.5)
    assert pi[:2].tolist() == [1.0, 1.0]
    assert pi.sum() == pytest.approx(4.0)
    assert pi[2:].min() == pytest.approx(0.125)
    with pytest.raises(ValueError, match="2 row\\(s\\) must be strong-judged"):
        inclusion_probabilities(10, 1, uncertainty)
    with pytest.raises(ValueError, match=r"^line 1: uncertainty: NaN"):
        inclusion_probabilities(10, 4, uncertainty, forced=[False, True] + [False] * 8)


@pytest.mark.parametrize("active", [False, True])
def test_a_larger_budget_s_sample_contains_the_smaller_one_s(active):
    rng = np.random.default_rng(7)
    ids = [f"q-{i}" for i in range(500)]
    cheap = rng.random(500)
    cheap[::50] = np.nan  # judge_error rows: drawn at every budget
    uncertainty = score_uncertainty(cheap) if active else None
    samples = [draw(ids, 3, budget, uncertainty) for budget in (0.05, 0.1, 0.2, 0.5, 1.0)]
    for smaller, larger in itertools.pairwise(samples):
        assert (larger.pi >= smaller.pi - 1e-12).all()
        assert (larger.drawn >= smaller.drawn).all()
        assert larger.rows > smaller.rows
    assert samples[-1].drawn.all()
    # Another seed draws other rows.
    assert (draw(ids, 4, 0.1, uncertainty).drawn != samples[1].drawn).any()


def test_hand_worked_four_rows_with_fixed_lam():
    # pi = 1/2 everywhere, rows 1, 2, 4 drawn; g = 0.5 f = 0.45, 0.1, 0.3, 0.2.
    # Terms g + (y - g) / pi: 0.45 + 1.1, 0.1 - 0.2, 0.3, 0.2 + 1.6 -> mean 3.55 / 4 = 0.8875.
    # se^2 = (1 - pi) / pi^2 * (0.55^2 + 0.1^2 + 0.8^2) / 16 = 2 * 0.9525 / 16.
    sample = StrongSample(np.full(4, 0.5), np.array([True, True, False, True]), "uniform")
    out = cascade_mean([0.9, 0.2, 0.6, 0.4], [1, 0, np.nan, 1], sample, lam=0.5, intercept=0.0)
    assert out.estimate.estimate == pytest.approx(0.8875)
    assert out.estimate.se == pytest.approx(math.sqrt(2 * 0.9525 / 16))
    assert (out.estimate.n, out.estimate.N, out.estimate.method) == (3, 4, "cascade-uniform")


def test_a_drawn_row_the_strong_judge_finds_not_applicable_leaves_the_population_whose_size_is_estimated():
    # pi = 1/2, g = f (lam 1, b 0); rows 1 and 3 scored 1 and 0 by the strong judge, row 2 outside its population.
    # N_d = 4 - 1 / 0.5 = 2; theta = [2.1 + (1 - 0.9) / 0.5 + (0 - 0.6) / 0.5 - 0.2 / 0.5] / 2 = 0.7 / 2 = 0.35.
    # se² = 2 * (0.1² + 0.6² + (0.35 - 0.2)²) / 2², the outside row's residual being theta - g.
    sample = StrongSample(np.full(4, 0.5), np.array([True, True, True, False]), "uniform")
    out = cascade_mean([0.9, 0.2, 0.6, 0.4], [1, np.nan, 0, np.nan], sample, lam=1.0, intercept=0.0,
                       outside=[False, True, False, False])
    assert out.estimate.estimate == pytest.approx(0.35)
    assert out.estimate.se == pytest.approx(math.sqrt(2 * (0.01 + 0.36 + 0.0225) / 4))
    assert (out.estimate.n, out.estimate.N) == (2, 4)
    with pytest.raises(ValueError, match=r"^the strong judge found 2 drawn row\(s\) not applicable, standing for "
                                         r"more than the 4 rows covered"):
        cascade_mean([0.9, 0.2, 0.6, 0.4], [1, np.nan, np.nan, np.nan], sample, lam=1.0, intercept=0.0,
                     outside=[False, True, True, False])


def test_hand_worked_twelve_rows_tuned():
    # Rows 0-11, pi = 0.5, drawn: rows 0-9 (10 strong rows, MIN_DRAWN); rows 10, 11 not drawn. Drawn
    # f = 0.9, 0.2, 0.4 repeated (0.9, 0.2, 0.4, 0.9, ..., 0.9), y = 1, 0, 1 repeated. Equal weights; the centred
    # slope is 0.3 / 0.26 per triple on the first nine and the tenth row (f 0.9, y 1) adds to it: fitted
    # as the test computes below by least squares (numpy), clipped to [0, 1].
    f = np.array([0.9, 0.2, 0.4] * 3 + [0.9, 0.6, 0.3])
    y = np.array([1.0, 0.0, 1.0] * 3 + [1.0, np.nan, np.nan])
    drawn = np.array([True] * 10 + [False, False])
    sample = StrongSample(np.full(12, 0.5), drawn, "uniform")
    out = cascade_mean(f, y, sample)
    slope = np.polyfit(f[drawn], y[drawn], 1)[0]
    lam = min(1.0, max(0.0, slope))
    b = float(np.mean(y[drawn] - lam * f[drawn]))
    assert (out.estimate.lam, out.intercept) == pytest.approx((lam, b))
    # The residuals sum to 0: theta = lam mean(f over all 12) + b.
    assert out.estimate.estimate == pytest.approx(lam * f.mean() + b)
    # se^2 = w sum r^2 / N^2 with w = (1 - 0.5) / 0.25 = 2, times m / (m - 2) = 10 / 8 (lam and b fitted on
    # the rows that estimate the spread), times (12 / 20)^2 (the 12 scored rows over their estimate from
    # the draw, 10 / 0.5: the fitted intercept's Hajek correction); the quantile is Student's t with 8
    # degrees of freedom, 2.306.
    r = y[drawn] - lam * f[drawn] - b
    se = math.sqrt(2 * (r ** 2).sum() * 10 / 8 * (12 / 20) ** 2) / 12
    assert out.estimate.se == pytest.approx(se)
    assert out.estimate.ci_low == pytest.approx(out.estimate.estimate - 2.306 * se, abs=1e-3 * se)
    assert out.cheap_mean == pytest.approx(f.mean())


def test_fewer_strong_rows_than_an_interval_needs_are_refused_naming_them():
    sample = StrongSample(np.full(4, 0.5), np.array([True, True, False, True]), "uniform")
    with pytest.raises(ValueError, match=r"^3 strong-judged row\(s\) among the 4 sampled: an interval needs at "
                                         r"least 10; raise the budget$"):
        cascade_mean([0.9, 0.2, 0.6, 0.4], [1, 0, np.nan, 1], sample)
    # Given lam and the intercept, nothing is fitted on them: four rows give the Horvitz-Thompson interval.
    out = cascade_mean([0.9, 0.2, 0.6, 0.4], [1, 0, np.nan, 1], sample, lam=1.0, intercept=0.0).estimate
    assert out.estimate == pytest.approx((0.9 + 0.2 + 0.6 + 0.4) / 4 + (0.1 - 0.2 + 0.6) / 0.5 / 4)


def test_a_sample_the_cheap_judge_fits_exactly_gets_laplace_s_spread_not_a_zero_width_interval():
    # 20 rows, pi = 0.5, rows 0-9 drawn; the strong judge passes every drawn row and the cheap judge says 1 on
    # every row: lam = 0 (a constant cheap judge), b = 1, every residual 0. No spread seen is not none: each
    # residual is taken as a Bernoulli one of rate 1 / (m + 2) = 1 / 12, variance 11 / 144.
    sample = StrongSample(np.full(20, 0.5), np.arange(20) < 10, "uniform")
    out = cascade_mean(np.ones(20), np.where(np.arange(20) < 10, 1.0, np.nan), sample).estimate
    se = math.sqrt(2 * 10 * 11 / 144 * 10 / 8 * (20 / 20) ** 2) / 20
    assert out.estimate == pytest.approx(1.0) and out.se == pytest.approx(se) and out.ci_low < 1.0


def test_the_estimate_and_its_variance_estimate_are_unbiased_by_enumeration():
    # Row 0 has no cheap score (pi = 1); rows 1-4 are drawn with the unequal pi below. Over all
    # 16 subsets, weighted by their probability: E[theta] is the strong mean exactly and E[se^2]
    # is theta's variance exactly (Horvitz-Thompson, fixed lam and intercept).
    cheap = np.array([np.nan, 0.9, 0.1, 0.6, 0.3])
    strong = np.array([1.0, 1.0, 0.0, 0.0, 1.0])
    pi = np.array([1.0, 0.2, 0.5, 0.7, 0.9])
    thetas, variances, weights = [], [], []
    for chosen in itertools.product([False, True], repeat=4):
        drawn = np.array([True, *chosen])
        weights.append(np.prod(np.where(drawn, pi, 1 - pi)))
        out = cascade_mean(cheap, np.where(drawn, strong, np.nan), StrongSample(pi, drawn, "active"),
                           lam=0.6, intercept=0.1).estimate
        thetas.append(out.estimate)
        variances.append(out.se ** 2)
    weights, thetas = np.array(weights), np.array(thetas)
    assert weights.sum() == pytest.approx(1.0)
    assert weights @ thetas == pytest.approx(strong.mean(), abs=1e-12)
    assert weights @ np.array(variances) == pytest.approx(weights @ (thetas - strong.mean()) ** 2, abs=1e-12)


def test_the_tuned_estimate_is_unbiased_within_its_simulation_error():
    # A fixed population of 400 rows; 3,000 active draws at a 20 % budget. The tuned lam and
    # intercept make the estimator a ratio (bias of order 1/n); the mean over draws must lie
    # within 4 simulation standard errors of the strong mean.
    rng = np.random.default_rng(11)
    cheap = rng.beta(2, 2, 400)
    strong = (rng.random(400) < 0.2 + 0.6 * cheap).astype(float)
    pi = inclusion_probabilities(400, 0.2, score_uncertainty(cheap))
    thetas = np.array([cascade_mean(cheap, strong, StrongSample(pi, rng.random(400) < pi, "active")).estimate.estimate
                       for _ in range(3000)])
    assert abs(thetas.mean() - strong.mean()) < 4 * thetas.std() / math.sqrt(len(thetas))


def test_every_row_drawn_for_sure_gives_the_strong_mean_with_zero_width():
    cheap = [0.2, np.nan, 0.7, 0.9]
    strong = [0.0, 1.0, 1.0, 0.0]
    out = cascade_mean(cheap, strong, draw(["a", "b", "c", "d"], 0, 1.0, score_uncertainty(cheap)))
    assert out.estimate.estimate == 0.5
    assert (out.estimate.ci_low, out.estimate.ci_high, out.estimate.se) == (0.5, 0.5, 0.0)
    assert out.estimate.n == 4


def test_uniform_sampling_with_fixed_n_is_ppi_plus_plus_on_the_rows_themselves():
    # With pi = n / N and exactly n rows drawn, the fitted intercept centres the residuals:
    # theta = lam mean_all(f) + mean_drawn(y - lam f), PPI++'s estimate with the cheap mean over
    # all N rows instead of the N - n undrawn ones; se^2 = (1 - n/N) var(y - lam f) / n, PPI++'s
    # rectifier variance with the finite-population correction and without lam^2 var(f) / (N - n)
    # (the cheap mean is known on every row, not estimated for a population beyond them).
    rng = np.random.default_rng(5)
    big_n, n, lam = 2000, 200, 0.8
    cheap = rng.random(big_n)
    strong = (rng.random(big_n) < cheap).astype(float)
    drawn = np.zeros(big_n, bool)
    drawn[rng.choice(big_n, n, replace=False)] = True
    out = cascade_mean(cheap, strong, StrongSample(np.full(big_n, n / big_n), drawn, "uniform"), lam=lam).estimate
    ppi = ppi_mean(strong[drawn], cheap[drawn], cheap[~drawn], lam=lam, pseudo=0.0)
    assert out.estimate == pytest.approx(ppi.estimate + lam * (cheap.mean() - cheap[~drawn].mean()))
    # The intercept is fitted on the drawn rows: the residuals' variance with one degree of freedom spent.
    residual_variance = np.var(strong[drawn] - lam * cheap[drawn], ddof=1)
    assert out.se ** 2 == pytest.approx((1 - n / big_n) * residual_variance / n)
    assert ppi.se ** 2 == pytest.approx(residual_variance * (n - 1) / n / n
                                        + lam ** 2 * np.var(cheap[~drawn]) / (big_n - n))
    # At this size the two point estimates differ by far less than the interval's width.
    assert abs(out.estimate - ppi.estimate) < 0.1 * (out.ci_high - out.ci_low)


@pytest.mark.parametrize("uncertain", [False, True])
def test_coverage_on_a_synthetic_population_is_95_percent_within_the_binomial_band(uncertain):
    # 400 versions of 1,000 rows, a cheap score informative of the strong verdict, 3 % judge_error
    # rows; a 10 % budget. 95 % coverage over 400 draws has standard error 1.09 %: within 3.
    rng = np.random.default_rng(2)
    ids = [str(i) for i in range(1000)]
    hits = 0
    for version in range(400):
        cheap = rng.beta(0.7, 0.7, 1000)
        strong = (rng.random(1000) < 0.1 + 0.8 * cheap).astype(float)
        cheap[rng.random(1000) < 0.03] = np.nan
        sample = draw(ids, version, 0.1, score_uncertainty(cheap) if uncertain else None, forced=np.isnan(cheap))
        assert sample.drawn[np.isnan(cheap)].all()
        out = cascade_mean(cheap, np.where(sample.drawn, strong, np.nan), sample).estimate
        hits += out.ci_low <= strong.mean() <= out.ci_high
    band = 3 * math.sqrt(0.95 * 0.05 / 400)
    assert 0.95 - band <= hits / 400 <= 0.95 + band


def test_bad_rows_are_named_by_line_and_field():
    sample = StrongSample(np.array([1.0, 0.5, 0.5]), np.array([True, True, False]), "active")
    with pytest.raises(ValueError, match=r"^line 2: strong: drawn for the strong judge"):
        cascade_mean([np.nan, 0.4, 0.3], [1.0, np.nan, np.nan], sample)
    with pytest.raises(ValueError, match=r"^line 3: cheap: no cheap score"):
        cascade_mean([0.2, 0.4, np.nan], [1.0, 0.0, np.nan], sample)
    with pytest.raises(ValueError, match=r"^line 3: id 'a' repeats line 1's"):
        draw(["a", "b", "a"], 0, 0.5)
    with pytest.raises(ValueError, match="no row was strong-judged"):
        cascade_mean([0.2, 0.4, 0.3], [np.nan] * 3, StrongSample(np.full(3, 0.1), np.zeros(3, bool), "uniform"))
    with pytest.raises(ValueError, match="1 strong-judged row\\(s\\) among the 3 sampled"):
        cascade_mean([0.2, 0.4, 0.3], [1.0, np.nan, np.nan],
                     StrongSample(np.full(3, 0.5), np.array([True, False, False]), "uniform"))


@pytest.mark.parametrize("budget, message", [(1.5, "at most 1"), (11, "exceeds the 10 rows"), (-1, "share"),
                                             (True, "share")])
def test_a_bad_budget_is_refused(budget, message):
    with pytest.raises(ValueError, match=message):
        inclusion_probabilities(10, budget)


def test_the_bench_compares_with_the_strong_judge_alone_on_the_same_sample():
    from bench import cascade_bench
    from bench.trust_bench import Pool

    # A cheap judge that says the same on every row carries no information: lam = 0 and the
    # uniform cascade is the classical interval itself, but for the parameter it fits besides (lam: one
    # degree of freedom more, about 1 % wider on 50 rows).
    constant = Pool(np.array([1.0, 0.0]), np.array([0.5, 0.5]), np.array([0.7, 0.3]))
    out = cascade_bench.simulate(constant, "labels", budgets=(0.1,), rows=500, draws=100)[0.1]
    assert out["uniform_width"] == pytest.approx(out["classical_width"], rel=0.02)
    assert out["uniform_width"] > out["classical_width"]
    # Mean strong rows: 10 % of 500 = 50 expected, standard error sqrt(45 / 100) = 0.67.
    assert abs(out["uniform_rows"] - 50) < 3 * 0.67
    # A cheap judge equal to the strong one: every residual is 0 and the estimate exact; the width is
    # Laplace's (a residual of rate q = 1 / (m + 2) per drawn row), not 0: at m = 50 drawn rows, w = 0.9 / 0.01,
    # 2 * 2.01 * sqrt(50 * 90 * q (1 - q) * 50 / 48) / 500 = 0.076.
    perfect = Pool(np.array([1.0, 0.0]), np.array([1.0, 0.0]), np.array([0.7, 0.3]))
    out = cascade_bench.simulate(perfect, "labels", budgets=(0.1,), rows=500, draws=20)[0.1]
    assert out["uniform_coverage"] == 1.0 and out["uniform_width"] == pytest.approx(0.076, abs=0.01)
    # The noisy strong judge flips 10 % of the labels: the same cheap judge no longer matches it.
    out = cascade_bench.simulate(perfect, "noisy labels", budgets=(0.1,), rows=500, draws=20)[0.1]
    assert out["uniform_width"] > 0.0


def test_the_rows_a_traffic_sample_chose_by_their_priority_are_drawn_at_the_cascade_s_rate_on_its_stream():
    # A traffic sample keeps the traces of lowest priority(seed, id) (rag_eval.metrics.stats.sampling.select). On
    # the same stream all 200 of them have u < 0.11 and a 25 % cascade would draw every one; on a stream of its
    # own about 50 of them (binomial sd 6.1) are drawn.
    from rag_eval.metrics.stats.cascade import row_uniforms
    from rag_eval.metrics.stats.sampling import priority

    ids = [f"trace-{i}" for i in range(2000)]
    sampled = sorted(ids, key=lambda i: priority(3, i))[:200]
    assert max(priority(3, i) for i in sampled) < 0.11 and (row_uniforms(sampled, 3) < 0.25).all()
    assert 30 <= int((row_uniforms(sampled, 3, stream="cascade:") < 0.25).sum()) <= 70


def test_a_census_of_a_traffic_sample_is_an_estimate_of_the_traffic_not_a_zero_width_interval():
    # 4 traces of a day, all strong-judged (pi = 1), strong scores 1, 1, 0, 1: of these 4 rows the mean is 0.75
    # exactly (zero width); of the day's traffic they are a sample: the spread (3 * 0.25² + 0.75²) / 4 * 4 / 3 =
    # 0.25 over 4 rows, se 0.25, Student's t with 3 degrees of freedom.
    sample = StrongSample(np.ones(4), np.ones(4, bool), "uniform")
    cheap, strong = np.array([0.9, 0.8, 0.2, 0.7]), np.array([1.0, 1.0, 0.0, 1.0])
    rows = cascade_mean(cheap, strong, sample)
    assert (rows.estimate.estimate, rows.estimate.ci_low, rows.estimate.ci_high) == (0.75, 0.75, 0.75)
    day = cascade_mean(cheap, strong, sample, stream=True)
    half = t_value(z_value(0.95), 3) * 0.25
    assert day.estimate.estimate == 0.75 and day.estimate.se == pytest.approx(0.25)
    assert (day.estimate.ci_low, day.estimate.ci_high) == pytest.approx((0.75 - half, 0.75 + half))
    with pytest.raises(ValueError, match="1 strong-judged row"):
        cascade_mean(cheap[:1], strong[:1], StrongSample(np.ones(1), np.ones(1, bool), "uniform"), stream=True)
