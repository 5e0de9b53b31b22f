"""Tests of the book's paired comparisons: Student's t, the paired t-test's p, its exact power (noncentral t), the
difference it detects and the seeds a difference needs, the uncertainty of a seed-spread sd (chi-square), and Holm's
correction over a family of comparisons. Pure functions of numbers; numpy and the standard library only (scipy is
not a dependency).

Notation: n paired seeds give differences d_1..d_n with mean d̄ and standard deviation sd (ddof 1); the paired
t statistic is ``t = d̄ sqrt(n) / sd`` with n − 1 degrees of freedom; a two-sided test at ``alpha`` rejects when
``|t| > c = t_{n−1, 1−α/2}``.
"""

from __future__ import annotations

import math

import numpy as np

_erfc = np.frompyfunc(math.erfc, 1, 1)


def _normal_cdf(x: np.ndarray) -> np.ndarray:
    """Φ(x) elementwise, ``erfc(−x / sqrt 2) / 2`` (exact in both tails, unlike ``1 − erfc``)."""
    return _erfc(-np.asarray(x, dtype=float) / math.sqrt(2)).astype(float) / 2


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


def paired_t_p(d) -> float:
    """Two-sided p of the paired t-test that the mean of the per-seed differences ``d`` is 0:
    ``p = 2 (1 − T_{n−1}(|d̄| sqrt(n) / sd))``; NaN below 2 differences; with sd = 0, 1 when d̄ = 0 and 0 otherwise."""
    d = np.asarray(d, dtype=float)
    d = d[~np.isnan(d)]
    if len(d) < 2:
        return math.nan
    mean, sd = float(d.mean()), float(d.std(ddof=1))
    if sd == 0:
        return 1.0 if mean == 0 else 0.0
    return 2 * (1 - t_cdf(abs(mean) * math.sqrt(len(d)) / sd, len(d) - 1))


def holm(pvalues) -> np.ndarray:
    """Holm's step-down adjusted p of a family of m tests (NaN entries are not tests and stay NaN; m counts the
    others): with p_(1) <= ... <= p_(m) sorted, ``p̃_(i) = max_{j <= i} min(1, (m − j + 1) p_(j))``. Rejecting
    where p̃ < α keeps the chance of any false rejection in the family at or below α, whatever the dependence
    between the tests."""
    p = np.asarray(pvalues, dtype=float)
    out = np.full(p.shape, math.nan)
    tested = np.flatnonzero(~np.isnan(p))
    order = tested[np.argsort(p[tested], kind="stable")]
    m = len(order)
    out[order] = np.maximum.accumulate(np.minimum(1.0, (m - np.arange(m)) * p[order]))
    return out


# ----------------------------------------------------------------------------------------------------
# power: the noncentral t


def _chi_grid(df: int, points: int = 2001) -> tuple[np.ndarray, np.ndarray]:
    """(s, w): nodes s = sqrt(V / df) of V ~ chi-square(df) and their quadrature weights (summing to 1). Integrates
    over u = sqrt(V / 2), whose density ``2 u^(df−1) e^(−u²) / Γ(df/2)`` is smooth and bounded for every df >= 1
    and has a spread of about 1/2 around its mode sqrt((df − 1) / 2): the trapezoid rule on ±10 around the mode."""
    mode = math.sqrt(max(df - 1, 0) / 2)
    u = np.linspace(max(0.0, mode - 10), mode + 10, points)
    log_f = (df - 1) * np.log(np.maximum(u, 1e-300)) - u ** 2
    f = np.exp(log_f - log_f.max())
    w = f.copy()
    w[[0, -1]] /= 2  # the trapezoid rule (at df = 1 the density is largest at u = 0)
    return u * math.sqrt(2 / df), w / w.sum()


def power(delta: float, sd_diff: float, seeds: int, alpha: float = 0.05) -> float:
    """Power of a two-sided paired t-test at ``alpha`` to detect a paired difference ``delta`` over ``seeds``
    pairs whose differences are normal with standard deviation ``sd_diff``: the t statistic is noncentral t with
    df = n − 1 and noncentrality ``λ = |δ| sqrt(n) / sd``, so with S = sqrt(V / df), V ~ chi-square(df),

        power = P(|T| > c) = E_S[ Φ(λ − c S) + Φ(−λ − c S) ],   c = t_{n−1, 1−α/2}

    (integrated numerically, :func:`_chi_grid`). It is alpha at δ = 0 and never below it. NaN below 2 seeds or
    with ``sd_diff`` unknown; with ``sd_diff`` 0, 1 when ``delta`` is not 0 and alpha when it is."""
    if seeds < 2 or sd_diff != sd_diff or delta != delta:
        return math.nan
    if sd_diff == 0:
        return 1.0 if delta else alpha
    df = seeds - 1
    lam = abs(delta) * math.sqrt(seeds) / sd_diff
    c = t_quantile(1 - alpha / 2, df)
    s, w = _chi_grid(df)
    return float(np.clip(w @ (_normal_cdf(lam - c * s) + _normal_cdf(-lam - c * s)), alpha, 1.0))


