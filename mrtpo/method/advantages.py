"""Advantage math of GRPO, GDPO and MRTPO (PAPER.md §2–3). Pure tensor functions: no I/O, no trainer state.

Shapes: B responses (a multiple of G, the G responses of one prompt contiguous, TRL's layout), K rewards,
T completion positions. ``mask`` (B, T) is 1 on valid completion tokens. Rewards may be NaN where a
reward does not apply to a response (TRL's ``None``); NaN rewards get zero advantage.
"""

from __future__ import annotations

import math
from typing import Callable

import torch

from mrtpo.method.gtpo import GTPO_ALPHAS, gtpo_advantages

EPS = 1e-4
#: the methods: advantage schemes (``mrtpo_advantages``) and OPSD; the token-level ones share MRTPO's machinery, the
#: replaying ones run leave-one-out replays (``uniform`` is token-level with w = 1 and trains exactly as gdpo;
#: ``entropy`` is an entropy-weighted MRTPO placement control, not GTPO: MRTPO's within-response weights with q
#: replaced by the sampling policy's token entropy, without any replay; ``region`` the positive control whose weights
#: come from the verifiers' read regions, ``placement``; ``gtpo`` is GTPO's entropy-shaped token reward (Tan et al.
#: 2025, ``gtpo_advantages``) on GDPO's summed advantage: token-level, but not MRTPO's machinery, so not TOKEN_LEVEL)
METHODS = ("grpo", "gdpo", "mrtpo", "joint", "shuffled", "uniform", "entropy", "region", "gtpo", "opsd")
#: methods whose loss is the OPSD distillation term alone (``mrtpo.method.distillation``); their advantages (GDPO's) are
#: computed for the logs only
DISTILLING = ("opsd",)
TOKEN_LEVEL = ("mrtpo", "joint", "shuffled", "uniform", "entropy", "region")
REPLAYING = ("mrtpo", "joint", "shuffled")
#: methods whose advantages read the sampling policy's token entropy (recorded at generation; no vLLM)
READS_ENTROPY = ("entropy", "gtpo")

def nanstd(x: torch.Tensor, dim=None, keepdim: bool = False) -> torch.Tensor:
    """Sample standard deviation (Bessel) ignoring NaNs; NaN where fewer than two values are finite."""
    mean = torch.nanmean(x, dim=dim, keepdim=True)
    count = (~torch.isnan(x)).sum(dim=dim, keepdim=True)
    var = torch.nanmean((x - mean) ** 2, dim=dim, keepdim=True) * count / (count - 1)
    var = torch.where(count > 1, var, torch.full_like(var, float("nan")))
    std = var.sqrt()
    if not keepdim:
        std = std.squeeze(dim) if dim is not None else std.reshape(())
    return std


def group_normalize(r: torch.Tensor, num_generations: int, eps: float = EPS) -> torch.Tensor:
    """``G(r_j) = (r_j - mu) / (sigma + eps)``, mu and sigma the mean and sample std of r over the group of j.

    r: (B,) or (B, K) (each column normalised on its own); NaN entries are ignored by mu and sigma and stay NaN.
    """
    grouped = r.reshape(-1, num_generations, *r.shape[1:])
    mean = torch.nanmean(grouped, dim=1, keepdim=True)
    std = nanstd(grouped, dim=1, keepdim=True) if num_generations > 1 else torch.zeros_like(mean)
    return ((grouped - mean) / (std + eps)).reshape(r.shape)


def grpo_advantages(rewards: torch.Tensor, num_generations: int, eps: float = EPS) -> torch.Tensor:
    """GRPO: ``A_j = G(sum_k r_k^(j))`` — sum the K rewards first, then group-normalise. (B, K) -> (B,).

    Responses whose rewards are all NaN (unscorable) get A = 0.
    """
    unscorable = torch.isnan(rewards).all(dim=1)
    total = rewards.nansum(dim=1).masked_fill(unscorable, float("nan"))
    return torch.nan_to_num(group_normalize(total, num_generations, eps), nan=0.0)


