"""The paired t-test of the book's comparisons (mrtpo.analysis.significance): Student's t, the test's p, its power against a
simulation, the detectable difference and the seeds a difference needs, the chi-square interval of a measured sd,
and Holm's correction over a family."""

import math

import numpy as np
import pytest

from mrtpo.analysis import significance as sg


def test_t_distribution_against_known_values():
    assert sg.t_cdf(1.0, 1) == pytest.approx(0.75)  # Cauchy
    assert sg.t_cdf(0.0, 7) == pytest.approx(0.5)
    assert sg.t_quantile(0.975, 2) == pytest.approx(4.3027, abs=1e-4)
    assert sg.t_quantile(0.975, 10) == pytest.approx(2.2281, abs=1e-4)
    assert sg.t_quantile(0.8, 4) == pytest.approx(0.9410, abs=1e-4)
    assert sg.t_quantile(0.025, 5) == pytest.approx(-sg.t_quantile(0.975, 5))


def test_paired_t_p():
    d = [0.1, -0.05, 0.1]  # t = 1 on 2 df: P(|T| > 1) = 1 - 1/sqrt(3)
    assert sg.paired_t_p(d) == pytest.approx(1 - 1 / math.sqrt(3))
    assert sg.paired_t_p([0.2, 0.2]) == 0.0 and sg.paired_t_p([0.0, 0.0]) == 1.0
    assert math.isnan(sg.paired_t_p([0.3])) and math.isnan(sg.paired_t_p([0.3, float("nan")]))


@pytest.mark.parametrize("seeds", [3, 4, 8])
@pytest.mark.parametrize("delta, sd", [(0.05, 0.039), (0.1, 0.1)])
def test_power_matches_a_simulation_of_the_paired_t_test(seeds, delta, sd):
    """The rejection rate of the two-sided paired t-test at 0.05 over 100,000 simulated sets of ``seeds`` normal
    differences. At 3 seeds, delta 0.05 and sd 0.039 it is 0.25, where a shifted central t says 0.09."""
    rng = np.random.default_rng(seeds)
    d = rng.normal(delta, sd, size=(100_000, seeds))
    t = d.mean(axis=1) * math.sqrt(seeds) / d.std(axis=1, ddof=1)
    simulated = np.mean(np.abs(t) > sg.t_quantile(0.975, seeds - 1))
    assert sg.power(delta, sd, seeds) == pytest.approx(simulated, abs=0.005)


def test_power_is_alpha_without_an_effect_and_never_below_it():
    assert sg.power(0.0, 0.1, 3) == pytest.approx(0.05, abs=1e-6)
    assert sg.power(0.0, 0.0, 3) == 0.05 and sg.power(0.05, 0.0, 3) == 1.0
    assert min(sg.power(delta, 0.2, n) for delta in (1e-4, 0.01, 0.03) for n in (2, 3, 5)) >= 0.05
    assert sg.power(0.05, 0.1, 3) < sg.power(0.05, 0.1, 10) < sg.power(0.1, 0.1, 10)
    assert sg.power(-0.05, 0.1, 5) == sg.power(0.05, 0.1, 5)  # two-sided
    assert math.isnan(sg.power(0.05, 0.1, 1)) and math.isnan(sg.power(0.05, float("nan"), 5))


def test_power_is_the_inverse_of_the_detectable_difference():
    for sd, n in ((0.11, 3), (0.05, 8), (0.2, 20)):
        assert sg.power(sg.detectable_difference(sd, n), sd, n) == pytest.approx(0.8, abs=1e-6)
        assert sg.power(sg.detectable_difference(sd, n, power=0.5), sd, n) == pytest.approx(0.5, abs=1e-6)
    assert math.isnan(sg.detectable_difference(0.1, 1))
    assert sg.detectable_difference(0.1, 3) > sg.detectable_difference(0.1, 10)
    # a stricter level (Holm's first step in a family of 40) needs a larger difference
    assert sg.detectable_difference(0.1, 8, alpha=0.05 / 40) > sg.detectable_difference(0.1, 8)


def test_seeds_needed_and_detectable_difference_agree():
    sd = 0.079 * 2 ** 0.5  # text-to-SQL GDPO's seed spread, two unpaired arms
    n = sg.seeds_for_power(sd, delta=0.05)
    assert sg.detectable_difference(sd, n) <= 0.05 < sg.detectable_difference(sd, n - 1)
    z = (1.959964 + 0.841621) * sd / 0.05
    assert z ** 2 < n < z ** 2 + 4  # the normal approximation plus the t correction of small samples
    assert sg.seeds_for_power(0.0) == 2 and sg.seeds_for_power(float("nan")) is None
    assert sg.seeds_for_power(1.0, 0.001, max_seeds=100) is None


def test_chi_square_and_the_interval_of_a_measured_sd():
    assert sg.chi2_cdf(5.991465, 2) == pytest.approx(0.95, abs=1e-6)  # 2 df: 1 - exp(-x/2)
    assert sg.chi2_quantile(0.975, 1) == pytest.approx(5.023886, abs=1e-5)
    assert sg.chi2_quantile(0.025, 30) == pytest.approx(16.790772, abs=1e-5)
    lo, hi = sg.sd_interval(0.039, 2)  # 3 seeds: the sd is known to within a factor of 12
    assert lo == pytest.approx(0.039 * math.sqrt(2 / 7.377759), rel=1e-5)
    assert hi == pytest.approx(0.039 * math.sqrt(2 / 0.0506356), rel=1e-5)
    assert all(math.isnan(x) for x in sg.sd_interval(0.039, 0))


def test_holm_against_a_hand_worked_family():
    # sorted: 0.005 x 4 = 0.02; 0.01 x 3 = 0.03; 0.03 x 2 = 0.06; 0.04 x 1 = 0.04 -> 0.06 (never below an earlier step)
    p = [0.01, 0.04, 0.03, 0.005, float("nan")]  # the NaN is no test: m = 4
    np.testing.assert_allclose(sg.holm(p), [0.03, 0.06, 0.06, 0.02, np.nan])
    np.testing.assert_allclose(sg.holm([0.5, 0.6]), [1.0, 1.0])  # capped at 1
    assert sg.holm([]).size == 0


def test_a_difference_that_is_not_a_gap_is_never_said_to_hold():
    assert sg.not_distinguishable(0.1234) == "not distinguishable at this power (detectable: ±0.123)"
    assert sg.not_distinguishable(float("nan")) == "not distinguishable at this power (no test: one shared seed)"
