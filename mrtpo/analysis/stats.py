"""Statistics of the book's comparisons: means over seeds, paired differences with paired t intervals, verdicts,
the spread of a paired difference, and evaluation noise (within-prompt sampling) against seed noise; standard
errors of one measurement on sampled responses (a bootstrap over items or clusters of them, the clustered s.e. of
a mean over prompts' samples, the s.e. of a difference). Pure functions of numbers (no run folders, no I/O).

Notation: an arm is trained once per seed s = 1..S; a run is evaluated on the same P held-out prompts, giving a
per-prompt value x[s, p, m] for each component metric m = 1..M (M > 1 for a metric that is a mean of
components, e.g. instruction following's ``constraint_mean`` = mean over constraint slots; NaN where a
component does not apply to a prompt). A run's metric over a set of prompts is

    metric(s) = (1/M) sum_m  mean_{p : x[s,p,m] defined} x[s,p,m]

which is what the evaluation reports when every prompt has the same number of samples. Without per-prompt
values (run folders written before they were stored), only the per-seed values metric(s) are known. The
paired t-test, its power and Holm's correction are ``mrtpo.analysis.significance``.
"""

from __future__ import annotations

import math
import warnings
from statistics import NormalDist

import numpy as np

from mrtpo.analysis.significance import paired_t_p, t_quantile


def mean_se(values) -> tuple[float, float, int]:
    """(mean, standard error, n) of per-seed values: ``se = std(ddof=1) / sqrt(n)``; se is NaN below 2 values
    (one seed has no spread, never 0). NaN values are left out."""
    x = np.asarray(values, dtype=float)
    x = x[~np.isnan(x)]
    n = len(x)
    if n == 0:
        return math.nan, math.nan, 0
    return float(x.mean()), float(x.std(ddof=1) / math.sqrt(n)) if n > 1 else math.nan, n


def _as_prompts(x) -> np.ndarray:
    """Per-prompt values as (S, P, M): a (S, P) array gets M = 1."""
    x = np.asarray(x, dtype=float)
    return x[..., None] if x.ndim == 2 else x


def run_metric(x, counts=None) -> np.ndarray:
    """metric(s) of the module docstring for each seed, from per-prompt values x (S, P[, M]); ``counts`` (B, P)
    resamples the prompts (prompt p taken counts[b, p] times) and gives (B, S)."""
    x = _as_prompts(x)
    valid = ~np.isnan(x)
    filled = np.where(valid, x, 0.0)
    if counts is None:
        counts = np.ones((1, x.shape[1]))
        squeeze = True
    else:
        squeeze = False
    num = np.einsum("bp,spm->bsm", counts, filled)
    den = np.einsum("bp,spm->bsm", counts, valid.astype(float))
    with np.errstate(invalid="ignore", divide="ignore"):
        per_component = num / den
    out = np.nanmean(per_component, axis=2) if per_component.shape[2] > 1 else per_component[..., 0]
    return out[0] if squeeze else out


def _percentile_interval(samples: np.ndarray, level: float) -> tuple[float, float]:
    samples = samples[~np.isnan(samples)]
    if len(samples) == 0:
        return math.nan, math.nan
    tail = 100 * (1 - level) / 2
    lo, hi = np.percentile(samples, [tail, 100 - tail])
    return float(lo), float(hi)


