"""``mrtpo diagnose``: will MRTPO help on a task? Measured on a few hundred samples before training.

Samples G responses per held-out prompt from a policy at the training temperature (the groups RL would see),
scores them with the task's verifiers, replays them leave-one-out with the trainer's replay and reports, per
reward (definitions of PAPER.md §7):

* ``replay_rate``: share of response–reward pairs (where the reward applies) whose group std is non-zero, i.e.
  that MRTPO replays; ``effective_k``: replayed rewards per response;
* ``concentration80``: mean over replayed responses of the smallest share of tokens holding 80% of the shift
  (uniform: 0.8), and ``concentration_x = 0.8 / concentration80`` (Fig. 6's "3x");
* ``check_region_ratio``: (sum of q inside the verifier's read region / sum of q) / (tokens inside / tokens),
  pooled over responses;
* ``entropy_corr``: median correlation over tokens of q_k with the sampling policy's entropy h_t (issue 18);

and over all rewards: the same pooled figures, ``cross_reward_corr`` (median correlation of two rewards' q on
the same response: near 1 means the profiles are not reward-specific), the realised bound ``s`` (Eq. 8) at the
configured beta on batches of one training step, and a verdict line applying the reader's rule of thumb:
below 3x concentration and 2x check-region ratio, expect about half a point from MRTPO.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import torch

RULE_CONCENTRATION_X = 3.0
RULE_RATIO = 2.0
#: issue 18's acceptance line for a testbed: profiles are reward-specific when two rewards' q correlate at most this
SPECIFIC_CORR = 0.3


def pooled_ratio(q: torch.Tensor, inside: torch.Tensor, mask: torch.Tensor) -> float:
    """Check-region ratio over a set of profiles (PAPER.md §7): ``(sum q inside / sum q) / (n inside / n)``.

    q, inside, mask (N, T): relevance, whether each token lies in the verifier's read region, valid tokens.
    A ratio of pooled shares, not a mean of per-response ratios; NaN without shift or without region tokens.
    """
    m = mask.to(torch.float32)
    inside = inside.to(torch.float32) * m
    shift, tokens = float((q * m).sum()), float(m.sum())
    if shift <= 0 or tokens <= 0 or float(inside.sum()) <= 0:
        return math.nan
    return (float((q * inside).sum()) / shift) / (float(inside.sum()) / tokens)


def verdict(concentration_x: float, ratio: float, cross_reward_corr: float, entropy_corr: float) -> str:
    """One line: the reader's rule of thumb (PAPER.md §7) on the pooled figures, then reward-specificity."""
    below = concentration_x < RULE_CONCENTRATION_X and ratio < RULE_RATIO
    figures = f"concentration {concentration_x:.1f}x, check-region ratio {ratio:.2f}x"
    if below:
        head = (f"{figures}: below {RULE_CONCENTRATION_X:g}x and {RULE_RATIO:g}x, so by the reader's rule expect "
                "about half a point from MRTPO over GDPO")
    elif math.isnan(concentration_x) or math.isnan(ratio):
        head = f"{figures}: not enough replayed responses with a check region to apply the reader's rule"
    else:
        head = (f"{figures}: at or above the reader's thresholds ({RULE_CONCENTRATION_X:g}x concentration or "
                f"{RULE_RATIO:g}x ratio), so the rule does not cap MRTPO's gain")
    if math.isnan(cross_reward_corr):
        return head + "; reward-specificity unmeasured (fewer than two rewards replayed on a response)"
    specific = "reward-specific" if cross_reward_corr <= SPECIFIC_CORR else "not reward-specific"
    return (f"{head}; profiles {specific} (median cross-reward correlation {cross_reward_corr:.2f}, "
            f"target <= {SPECIFIC_CORR:g}; with entropy {entropy_corr:.2f})"
            + ("" if cross_reward_corr <= SPECIFIC_CORR else ": compare MRTPO with the entropy arm before crediting Z_k"))
