"""The book's statistics (mrtpo.analysis.stats): seed means, paired t intervals and their coverage on shared prompts, verdicts,
the noise split from within-prompt sampling, standard errors of a measurement (bootstrap, clustered samples,
differences). The tests and their power are tests/test_significance.py."""

import math

import numpy as np
import pytest

from mrtpo.analysis import stats


def test_mean_se_over_seeds_and_no_spread_from_one_seed():
    mean, se, n = stats.mean_se([0.406, 0.297, 0.449])
    assert n == 3 and mean == pytest.approx(0.384) and se == pytest.approx(np.std([0.406, 0.297, 0.449], ddof=1) / 3 ** 0.5)
    mean, se, n = stats.mean_se([0.5, float("nan")])
    assert (mean, n) == (0.5, 1) and math.isnan(se)


def test_run_metric_is_the_mean_over_components_of_their_means_over_applicable_prompts():
    # two seeds, three prompts, two components; component 1 applies to the first two prompts only
    x = np.array([[[1, 1], [0, 0], [1, np.nan]],
                  [[0, 1], [0, 1], [1, np.nan]]], dtype=float)
    np.testing.assert_allclose(stats.run_metric(x), [(2 / 3 + 1 / 2) / 2, (1 / 3 + 1) / 2])
    # resampling counts: prompt 0 twice, prompt 2 once
    np.testing.assert_allclose(stats.run_metric(x, np.array([[2, 0, 1]]))[0], [(1 + 1) / 2, (1 / 3 + 1) / 2])
    np.testing.assert_allclose(stats.run_metric(x[..., 0]), [2 / 3, 1 / 3])  # (S, P): one component


def test_paired_difference_of_an_arm_with_itself_and_with_a_constant_shift():
    rng = np.random.default_rng(0)
    a = rng.random((3, 40))
    same = stats.paired_difference(a, a.copy())
    assert (same["diff"], same["lo"], same["hi"]) == (0.0, 0.0, 0.0) and same["resampled"] == "seeds (paired t)"
    assert same["p"] == 1.0 and same["sd"] == 0.0
    shifted = stats.paired_difference(a + 0.1, a)
    assert shifted["diff"] == pytest.approx(0.1) and shifted["lo"] == pytest.approx(0.1) and shifted["hi"] == pytest.approx(0.1)
    assert (shifted["seeds"], shifted["prompts"]) == (3, 40)


def test_paired_difference_without_prompts_or_with_one_seed_says_what_its_interval_covers():
    one = stats.paired_difference(np.array([0.5]), np.array([0.4]))
    assert one["diff"] == pytest.approx(0.1) and math.isnan(one["lo"]) and one["resampled"] == "none: one shared seed"
    seeds = stats.paired_difference(np.array([0.5, 0.45, 0.6]), np.array([0.4, 0.5, 0.5]))
    assert seeds["resampled"] == "seeds (paired t)" and seeds["lo"] < seeds["diff"] < seeds["hi"]
    # three seeds: the paired t interval (t_2 = 4.30), not a bootstrap's, which is about the per-seed range
    half = 4.3027 * np.std([0.1, -0.05, 0.1], ddof=1) / np.sqrt(3)
    assert (seeds["lo"], seeds["hi"]) == pytest.approx((0.05 - half, 0.05 + half), abs=1e-3)
    t = 0.05 / (np.std([0.1, -0.05, 0.1], ddof=1) / np.sqrt(3))  # 1.0; for t_2, P(|T| > t) = 1 - t / sqrt(2 + t²)
    assert seeds["p"] == pytest.approx(1 - t / np.sqrt(2 + t ** 2))
    prompts = stats.paired_difference(np.array([[1, 0, 1, 1]]), np.array([[0, 0, 1, 0]]))
    assert prompts["resampled"] == "prompts only: one shared seed" and prompts["diff"] == pytest.approx(0.5)
    with pytest.raises(ValueError, match="same seeds and prompts"):
        stats.paired_difference(np.zeros((2, 4)), np.zeros((3, 4)))


