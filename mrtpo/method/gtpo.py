"""GTPO (Tan et al. 2025, Group Token Policy Optimization): token-level advantages shaped by the sampling policy's
entropy, compared across a group's responses at each position; the ``gtpo`` arm (``advantages.mrtpo_advantages``).
Pure tensor math."""

from __future__ import annotations

import torch

#: GTPO's coefficients alpha_1 (outcome reward) and alpha_2 (entropy-shaped reward), the paper's experimental values
GTPO_ALPHAS = (1.0, 0.1)


#: Remark 2.1 of the GTPO paper: a small constant added where an entropy is a denominator (the inverse 1 / H of Eq. 5)
GTPO_EPS = 1e-8


def gtpo_advantages(
    A: torch.Tensor,
    entropy: torch.Tensor,
    mask: torch.Tensor,
    num_generations: int,
    alpha1: float = GTPO_ALPHAS[0],
    alpha2: float = GTPO_ALPHAS[1],
    outcome: torch.Tensor | None = None,
    eps: float = GTPO_EPS,
) -> torch.Tensor:
    """GTPO's token-level entropy-shaped advantages (Tan et al. 2025, "GTPO and GRPO-S: Token and Sequence-Level
    Reward Shaping with Policy Entropy", arXiv 2508.04349, Group Token Policy Optimization), on GDPO's advantages.

    The paper, for one binary reward and a group of n successful responses O+ and m failed ones O-:

        Eq. 3 (o_i in O+):  r+_{i,t} = alpha_1 r_i + alpha_2 (H_{i,t} / sum_{k in O+_t} H_{k,t}) d_t
        Eq. 5 (o_j in O-):  r-_{j,t} = alpha_1 (-1) + alpha_2 ((1 / H_{j,t}) / sum_{k in O-_t} (1 / H_{k,t})) h_t (-1)

    H_{i,t} the entropy of the distribution token t of response i was sampled from (old policy, no gradient),
    O+_t / O-_t the successful / failed responses of the group still generating at position t, d_t = |O+_t|,
    h_t = |O-_t|: the entropy share is normalised per position across the group, so that at each t the shaped
    reward is only redistributed between the group's responses of one outcome (Proposition 2.2: with r_i = 1 and
    alpha_1 + alpha_2 = 1, sum_{i in O+_t} r+_{i,t} = d_t). Successful responses credit their high-entropy tokens
    more; failed ones are blamed more at their confident (low-entropy) tokens. Remark 2.1: ``eps`` is added to H
    in the inverse of Eq. 5. The paper then standardises the shaped token rewards into token advantages (Eq. 6)
    for its clipped token-level objective (Eq. 7); alpha_1 = 1, alpha_2 = 0.1 in its experiments. (Source: the
    paper's abstract, read directly, gives the weight ratio H_{i,t} / sum_{k=1}^n H_{k,t}; Eq. 3, 5, Remark 2.1,
    Proposition 2.2 and the alphas are as three independent reimplementations quote them with the paper's
    numbering, which agree; the paper's body text itself could not be read when this was written.)

    Adaptation to K rewards (this repository's arms share GDPO's per-reward normalisation): the response's outcome
    is GDPO's summed advantage S_j = sum_k A_k (``outcome``; group-centred, so O+ = {S_j > 0}, the responses above
    their group, O- = {S_j < 0}; S_j = 0, a group without spread or an unscorable response, is in neither and keeps
    GDPO's advantage), and its signed magnitude, GDPO's batch-standardised advantage A_j (``A``), takes the place
    of the paper's +-1 (r_i = 1 in O+, -1 in O-):

        omega_{j,t} = d_t H_{j,t} / sum_{k in O+_t} H_{k,t}                     (j in O+; Eq. 3's share;
                                                                                 1 where that sum is 0)
        omega_{j,t} = h_t (H_{j,t} + eps)^-1 / sum_{k in O-_t} (H_{k,t} + eps)^-1   (j in O-; Eq. 5's share)
        adv_{j,t}   = A_j (alpha_1 + alpha_2 omega_{j,t}) / (alpha_1 + alpha_2)   (0 on padding)

    With one binary reward every O+ response has the same A_j > 0 and every O- one the same A_j < 0, so on each
    outcome adv_{j,t} is the paper's r+_{j,t} (Eq. 3, r_j = 1) or r-_{j,t} (Eq. 5) times one positive constant.
    Eq. 6's standardisation is not reproduced (its exact text could not be verified here): the scale is GDPO's
    batch standardisation of S, and the division by alpha_1 + alpha_2 keeps the weights' mean over each outcome's
    responses at every position at 1 (Proposition 2.2), so only alpha_2 / alpha_1 matters, as under Eq. 6. A flat
    entropy (equal at each position across the group's responses of one outcome; all zero included) gives
    omega = 1 and exactly GDPO's advantage, the analogue of GTPO reducing to GRPO/DAPO's uniform token reward.

    Unlike the ``entropy`` arm (``entropy_weights``: within one response, across its positions), GTPO's weights
    compare responses at the same position. A (B,), entropy (B, T) >= 0, mask (B, T): whole groups of
    ``num_generations`` contiguous responses (TRL's layout); outcome (B,) defaults to A. Returns (B, T).
    """
    G = num_generations
    B, T = entropy.shape
    if B % G:
        raise ValueError(f"GTPO compares the responses of a group at each position: {B} responses are not whole groups of {G}")
    if alpha1 < 0 or alpha2 < 0 or alpha1 + alpha2 <= 0:
        raise ValueError(f"GTPO's alpha_1={alpha1} and alpha_2={alpha2} must be >= 0 with a positive sum")
    outcome = A if outcome is None else outcome
    valid = mask > 0
    H = torch.where(valid, entropy.to(torch.float32), torch.zeros((), dtype=torch.float32, device=entropy.device))
    pos = valid & (outcome > 0).unsqueeze(1)  # O+_t membership of each (response, position)
    neg = valid & (outcome < 0).unsqueeze(1)  # O-_t
    grouped = lambda x: x.reshape(B // G, G, T)  # noqa: E731
    # Eq. 3: share H_{i,t} / sum_{k in O+_t} H_{k,t} of d_t = |O+_t|; equal shares where every H in O+_t is 0
    d = grouped(pos).sum(1, keepdim=True).to(torch.float32)
    sum_h = grouped(H * pos).sum(1, keepdim=True)
    share_pos = torch.where(sum_h > 0, grouped(H) / torch.where(sum_h > 0, sum_h, torch.ones_like(sum_h)),
                            1.0 / d.clamp_min(1))
    omega_pos = (share_pos * d).reshape(B, T)
    # Eq. 5: share (1 / H_{j,t}) / sum_{k in O-_t} (1 / H_{k,t}) of h_t = |O-_t|, eps added to H (Remark 2.1)
    inv = torch.where(neg, 1.0 / (H + eps), torch.zeros_like(H))
    h = grouped(neg).sum(1, keepdim=True).to(torch.float32)
    sum_inv = grouped(inv).sum(1, keepdim=True)
    omega_neg = (grouped(inv) / torch.where(sum_inv > 0, sum_inv, torch.ones_like(sum_inv)) * h).reshape(B, T)
    omega = torch.where(pos, omega_pos, torch.where(neg, omega_neg, torch.ones_like(H)))
    w = (alpha1 + alpha2 * omega) / (alpha1 + alpha2)
    return torch.nan_to_num(A.to(torch.float32), nan=0.0).unsqueeze(1) * w * valid.to(torch.float32)