def t_interval(d: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """The Student-t interval of the mean of the per-seed differences ``d`` (two or more)."""
    half = t_quantile((1 + level) / 2, len(d) - 1) * float(np.std(d, ddof=1)) / math.sqrt(len(d))
    return float(d.mean()) - half, float(d.mean()) + half


def paired_difference(a, b, n_boot: int = 4000, level: float = 0.95, seed: int = 0, replicates: bool = False) -> dict:
    """A − B over the seeds both arms share, with a ``level`` interval: from two shared seeds on, the paired t
    interval over the per-seed differences, with the paired t-test's two-sided p.

    ``a``, ``b``: per-prompt values (S, P[, M]) of the shared seeds in the same order, both arms evaluated on the
    same prompts; or per-seed values (S,) when per-prompt values are absent. The per-seed differences are
    ``d_s = metric_A(s) − metric_B(s)`` and the estimate is their mean d̄. Every run is evaluated on the same P
    prompts, so prompt difficulty is common to all of them and never enters the spread of d_s (resampling the
    prompts would add a noise the runs do not have: an interval too wide, 99.5% coverage for 95% when
    evaluation noise dominates); what d_s does hold is the seed-to-seed spread and the evaluation's sampling of
    responses within each prompt. The interval is therefore over seeds only,
    ``d̄ ± t_{S−1, (1+level)/2} · sd(d_s) / sqrt(S)`` (exact for normal d_s; the estimand is the difference on these
    prompts), and ``p = significance.paired_t_p(d_s)``: the interval excludes 0 exactly when p < 1 − level. With
    one shared seed there is no seed-to-seed spread to measure: per-prompt values give a bootstrap over prompts
    (``"prompts only: one shared seed"``, the evaluation's prompt sampling alone, never a test: no p), per-seed
    values no interval.

    ``replicates``: also ``n_boot`` bootstrap values of d̄, each drawing S seeds with replacement (prompts
    with one shared seed), for a statistic of several comparisons (:func:`slope`). The draws depend only on
    ``seed`` and S (and P): comparisons over the same seeds in the same order get the same draws, i.e. are
    resampled jointly.

    Returns ``{"diff", "lo", "hi", "sd", "p", "seeds", "prompts", "resampled"}``: ``sd`` is sd(d_s) (ddof 1, NaN
    below two seeds), ``resampled`` names what the interval covers: "seeds (paired t)", "prompts only: one
    shared seed", or "none: one shared seed"; with ``replicates``, ``"replicates"`` (empty where there is none).
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"paired_difference: both arms need the same seeds and prompts, got shapes {a.shape} and {b.shape}")
    S = a.shape[0]
    P = a.shape[1] if a.ndim > 1 else 0
    none = {"lo": math.nan, "hi": math.nan, "sd": math.nan, "p": math.nan, "seeds": S, "prompts": P}
    extra = {"replicates": np.empty(0)} if replicates else {}
    if S == 0:
        return {"diff": math.nan, **none, "resampled": "none", **extra}
    d = a - b if a.ndim == 1 else run_metric(a) - run_metric(b)
    rng = np.random.default_rng(seed)
    seed_counts = rng.multinomial(S, np.full(S, 1 / S), size=n_boot)  # (B, S)
    if S > 1:
        lo, hi = t_interval(d, level)
        return {**none, "diff": float(d.mean()), "lo": lo, "hi": hi, "sd": float(np.std(d, ddof=1)), "p": paired_t_p(d),
                "resampled": "seeds (paired t)", **({"replicates": seed_counts @ d / S} if replicates else {})}
    if a.ndim == 1:
        return {**none, "diff": float(d.mean()), "resampled": "none: one shared seed", **extra}
    prompt_counts = rng.multinomial(P, np.full(P, 1 / P), size=n_boot)  # (B, P)
    reps = (run_metric(a, prompt_counts) - run_metric(b, prompt_counts))[:, 0]
    lo, hi = _percentile_interval(reps, level)
    return {**none, "diff": float(d.mean()), "lo": lo, "hi": hi, "resampled": "prompts only: one shared seed",
            **({"replicates": reps} if replicates else {})}


def slope(x, y, y_replicates=None, level: float = 0.95, y_intervals=None) -> dict:
    """Least-squares slope of y on x, ``b = sum_i (x_i − x̄)(y_i − ȳ) / sum_i (x_i − x̄)²``, with the intercept
    ``ȳ − b x̄`` and a ``level`` percentile interval over bootstrap replicates of y.

    ``y_replicates`` (n, B): replicate j of every y_i (e.g. the ``replicates`` of :func:`paired_difference` for
    each of n comparisons); each column gives one replicate slope, x held fixed (a measured x's own error is not
    propagated). ``y_intervals`` (n, 2): each y_i's own ``level`` interval (e.g. :func:`paired_difference`'s, which
    is wider than its replicates' at few seeds); the interval returned then also holds ``b ± z · se(b)``, with
    ``se(b)² = sum_i (x_i − x̄)² σ_i² / (sum_i (x_i − x̄)²)²`` and σ_i the half-width of y_i's interval over z (the
    points taken as independent). Returns ``{"slope", "intercept", "lo", "hi", "points"}``; NaN below 2 distinct x,
    and no interval without replicates."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    out = {"slope": math.nan, "intercept": math.nan, "lo": math.nan, "hi": math.nan, "points": len(x)}
    dx = x - x.mean() if len(x) else x
    if len(x) < 2 or not np.any(dx):
        return out
    b = float(dx @ (y - y.mean()) / (dx @ dx))
    out.update(slope=b, intercept=float(y.mean() - b * x.mean()))
    if y_replicates is not None and np.size(y_replicates):
        reps = np.asarray(y_replicates, dtype=float)
        out["lo"], out["hi"] = _percentile_interval(dx @ (reps - reps.mean(axis=0)) / (dx @ dx), level)
        if y_intervals is not None:
            z = NormalDist().inv_cdf((1 + level) / 2)
            sigma = np.diff(np.asarray(y_intervals, dtype=float), axis=1)[:, 0] / (2 * z)
            half = z * math.sqrt(float((dx ** 2) @ (sigma ** 2))) / float(dx @ dx)
            out["lo"], out["hi"] = min(out["lo"], b - half), max(out["hi"], b + half)
    return out


