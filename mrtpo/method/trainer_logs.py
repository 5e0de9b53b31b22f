"""The per-step logs of ``MRTPOTrainer`` (``TrainerLogs``, a mixin of the trainer): reward variance and replay rate,
relevance statistics and saved profiles, and the check-region ratio of region-placed weights. Each method appends
to TRL's ``self._metrics["train"]`` (averaged over the step and logged by TRL)."""

from __future__ import annotations

from typing import Any

import torch

from mrtpo.method.advantages import REPLAYING, replay_rate
from mrtpo.method.regions import check_region_ratio, region_sums
from mrtpo.method.relevance import concentration, median_correlations, specificity


class TrainerLogs:
    """Logging helpers of ``MRTPOTrainer``; they read its ``args``, ``_metrics``, ``num_generations``,
    ``reward_func_names``, ``state``, ``_scored`` and ``pending_profiles``."""

    def _log_reward_variance(self, rewards: torch.Tensor, need: torch.Tensor) -> None:
        """Per reward: share of groups with non-zero std and, when replaying, the replay rate over the pairs that
        exist (``advantages.replay_rate``, PAPER.md §7); over all rewards: that rate, rewards applying, effective K."""
        metrics = self._metrics["train"]
        G, B = self.num_generations, need.shape[0]
        groups_vary = need.reshape(-1, G, need.shape[1]).any(dim=1).float()
        applicable = ~torch.isnan(rewards)
        replays = self.args.advantage in REPLAYING
        for k, name in enumerate(self.reward_func_names):
            metrics[f"mrtpo/{name}/frac_groups_nonzero_std"].append(groups_vary[:, k].mean().item())
            if replays:
                metrics[f"mrtpo/{name}/frac_replayed"].append(replay_rate(need[:, k].sum(), applicable[:, k].sum(), B)[0])
        if replays:
            rate, applying, effective_k = replay_rate(need.sum(), applicable.sum(), B)
            metrics["mrtpo/frac_replayed"].append(rate)
            metrics["mrtpo/rewards_applying"].append(applying)
            metrics["mrtpo/effective_k"].append(effective_k)

    def _log_relevance(self, q, mask, need, rewards, completion_ids, entropy=None) -> None:
        """Mean q and 80%-concentration per reward over replayed responses, reward-specificity (median
        cross-reward correlation of q on a response, median correlation of q with the token entropy; issue 18);
        queue ``profile_samples`` profiles.

        A saved profile holds what the localisation notebooks need to map q onto the verifiers' check
        regions: the example's columns, the completion text and ids, the rewards, q per reward and the entropy.
        """
        metrics = self._metrics["train"]
        names = self.reward_func_names if q.shape[1] == len(self.reward_func_names) else ["joint"]
        for k, name in enumerate(names):
            rows = need[:, k] if q.shape[1] > 1 else need.any(1)
            if rows.any():
                qk, mk = q[rows, k], mask[rows]
                metrics[f"mrtpo/{name}/q_mean"].append(float((qk * mk).sum() / mk.sum().clamp_min(1)))
                conc = concentration(qk, mk)
                if not torch.isnan(conc).all():
                    metrics[f"mrtpo/{name}/concentration80"].append(float(torch.nanmean(conc)))
        profiled = (need if q.shape[1] > 1 else need.any(1, keepdim=True)) & (q * mask.unsqueeze(1)).sum(-1).gt(0)
        corr = median_correlations(specificity(q, mask, profiled, entropy), names)
        for key, value in corr.items():
            if isinstance(value, float) and value == value:  # medians only, and only defined ones (not NaN)
                figure, _, reward = key.partition("/")  # "entropy_corr/<reward>" is logged under the reward
                metrics[f"mrtpo/{reward}/{figure}" if reward else f"mrtpo/{figure}"].append(value)
        for j in range(min(self.args.profile_samples, q.shape[0])):
            T = int(mask[j].sum())
            example: dict[str, Any] = {key: v for key, v in self._scored.inputs[j].items()
                                       if key not in ("completion", "completion_ids")}
            self.pending_profiles.append({
                "step": self.state.global_step, "example": example, "completion": self._scored.completions[j],
                "completion_ids": completion_ids[j, :T].tolist(),
                "rewards": dict(zip(self.reward_func_names, [None if r != r else float(r) for r in rewards[j].tolist()])),
                "q": {name: q[j, k, :T].tolist() for k, name in enumerate(names)},
                **({"entropy": entropy[j, :T].tolist()} if entropy is not None else {}),
            })

    def _log_region_ratio(self, profile: torch.Tensor, region: torch.Tensor, mask: torch.Tensor,
                          need: torch.Tensor) -> None:
        """Check-region ratio (PAPER.md §7: ``regions.check_region_ratio``, a ratio of pooled shares) of the
        placement the weights use, per reward (``mrtpo/<reward>/region_ratio``) and over all rewards
        (``mrtpo/region_ratio``), over this process's pairs whose advantage varies (``need``: non-zero group std).

        ``profile`` (B, K, T) is ``advantages.placement``'s p = (w - (1 - beta)) / beta: the weights' reallocated
        part. w - (1 - beta), and its bounded form 1 + s (w - 1) - (1 - s beta), have p's ratio for every beta_t > 0
        (beta_t and the bound's s scale p by one factor over the batch); p's is defined at beta_t = 0 too. Since
        mean_t p = 1 on every response, the ratio is the mean of p over the pairs' region tokens. ``region`` (B, K, T):
        the check-region indicator m. A selection without region tokens logs nothing."""
        sums = {c: v.detach().cpu() for c, v in region_sums(profile, region, mask).items()}
        need = need.cpu()
        selections = {f"mrtpo/{name}/region_ratio": need & (torch.arange(need.shape[1]) == k)
                      for k, name in enumerate(self.reward_func_names)}
        selections["mrtpo/region_ratio"] = need
        for key, pairs in selections.items():
            ratio = check_region_ratio({c: v[pairs] for c, v in sums.items()})
            if ratio == ratio:  # not NaN
                self._metrics["train"][key].append(ratio)
