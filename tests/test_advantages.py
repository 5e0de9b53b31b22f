"""Properties of the advantage math (PAPER.md §2–3), asserted on values."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mrtpo.method.advantages import (
    METHODS,
    beta_at,
    entropy_weights,
    gdpo_advantages,
    group_normalize,
    grpo_advantages,
    placement,
    replay_needed,
    replay_rate,
    saw_weights,
    shuffle_positions,
    token_advantages,
    token_weights,
    uniform_weights,
)


@st.composite
def batches(draw, max_groups=4, max_k=4, max_t=12):
    """Random rewards (binary or graded, some groups constant), relevance and ragged masks."""
    G = draw(st.integers(2, 4))
    n = draw(st.integers(1, max_groups))
    K = draw(st.integers(1, max_k))
    T = draw(st.integers(1, max_t))
    seed = draw(st.integers(0, 2**31 - 1))
    g = torch.Generator().manual_seed(seed)
    B = G * n
    if draw(st.booleans()):
        rewards = torch.randint(0, 2, (B, K), generator=g).float()
    else:
        rewards = torch.rand(B, K, generator=g)
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    mask = (torch.arange(T).unsqueeze(0) < lengths.unsqueeze(1)).float()
    q = torch.rand(B, K, T, generator=g) * (torch.rand(B, K, 1, generator=g) > 0.2)  # some profiles all zero
    beta = draw(st.floats(0.0, 1.0))
    return rewards, q, mask, beta, G


def token_mean(adv, mask):
    return (adv * mask).sum(-1) / mask.sum(-1)


@settings(max_examples=200, deadline=None)
@given(batches())
def test_weights_have_unit_token_mean(batch):
    _, q, mask, beta, _ = batch
    w = token_weights(q, mask, beta)
    means = (w * mask.unsqueeze(1)).sum(-1) / mask.sum(-1, keepdim=True)
    assert torch.allclose(means, torch.ones_like(means), atol=1e-5)
    assert (w[mask.unsqueeze(1).expand_as(w) == 0] == 0).all()
    assert (w[mask.unsqueeze(1).expand_as(w) == 1] >= 1 - beta - 1e-6).all()  # every token keeps (1 - beta)


@settings(max_examples=200, deadline=None)
@given(batches(), st.booleans())
def test_token_mean_is_gdpo_advantage(batch, bound):
    rewards, q, mask, beta, G = batch
    A_k, A = gdpo_advantages(rewards, G)
    adv, stats = token_advantages(A_k, token_weights(q, mask, beta), mask, bound=bound)
    # without the bound, S = 0 everywhere makes R / (0 + eps) large: compare relative to the magnitude
    tol = 1e-4 * max(1.0, float(adv.abs().max()))
    assert torch.allclose(token_mean(adv, mask), A, atol=tol)
    assert 0.0 <= stats["s"] <= 1.0
    assert torch.isfinite(adv).all()


@settings(max_examples=200, deadline=None)
@given(batches())
def test_bound_caps_second_moment_at_twice_uniform(batch):
    rewards, q, mask, beta, G = batch
    A_k, A = gdpo_advantages(rewards, G)
    adv, stats = token_advantages(A_k, token_weights(q, mask, 1.0), mask, bound=True)
    uniform_moment = (A**2 * mask.sum(-1)).sum()
    assert (adv**2).sum() <= 2 * uniform_moment * (1 + 1e-4) + 1e-6
    if stats["moment_ratio"] > 1:
        assert stats["s"] < 1


def test_bound_is_active_and_beta_cancels():
    """PAPER.md §6.2: when the bound is active, s * beta * R1 = sqrt(A/B1) R1, so beta and 2*beta deliver the same."""
    g = torch.Generator().manual_seed(0)
    G, K, T = 4, 3, 20
    rewards = torch.randint(0, 2, (16, K), generator=g).float()
    mask = torch.ones(16, T)
    q = torch.zeros(16, K, T)
    q[..., 3] = 1.0  # all the shift on one token: a large reallocation, so the bound binds for both betas
    A_k, _ = gdpo_advantages(rewards, G)
    adv1, st1 = token_advantages(A_k, token_weights(q, mask, 0.4), mask)
    adv2, st2 = token_advantages(A_k, token_weights(q, mask, 0.8), mask)
    assert st1["s"] < 1 and st2["s"] < 1
    assert math.isclose(st1["s"], 2 * st2["s"], rel_tol=1e-5)
    assert torch.allclose(adv1, adv2, atol=1e-5)


def test_qbar_zero_gives_gdpo_exactly():
    g = torch.Generator().manual_seed(1)
    rewards = torch.randint(0, 2, (8, 3), generator=g).float()
    mask = torch.ones(8, 5)
    mask[0, 2:] = 0
    A_k, A = gdpo_advantages(rewards, 4)
    w = token_weights(torch.zeros(8, 3, 5), mask, 0.5)
    assert torch.equal(w, mask.unsqueeze(1).expand(-1, 3, -1))
    adv, stats = token_advantages(A_k, w, mask)
    assert torch.equal(adv, A.unsqueeze(1) * mask)
    assert stats["frac_qbar_zero"] == 1.0 and stats["s"] == 1.0


def test_zero_group_std_gives_zero_advantage_and_no_replay():
    rewards = torch.tensor([[1.0, 0.0], [1.0, 1.0], [1.0, 0.0], [1.0, 1.0]])  # reward 0 constant in the group
    A_k, _ = gdpo_advantages(rewards, 4)
    assert torch.equal(A_k[:, 0], torch.zeros(4))
    assert replay_needed(rewards, 4).tolist() == [[False, True]] * 4


def test_nan_rewards_are_not_replayed_and_unscorable_get_zero():
    rewards = torch.tensor([[1.0, float("nan")], [0.0, float("nan")], [float("nan"), float("nan")], [1.0, float("nan")]])
    need = replay_needed(rewards, 4)
    assert need[:, 1].sum() == 0 and need[2, 0] == False  # noqa: E712
    A_k, A = gdpo_advantages(rewards, 4)
    assert A[2] == 0
    adv, _ = token_advantages(A_k, token_weights(torch.rand(4, 2, 3), torch.ones(4, 3), 0.5), torch.ones(4, 3))
    assert torch.equal(adv[2], torch.zeros(3)) and torch.isfinite(adv).all()


def test_replay_rate_counts_only_the_pairs_that_exist():
    """Two groups of 2, two rewards; the second applies to the first group only (4 slots, 2 pairs)."""
    nan = float("nan")
    rewards = torch.tensor([[1.0, 1.0], [0.0, 0.0], [1.0, nan], [1.0, nan]])
    need = replay_needed(rewards, 2)  # reward 0 varies in group 1 only; reward 1 varies where it applies
    rate, applying, effective_k = replay_rate(need.sum(), (~torch.isnan(rewards)).sum(), 4)
    assert rate == pytest.approx(4 / 6) and applying == pytest.approx(1.5) and effective_k == pytest.approx(1.0)
    assert need.float().mean() == pytest.approx(0.5)  # dividing by every slot would say 4 of 8
    assert math.isnan(replay_rate(0, 0, 4)[0]) and replay_rate(0, 0, 4)[2] == 0.0


def test_group_normalize_and_grpo_values():
    r = torch.tensor([1.0, 0.0, 0.0, 1.0, 3.0, 3.0, 3.0, 3.0])
    out = group_normalize(r, 4)
    std = torch.tensor([1.0, 0, 0, 1]).std()
    assert torch.allclose(out[:4], (torch.tensor([1.0, 0, 0, 1]) - 0.5) / (std + 1e-4))
    assert torch.equal(out[4:], torch.zeros(4))
    # GRPO sums first: (format right, match wrong) and the reverse get the same advantage
    rewards = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0]])
    A = grpo_advantages(rewards, 4)
    assert A[0] == A[1] and A[2] > 0 > A[3]


def test_shuffled_keeps_each_responses_weights_multiset():
    g = torch.Generator().manual_seed(2)
    mask = torch.ones(4, 7)
    mask[1, 4:] = 0
    w = token_weights(torch.rand(4, 3, 7, generator=g), mask, 0.5)
    ws = shuffle_positions(w, mask, torch.Generator().manual_seed(3))
    assert not torch.equal(ws, w)
    for j in range(4):
        for k in range(3):
            assert torch.equal(ws[j, k].sort().values, w[j, k].sort().values)
    assert (ws[1, :, 4:] == 0).all()


def test_joint_with_identical_profiles_equals_per_reward():
    g = torch.Generator().manual_seed(4)
    rewards = torch.randint(0, 2, (8, 3), generator=g).float()
    mask = torch.ones(8, 6)
    profile = torch.rand(8, 1, 6, generator=g)
    A_k, _ = gdpo_advantages(rewards, 4)
    joint, _ = token_advantages(A_k, token_weights(profile, mask, 0.5), mask)
    per_reward, _ = token_advantages(A_k, token_weights(profile.expand(-1, 3, -1), mask, 0.5), mask)
    assert torch.allclose(joint, per_reward, atol=1e-6)


def test_uniform_weights_reproduce_gdpo():
    g = torch.Generator().manual_seed(5)
    rewards = torch.rand(12, 4, generator=g)
    mask = (torch.rand(12, 9, generator=g) > 0.3).float()
    mask[:, 0] = 1
    A_k, A = gdpo_advantages(rewards, 3)
    adv, stats = token_advantages(A_k, uniform_weights(mask, 4), mask)
    assert torch.equal(adv, A.unsqueeze(1) * mask)
    assert stats["moment_ratio"] == 0.0


def test_beta_warmup_smoothstep():
    assert beta_at(0) == 0.0
    assert beta_at(5, 0.5, 10) == pytest.approx(0.5 * (3 * 0.25 - 2 * 0.125))
    assert beta_at(10) == 0.5 and beta_at(1000, 0.25) == 0.25
    assert beta_at(3, 0.5, 0) == 0.5


def test_saw_weights():
    rewards = torch.tensor([[1.0, 0.5], [1.0, 0.4], [1.0, 0.6], [1.0, 0.5]])
    w = saw_weights(rewards)
    assert w[0] == 0 and w[1] == pytest.approx(2.0)
    assert torch.equal(saw_weights(torch.ones(4, 3)), torch.ones(3))


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("saw", [False, True])
def test_mrtpo_advantages_composes_the_schemes(method, saw):
    """The one composition the trainer calls equals the schemes written out from their parts, on a local slice."""
    from mrtpo.method.advantages import mrtpo_advantages

    g = torch.Generator().manual_seed(5)
    G, B, T = 4, 16, 7
    rewards = torch.randint(0, 2, (B, 3), generator=g).float()
    rewards[2, 1] = float("nan")
    mask = (torch.arange(T) < torch.randint(1, T + 1, (B, 1), generator=g)).float()
    q = torch.rand(B, 3 if method != "joint" else 1, T, generator=g)
    entropy = torch.rand(B, T, generator=g) * 2
    region = (torch.rand(B, 3, T, generator=g) < 0.4).float()
    local = slice(G, 3 * G)
    weights = torch.tensor([1.0, 0.5, 2.0])[: rewards.shape[1]]
    got, stats = mrtpo_advantages(rewards, G, method, local, reward_weights=weights, saw=saw, mask=mask[local],
                                  q=q[local], entropy=entropy[local], region=region[local], beta=0.6,
                                  generator=torch.Generator().manual_seed(3))
    if method == "grpo":
        assert torch.equal(got, grpo_advantages(rewards, G)[local]) and stats == {}
        return
    w_r = weights * saw_weights(rewards) if saw else weights
    A_k, A = gdpo_advantages(rewards, G, reward_weights=w_r)
    if method == "gdpo":
        assert torch.equal(got, A[local]) and stats == {}
        return
    if method == "gtpo":  # GTPO's entropy shaping of GDPO's advantage, its summed advantage S the outcome
        from mrtpo.method.advantages import summed_advantage
        from mrtpo.method.gtpo import gtpo_advantages

        want = gtpo_advantages(A[local], entropy[local], mask[local], G, outcome=summed_advantage(A_k)[local])
        assert torch.equal(got, want) and stats == {}
        return
    if method == "uniform":
        w = uniform_weights(mask[local], rewards.shape[1])
    elif method == "entropy":
        w = token_weights(entropy[local].unsqueeze(1), mask[local], 0.6)
    elif method == "region":
        w = token_weights(placement(region[local], mask[local]), mask[local], 0.6)
    else:
        w = token_weights(q[local], mask[local], 0.6)
        if method == "shuffled":
            w = shuffle_positions(w, mask[local], torch.Generator().manual_seed(3))
    from mrtpo.method.advantages import batch_stats, summed_advantage

    center, scale = batch_stats(summed_advantage(A_k))
    want, want_stats = token_advantages(A_k[local], w, mask[local], scale=scale, center=center)
    assert torch.equal(got, want) and stats == want_stats


@st.composite
def entropy_batches(draw):
    """Rewards and masks as ``batches``, with a non-negative entropy profile (some responses flat or all zero)."""
    rewards, q, mask, beta, G = draw(batches())
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    entropy = torch.rand(mask.shape, generator=g) * 3
    entropy[::3] = 0.7  # flat profiles
    entropy[1::5] = 0.0  # no uncertainty at all
    entropy[mask == 0] = float(draw(st.sampled_from([0.0, 5.0])))  # whatever padding holds is ignored
    return rewards, entropy, mask, beta, G


@settings(max_examples=200, deadline=None)
@given(entropy_batches(), st.booleans())
def test_entropy_arm_token_mean_is_gdpo_advantage(batch, bound):
    rewards, entropy, mask, beta, G = batch
    A_k, A = gdpo_advantages(rewards, G)
    w = entropy_weights(entropy, mask, beta)
    assert w.shape == (mask.shape[0], 1, mask.shape[1])
    assert (w[:, 0][mask == 1] >= 1 - beta - 1e-6).all() and (w[:, 0][mask == 0] == 0).all()
    adv, stats = token_advantages(A_k, w, mask, bound=bound)
    tol = 1e-4 * max(1.0, float(adv.abs().max()))
    assert torch.allclose(token_mean(adv, mask), A, atol=tol)
    assert 0.0 <= stats["s"] <= 1.0 and torch.isfinite(adv).all()


@settings(max_examples=200, deadline=None)
@given(entropy_batches())
def test_entropy_arm_second_moment_bounded(batch):
    rewards, entropy, mask, _, G = batch
    A_k, A = gdpo_advantages(rewards, G)
    adv, stats = token_advantages(A_k, entropy_weights(entropy, mask, 1.0), mask, bound=True)
    assert (adv**2).sum() <= 2 * (A**2 * mask.sum(-1)).sum() * (1 + 1e-4) + 1e-6
    if stats["moment_ratio"] > 1:
        assert stats["s"] < 1


def test_entropy_arm_follows_entropy_and_flat_entropy_gives_gdpo():
    g = torch.Generator().manual_seed(6)
    rewards = torch.randint(0, 2, (12, 3), generator=g).float()
    mask = torch.ones(12, 8)
    mask[2, 5:] = 0
    A_k, A = gdpo_advantages(rewards, 4)
    flat = torch.full((12, 8), 1.3)
    adv, stats = token_advantages(A_k, entropy_weights(flat, mask, 0.5), mask)
    assert torch.allclose(adv, A.unsqueeze(1) * mask, atol=1e-6) and stats["moment_ratio"] < 1e-10
    zero, _ = token_advantages(A_k, entropy_weights(torch.zeros(12, 8), mask, 0.5), mask)
    assert torch.equal(zero, A.unsqueeze(1) * mask)
    # one uncertain token: with beta = 1 and no bound, w = h / hbar puts the whole response's advantage there
    spike = torch.zeros(12, 8)
    spike[:, 3] = 2.0
    adv, _ = token_advantages(A_k, entropy_weights(spike, mask, 1.0), mask, bound=False)
    assert torch.allclose(adv[:, 3], A * mask.sum(-1), atol=1e-4)
    assert torch.allclose(adv[:, :3], torch.zeros(12, 3), atol=1e-6)
    # the same for every reward: equal to per-reward MRTPO weights with q_k = h for all k
    ent = torch.rand(12, 8, generator=g)
    shared, _ = token_advantages(A_k, entropy_weights(ent, mask, 0.5), mask)
    per_reward, _ = token_advantages(A_k, token_weights(ent.unsqueeze(1).expand(-1, 3, -1), mask, 0.5), mask)
    assert torch.allclose(shared, per_reward, atol=1e-6)


def region_batch(seed=8, B=12, K=3, T=9):
    """A ragged mask, relevance q, and a check-region indicator with the edge cases: a response whose reward k has
    no region, one whose region is the whole response (and spills into padding), and a pair with q = 0."""
    g = torch.Generator().manual_seed(seed)
    mask = (torch.arange(T) < torch.randint(2, T + 1, (B, 1), generator=g)).float()
    q = torch.rand(B, K, T, generator=g)
    q[3, 2] = 0.0  # not replayed
    region = (torch.rand(B, K, T, generator=g) < 0.3).float() * mask.unsqueeze(1)
    region[0, 0] = 0.0  # no region
    region[1, 1] = 1.0  # the whole response, padding too
    mask[2], region[2, 0] = 1.0, 0.0
    region[2, 0, 1:3] = 1.0  # two tokens of a full-length response
    return mask, q, region


def test_region_weights_keep_the_total_and_are_uniform_without_a_region():
    """``region``: w = (1 - beta) + beta m / mbar; mean_t w = 1; w = 1 where the region is empty or the whole
    response; otherwise inside the region w = (1 - beta) + beta / (region's token share) and outside 1 - beta."""
    mask, _, region = region_batch()
    w = token_weights(placement(region, mask), mask, 0.5)
    n = mask.sum(-1)
    assert torch.allclose((w * mask.unsqueeze(1)).sum(-1) / n.unsqueeze(1), torch.ones(12, 3), atol=1e-6)
    assert torch.equal(w[0, 0], mask[0]) and torch.equal(w[1, 1], mask[1])
    assert (w[mask.unsqueeze(1).expand_as(w) == 0] == 0).all()  # padding
    inside = region[2, 0] == 1
    assert torch.allclose(w[2, 0][inside], torch.tensor(0.5 + 0.5 * 9 / 2)) and torch.allclose(w[2, 0][~inside], torch.tensor(0.5))


def test_placement_dial_runs_from_mrtpo_to_the_region():
    """lambda = 0: MRTPO's weights; lambda = 1: exactly the region's; in between mean_t w = 1 and the check-region
    ratio of the placement is linear in lambda (both ends have mean 1 on every response)."""
    from mrtpo.method.regions import check_region_ratio, region_sums

    mask, q, region = region_batch()
    beta = 0.7
    mrtpo_w, region_w = token_weights(q, mask, beta), token_weights(placement(region, mask), mask, beta)
    assert torch.allclose(token_weights(placement(region, mask, q, 0.0), mask, beta), mrtpo_w, atol=1e-6)
    assert torch.equal(token_weights(placement(region, mask, q, 1.0), mask, beta), region_w)
    half = placement(region, mask, q, 0.5)
    assert torch.allclose((half * mask.unsqueeze(1)).sum(-1), mask.sum(-1, keepdim=True).expand(-1, 3), atol=1e-5)
    assert torch.allclose(token_weights(half, mask, beta), ((1 - beta) + beta * half) * mask.unsqueeze(1), atol=1e-6)
    ratio = {lam: check_region_ratio(region_sums(placement(region, mask, q, lam), region, mask)) for lam in (0, 0.5, 1)}
    assert ratio[1] > ratio[0] and ratio[0.5] == pytest.approx((ratio[0] + ratio[1]) / 2, rel=1e-5)


def test_blend_zero_is_plain_mrtpo_bit_for_bit():
    """``region_blend`` = 0 skips the blend: plain MRTPO's advantages (and behaviour fingerprint) are unchanged."""
    from mrtpo.method.advantages import mrtpo_advantages

    mask, q, region = region_batch()
    rewards = torch.randint(0, 2, (12, 3), generator=torch.Generator().manual_seed(1)).float()
    args = dict(mask=mask, q=q, beta=0.5)
    plain = mrtpo_advantages(rewards, 4, "mrtpo", slice(0, 12), **args)
    assert torch.equal(mrtpo_advantages(rewards, 4, "mrtpo", slice(0, 12), region=region, region_blend=0.0, **args)[0],
                       plain[0])
    blended = mrtpo_advantages(rewards, 4, "mrtpo", slice(0, 12), region=region, region_blend=1.0, **args)
    assert torch.equal(blended[0], mrtpo_advantages(rewards, 4, "region", slice(0, 12), region=region, **args)[0])