_power = power  # for the functions below, whose ``power`` argument is the target


def not_distinguishable(detectable: float) -> str:
    """The verdict on a difference whose interval holds 0: never "agrees" or "holds", only that the runs cannot
    tell it from 0, and how large a difference they would have told (``detectable``: e.g. the difference detectable
    with 80% power, :func:`detectable_difference`; NaN without a test)."""
    size = f"detectable: ±{detectable:.3f}" if detectable == detectable else "no test: one shared seed"
    return f"not distinguishable at this power ({size})"


def detectable_difference(sd_diff: float, seeds: int, power: float = 0.8, alpha: float = 0.05) -> float:
    """Smallest paired difference δ >= 0 that a two-sided paired t-test at ``alpha`` detects with ``power`` over
    ``seeds`` pairs whose differences have standard deviation ``sd_diff``: the root of
    ``power(δ, sd_diff, n) = power`` (:func:`power`, increasing in δ; bisection to 1e-9 of sd). NaN below 2 seeds
    or with ``sd_diff`` unknown."""
    if seeds < 2 or sd_diff != sd_diff:
        return math.nan
    if sd_diff == 0:
        return 0.0
    lo, hi = 0.0, sd_diff
    while _power(hi, sd_diff, seeds, alpha) < power:
        lo, hi = hi, 2 * hi
    while hi - lo > 1e-9 * sd_diff:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _power(mid, sd_diff, seeds, alpha) < power else (lo, mid)
    return (lo + hi) / 2


def seeds_for_power(sd_diff: float, delta: float = 0.05, power: float = 0.8, alpha: float = 0.05,
                    max_seeds: int = 10_000) -> int | None:
    """Fewest paired seeds n >= 2 whose paired t-test reaches ``power`` for ``delta`` (:func:`power`); None when
    sd_diff is unknown (NaN) or more than ``max_seeds`` would be needed."""
    if sd_diff != sd_diff:
        return None
    if sd_diff == 0:
        return 2
    reaches = lambda n: _power(delta, sd_diff, n, alpha) >= power  # noqa: E731
    # double, then bisect: power grows with n
    lo, hi = 1, 2
    while not reaches(hi):
        lo, hi = hi, 2 * hi
        if lo > max_seeds:
            return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if not reaches(mid) else (lo, mid)
    return hi if hi <= max_seeds else None


# ----------------------------------------------------------------------------------------------------
# the uncertainty of a measured sd


def chi2_cdf(x: float, df: int) -> float:
    """CDF of chi-square with ``df`` degrees of freedom, the regularised lower incomplete gamma P(df/2, x/2): its
    power series below a + 1, Lentz's continued fraction for the upper tail above (Numerical Recipes 6.2)."""
    if x <= 0:
        return 0.0
    a, z = df / 2, x / 2
    log_front = a * math.log(z) - z - math.lgamma(a)
    if z < a + 1:
        term = total = 1 / a
        k = a
        while abs(term) > 1e-15 * abs(total):
            k += 1
            term *= z / k
            total += term
        return math.exp(log_front) * total
    tiny = 1e-300
    b = z + 1 - a
    c, d = 1 / tiny, 1 / b
    h = d
    for i in range(1, 1000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        h *= d * c
        if abs(d * c - 1) < 1e-15:
            break
    return 1 - math.exp(log_front) * h


def chi2_quantile(p: float, df: int) -> float:
    """Inverse of :func:`chi2_cdf` (bisection to 1e-12 relative)."""
    if not 0 < p < 1:
        raise ValueError(f"chi2_quantile: p must be in (0, 1), got {p}")
    lo, hi = 0.0, max(1.0, 2.0 * df)
    while chi2_cdf(hi, df) < p:
        lo, hi = hi, 2 * hi
    while hi - lo > 1e-12 * hi:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if chi2_cdf(mid, df) < p else (lo, mid)
    return (lo + hi) / 2


def sd_interval(sd: float, df: int, level: float = 0.95) -> tuple[float, float]:
    """``level`` interval of a normal standard deviation measured as ``sd`` with ``df`` degrees of freedom
    (n − 1 for n paired seeds): ``(df sd² / χ²_{df, (1+level)/2})^½`` to ``(df sd² / χ²_{df, (1−level)/2})^½``.
    At 2 df (3 seeds) a 95% interval runs from about 0.52 sd to 6.3 sd. (NaN, NaN) without df or sd."""
    if df < 1 or sd != sd:
        return math.nan, math.nan
    return (sd * math.sqrt(df / chi2_quantile((1 + level) / 2, df)),
            sd * math.sqrt(df / chi2_quantile((1 - level) / 2, df)))
