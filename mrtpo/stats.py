"""Statistics of the book's comparisons: means over seeds, paired differences with bootstrap intervals, verdicts,
power, and evaluation noise against seed noise; standard errors of one measurement on sampled responses (a
bootstrap over items, the clustered s.e. of a mean over prompts' samples, the s.e. of a difference). Pure
functions of numbers (no run folders, no I/O).

Notation: an arm is trained once per seed s = 1..S; a run is evaluated on the same P held-out prompts, giving a
per-prompt value x[s, p, m] for each component metric m = 1..M (M > 1 for a metric that is a mean of
components, e.g. instruction following's ``constraint_mean`` = mean over constraint slots; NaN where a
component does not apply to a prompt). A run's metric over a set of prompts is

    metric(s) = (1/M) sum_m  mean_{p : x[s,p,m] defined} x[s,p,m]

which is what the evaluation reports when every prompt has the same number of samples. Without per-prompt
values (run folders written before they were stored), only the per-seed values metric(s) are known.
"""

from __future__ import annotations

import math
import warnings
from statistics import NormalDist

import numpy as np


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


def _with_t_interval(interval: tuple[float, float], d: np.ndarray, level: float) -> tuple[float, float]:
    """The hull of ``interval`` and the paired Student-t interval of the mean of the per-seed differences ``d``."""
    half = t_quantile((1 + level) / 2, len(d) - 1) * float(np.std(d, ddof=1)) / math.sqrt(len(d))
    return min(interval[0], float(d.mean()) - half), max(interval[1], float(d.mean()) + half)


