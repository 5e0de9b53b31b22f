"""MRTPOConfig / MRTPOTrainer: TRL's GRPO with reward-specific token-level advantages (PAPER.md §3).

The trainer only orchestrates one step: TRL generates and scores (``Scored``); the replay (``mrtpo.method.replay``)
gives each response's JS profiles q (the ``region`` method and the blend: the check regions, ``regions.
region_indicator``); ``advantages.mrtpo_advantages`` turns rewards and q into (B, T) advantages; TRL's loss trains
on them. Sampled q profiles are written by the ``ProfileWriter`` callback; the logs are ``trainer_logs.TrainerLogs``.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import dataclass, field
from typing import Callable, NamedTuple

import torch
from transformers import TrainerCallback
from trl import GRPOConfig, GRPOTrainer

from mrtpo.method.adapters import frozen_initial, initial_policy
from mrtpo.method.advantages import (DISTILLING, METHODS, READS_ENTROPY, REPLAYING, beta_at, mrtpo_advantages,
                                     placement, replay_needed)
from mrtpo.method.collective import finite_or_skipped
from mrtpo.method.distillation import DIVERGENCES, distillation_loss
from mrtpo.method.gtpo import GTPO_ALPHAS
from mrtpo.method.regions import region_indicator
from mrtpo.method.relevance import record_entropies
from mrtpo.method.replay import relevance, safe_z_blocks, teacher_hidden, whole_parameters
from mrtpo.method.trainer_logs import TrainerLogs


ZBlockFunc = Callable[..., list]


class Scored(NamedTuple):
    """What TRL scored in this generation batch (global rewards; the rest local to this process)."""

    inputs: list[dict]  # dataset rows
    prompts: list
    completions: list
    completion_ids: list  # token ids per response, unpadded
    rewards: torch.Tensor  # (B_global, K), NaN where a reward does not apply


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
            "(MRTPO machinery with w = 1; trains exactly as gdpo), 'entropy' (an entropy-weighted MRTPO placement "
            "control, not GTPO: MRTPO's within-response weights with q replaced by the sampling policy's token entropy, "
            "shared by all rewards; no replay), 'gtpo' (GTPO, Tan et al. 2025, arXiv 2508.04349: GDPO's advantage "
            "shaped per token by the entropy share at each position among the group's responses above (H) or below "
            "(1/H) their group, alpha_1 + alpha_2 omega; no replay), 'region' (positive control: "
            "MRTPO's weights with q replaced by the indicator of each verifier's read region, uniform where a reward "
            "has none or reads the whole response; no replay), 'opsd' (on-policy self-distillation: the loss is the "
            "divergence from the teacher, the policy shown every Z block; no RL term)."
        },
    )
    saw: bool = field(
        default=False,
        metadata={"help": "Stack SAW: weight each reward's advantage by K * CV_k / sum CV over the batch."},
    )
    opsd: bool = field(
        default=False,
        metadata={"help": "Add the OPSD distillation term, times opsd_coef, to the RL loss of any advantage scheme."},
    )
    opsd_coef: float = field(default=1.0, metadata={"help": "Weight of the OPSD term added to the RL loss (opsd=True)."})
    opsd_teacher: str = field(
        default="initial",
        metadata={"help": "OPSD teacher weights: 'initial' (frozen at the starting policy, the paper's setting; one "
                  "extra copy of the model) or 'current' (the policy that sampled the step's responses)."},
    )
    opsd_divergence: str = field(
        default="forward_topk",
        metadata={"help": "OPSD divergence: 'forward_topk' (KL(teacher || student) on the teacher's top opsd_top_k "
                  "tokens, renormalised; the paper's) or 'reverse' (full KL(student || teacher))."},
    )
    opsd_top_k: int = field(default=64, metadata={"help": "Teacher tokens kept by 'forward_topk' (the paper: 64)."})
    opsd_clip: float | None = field(
        default=None,
        metadata={"help": "Pointwise KL clipping: cap every vocabulary entry's KL term at this value (None: off)."},
    )
    mrtpo_beta: float = field(
        default=0.5, metadata={"help": "Reallocation strength beta in w = (1 - beta) + beta q / qbar, in [0, 1]."}
    )
    gtpo_alpha1: float = field(
        default=GTPO_ALPHAS[0],
        metadata={"help": "advantage='gtpo': alpha_1, the weight of the outcome reward (GTPO's Eq. 3 and 5; the "
                  "paper's 1.0). Only alpha_2 / alpha_1 matters: the weights are divided by alpha_1 + alpha_2."},
    )
    gtpo_alpha2: float = field(
        default=GTPO_ALPHAS[1],
        metadata={"help": "advantage='gtpo': alpha_2, the weight of the entropy-shaped reward (the paper's 0.1)."},
    )
    region_blend: float = field(
        default=0.0,
        metadata={"help": "Placement dial of advantage='mrtpo', lambda in [0, 1]: q replaced by (1 - lambda) q / qbar "
                  "+ lambda m / mbar, m the indicator of the verifier's read region (0: MRTPO; 1: the 'region' "
                  "weights; advantages.placement)."},
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
        if self.gtpo_alpha1 < 0 or self.gtpo_alpha2 < 0 or self.gtpo_alpha1 + self.gtpo_alpha2 <= 0:
            raise ValueError(f"gtpo_alpha1={self.gtpo_alpha1} and gtpo_alpha2={self.gtpo_alpha2} must be >= 0 with a "
                             "positive sum")
        if not 0.0 <= self.region_blend <= 1.0 or (self.region_blend > 0 and self.advantage != "mrtpo"):
            raise ValueError(f"region_blend={self.region_blend} must lie in [0, 1], and be 0 unless advantage='mrtpo'")
        if self.opsd_teacher not in ("initial", "current"):
            raise ValueError(f"opsd_teacher={self.opsd_teacher!r} is not valid; valid values: initial, current")
        if self.opsd_divergence not in DIVERGENCES or self.opsd_top_k < 1:
            raise ValueError(f"opsd_divergence must be one of {', '.join(DIVERGENCES)} and opsd_top_k >= 1")
        if self.replay_batch_size < 1 or self.replay_chunk_tokens < 1:
            raise ValueError("replay_batch_size and replay_chunk_tokens must be >= 1")
        # TRL's own advantages feed only its logs; keep them the scheme's response-level ones
        self.multi_objective_aggregation = "sum_then_normalize" if self.advantage == "grpo" else "normalize_then_sum"
        super().__post_init__()


class ProfileWriter(TrainerCallback):
    """Appends the step's sampled q profiles (``MRTPOTrainer.pending_profiles``) to ``<output_dir>/profiles.jsonl``
    at the end of each step, on the main process."""

    def __init__(self, trainer: "MRTPOTrainer"):
        self.trainer = trainer

    def on_step_end(self, args, state, control, **kwargs):
        records, self.trainer.pending_profiles = self.trainer.pending_profiles, []
        if records and state.is_world_process_zero:
            os.makedirs(args.output_dir, exist_ok=True)
            with open(os.path.join(args.output_dir, "profiles.jsonl"), "a") as f:
                f.writelines(json.dumps(r, default=str) + "\n" for r in records)


class MRTPOTrainer(TrainerLogs, GRPOTrainer):
    """GRPOTrainer whose advantages follow ``args.advantage``; see MRTPOConfig.

    Extra argument ``z_blocks``: a function with a reward function's signature
    ``z_blocks(prompts, completions, completion_ids, **dataset_columns) -> list[dict[reward_name, str]]`` that
    returns, per sampled response, the text Z_k each verifier judges with (``Task.z_blocks``; a notebook can
    pass its own). Rewards without a Z block are never replayed (their weights stay 1).
    Extra argument ``check_regions`` (read by ``region`` and by ``mrtpo`` with ``region_blend`` > 0): the same
    signature, returning per response ``{reward_name: [(start, end), ...]}``, the char spans of the completion text
    each verifier reads (``Task.read_regions``). Rewards without spans keep uniform weights.
    """

    _tag_names = ["trl", "grpo", "mrtpo"]

    def __init__(self, *args, z_blocks: ZBlockFunc | None = None, check_regions: ZBlockFunc | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        if self.args.advantage in REPLAYING and z_blocks is None:
            raise ValueError(f"advantage={self.args.advantage!r} replays with Z blocks: pass z_blocks=...")
        self.reads_regions = self.args.advantage == "region" or self.args.region_blend > 0
        if self.reads_regions and check_regions is None:
            raise ValueError("advantage='region' and region_blend > 0 place by the check regions: pass check_regions=...")
        if self.args.advantage in READS_ENTROPY and (self.use_vllm or self.use_transformers_continuous_batching or self.tools):
            raise ValueError(
                f"advantage={self.args.advantage!r} reads token entropies from the logits of transformers' generate; vLLM, "
                "continuous batching and tool calls do not expose them: turn those off for this arm"
            )
        self.distills = self.args.advantage in DISTILLING or self.args.opsd
        if self.distills and z_blocks is None:
            raise ValueError("OPSD's teacher reads every Z block: pass z_blocks=...")
        # the frozen teacher at the starting weights (the paper's OPSD setting), and under DeepSpeed its engine, kept
        # alive for the partitioned parameters' hooks: ``adapters.frozen_initial``
        self.teacher, self._teacher_engine = (frozen_initial(self.accelerator.unwrap_model(self.model), self)
                                              if self.distills and self.args.opsd_teacher == "initial" else (None, None))
        self.z_blocks, self.check_regions = z_blocks, check_regions
        self._generation_entropy: list[torch.Tensor] = []  # per generate call of this step: (B, positions)
        self.replay_forwards = 0  # sequences replayed so far (tests count them)
        self.pending_profiles: list[dict] = []  # written by ProfileWriter at the end of the step
        self._scored: Scored | None = None
        self._step_time, self._nonfinite = {}, False  # seconds per phase of this step; a skipped non-finite loss
        self.add_callback(ProfileWriter(self))

    # -- TRL hooks: score -> replay -> advantages -> TRL's loss ------------------------------------------------
    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._scored = Scored(inputs, prompts, completions, completion_ids_list, rewards)
        return rewards

    def _generate_single_turn(self, *args, **kwargs):
        """TRL's generation, recording the sampling distribution's entropy at every generated position.

        The entropy comes from the logits generation computes anyway (``relevance.record_entropies``): the loss
        pass also has them, but only after the advantages are needed, and only for one micro-batch. Recorded in
        training for the schemes that read it (``READS_ENTROPY``: the entropy arm and GTPO; the replaying ones log its
        correlation with q).
        """
        reads = self.args.advantage in READS_ENTROPY or self.args.advantage in REPLAYING
        if not (self.model.training and reads) or self.use_vllm or self.use_transformers_continuous_batching:
            return super()._generate_single_turn(*args, **kwargs)
        with record_entropies(self.accelerator.unwrap_model(self.model), self.temperature) as steps:
            result = super()._generate_single_turn(*args, **kwargs)
        if steps:
            self._generation_entropy.append(torch.stack(steps, 1))
        return result

    def _generate_and_score_completions(self, inputs):
        start = time.perf_counter()
        self._generation_entropy = []
        out = super()._generate_and_score_completions(inputs)
        generated = time.perf_counter()
        if self.model.training:  # evaluation keeps TRL's response-level advantages
            out["advantages"] = self._advantages(out)
            if self.distills:
                out["opsd_teacher_hidden"] = self._teacher_hidden(out)
        self._add_time("generation", generated - start)
        self._add_time("replay", time.perf_counter() - generated)
        return out

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        """TRL's loss; a non-finite one (a broken forward: inf/NaN logits) is replaced by a zero, so that its backward
        adds nothing and the gradients of earlier micro-batches of the step are kept (``collective.finite_or_skipped``:
        on many processes, all skip this micro-batch together when any has a non-finite loss)."""
        if self.args.advantage in DISTILLING:
            loss = self._distillation_loss(model, inputs)
        else:
            loss = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            if self.args.opsd and "opsd_teacher_hidden" in inputs:
                loss = loss + self.args.opsd_coef * self._distillation_loss(model, inputs)
        loss, self._nonfinite = finite_or_skipped(model, loss)
        return loss

    def training_step(self, model, inputs, num_items_in_batch):
        start = time.perf_counter()
        self._step_time = {}
        loss = super().training_step(model, inputs, num_items_in_batch)
        metrics = self._metrics["train"]
        metrics["mrtpo/skipped_nonfinite"].append(float(self._nonfinite))
        generation, replay = self._step_time.get("generation", 0.0), self._step_time.get("replay", 0.0)
        metrics["time/generation"].append(generation)
        metrics["time/replay"].append(replay)
        metrics["time/loss_backward"].append(time.perf_counter() - start - generation - replay)
        return loss

    def _add_time(self, phase: str, seconds: float) -> None:
        self._step_time[phase] = self._step_time.get(phase, 0.0) + seconds

    # -- advantages ------------------------------------------------------------------------------------------
    def _advantages(self, out: dict) -> torch.Tensor:
        """Local advantages of this process: (B,) for grpo/gdpo, (B, T) for the token-level schemes."""
        args, metrics = self.args, self._metrics["train"]
        rewards = self._scored.rewards
        B = len(self._scored.prompts)
        local = slice(self.accelerator.process_index * B, (self.accelerator.process_index + 1) * B)
        need = replay_needed(rewards, self.num_generations)
        self._log_reward_variance(rewards, need)
        mask = out["completion_mask"].float()
        beta = beta_at(self.state.global_step, args.mrtpo_beta, args.beta_warmup_steps)
        q, generator = None, None
        entropy = self._token_entropy(mask)
        if args.advantage in READS_ENTROPY and entropy is None:
            raise RuntimeError(f"advantage={args.advantage!r} found no generation entropies this step (a tool-call turn?)")
        scheme = "gdpo" if args.advantage in DISTILLING else args.advantage  # OPSD: GDPO's, for the logs only
        if args.advantage in REPLAYING:
            q = self._relevance(out, need[local], joint=args.advantage == "joint")
            self._log_relevance(q, mask, need[local], rewards[local], out["completion_ids"], entropy)
        if args.advantage == "shuffled":
            generator = torch.Generator().manual_seed(args.seed * 1_000_003 + self.state.global_step * 101 + local.start)
        region = self._region_indicator(mask) if self.reads_regions else None
        adv, stats = mrtpo_advantages(
            rewards, self.num_generations, scheme, local, reward_weights=self.reward_weights.to(rewards.device),
            saw=args.saw, mask=mask, q=q, entropy=entropy, region=region, region_blend=args.region_blend, beta=beta,
            gtpo_alphas=(args.gtpo_alpha1, args.gtpo_alpha2), bound=args.bound, generator=generator, reduce_sum=lambda x: self.accelerator.reduce(x, reduction="sum"),
        )
        if region is not None:  # the placement those weights used ('region': the blend's end, lambda = 1)
            blend = 1.0 if args.advantage == "region" else args.region_blend
            self._log_region_ratio(placement(region, mask, q, blend), region, mask, need[local])
        if stats:
            metrics["mrtpo/beta_t"].append(beta)  # the warmed-up value beta_t, not the setting mrtpo_beta
            metrics["mrtpo/s"].append(stats["s"])
            metrics["mrtpo/moment_ratio"].append(stats["moment_ratio"])
            metrics["mrtpo/frac_qbar_zero"].append(stats["frac_qbar_zero"])
        if entropy is not None:
            metrics["mrtpo/entropy_mean"].append(float((entropy * mask).sum() / mask.sum().clamp_min(1)))
        return adv

    def _token_entropy(self, mask: torch.Tensor) -> torch.Tensor | None:
        """(B, T) entropy of the distribution each completion token was sampled from (0 on padding); None when
        generation did not record it (a scheme that does not read it, vLLM) or recorded several turns (tool calls:
        completion positions then mix generated and inserted tokens)."""
        if len(self._generation_entropy) != 1:
            return None
        h = self._generation_entropy[0]
        T = mask.shape[1]
        if h.shape[1] < T:  # completions padded beyond the generated length (pad_to_multiple_of): masked anyway
            h = torch.nn.functional.pad(h, (0, T - h.shape[1]))
        return h[:, :T].to(mask.device) * mask

    def _region_indicator(self, mask: torch.Tensor) -> torch.Tensor:
        """(B, K, T) indicator of each reward's check region on this process's responses: ``check_regions`` (through
        ``replay.safe_z_blocks``: a response it fails on gets no region, i.e. uniform weights) mapped onto the tokens
        by ``regions.region_indicator``, as the localisation metric maps them."""
        sc = self._scored
        regions, errors = safe_z_blocks(self.check_regions, sc.inputs, sc.prompts, sc.completions, sc.completion_ids)
        if errors is not None:
            self._metrics["train"]["mrtpo/check_region_errors"].append(errors)
        names = self.reward_func_names
        return region_indicator(self._tokenizer, sc.completion_ids, regions, names, mask.shape[1]).to(mask.device)

    def _relevance(self, out: dict, need: torch.Tensor, joint: bool) -> torch.Tensor:
        """q of this process's responses (``mrtpo.method.replay.relevance``), with this trainer's tokenisation."""
        B = out["completion_ids"].shape[0]
        sc, blocks = self._scored, [{}] * B  # no blocks: q = 0, but on many processes relevance() joins the others'
        if need.any():  # the Z blocks are built only when some pair is replayed
            blocks, errors = safe_z_blocks(self.z_blocks, sc.inputs, sc.prompts, sc.completions, sc.completion_ids)
            if errors is not None:
                self._metrics["train"]["mrtpo/z_block_errors"].append(errors)
        with self.accelerator.autocast():  # the replay's forwards in the training forward's precision (bf16 on GPU)
            q, forwards = relevance(
                self.accelerator.unwrap_model(self.model), lambda prompts: self._tokenize_prompts(prompts)[0],
                self._tokenizer.pad_token_id, sc.prompts, blocks, out["completion_ids"], out["completion_mask"],
                need, self.reward_func_names, joint=joint, temperature=self.temperature,
                batch_size=self.args.replay_batch_size, chunk_tokens=self.args.replay_chunk_tokens,
                precision={"bf16": torch.bfloat16, "fp16": torch.float16}.get(self.accelerator.mixed_precision),
            )
        self.replay_forwards += forwards
        self._metrics["train"]["mrtpo/replay_forwards_per_response"].append(forwards / B)
        return q

    # -- OPSD ------------------------------------------------------------------------------------------------
    def _teacher_hidden(self, out: dict) -> torch.Tensor:
        """(B, T, H) no-grad hidden states of the teacher (``mrtpo.method.replay.teacher_hidden``: the replay's P_all
        forward) on this process's responses; the teacher's output head is kept for the loss."""
        sc = self._scored
        blocks, errors = safe_z_blocks(self.z_blocks, sc.inputs, sc.prompts, sc.completions, sc.completion_ids)
        if errors is not None:
            self._metrics["train"]["mrtpo/z_block_errors"].append(errors)
        teacher = self.teacher if self.teacher is not None else self.accelerator.unwrap_model(self.model)
        head = teacher.get_output_embeddings()
        # 'current': the head that scored the samples, even if the policy moves before this batch's loss (ZeRO-3: whole)
        with whole_parameters(head.weight, head.bias):
            self._teacher_head = (head.weight.detach().clone(), None if head.bias is None else head.bias.detach().clone())
        # the training forward's precision, as the replay (bf16 on a GPU); the initial teacher with LoRA: adapters off
        frozen = self.args.opsd_teacher == "initial"
        with self.accelerator.autocast(), initial_policy(teacher) if frozen else contextlib.nullcontext():
            hidden = teacher_hidden(
                teacher, lambda prompts: self._tokenize_prompts(prompts)[0], self._tokenizer.pad_token_id, sc.prompts,
                blocks, out["completion_ids"], batch_size=self.args.replay_batch_size,
            )
        self._metrics["train"]["opsd/teacher_forwards_per_response"].append(1.0)
        return hidden

    def _distillation_loss(self, model, inputs: dict) -> torch.Tensor:
        """OPSD's term (``mrtpo.method.distillation.distillation_loss``): the student (plain prompt) against the teacher
        (P_all) on the sampled responses, both at the sampling temperature; mean over valid tokens."""
        prompt_ids, completion_ids = inputs["prompt_ids"], inputs["completion_ids"]
        mask = inputs["completion_mask"]
        T = completion_ids.shape[1]
        logits = model(input_ids=torch.cat([prompt_ids, completion_ids], 1),
                       attention_mask=torch.cat([inputs["prompt_mask"], mask], 1), logits_to_keep=T + 1).logits
        student = logits[:, :-1] / self.temperature
        weight, bias = self._teacher_head
        hidden = inputs["opsd_teacher_hidden"]
        teacher = torch.nn.functional.linear(hidden.to(weight.dtype), weight, bias) / self.temperature
        args = self.args
        loss = distillation_loss(student, teacher, mask, args.opsd_divergence, args.opsd_top_k, args.opsd_clip)
        self._metrics["train"]["opsd/divergence"].append(float(loss.detach()))
        return loss / self.current_gradient_accumulation_steps