def shared_prompt_runs(rng, seeds: int, prompts: int = 64, samples: int = 4, seed_sd: float = 0.1, shift=0.0):
    """Per-prompt values (S, P) of two arms of the same policy family on shared evaluation prompts: each prompt
    has one difficulty (a logit) for every run, each (arm, seed) run its own logit offset (sd ``seed_sd``; arm A
    ``shift`` higher), and each prompt's value is the mean of ``samples`` 0/1 scores drawn at the run's rate."""
    difficulty = rng.normal(0, 1.5, size=prompts)

    def arm(offset):
        rate = 1 / (1 + np.exp(-(difficulty[None] + offset + rng.normal(0, seed_sd, size=(seeds, 1)))))
        return rng.binomial(samples, rate) / samples

    return arm(shift), arm(0.0)


@pytest.mark.parametrize("seeds", [3, 8])
def test_paired_interval_covers_no_effect_between_93_and_97_percent_on_shared_prompts(seeds):
    """No effect; the book's seed counts (3 per arm, 8 on instruction following); 64 prompts x 4 samples shared by
    every run, with seed noise about as large as the sampling noise. Too wide fails as surely as too narrow: a
    bootstrap over prompts counts their difficulty, which shared prompts cancel (99.5% coverage at 3 seeds)."""
    rng = np.random.default_rng(seeds)
    trials = 1000
    covered = [(o := stats.paired_difference(*shared_prompt_runs(rng, seeds), n_boot=1))["lo"] <= 0 <= o["hi"]
               for _ in range(trials)]
    assert 0.93 <= np.mean(covered) <= 0.97


def test_paired_interval_over_three_seeds_covers_no_effect_95_percent_of_the_time():
    """No effect, three seeds: a percentile bootstrap alone covers 0 only 77% of the time here (its interval is
    about the range of three differences); the interval returned must keep the nominal level (it covers ~94%)."""
    rng = np.random.default_rng(2)
    trials = 300
    outs = [stats.paired_difference(d, np.zeros(3), n_boot=400, seed=t)
            for t, d in enumerate(rng.normal(0, 0.05, size=(trials, 3)))]
    assert np.mean([o["lo"] <= 0 <= o["hi"] for o in outs]) >= 0.92


def test_verdicts():
    assert stats.verdict(0.01, 0.09, claimed=0.016) == "reproduced"
    # in a family: a gap also needs its adjusted p below 0.05
    assert stats.verdict(0.01, 0.09, claimed=0.016, p_adjusted=0.01) == "reproduced"
    assert stats.verdict(0.01, 0.09, claimed=0.016, p_adjusted=0.2) == "inconclusive"
    assert stats.verdict(-0.09, -0.01, claimed=0.016, p_adjusted=0.3) == "not reproduced"  # the claimed size is excluded
    assert stats.verdict(1.03, 1.13, claimed=2.8, null=1.0) == "weaker than claimed"  # above 1, far short of 2.8
    assert stats.verdict(0.2, 0.3, claimed=0.27, null=0.8) == "reproduced"  # reaches the claim from its side
    assert stats.verdict(-0.09, -0.01, claimed=0.016) == "contradicted"
    assert stats.verdict(-0.004, 0.008, claimed=0.016) == "not reproduced"  # an effect as large as claimed is excluded
    assert stats.verdict(-0.05, 0.08, claimed=0.016) == "inconclusive"
    assert stats.verdict(float("nan"), float("nan"), claimed=0.016) == "inconclusive"
    assert stats.verdict(0.2, 0.5) == "reproduced"  # no claimed size: the direction above null
    # a claim below the null: concentration under uniform's 0.8
    assert stats.verdict(0.3, 0.5, claimed=0.27, null=0.8) == "weaker than claimed"
    assert stats.verdict(0.75, 0.85, claimed=0.27, null=0.8) == "not reproduced"
    assert stats.verdict(0.9, 1.1, claimed=0.27, null=0.8) == "contradicted"