def paired_difference(a, b, n_boot: int = 4000, level: float = 0.95, seed: int = 0, replicates: bool = False) -> dict:
    """A − B over the seeds both arms share, with a ``level`` interval: a paired bootstrap's, widened to the paired t
    interval over seeds where that is wider.

    ``a``, ``b``: per-prompt values (S, P[, M]) of the shared seeds in the same order, both arms evaluated on the
    same prompts; or per-seed values (S,) when per-prompt values are absent. The estimate is
    ``d = (1/S) sum_s [metric_A(s) − metric_B(s)]``. Each bootstrap replicate draws S seeds with replacement and P
    prompts with replacement, the same draws for both arms (paired over seeds and prompts), and recomputes d;
    the bootstrap interval is the replicates' (1 − level)/2 and (1 + level)/2 percentiles. Per-seed values give a
    seed-only bootstrap (evaluation noise then enters only through each seed's value). With few seeds a percentile
    bootstrap over seeds is too narrow: at S = 3 its 95% interval is about the range of the three per-seed
    differences, so three differences of one sign would make a "gap" a quarter of the time under no effect. From
    two seeds on the interval returned is therefore the hull of the bootstrap interval and the paired Student-t
    interval over the per-seed differences d_s, ``d ± t_{S−1, (1+level)/2} · sd(d_s) / sqrt(S)`` (exact for
    normal d_s; d_s holds the evaluation noise too): a gap it finds is not an artefact of resampling three seeds.
    With one shared seed the prompt bootstrap measures evaluation noise alone and a seed-only bootstrap has no
    interval (NaN). ``replicates`` are the bootstrap's alone.

    Returns ``{"diff", "lo", "hi", "seeds", "prompts", "resampled"}``; ``resampled`` names what the interval
    covers: "seeds × prompts", "prompts only: one shared seed", "seeds only", or "none: one shared seed". With
    ``replicates``, also ``"replicates"``: the ``n_boot`` bootstrap values of d (empty where there is no interval).
    The draws depend only on ``seed``, S and P: two comparisons with the same S and P (the same seeds and prompts
    in the same order) get the same draws, i.e. are resampled jointly (:func:`slope`).
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"paired_difference: both arms need the same seeds and prompts, got shapes {a.shape} and {b.shape}")
    S = a.shape[0]
    extra = {"replicates": np.empty(0)} if replicates else {}
    if S == 0:
        return {"diff": math.nan, "lo": math.nan, "hi": math.nan, "seeds": 0, "prompts": 0, "resampled": "none", **extra}
    rng = np.random.default_rng(seed)
    seed_counts = rng.multinomial(S, np.full(S, 1 / S), size=n_boot)  # (B, S)
    if a.ndim == 1:
        d = a - b
        out = {"diff": float(d.mean()), "seeds": S, "prompts": 0}
        if S < 2:
            return {**out, "lo": math.nan, "hi": math.nan, "resampled": "none: one shared seed", **extra}
        reps = seed_counts @ d / S
        lo, hi = _with_t_interval(_percentile_interval(reps, level), d, level)
        return {**out, "lo": lo, "hi": hi, "resampled": "seeds only", **({"replicates": reps} if replicates else {})}
    P = a.shape[1]
    d_full = run_metric(a) - run_metric(b)
    prompt_counts = rng.multinomial(P, np.full(P, 1 / P), size=n_boot)  # (B, P)
    d_boot = run_metric(a, prompt_counts) - run_metric(b, prompt_counts)  # (B, S)
    reps = np.nansum(seed_counts * d_boot, axis=1) / S
    lo, hi = _percentile_interval(reps, level)
    if S > 1:
        lo, hi = _with_t_interval((lo, hi), d_full, level)
    return {"diff": float(np.mean(d_full)), "lo": lo, "hi": hi, "seeds": S, "prompts": P,
            "resampled": "seeds × prompts" if S > 1 else "prompts only: one shared seed",
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


def verdict(lo: float, hi: float, claimed: float | None = None, null: float = 0.0) -> str:
    """The claim against our interval [lo, hi] of the same quantity.

    The claim says the quantity lies on the side of ``null`` that ``claimed`` (the paper's value) lies on
    (above when ``claimed`` is None). *reproduced*: the whole interval is on the claimed side (a difference is a
    gap only when its interval excludes ``null``) and reaches the claimed value; *weaker than claimed*: the whole
    interval is on the claimed side but short of the claimed value (the direction holds, the size does not: a
    check-region ratio of 1.1 against the paper's 2.8); *contradicted*: the whole interval is on the other side;
    *not reproduced*: the interval holds ``null`` but excludes ``claimed`` (an effect as large as the paper's
    would have been seen); *inconclusive*: the interval holds both, or there is no interval.
    """
    if lo != lo or hi != hi:
        return "inconclusive"
    sign = 1.0 if claimed is None or claimed >= null else -1.0
    low, high = sorted((sign * (lo - null), sign * (hi - null)))
    if low > 0:
        return "weaker than claimed" if claimed is not None and high < sign * (claimed - null) else "reproduced"
    if high < 0:
        return "contradicted"
    if claimed is not None and sign * (claimed - null) > high:
        return "not reproduced"
    return "inconclusive"


# ----------------------------------------------------------------------------------------------------
# power (paired t-test, two-sided)


def t_cdf(t: float, df: int) -> float:
    """CDF of Student's t with integer ``df`` degrees of freedom (closed forms, Abramowitz & Stegun 26.7.3–4):
    with θ = atan(t / sqrt(df)), A = P(|T| < |t|) is
    (2/π)(θ + sinθ cosθ (1 + (2/3)cos²θ + ... + (2·4···(df−3))/(3·5···(df−2)) cos^(df−3)θ)) for odd df and
    sinθ (1 + (1/2)cos²θ + ... + (1·3···(df−3))/(2·4···(df−2)) cos^(df−2)θ) for even df."""
    if df < 1:
        raise ValueError(f"t_cdf: df must be >= 1, got {df}")
    theta = math.atan(abs(t) / math.sqrt(df))
    s, c = math.sin(theta), math.cos(theta)
    if df % 2:
        term, total = 1.0, 1.0 if df > 1 else 0.0
        for k in range(1, (df - 3) // 2 + 1):
            term *= (2 * k) / (2 * k + 1) * c * c
            total += term
        a = 2 / math.pi * (theta + (s * c * total if df > 1 else 0.0))
    else:
        term, total = 1.0, 1.0
        for k in range(1, (df - 2) // 2 + 1):
            term *= (2 * k - 1) / (2 * k) * c * c
            total += term
        a = s * total
    return 0.5 + math.copysign(a / 2, t)


def t_quantile(p: float, df: int) -> float:
    """Inverse of :func:`t_cdf` (bisection to 1e-10)."""
    if not 0 < p < 1:
        raise ValueError(f"t_quantile: p must be in (0, 1), got {p}")
    lo, hi = -1e3, 1e3
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if t_cdf(mid, df) < p else (lo, mid)
        if hi - lo < 1e-10:
            break
    return (lo + hi) / 2


def detectable_difference(sd_diff: float, seeds: int, power: float = 0.8, alpha: float = 0.05) -> float:
    """Smallest paired difference a two-sided paired t-test at ``alpha`` detects with ``power`` over ``seeds``
    pairs whose differences have standard deviation ``sd_diff``:
    ``δ = (t_{1−α/2, n−1} + t_{power, n−1}) · sd_diff / sqrt(n)`` (NaN below 2 seeds)."""
    if seeds < 2 or sd_diff != sd_diff:
        return math.nan
    df = seeds - 1
    return (t_quantile(1 - alpha / 2, df) + t_quantile(power, df)) * sd_diff / math.sqrt(seeds)


def power(delta: float, sd_diff: float, seeds: int, alpha: float = 0.05) -> float:
    """Power of a two-sided paired t-test at ``alpha`` to detect a paired difference ``delta`` over ``seeds``
    pairs whose differences have standard deviation ``sd_diff``, in the approximation that
    :func:`detectable_difference` inverts (the far tail left out, the noncentral t replaced by a shifted t):
    ``power = T_{n−1}(|δ| sqrt(n) / sd_diff − t_{1−α/2, n−1})``. NaN below 2 seeds or with ``sd_diff`` unknown;
    1 when ``sd_diff`` is 0 and ``delta`` is not."""
    if seeds < 2 or sd_diff != sd_diff or delta != delta:
        return math.nan
    if sd_diff == 0:
        return 1.0 if delta else alpha / 2
    df = seeds - 1
    return t_cdf(abs(delta) * math.sqrt(seeds) / sd_diff - t_quantile(1 - alpha / 2, df), df)


def seeds_for_power(sd_diff: float, delta: float = 0.05, power: float = 0.8, alpha: float = 0.05,
                    max_seeds: int = 10_000) -> int | None:
    """Fewest paired seeds n >= 2 with ``detectable_difference(sd_diff, n, power, alpha) <= delta``; None when
    sd_diff is unknown (NaN) or more than ``max_seeds`` would be needed."""
    if sd_diff != sd_diff:
        return None
    if sd_diff == 0:
        return 2
    # start near the normal approximation, then step to the exact smallest n
    z = NormalDist().inv_cdf
    n = max(2, int(((z(1 - alpha / 2) + z(power)) * sd_diff / delta) ** 2) - 2)
    while n > 2 and detectable_difference(sd_diff, n - 1, power, alpha) <= delta:
        n -= 1
    while detectable_difference(sd_diff, n, power, alpha) > delta:
        n += 1
        if n > max_seeds:
            return None
    return n


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


def evaluation_se(x, n_boot: int = 2000, seed: int = 0) -> float:
    """Standard error of one run's metric from its evaluation prompts alone: the std of the metric over
    ``n_boot`` resamples of the prompts with replacement. ``x``: per-prompt values (P[, M]) of one run."""
    x = np.asarray(x, dtype=float)[None]  # one seed
    P = x.shape[1]
    counts = np.random.default_rng(seed).multinomial(P, np.full(P, 1 / P), size=n_boot)
    return float(np.nanstd(run_metric(x, counts)[:, 0], ddof=1))


def binomial_se(p: float, draws: int) -> float:
    """``sqrt(p (1 − p) / draws)``: the evaluation s.e. of a success rate over ``draws`` independent samples
    (a lower bound when several samples share a prompt)."""
    return math.sqrt(p * (1 - p) / draws) if draws > 0 and p == p else math.nan


def noise_components(values, eval_ses) -> dict:
    """Seed noise against evaluation noise of one arm.

    ``values``: the arm's metric per seed; ``eval_ses``: each run's evaluation s.e. The observed seed-to-seed
    variance holds both: ``var_obs = var_seed + mean(eval_se²)``, so the seed component is
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


def cluster_bootstrap_se(statistic, clusters, n_boot: int = 1000, seed: int = 0):
    """:func:`bootstrap_se` over clusters of rows (the responses of one prompt): each replicate draws the C
    clusters with replacement and calls ``statistic(rows)`` with the row indices of every drawn cluster (a cluster
    drawn twice gives its rows twice). Responses to one prompt share it, so resampling them one by one would
    understate the spread; with one row per cluster this is the bootstrap over rows. ``clusters``: the cluster
    label of each row."""
    _, index = np.unique(np.asarray(clusters), return_inverse=True)
    members = [np.flatnonzero(index == c) for c in range(index.max() + 1 if len(index) else 0)]
    return bootstrap_se(lambda idx: statistic(np.concatenate([members[c] for c in idx] + [index[:0]])),
                        len(members), n_boot, seed)


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