def verdict(lo: float, hi: float, claimed: float | None = None, null: float = 0.0, p_adjusted: float | None = None,
            alpha: float = 0.05) -> str:
    """The claim against our interval [lo, hi] of the same quantity.

    The claim says the quantity lies on the side of ``null`` that ``claimed`` (the paper's value) lies on
    (above when ``claimed`` is None). *reproduced*: the whole interval is on the claimed side (a difference is a
    gap only when its interval excludes ``null``) and reaches the claimed value; *weaker than claimed*: the whole
    interval is on the claimed side but short of the claimed value (the direction holds, the size does not: a
    check-region ratio of 1.1 against the paper's 2.8); *contradicted*: the whole interval is on the other side;
    *not reproduced*: the interval holds ``null`` but excludes ``claimed`` (an effect as large as the paper's
    would have been seen); *inconclusive*: the interval holds both, or there is no interval. An interval that
    holds ``null`` never confirms anything. ``p_adjusted``: the comparison's p corrected for the family it
    belongs to (``significance.holm``); a gap then also needs ``p_adjusted < alpha``, and an interval that
    excludes ``null`` without it counts as holding it.
    """
    if lo != lo or hi != hi:
        return "inconclusive"
    sign = 1.0 if claimed is None or claimed >= null else -1.0
    low, high = sorted((sign * (lo - null), sign * (hi - null)))
    gap = p_adjusted is None or p_adjusted < alpha
    if low > 0 and gap:
        return "weaker than claimed" if claimed is not None and high < sign * (claimed - null) else "reproduced"
    if high < 0 and gap:
        return "contradicted"
    if claimed is not None and sign * (claimed - null) > high:
        return "not reproduced"
    return "inconclusive"


# ----------------------------------------------------------------------------------------------------
# the spread of a paired difference (its power: ``mrtpo.analysis.significance``)


def sd_of_differences(a, b, fallback: float | None = None) -> tuple[float, str]:
    """(standard deviation of the paired difference of two arms' per-seed values, how it was measured).

    ``a``, ``b``: {seed: value}. From two shared seeds on: the std (ddof 1) of the differences on the shared
    seeds ("paired"). Otherwise ``sqrt(sd_A² + sd_B²)`` from each arm's own seed spread (ddof 1; an arm with one
    seed borrows the other's, or ``fallback`` — e.g. the spread pooled over the other arms of the task — when
    neither has two), which assumes the arms' seed effects are uncorrelated ("unpaired": an upper bound when
    common random numbers make paired arms move together); NaN when there is nothing to measure it from.
    """
    shared = sorted(set(a) & set(b))
    if len(shared) >= 2:
        return float(np.std([a[s] - b[s] for s in shared], ddof=1)), "paired"
    sds = [float(np.std(list(x.values()), ddof=1)) for x in (a, b) if len(x) >= 2]
    if len(sds) == 2:
        return math.sqrt(sds[0] ** 2 + sds[1] ** 2), "unpaired (each arm's seed spread)"
    if len(sds) == 1:
        return math.sqrt(2) * sds[0], "unpaired (one arm's seed spread, for both)"
    if fallback is not None and fallback == fallback:
        return math.sqrt(2) * fallback, "unpaired (the task's pooled seed spread, for both)"
    return math.nan, "unknown (no arm has two seeds)"


def pooled_sd(groups) -> float:
    """Pooled standard deviation of several groups of values (each arm's per-seed values):
    ``sqrt(sum_g (n_g − 1) var_g / sum_g (n_g − 1))`` over groups with two values or more; NaN without any."""
    groups = [np.asarray(list(g), dtype=float) for g in groups]
    groups = [g for g in groups if len(g) >= 2]
    dof = sum(len(g) - 1 for g in groups)
    return math.sqrt(sum((len(g) - 1) * g.var(ddof=1) for g in groups) / dof) if dof else math.nan