def test_sd_of_differences_paired_when_two_seeds_are_shared_otherwise_from_the_arms_or_the_task():
    sd, how = stats.sd_of_differences({0: 0.5, 1: 0.6}, {0: 0.4, 1: 0.45, 2: 0.5})
    assert how == "paired" and sd == pytest.approx(np.std([0.1, 0.15], ddof=1))
    gdpo = {0: 0.406, 1: 0.297, 2: 0.449}
    sd, how = stats.sd_of_differences({0: 0.5}, gdpo)
    assert how.startswith("unpaired") and sd == pytest.approx(2 ** 0.5 * np.std(list(gdpo.values()), ddof=1))
    sd, how = stats.sd_of_differences({0: 0.5, 1: 0.4}, {2: 0.3, 3: 0.6})
    assert sd == pytest.approx((np.var([0.5, 0.4], ddof=1) + np.var([0.3, 0.6], ddof=1)) ** 0.5)
    sd, how = stats.sd_of_differences({0: 0.5}, {0: 0.4})
    assert math.isnan(sd) and how.startswith("unknown")
    sd, how = stats.sd_of_differences({0: 0.5}, {0: 0.4}, fallback=0.08)
    assert sd == pytest.approx(0.08 * 2 ** 0.5) and "pooled" in how
    assert stats.pooled_sd([[0.406, 0.297, 0.449], [0.5], [0.1, 0.3]]) == pytest.approx(
        ((2 * np.var([0.406, 0.297, 0.449], ddof=1) + np.var([0.1, 0.3], ddof=1)) / 3) ** 0.5)
    assert math.isnan(stats.pooled_sd([[0.5], []]))


def test_noise_components_split_seed_from_evaluation_noise():
    out = stats.noise_components([0.406, 0.297, 0.449], [0.03, 0.03, 0.03])
    sd = np.std([0.406, 0.297, 0.449], ddof=1)
    assert out["sd_observed"] == pytest.approx(sd) and out["eval_se"] == pytest.approx(0.03)
    assert out["sd_seed"] == pytest.approx((sd ** 2 - 0.03 ** 2) ** 0.5) and out["eval_below_seed"] is True
    assert math.isnan(stats.noise_components([0.4], [0.03])["sd_seed"])
    assert stats.binomial_se(0.4, 256) == pytest.approx((0.24 / 256) ** 0.5)
    assert stats.within_prompt_se(np.array([0.5, 0.25]), samples=1) == 0.0  # greedy: nothing is sampled


def test_within_prompt_se_of_a_component_metric_by_hand():
    # two slots over 2 prompts x 4 samples, slot 1 applying to prompt 0 only:
    # slot 0: s² = 4/3 * (0.5 * 0.5, 0.25 * 0.75) -> var = (1/3 + 1/4) / (4 * 2²); slot 1: 4/3 * 0.75 * 0.25 / 4
    x = np.array([[0.5, 0.75], [0.25, np.nan]])
    var = ((4 / 3) * (0.25 + 0.1875) / 16 + (4 / 3) * 0.1875 / 4) / 2 ** 2
    assert stats.within_prompt_se(x, samples=4) == pytest.approx(var ** 0.5)


def test_noise_split_on_shared_prompts_recovers_the_sampling_and_the_seed_noise():
    """400 runs of one arm on 64 shared prompts x 4 samples: the evaluation noise between runs is the sampling
    within prompts (prompt difficulty is the same for every run), and taking it out of the observed spread leaves
    the spread of the runs' own rates."""
    rng = np.random.default_rng(11)
    difficulty = rng.normal(0, 1.5, size=64)
    rate = 1 / (1 + np.exp(-(difficulty[None] + rng.normal(0, 0.15, size=(400, 1)))))  # (runs, prompts)
    x = rng.binomial(4, rate) / 4
    true_eval = np.sqrt(np.mean(np.sum(rate * (1 - rate), axis=1) / 4)) / 64  # sampling s.e. of a run's mean
    true_seed = np.std(rate.mean(axis=1), ddof=1)
    ses = [stats.within_prompt_se(run, samples=4) for run in x]
    assert np.sqrt(np.mean(np.square(ses))) == pytest.approx(true_eval, rel=0.05)
    assert stats.noise_components(x.mean(axis=1), ses)["sd_seed"] == pytest.approx(true_seed, rel=0.15)


