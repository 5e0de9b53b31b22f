"""MRTPOConfig / MRTPOTrainer: TRL's GRPO with reward-specific token-level advantages (PAPER.md §3).

The trainer only orchestrates: TRL generates and scores; this class replays each response under the
leave-one-out contexts with the sampling weights, turns the JS profiles into token weights and hands
(B, T) advantages to TRL's loss. Formulas live in ``advantages.py``, ``relevance.py`` and ``contexts.py``.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Callable

import torch
from trl import GRPOConfig, GRPOTrainer

from .advantages import (
    batch_stats,
    beta_at,
    gdpo_advantages,
    grpo_advantages,
    replay_needed,
    saw_weights,
    shuffle_positions,
    summed_advantage,
    token_advantages,
    token_weights,
    uniform_weights,
)
from .config import METHODS, REPLAYING
from .contexts import build_contexts
from .relevance import concentration, js_relevance


ZBlockFunc = Callable[..., list]
logger = logging.getLogger(__name__)


@dataclass
class MRTPOConfig(GRPOConfig):
    """GRPOConfig plus the settings of MRTPO. Every GRPOConfig field keeps its meaning.

    Note: TRL's ``beta`` is the KL coefficient; MRTPO's reallocation strength is ``mrtpo_beta``.
    """

    advantage: str = field(
        default="mrtpo",
        metadata={
            "help": "Advantage scheme: 'grpo' (normalise the summed reward), 'gdpo' (normalise each reward, sum, "
            "batch-scale), 'mrtpo' (per-reward leave-one-out replay, K_x extra forwards), 'joint' (one profile "
            "from P_all vs P_0, one extra forward), 'shuffled' (MRTPO weights at random positions), 'uniform' "
            "(MRTPO machinery with w = 1; trains exactly as gdpo)."
        },
    )
    saw: bool = field(
        default=False,
        metadata={"help": "Stack SAW: weight each reward's advantage by K * CV_k / sum CV over the batch."},
    )
    mrtpo_beta: float = field(
        default=0.5, metadata={"help": "Reallocation strength beta in w = (1 - beta) + beta q / qbar, in [0, 1]."}
    )
    beta_warmup_steps: int = field(
        default=10, metadata={"help": "Steps of the smoothstep warm-up of mrtpo_beta from 0 (0: no warm-up)."}
    )
    bound: bool = field(
        default=True, metadata={"help": "Apply the batch second-moment bound (Eq. 8) to the reallocation."}
    )
    replay_batch_size: int = field(
        default=16, metadata={"help": "Sequences per forward pass of the replay."}
    )
    replay_chunk_tokens: int = field(
        default=1024,
        metadata={"help": "Completion positions per chunk when projecting hidden states to JS (memory ~ chunk x V)."},
    )
    profile_samples: int = field(
        default=0,
        metadata={
            "help": "Responses per step whose per-token q profiles are appended to <output_dir>/profiles.jsonl "
            "(for the localisation notebooks); 0 saves none."
        },
    )
    multi_objective_aggregation: str = field(
        default="normalize_then_sum",
        metadata={"help": "TRL's own aggregation; set from `advantage` (GRPO sums first, all others are GDPO-based)."},
    )

    def __post_init__(self):
        if self.advantage not in METHODS:
            raise ValueError(f"advantage={self.advantage!r} is not one of {', '.join(METHODS)}")
        if not 0.0 <= self.mrtpo_beta <= 1.0:
            raise ValueError(f"mrtpo_beta={self.mrtpo_beta} must lie in [0, 1]")
        if self.replay_batch_size < 1 or self.replay_chunk_tokens < 1:
            raise ValueError("replay_batch_size and replay_chunk_tokens must be >= 1")
        # TRL's own advantages feed only its logs; keep them the scheme's response-level ones
        self.multi_objective_aggregation = "sum_then_normalize" if self.advantage == "grpo" else "normalize_then_sum"
        super().__post_init__()


class MRTPOTrainer(GRPOTrainer):
    """GRPOTrainer whose advantages follow ``args.advantage``; see MRTPOConfig.

    Extra argument ``z_blocks``: a function with a reward function's signature
    ``z_blocks(prompts, completions, completion_ids, **dataset_columns) -> list[dict[reward_name, str]]`` that
    returns, per sampled response, the text Z_k each verifier judges with (``Task.z_blocks``; a notebook can
    pass its own). Rewards without a Z block are never replayed (their weights stay 1).
    """

    _tag_names = ["trl", "grpo", "mrtpo"]

    def __init__(self, *args, z_blocks: ZBlockFunc | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        if self.args.advantage in REPLAYING and z_blocks is None:
            raise ValueError(f"advantage={self.args.advantage!r} replays with Z blocks: pass z_blocks=...")
        self.z_blocks = z_blocks
        self.replay_forwards = 0  # sequences replayed so far (tests count them)
        self._scored = None
        self._step_time = {}

    # -- TRL hooks -------------------------------------------------------------------------------------------
    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._scored = (inputs, prompts, completions, completion_ids_list, rewards)
        return rewards

    def _generate_and_score_completions(self, inputs):
        start = time.perf_counter()
        out = super()._generate_and_score_completions(inputs)
        generated = time.perf_counter()
        if self.model.training:  # evaluation keeps TRL's response-level advantages
            out["advantages"] = self._advantages(out)
        done = time.perf_counter()
        self._step_time["generation"] = self._step_time.get("generation", 0.0) + generated - start
        self._step_time["replay"] = self._step_time.get("replay", 0.0) + done - generated
        return out

    def training_step(self, model, inputs, num_items_in_batch):
        start = time.perf_counter()
        self._step_time = {}
        loss = super().training_step(model, inputs, num_items_in_batch)
        metrics = self._metrics["train"]
        skipped = not torch.isfinite(loss).all()
        if skipped:  # a broken forward (inf/NaN logits): drop this batch's gradient instead of training on it
            model.zero_grad(set_to_none=True)
            loss = torch.zeros_like(loss)
        metrics["mrtpo/skipped_nonfinite"].append(float(skipped))
        total = time.perf_counter() - start
        spent = self._step_time.get("generation", 0.0) + self._step_time.get("replay", 0.0)
        metrics["time/generation"].append(self._step_time.get("generation", 0.0))
        metrics["time/replay"].append(self._step_time.get("replay", 0.0))
        metrics["time/loss_backward"].append(total - spent)
        return loss

    # -- advantages ------------------------------------------------------------------------------------------
    def _advantages(self, out: dict) -> torch.Tensor:
        """Local advantages of this process: (B,) for grpo/gdpo, (B, T) for the token-level schemes."""
        args, metrics = self.args, self._metrics["train"]
        inputs, prompts, completions, completion_ids, rewards = self._scored
        G = self.num_generations
        B = len(prompts)
        local = slice(self.accelerator.process_index * B, (self.accelerator.process_index + 1) * B)
        need = replay_needed(rewards, G)
        self._log_reward_variance(rewards, need)
        if args.advantage == "grpo":
            return grpo_advantages(rewards, G)[local]
        weights = self.reward_weights.to(rewards.device)
        if args.saw:
            weights = weights * saw_weights(rewards)
        A_k, A = gdpo_advantages(rewards, G, reward_weights=weights)
        if args.advantage == "gdpo":
            return A[local]

        mask = out["completion_mask"].float()
        beta = beta_at(self.state.global_step, args.mrtpo_beta, args.beta_warmup_steps)
        metrics["mrtpo/beta_t"].append(beta)  # the warmed-up value beta_t, not the setting mrtpo_beta
        if args.advantage == "uniform":
            w = uniform_weights(mask, rewards.shape[1])
        else:
            forwards = self.replay_forwards
            q = self._relevance(out, need[local], joint=args.advantage == "joint")
            metrics["mrtpo/replay_forwards_per_response"].append((self.replay_forwards - forwards) / B)
            self._log_relevance(q, mask, need[local], rewards[local], out["completion_ids"])
            w = token_weights(q, mask, beta)
            if args.advantage == "shuffled":
                gen = torch.Generator().manual_seed(args.seed * 1_000_003 + self.state.global_step * 101 + local.start)
                w = shuffle_positions(w, mask, gen)
        center, scale = batch_stats(summed_advantage(A_k))
        adv, stats = token_advantages(
            A_k[local], w, mask, bound=args.bound, scale=scale, center=center,
            reduce_sum=lambda x: self.accelerator.reduce(x, reduction="sum"),
        )
        metrics["mrtpo/s"].append(stats["s"])
        metrics["mrtpo/moment_ratio"].append(stats["moment_ratio"])
        metrics["mrtpo/frac_qbar_zero"].append(stats["frac_qbar_zero"])
        return adv

    def _log_reward_variance(self, rewards: torch.Tensor, need: torch.Tensor) -> None:
        """Per reward: share of groups with non-zero std, share of response-reward pairs replayed; effective K."""
        metrics = self._metrics["train"]
        G = self.num_generations
        groups_vary = need.reshape(-1, G, need.shape[1]).any(dim=1).float()
        replays = self.args.advantage in REPLAYING
        for k, name in enumerate(self.reward_func_names):
            metrics[f"mrtpo/{name}/frac_groups_nonzero_std"].append(groups_vary[:, k].mean().item())
            if replays:
                metrics[f"mrtpo/{name}/frac_replayed"].append(need[:, k].float().mean().item())
        if replays:
            metrics["mrtpo/frac_replayed"].append(need.float().mean().item())
            metrics["mrtpo/effective_k"].append(need.float().sum(1).mean().item())

    def _log_relevance(self, q, mask, need, rewards, completion_ids) -> None:
        """Mean q and 80%-concentration per reward over replayed responses; optionally save profiles.

        A saved profile holds what the localisation notebooks need to map q onto the verifiers' check
        regions: the example's columns, the completion text and ids, the rewards and q per reward.
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
        n = min(self.args.profile_samples, q.shape[0])
        if n and self.accelerator.is_main_process:
            inputs, prompts, completions = self._scored[:3]
            path = os.path.join(self.args.output_dir, "profiles.jsonl")
            os.makedirs(self.args.output_dir, exist_ok=True)
            with open(path, "a") as f:
                for j in range(n):
                    T = int(mask[j].sum())
                    example = {key: v for key, v in inputs[j].items() if key not in ("completion", "completion_ids")}
                    f.write(json.dumps({
                        "step": self.state.global_step, "example": example, "completion": completions[j],
                        "completion_ids": completion_ids[j, :T].tolist(),
                        "rewards": dict(zip(self.reward_func_names, [None if r != r else float(r) for r in rewards[j].tolist()])),
                        "q": {name: q[j, k, :T].tolist() for k, name in enumerate(names)},
                    }, default=str) + "\n")

    # -- replay ----------------------------------------------------------------------------------------------
    @torch.no_grad()
    def _relevance(self, out: dict, need: torch.Tensor, joint: bool) -> torch.Tensor:
        """q (B, K, T) — or (B, 1, T) for joint replay — from leave-one-out replays with the sampling weights.

        Per response: P_all once, plus P_minus[k] for each reward k that needs a replay and has a Z block
        (joint: P_none once). Rows of the whole local batch are stacked and run ``replay_batch_size`` at a time.
        """
        inputs, prompts, completions, completion_ids, _ = self._scored
        B, T = out["completion_ids"].shape
        K = need.shape[1]
        q = torch.zeros(B, 1 if joint else K, T, device=out["completion_ids"].device)
        if not need.any():
            return q
        blocks = self._z_blocks(inputs, prompts, completions, completion_ids)
        names = self.reward_func_names
        ref_prompts, ref_rows = [], []  # P_all, one per replayed response
        cmp_prompts, cmp_rows = [], []  # (response j, profile index k, index of j's P_all row)
        for j in range(B):
            wanted = [k for k in range(K) if need[j, k] and names[k] in blocks[j]]
            if joint and need[j].any() and blocks[j]:
                wanted = [0]
            if not wanted:
                continue
            ctx = build_contexts(prompts[j], blocks[j])
            ref_rows.append(j)
            ref_prompts.append(ctx.all)
            for k in wanted:
                cmp_prompts.append(ctx.none if joint else ctx.minus[names[k]])
                cmp_rows.append((j, k, len(ref_rows) - 1))
        if not cmp_rows:
            return q
        model = self.accelerator.unwrap_model(self.model)
        was_training = model.training
        model.eval()
        try:
            h_ref = self._replay_hidden(model, ref_prompts, [out["completion_ids"][j] for j in ref_rows])
            head = model.get_output_embeddings()
            mask = out["completion_mask"]
            bs = self.args.replay_batch_size
            for start in range(0, len(cmp_rows), bs):
                rows = cmp_rows[start : start + bs]
                h_cmp = self._replay_hidden(model, cmp_prompts[start : start + bs], [out["completion_ids"][j] for j, _, _ in rows])
                h_all = h_ref[[r for _, _, r in rows]]
                js = js_relevance(
                    h_all, h_cmp, mask[[j for j, _, _ in rows]], lm_head=head.weight, lm_head_bias=head.bias,
                    temperature=self.temperature, chunk_tokens=self.args.replay_chunk_tokens,
                )
                for i, (j, k, _) in enumerate(rows):
                    q[j, k] = js[i]
            # inf/NaN logits make q NaN; such a response keeps uniform weights (its loss is then skipped)
            q = torch.nan_to_num(q, nan=0.0, posinf=0.0, neginf=0.0)
        finally:
            model.train(was_training)
        return q

    def _z_blocks(self, inputs, prompts, completions, completion_ids) -> list[dict[str, str]]:
        """The Z blocks of every response. A builder that raises (strange text, a broken user formulation) never
        crashes the step: the responses it fails on get no blocks (uniform weights), counted per step."""
        columns = {key: [x[key] for x in inputs] for key in inputs[0] if key not in ("prompt", "completion", "completion_ids")}
        try:
            return self.z_blocks(prompts=prompts, completions=completions, completion_ids=completion_ids, **columns)
        except Exception:  # retry one response at a time to keep every response the builder can handle
            blocks = []
            for j in range(len(prompts)):
                try:
                    blocks += self.z_blocks(prompts=prompts[j : j + 1], completions=completions[j : j + 1],
                                            completion_ids=completion_ids[j : j + 1],
                                            **{key: values[j : j + 1] for key, values in columns.items()})
                except Exception as exc:
                    logger.warning("z_blocks failed on response %d (%s: %s); it is not replayed", j, type(exc).__name__, exc)
                    blocks.append({})
            self._metrics["train"]["mrtpo/z_block_errors"].append(sum(1 for b in blocks if not b))
            return blocks

    def _replay_hidden(self, model, prompts: list, completion_ids: list[torch.Tensor]) -> torch.Tensor:
        """Final hidden states (N, T, H) that predict each completion token, for prompts ⊕ completion.

        Prompts are tokenised exactly as TRL tokenises training prompts, left-padded, and followed by the
        (right-padded) completion ids; only the decoder runs, the lm_head is applied later in chunks.
        """
        prompt_ids = self._tokenize_prompts(prompts)[0]
        device = completion_ids[0].device
        pad = self._tokenizer.pad_token_id
        P = max(len(p) for p in prompt_ids)
        T = completion_ids[0].shape[0]
        ids = torch.full((len(prompts), P + T), pad, dtype=torch.long, device=device)
        attn = torch.zeros_like(ids)
        for i, (p, c) in enumerate(zip(prompt_ids, completion_ids)):
            ids[i, P - len(p) : P] = torch.tensor(p, device=device)
            attn[i, P - len(p) : P] = 1
            ids[i, P:] = c
            attn[i, P:] = 1
        self.replay_forwards += len(prompts)
        hidden = []
        for start in range(0, len(prompts), self.args.replay_batch_size):
            sl = slice(start, start + self.args.replay_batch_size)
            h = model.get_decoder()(input_ids=ids[sl], attention_mask=attn[sl]).last_hidden_state
            hidden.append(h[:, P - 1 : P + T - 1])
        return torch.cat(hidden)