# ----------------------------------------------------------------------------------------------------
# evaluation noise vs seed noise


def within_prompt_se(x, samples: int) -> float:
    """Evaluation s.e. of one run's metric from the sampling of responses within each prompt: the noise a rerun of
    the same policy's evaluation would show on the same prompts. Every run is scored on the same prompts, so the
    prompts' own difficulty is common to all runs and never enters seed-to-seed variance (a bootstrap over
    prompts would measure it); the sampling of ``samples`` responses per prompt does.

    ``x``: per-prompt values (P[, M]) of one run, each the mean of ``samples`` scores in [0, 1]. A score's
    variance within prompt p is estimated by ``s²_pm = G/(G−1) · x_pm (1 − x_pm)`` (unbiased for 0/1 scores, an
    upper bound for any score in [0, 1]), so component m's mean over its P_m prompts has sampling variance
    ``sum_p s²_pm / (G P_m²)``, and the metric (the mean over M components, :func:`run_metric`)

        se² = (1/M²) sum_m sum_p s²_pm / (G P_m²)

    with the components' sampling errors taken as independent (a response's slots are different constraints;
    positively correlated slots would make this a lower bound). 0 for one sample per prompt (greedy decoding:
    no sampling); NaN without values."""
    x = _as_prompts(np.asarray(x, dtype=float)[None])[0]  # (P, M)
    if samples <= 1:
        return 0.0
    n = (~np.isnan(x)).sum(axis=0)
    if not n.any():
        return math.nan
    within = samples / (samples - 1) * x * (1 - x)
    component_var = np.nansum(within, axis=0)[n > 0] / (samples * n[n > 0] ** 2)
    return math.sqrt(float(component_var.sum())) / len(component_var)


def binomial_se(p: float, draws: int) -> float:
    """``sqrt(p (1 − p) / draws)``: the evaluation s.e. of a success rate p over ``draws`` samples drawn as
    independent. For G samples on each of a fixed set of prompts it is an upper bound on the within-prompt
    sampling s.e. (:func:`within_prompt_se`): ``p (1 − p)`` is the mean within-prompt variance plus the variance of
    the prompts' rates."""
    return math.sqrt(p * (1 - p) / draws) if draws > 0 and p == p else math.nan


def noise_components(values, eval_ses) -> dict:
    """Seed noise against evaluation noise of one arm.

    ``values``: the arm's metric per seed; ``eval_ses``: each run's evaluation s.e. from the sampling within its
    prompts (:func:`within_prompt_se`: the only evaluation noise that differs between runs scored on the same
    prompts). The observed seed-to-seed variance holds both: ``var_obs = var_seed + mean(eval_se²)``, so the seed
    component is
    ``sqrt(max(0, var_obs − mean(eval_se²)))``. Returns ``{"seeds", "sd_observed", "eval_se", "sd_seed",
    "eval_below_seed"}`` (NaN where fewer than two seeds).
    """
    x = np.asarray(values, dtype=float)
    e = np.asarray(eval_ses, dtype=float)
    eval_var = float(np.nanmean(e ** 2)) if len(e) else math.nan
    sd_obs = float(np.std(x, ddof=1)) if len(x) > 1 else math.nan
    sd_seed = math.sqrt(max(0.0, sd_obs ** 2 - eval_var)) if sd_obs == sd_obs and eval_var == eval_var else math.nan
    return {"seeds": len(x), "sd_observed": sd_obs, "eval_se": math.sqrt(eval_var) if eval_var == eval_var else math.nan,
            "sd_seed": sd_seed, "eval_below_seed": bool(math.sqrt(eval_var) < sd_seed) if sd_seed == sd_seed else None}


def _replicates(statistic, n: int, n_boot: int, seed: int) -> np.ndarray:
    """``statistic(idx)`` (a number or an array of them) for ``n_boot`` resamples ``idx`` of ``range(n)`` with
    replacement: (n_boot, ...)."""
    rng = np.random.default_rng(seed)
    return np.array([statistic(rng.integers(0, n, n)) for _ in range(n_boot)], dtype=float)