def test_bootstrap_se_of_a_mean_matches_its_analytic_se():
    x = np.random.default_rng(1).normal(2.0, 3.0, 400)
    se = stats.bootstrap_se(lambda idx: x[idx].mean(), len(x), n_boot=2000)
    assert se == pytest.approx(x.std(ddof=1) / 20, rel=0.08)
    # an array statistic gets one s.e. per entry, from the same resamples
    both = stats.bootstrap_se(lambda idx: np.array([x[idx].mean(), 2 * x[idx].mean()]), len(x), n_boot=2000)
    assert both[0] == pytest.approx(se) and both[1] == pytest.approx(2 * se)
    assert math.isnan(stats.bootstrap_se(lambda idx: x[idx].mean(), 1))
    assert np.isnan(stats.bootstrap_se(lambda idx: np.array([1.0, 2.0]), 1)).all()


def test_bootstrap_se_of_a_ratio_of_sums_matches_the_delta_method():
    # the check-region ratio's form: sum a / sum b over responses; delta method se = sqrt(sum (a - R b)²) / sum b
    rng = np.random.default_rng(2)
    b = rng.uniform(0.5, 2.0, 300)
    a = 3.0 * b + rng.normal(0, 0.5, 300)
    ratio = a.sum() / b.sum()
    delta = math.sqrt(np.sum((a - ratio * b) ** 2)) / b.sum()
    assert stats.bootstrap_se(lambda idx: a[idx].sum() / b[idx].sum(), 300, n_boot=2000) == pytest.approx(delta, rel=0.1)


def test_clustered_se_reduces_to_the_se_of_a_mean_and_covers_clustered_samples():
    y = np.random.default_rng(3).integers(0, 2, 256).astype(float)
    mean, se, n = stats.clustered_mean_se(y, np.arange(256))
    assert (mean, n) == (y.mean(), 256) and se == pytest.approx(y.std(ddof=1) / 16)
    assert se == pytest.approx(stats.binomial_se(mean, 256) * (256 / 255) ** 0.5)
    mean, se, n = stats.clustered_mean_se([1.0, float("nan"), 0.0], [0, 1, 2])
    assert (mean, n) == (0.5, 2)
    assert math.isnan(stats.clustered_mean_se([1.0, 0.0], [0, 0])[1])  # one cluster: no s.e.
    # 32 prompts x 8 samples, each prompt with its own success rate: over many repetitions of the measurement the
    # spread of the rate is the clustered s.e., well above the binomial s.e. of 256 independent samples
    rng = np.random.default_rng(4)
    clusters = np.repeat(np.arange(32), 8)
    rates, ses = [], []
    for _ in range(2000):
        p = rng.beta(0.5, 0.5, 32)
        y = (rng.random(256) < p[clusters]).astype(float)
        m, s, _ = stats.clustered_mean_se(y, clusters)
        rates.append(m)
        ses.append(s)
    assert np.mean(ses) == pytest.approx(np.std(rates), rel=0.08)
    assert stats.binomial_se(0.5, 256) < 0.6 * np.std(rates)


def test_difference_se_of_independent_estimates():
    rng = np.random.default_rng(5)
    a, b = rng.normal(0, 0.3, 20000), rng.normal(0, 0.4, 20000)
    assert stats.difference_se(0.3, 0.4) == pytest.approx(0.5) and np.std(a - b) == pytest.approx(0.5, rel=0.03)
