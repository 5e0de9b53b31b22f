"""The ``gtpo`` arm (``mrtpo.method.gtpo.gtpo_advantages``): GTPO's entropy-shaped token reward (Tan et al. 2025,
arXiv 2508.04349, Eq. 3 and 5) on GDPO's advantages, checked against the equations written out literally."""

import pytest
import torch

from mrtpo.method.advantages import gdpo_advantages, mrtpo_advantages, summed_advantage
from mrtpo.method.gtpo import GTPO_ALPHAS, gtpo_advantages


def paper_token_rewards(outcome, entropy, mask, G, alpha1, alpha2, eps=1e-8):
    """Eq. 3 and Eq. 5 as printed, one (response, position) at a time: r_i = 1 on O+ (outcome > 0), -1 on O-;
    d_t / h_t the group's O+ / O- responses with a token at t. 0 outside O+ and O- and on padding."""
    B, T = entropy.shape
    out = torch.zeros(B, T, dtype=torch.float64)
    for g0 in range(0, B, G):
        group = range(g0, g0 + G)
        for t in range(T):
            plus = [k for k in group if outcome[k] > 0 and mask[k, t] > 0]
            minus = [k for k in group if outcome[k] < 0 and mask[k, t] > 0]
            for i in plus:  # Eq. 3
                out[i, t] = alpha1 * 1 + alpha2 * (float(entropy[i, t]) / sum(float(entropy[k, t]) for k in plus)) * len(plus)
            for j in minus:  # Eq. 5
                inv = lambda k: 1 / (float(entropy[k, t]) + eps)  # noqa: E731
                out[j, t] = alpha1 * (-1) + alpha2 * (inv(j) / sum(inv(k) for k in minus)) * len(minus) * (-1)
    return out


def test_hand_computed_example():
    """One group of 4, two positions, response 1 ends after one token (alpha_1 = 1, alpha_2 = 0.5).

    t = 0: O+ = {0, 1}, d = 2, H = (1, 3): omega = 2 * (1/4, 3/4) = (0.5, 1.5);
           O- = {2, 3}, h = 2, 1/H = (2, 0.5): omega = 2 * (2, 0.5) / 2.5 = (1.6, 0.4).
    t = 1: O+ = {0} (response 1 padded; its entropy 9 is ignored), omega = 1; O-: 1/H = (1, 0.25): (1.6, 0.4).
    adv = A (1 + 0.5 omega) / 1.5.
    """
    A = torch.tensor([2.0, 1.0, -1.0, -2.0])
    H = torch.tensor([[1.0, 2.0], [3.0, 9.0], [0.5, 1.0], [2.0, 4.0]])
    mask = torch.tensor([[1, 1], [1, 0], [1, 1], [1, 1]]).float()
    want = torch.tensor([[2 * 1.25 / 1.5, 2.0], [1 * 1.75 / 1.5, 0.0], [-1.2, -1.2], [-2 * 1.2 / 1.5, -2 * 1.2 / 1.5]])
    got = gtpo_advantages(A, H, mask, 4, alpha1=1.0, alpha2=0.5)
    assert torch.allclose(got, want, atol=1e-6)


@pytest.mark.parametrize("alphas", [GTPO_ALPHAS, (0.5, 0.5), (1.0, 0.0), (0.0, 1.0)])
def test_one_binary_reward_is_the_papers_shaped_reward(alphas):
    """With one binary reward every success has the same A > 0 and every failure the same A < 0: on each outcome
    the advantage is Eq. 3 / Eq. 5 (literal loops) times one positive constant, A / (alpha_1 + alpha_2)."""
    g = torch.Generator().manual_seed(0)
    G, B, T = 4, 16, 9
    rewards = torch.randint(0, 2, (B, 1), generator=g).float()
    rewards[:G] = torch.tensor([[1.0], [0.0], [0.0], [1.0]])  # a group with both outcomes for sure
    mask = (torch.arange(T) < torch.randint(1, T + 1, (B, 1), generator=g)).float()
    H = torch.rand(B, T, generator=g) * 2
    H[1, 2] = 0.0  # one confident token of a failure (Eq. 5 with Remark 2.1's eps)
    _, A = gdpo_advantages(rewards, G)
    got = gtpo_advantages(A, H, mask, G, *alphas).double()
    paper = paper_token_rewards(A, H, mask, G, *alphas)
    scale = (A.abs() / sum(alphas)).double().unsqueeze(1) * mask
    assert torch.allclose(got, scale * paper.abs() * A.sign().unsqueeze(1), rtol=1e-5, atol=1e-6)
    assert torch.allclose(got, scale * paper, rtol=1e-5, atol=1e-6)  # signs: Eq. 5 is negative on failures


def test_flat_entropy_gives_gdpo():
    """Entropy equal across a group's responses at each position (and all zero) gives omega = 1: GDPO exactly."""
    g = torch.Generator().manual_seed(1)
    G, B, T = 4, 12, 7
    rewards = torch.rand(B, 3, generator=g)
    rewards[:G, 0] = 0.5  # one reward without spread in the first group
    mask = (torch.arange(T) < torch.randint(1, T + 1, (B, 1), generator=g)).float()
    _, A = gdpo_advantages(rewards, G)
    for H in (torch.rand(1, T, generator=g).expand(B, T) * 3, torch.zeros(B, T), torch.full((B, T), 0.25)):
        got = gtpo_advantages(A, H, mask, G)
        assert torch.allclose(got, A.unsqueeze(1) * mask, rtol=1e-6, atol=1e-7)