def bootstrap_interval(statistic, n: int, n_boot: int = 4000, level: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile interval of ``statistic(idx)`` over ``n_boot`` resamples ``idx`` of ``range(n)`` with
    replacement (for one set of items, e.g. saved profiles; (NaN, NaN) below 2 items)."""
    if n < 2:
        return math.nan, math.nan
    return _percentile_interval(_replicates(statistic, n, n_boot, seed), level)


def bootstrap_se(statistic, n: int, n_boot: int = 1000, seed: int = 0):
    """Bootstrap standard error of a statistic of n independent items (e.g. the prompts of a measurement, each
    with all its responses): the standard deviation (ddof 1) of ``statistic(idx)`` over ``n_boot`` resamples
    ``idx`` of ``range(n)`` with replacement, replicates where the statistic is undefined (NaN) left out.

    ``statistic`` returns a number, or an array of numbers (then one s.e. per entry, from the same resamples).
    For a ratio of pooled sums such as the check-region ratio (PAPER.md §7), which the analytic s.e. of a mean
    does not cover, resample the items the sums run over. NaN below 2 items or 2 defined replicates."""
    if n < 2:
        shape = np.shape(statistic(np.arange(n)))  # a number or an array of them, as the statistic gives
        return np.full(shape, math.nan) if shape else math.nan
    reps = _replicates(statistic, n, n_boot, seed)
    defined = (~np.isnan(reps)).sum(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an entry undefined in every replicate
        se = np.where(defined >= 2, np.nanstd(reps, axis=0, ddof=1), math.nan)
    return float(se) if se.ndim == 0 else se


def _over_clusters(statistic, clusters):
    """(``statistic`` of the rows of drawn clusters as a statistic of cluster indices, the number of clusters C):
    ``idx`` (drawn cluster indices) -> ``statistic(rows)`` with the row indices of every drawn cluster (a cluster
    drawn twice gives its rows twice). ``clusters``: the cluster label of each row."""
    _, index = np.unique(np.asarray(clusters), return_inverse=True)
    members = [np.flatnonzero(index == c) for c in range(index.max() + 1 if len(index) else 0)]
    return (lambda idx: statistic(np.concatenate([members[c] for c in idx] + [index[:0]]))), len(members)


def cluster_bootstrap_se(statistic, clusters, n_boot: int = 1000, seed: int = 0):
    """:func:`bootstrap_se` over clusters of rows (the responses of one prompt): each replicate draws the C
    clusters with replacement and calls ``statistic(rows)`` with the row indices of every drawn cluster. Responses
    to one prompt share it, so resampling them one by one would understate the spread; with one row per cluster
    this is the bootstrap over rows. ``clusters``: the cluster label of each row."""
    return bootstrap_se(*_over_clusters(statistic, clusters), n_boot, seed)


def cluster_bootstrap_interval(statistic, clusters, n_boot: int = 4000, level: float = 0.95, seed: int = 0
                               ) -> tuple[float, float]:
    """:func:`bootstrap_interval` over clusters of rows (the profiles of one seed: they share its run, so
    resampling them one by one would leave the seed-to-seed spread out); (NaN, NaN) below 2 clusters."""
    return bootstrap_interval(*_over_clusters(statistic, clusters), n_boot, level, seed)


def clustered_mean_se(values, clusters) -> tuple[float, float, int]:
    """(mean, standard error, n) of values that come in clusters (the samples of one prompt), NaN values left out.

    The cluster-robust (sandwich) s.e. of the mean ``ybar`` of n values in C clusters:

        se² = C / (C − 1) · sum_c ( sum_{i in c} (y_i − ybar) )² / n²

    Samples of one prompt share its difficulty, so they are not independent draws: the binomial s.e.
    ``sqrt(p (1 − p) / n)`` of a success rate over them is too small when prompts differ, this one is not.
    With one value per cluster it is ``std(ddof=1) / sqrt(n)`` (for 0/1 values ``sqrt(p (1 − p) / (n − 1))``,
    the binomial s.e. up to a factor sqrt(n / (n − 1))). se is NaN below 2 clusters."""
    y = np.asarray(values, dtype=float)
    c = np.asarray(clusters)
    keep = ~np.isnan(y)
    y, c = y[keep], c[keep]
    n = len(y)
    if n == 0:
        return math.nan, math.nan, 0
    ybar = float(y.mean())
    _, index = np.unique(c, return_inverse=True)
    sums = np.bincount(index, weights=y - ybar)
    C = len(sums)
    se = math.sqrt(C / (C - 1) * float(np.sum(sums ** 2))) / n if C > 1 else math.nan
    return ybar, se, n


def difference_se(se_a: float, se_b: float) -> float:
    """``sqrt(se_a² + se_b²)``: the s.e. of the difference of two estimates with independent errors. For two arms
    sampled on the same prompts, whose errors correlate positively (a hard prompt is hard in both), it errs large."""
    return math.sqrt(se_a ** 2 + se_b ** 2)