def batch_stats(S: torch.Tensor, eps: float = EPS) -> tuple[torch.Tensor, torch.Tensor]:
    """GDPO's batch-level centre and scale of the summed advantage S: ``(mean_B(S), std_B(S) + eps)``, NaN-aware.

    The mean is 0 in exact arithmetic (every A_k has zero group mean); it is subtracted as TRL does so that
    the result matches TRL bit for bit.
    """
    scale = nanstd(S) if S.numel() > 1 else torch.zeros((), dtype=S.dtype, device=S.device)
    return torch.nanmean(S), scale + eps


def gdpo_advantages(
    rewards: torch.Tensor, num_generations: int, eps: float = EPS, reward_weights: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """GDPO: ``A_k = G(r_k)`` per reward, ``S = sum_k A_k``, ``A = (S - mean_B S) / (std_B(S) + eps)``.

    rewards (B, K) -> ``(A_k (B, K), A (B,))``. A_k keeps NaN where the reward is NaN (not applicable);
    a reward whose group std is 0 gives A_k = 0 for the whole group. ``reward_weights`` (K,) scales A_k
    before the sum (TRL's ``reward_weights``; SAW passes its weights here). Responses whose rewards are all
    NaN get A = 0. Equals TRL's ``multi_objective_aggregation="normalize_then_sum"``.
    """
    A_k = group_normalize(rewards, num_generations, eps)
    if reward_weights is not None:
        A_k = A_k * reward_weights.to(A_k)
    S = summed_advantage(A_k)
    center, scale = batch_stats(S, eps)
    return A_k, torch.nan_to_num((S - center) / scale, nan=0.0)


def summed_advantage(A_k: torch.Tensor) -> torch.Tensor:
    """``S = sum_k A_k`` over applicable rewards; NaN for a response with no applicable reward."""
    unscorable = torch.isnan(A_k).all(dim=1)
    return A_k.nansum(dim=1).masked_fill(unscorable, float("nan"))


def saw_weights(rewards: torch.Tensor) -> torch.Tensor:
    """SAW response-level reweighting: ``K * CV_k / sum_k CV_k`` with ``CV_k = std_B(r_k) / |mean_B(r_k)|``.

    rewards (B, K) -> (K,). Rewards that vary more relative to their mean weigh more; uniform (all ones)
    when every CV is 0 or undefined.
    """
    mean = torch.nanmean(rewards, dim=0)
    cv = torch.nan_to_num(nanstd(rewards, dim=0) / mean.abs().clamp_min(EPS), nan=0.0)
    total = cv.sum()
    if total <= 0:
        return torch.ones_like(cv)
    return rewards.shape[1] * cv / total


def replay_needed(rewards: torch.Tensor, num_generations: int) -> torch.Tensor:
    """(B, K) bool: response j needs a replay for reward k iff r_k^(j) is defined and k's group std is non-zero.

    A reward with zero group std has A_k = 0 for the whole group, so its token placement cannot matter.
    """
    std = nanstd(rewards.reshape(-1, num_generations, rewards.shape[1]), dim=1, keepdim=True)
    varies = torch.nan_to_num(std, nan=0.0) > 0
    return (varies.expand(-1, num_generations, -1).reshape(rewards.shape)) & ~torch.isnan(rewards)


def replay_rate(replayed, pairs, responses) -> tuple[float, float, float]:
    """Replay rate over the response–reward pairs that exist (PAPER.md §7; a reward that does not apply to a
    prompt is not a pair), from counts summed over any set of steps:

        rate = replayed / pairs,    rewards applying per response = pairs / responses,
        effective K = rate x rewards applying per response = replayed / responses

    ``replayed``: pairs with non-zero group std (:func:`replay_needed`); ``pairs``: applicable (response, reward)
    pairs; ``responses``: responses. (rate, rewards applying per response, effective K); NaN where undefined."""
    replayed, pairs, responses = float(replayed), float(pairs), float(responses)
    rate = replayed / pairs if pairs > 0 else math.nan
    applying = pairs / responses if responses > 0 else math.nan
    return rate, applying, rate * applying if pairs > 0 else (0.0 if responses > 0 else math.nan)


def beta_at(step: int, beta: float = 0.5, warmup_steps: int = 10) -> float:
    """Smoothstep warm-up of beta: ``beta * (3x^2 - 2x^3)``, ``x = min(1, step / warmup_steps)``."""
    if warmup_steps <= 0:
        return beta
    x = min(1.0, max(0.0, step / warmup_steps))
    return beta * (3 * x**2 - 2 * x**3)


def token_weights(q: torch.Tensor, mask: torch.Tensor, beta: float) -> torch.Tensor:
    """MRTPO reallocation weights ``w_{k,t} = (1 - beta) + beta * q_{k,t} / qbar_k``.

    q (B, K, T) relevance in [0, 1] (K may be 1: a profile shared by all rewards); mask (B, T).
    qbar_k is the mean of q_{k,t} over the response's valid tokens, so ``mean_t w = 1`` on every response.
    Where qbar = 0 (no shift at all) the weights are exactly 1; padding positions get 0.
    """
    m = mask.unsqueeze(1).to(q.dtype)
    n = m.sum(-1, keepdim=True).clamp_min(1)
    qbar = (q * m).sum(-1, keepdim=True) / n
    has_shift = qbar > 0
    ratio = torch.where(has_shift, q / torch.where(has_shift, qbar, torch.ones_like(qbar)), torch.ones_like(q))
    w = torch.where(has_shift, (1 - beta) + beta * ratio, torch.ones_like(q))
    return w * m


def entropy_weights(entropy: torch.Tensor, mask: torch.Tensor, beta: float) -> torch.Tensor:
    """The ``entropy`` arm (issue 18), an entropy-weighted MRTPO placement control, not GTPO: MRTPO's weights with
    q replaced by the sampling policy's token entropy, ``w_t = (1 - beta) + beta * h_t / hbar``, shared by all
    rewards. It moves each response's advantage between its own positions (GTPO, ``gtpo_advantages``, shapes the
    reward between the group's responses at each position instead).

    entropy (B, T): the sampling policy's token entropy h_t >= 0; hbar its mean over the response's valid
    tokens; mask (B, T). The profile is normalised exactly as q is (``token_weights`` on the (B, 1, T)
    profile), so it goes through the same bound and batch standardisation, and a flat entropy gives GDPO.
    """
    return token_weights(entropy.unsqueeze(1), mask, beta)



def placement(region: torch.Tensor, mask: torch.Tensor, q: torch.Tensor | None = None, blend: float = 1.0) -> torch.Tensor:
    """Placement by the verifiers' read regions (issue 42), a profile of mean 1 on each response's valid tokens:

        p_{k,t} = (1 - lambda) q_{k,t} / qbar_k + lambda m_{k,t} / mbar_k,    lambda = ``blend``

    region (B, K, T): the indicator m_{k,t} of the tokens reward k's verifier reads (its check region on the
    response, ``regions.region_indicator``); q (B, K|1, T): MRTPO's relevance (not read at lambda = 1); mask (B, T).
    Each profile is scaled to mean 1 by ``token_weights(x, mask, 1) = x / xbar``, which is exactly 1 on every valid
    token where xbar = 0 (a reward without a region on this response; a pair that was not replayed). Hence
    mean_t p = 1 and ``token_weights(p, mask, beta) = (1 - beta) + beta p``: MRTPO's weights with q replaced by p.

    lambda = 1 is the ``region`` method: the positive control, placement by the verifier's own read spans (the
    best placement available, and the extension MRTPO's critics propose: the checker's spans as weak supervision),
    at no replay cost. A region that is empty or covers every valid token gives p = 1: uniform, GDPO's placement.
    lambda in (0, 1) is the placement-quality dial at a fixed base, from MRTPO's relevance (lambda = 0, equal to
    ``token_weights(q, mask, beta)`` up to rounding) to the region (lambda = 1, exactly the ``region`` weights).
    """
    p = token_weights(region, mask, 1.0)
    if blend < 1:
        p = blend * p + (1 - blend) * token_weights(q, mask, 1.0)
    return p


def uniform_weights(mask: torch.Tensor, num_rewards: int) -> torch.Tensor:
    """w = 1 on every valid token for every reward: MRTPO's machinery reduces to GDPO. (B, K, T)."""
    return mask.unsqueeze(1).expand(-1, num_rewards, -1).to(torch.float32).clone()


def shuffle_positions(w: torch.Tensor, mask: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """Ablation "shuffled positions": each response's weights permuted at random among its valid tokens.

    One permutation per response, shared by its K rewards, so each reward keeps its multiset of weight
    values and only the placement is destroyed.
    """
    out = w.clone()
    for j in range(w.shape[0]):
        idx = mask[j].nonzero(as_tuple=True)[0]
        perm = idx[torch.randperm(idx.numel(), generator=generator, device="cpu").to(idx.device)]
        out[j][:, idx] = w[j][:, perm]
    return out


def token_advantages(
    A_k: torch.Tensor,
    w: torch.Tensor,
    mask: torch.Tensor,
    bound: bool = True,
    scale: torch.Tensor | float | None = None,
    center: torch.Tensor | float | None = None,
    reduce_sum: Callable[[torch.Tensor], torch.Tensor] | None = None,
    eps: float = EPS,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Per-token advantages from per-reward advantages and token weights, with the second-moment bound (Eq. 8).

    ``S_t = sum_k A_k w_{k,t}``, ``S = sum_k A_k``, ``R_t = S_t - S`` (zero mean over each response's tokens,
    since mean_t w = 1). With ``Sc = S - center``:
    ``s = min(1, sqrt(sum_j T_j Sc_j^2 / sum_j sum_t R_t^2))`` over all valid tokens of the batch (s = 1 when
    the denominator is 0, or when ``bound`` is off), and the result is ``(Sc + s R_t) / scale`` on valid
    tokens, 0 on padding. Hence every response's token mean is its GDPO advantage ``Sc / scale`` exactly,
    and the token advantages' second moment is at most twice that of uniform allocation.

    A_k (B, K) may hold NaN (reward not applicable: contributes nothing); w (B, K, T) or (B, 1, T);
    mask (B, T). ``scale``/``center`` default to GDPO's batch statistics of S (pass the global ones when the
    batch is split over processes); ``reduce_sum`` sums a tensor over processes (identity by default).
    Responses with no applicable reward get 0.

    Returns ``(adv (B, T), stats)``; stats: ``s`` (realised bound), ``moment_ratio`` (second moment of the
    reallocation relative to uniform, ``sum R_t^2 / sum_j T_j Sc_j^2``; the bound is active when it exceeds 1),
    ``frac_qbar_zero`` (share of weight profiles of scorable responses that are uniform: qbar = 0 or flat q).
    """
    reduce_sum = reduce_sum or (lambda x: x)
    m = mask.to(torch.float32)
    unscorable = torch.isnan(A_k).all(dim=1)
    S = summed_advantage(A_k)
    if center is None or scale is None:
        c, sc = batch_stats(S, eps)
        center = c if center is None else center
        scale = sc if scale is None else scale
    Ak = torch.nan_to_num(A_k, nan=0.0).to(torch.float32)
    Sc = torch.nan_to_num(S - center, nan=0.0)
    w = w.to(torch.float32).expand(-1, A_k.shape[1], -1)
    R = torch.einsum("bk,bkt->bt", Ak, w - 1.0) * m
    uniform_moment = reduce_sum((m.sum(-1) * Sc**2).sum())
    realloc_moment = reduce_sum((R**2).sum())
    if bound and realloc_moment > 0:
        s = torch.clamp((uniform_moment / realloc_moment).sqrt(), max=1.0)
    else:
        s = torch.ones(())
    adv = (Sc.unsqueeze(1) + s * R) / scale * m
    adv = adv.masked_fill(unscorable.unsqueeze(1), 0.0)
    flat = ((w == 1) | (m.unsqueeze(1) == 0)).all(-1)[~unscorable]
    stats = {
        "s": float(s),
        "moment_ratio": float(realloc_moment / uniform_moment.clamp_min(1e-12)),
        "frac_qbar_zero": float(flat.float().mean()) if flat.numel() else 1.0,
    }
    return adv, stats


def mrtpo_advantages(
    rewards: torch.Tensor,
    num_generations: int,
    method: str,
    local: slice,
    reward_weights: torch.Tensor | None = None,
    saw: bool = False,
    mask: torch.Tensor | None = None,
    q: torch.Tensor | None = None,
    entropy: torch.Tensor | None = None,
    region: torch.Tensor | None = None,
    region_blend: float = 0.0,
    beta: float = 0.0,
    gtpo_alphas: tuple[float, float] = GTPO_ALPHAS,
    bound: bool = True,
    generator: torch.Generator | None = None,
    reduce_sum: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The advantages of one scheme, for this process's slice ``local`` of the global batch.

    rewards (B_global, K). ``grpo``: ``grpo_advantages`` (B,). ``gdpo``: ``gdpo_advantages`` with the reward
    weights (times ``saw_weights`` when ``saw``) (B,). Token-level schemes (B, T), from the local mask (B, T)
    and q (B, K|1, T): ``mrtpo``/``joint``: ``token_weights(q, mask, beta)``; ``shuffled``: those weights at
    random positions (``shuffle_positions`` with ``generator``); ``uniform``: w = 1; ``entropy``:
    ``entropy_weights(entropy, mask, beta)`` from the local token entropy (B, T); ``region``:
    ``token_weights(placement(region, mask), mask, beta)`` from the local check-region indicator (B, K, T); ``mrtpo``
    with ``region_blend`` lambda > 0: ``token_weights(placement(region, mask, q, lambda), mask, beta)`` (at lambda = 0
    the blend is skipped, so plain MRTPO is computed exactly as without it). Then
    ``token_advantages`` with GDPO's global batch statistics of S and the bound. ``gtpo``: ``gtpo_advantages``
    of GDPO's advantages A, with S as the outcome, the local entropy and ``gtpo_alphas`` (alpha_1, alpha_2); ``local``
    must hold whole groups. Returns (advantages, stats of ``token_advantages``; empty for the response-level
    schemes and gtpo).
    """
    if method == "grpo":
        return grpo_advantages(rewards, num_generations)[local], {}
    if saw:
        reward_weights = (reward_weights if reward_weights is not None else 1.0) * saw_weights(rewards)
    A_k, A = gdpo_advantages(rewards, num_generations, reward_weights=reward_weights)
    if method == "gdpo":
        return A[local], {}
    if method == "gtpo":
        G = num_generations
        start, stop, _ = local.indices(rewards.shape[0])
        if start % G or (stop - start) % G:
            raise ValueError(f"gtpo compares a group's responses at each position: this process's slice {local} of "
                             f"the batch must hold whole groups of {G}")
        S = summed_advantage(A_k)
        return gtpo_advantages(A[local], entropy, mask, G, *gtpo_alphas, outcome=S[local]), {}
    if method == "uniform":
        w = uniform_weights(mask, rewards.shape[1])
    elif method == "entropy":
        w = entropy_weights(entropy, mask, beta)
    elif method == "region":
        w = token_weights(placement(region, mask), mask, beta)
    else:
        w = token_weights(placement(region, mask, q, region_blend) if region_blend > 0 else q, mask, beta)
        if method == "shuffled":
            w = shuffle_positions(w, mask, generator)
    center, scale = batch_stats(summed_advantage(A_k))
    return token_advantages(A_k[local], w, mask, bound=bound, scale=scale, center=center, reduce_sum=reduce_sum)