def test_entropy_share_is_conserved_per_position():
    """Proposition 2.2's conservation: at each position the weights (alpha_1 + alpha_2 omega) / (alpha_1 + alpha_2)
    average 1 over the group's responses of one outcome that have a token there."""
    g = torch.Generator().manual_seed(2)
    G, B, T = 6, 18, 10
    A = torch.randn(B, generator=g)
    mask = (torch.arange(T) < torch.randint(1, T + 1, (B, 1), generator=g)).float()
    H = torch.rand(B, T, generator=g)
    w = (gtpo_advantages(A, H, mask, G, 1.0, 0.3) / A.unsqueeze(1)).reshape(-1, G, T)
    for cls in (A > 0, A < 0):
        active = (cls.unsqueeze(1) & (mask > 0)).reshape(-1, G, T)
        n = active.sum(1)
        total = (w * active).sum(1)
        assert torch.allclose(total[n > 0], n[n > 0].float(), atol=1e-5)


def test_direction_of_the_shaping():
    """Successes credit their uncertain tokens more; failures are blamed more at their confident tokens."""
    A = torch.tensor([1.0, 1.0, -1.0, -1.0])
    H = torch.tensor([[2.0], [0.5], [2.0], [0.5]])
    adv = gtpo_advantages(A, H, torch.ones(4, 1), 4)[:, 0]
    assert adv[0] > 1 > adv[1] > 0 and adv[3] < -1 < adv[2] < 0


def test_masks_and_unscorable_responses():
    """Padding gets 0 and neither counts in d_t / h_t nor reads its entropy; responses in neither outcome (S = 0:
    a group without spread; NaN: unscorable) keep their advantage on every valid token."""
    g = torch.Generator().manual_seed(3)
    G, B, T = 4, 8, 6
    A = torch.tensor([1.0, -0.5, 0.7, -1.2, 0.0, 0.0, float("nan"), 0.3])
    mask = (torch.arange(T) < torch.tensor([[6], [2], [4], [1], [3], [6], [5], [6]])).float()
    H = torch.rand(B, T, generator=g)
    got = gtpo_advantages(A, H, mask, G)
    assert (got[mask == 0] == 0).all() and torch.isfinite(got).all()
    noisy = torch.where(mask > 0, H, torch.full_like(H, 1e6))
    assert torch.equal(got, gtpo_advantages(A, noisy, mask, G))
    # group 2: responses 4, 5 (outcome 0) and 6 (NaN) are in no outcome; 7 is alone in O+: omega = 1
    assert torch.equal(got[4], torch.zeros(T)) and torch.equal(got[6], torch.zeros(T))
    assert torch.allclose(got[7], 0.3 * mask[7])
    # group 1, positions 4 and 5: only response 0 is left in O+ (d_t = 1: omega = 1), none in O- (1 and 3 ended)
    assert got[0, 4] == pytest.approx(1.0) and got[0, 5] == pytest.approx(1.0) and got[0, 3] != pytest.approx(1.0)


def test_rejects_split_groups_and_bad_alphas():
    with pytest.raises(ValueError, match="whole groups"):
        gtpo_advantages(torch.ones(6), torch.ones(6, 2), torch.ones(6, 2), 4)
    with pytest.raises(ValueError, match="alpha"):
        gtpo_advantages(torch.ones(4), torch.ones(4, 2), torch.ones(4, 2), 4, alpha1=0.0, alpha2=0.0)
    rewards = torch.randint(0, 2, (16, 2)).float()
    with pytest.raises(ValueError, match="whole groups"):
        mrtpo_advantages(rewards, 4, "gtpo", slice(2, 10), mask=torch.ones(8, 3), entropy=torch.ones(8, 3))


def test_dispatcher_on_a_local_slice():
    """``mrtpo_advantages(method="gtpo")``: GDPO's advantages of the global batch (reward weights and SAW
    included), shaped with the local entropy, GDPO's summed advantage S giving the outcomes."""
    from mrtpo.method.advantages import saw_weights

    g = torch.Generator().manual_seed(4)
    G, B, T = 4, 16, 5
    rewards = torch.randint(0, 2, (B, 3), generator=g).float()
    rewards[5, 2] = float("nan")
    mask = (torch.arange(T) < torch.randint(1, T + 1, (B, 1), generator=g)).float()
    H = torch.rand(B, T, generator=g)
    local = slice(G, 3 * G)
    weights = torch.tensor([1.0, 0.5, 2.0])
    got, stats = mrtpo_advantages(rewards, G, "gtpo", local, reward_weights=weights, saw=True, mask=mask[local],
                                  entropy=H[local], gtpo_alphas=(1.0, 0.2))
    A_k, A = gdpo_advantages(rewards, G, reward_weights=weights * saw_weights(rewards))
    want = gtpo_advantages(A[local], H[local], mask[local], G, 1.0, 0.2, outcome=summed_advantage(A_k)[local])
    assert torch.equal(got, want) and stats == {}
    # a flat entropy trains as gdpo: the token advantages are GDPO's response advantage on every valid token
    flat, _ = mrtpo_advantages(rewards, G, "gtpo", local, mask=mask[local], entropy=torch.ones(8, T))
    _, A = gdpo_advantages(rewards, G)
    assert torch.allclose(flat, A[local].unsqueeze(1) * mask[local], atol=1e-7)
