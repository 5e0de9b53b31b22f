"""Batch geometry at any scale: a step is ``prompts_per_step x num_generations`` completions over the whole job.

TRL's GRPO counts per device: an optimizer step consumes ``per_device_train_batch_size x num_processes x
gradient_accumulation_steps`` completions, generated ``generation_batch_size = per_device_train_batch_size x
num_processes x steps_per_generation`` at a time. ``plan_batches`` turns the paper's step (prompts x G, a property of
the method, not of the hardware) into those numbers for a number of processes and a per-device memory budget:

* completions per process per step ``C = prompts x G / N`` (N must divide prompts x G);
* the micro-batch ``m`` is the largest divisor of C whose estimated memory fits the budget (all of C when there
  is no budget, e.g. on CPU), and ``gradient_accumulation_steps = C / m``;
* ``steps_per_generation = gradient_accumulation_steps``: one generation round per optimizer step, so every
  completion is trained on exactly once, by the weights that sampled it (on-policy, as the paper's GRPO/GDPO).

The memory model (``memory_estimate``) is an estimate for planning, stated term by term; measured figures for
the replay come from ``benchmarks/gpu_check.py``.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from mrtpo.models.smollm2 import CHECKPOINT as SMOLLM2_CHECKPOINT

GIB = 2**30


class DoesNotFit(ValueError):
    """A run whose estimated peak memory per device exceeds the device's budget (``BatchPlan.require_fit``)."""

#: share of a GPU's memory the plan may use (the rest: CUDA context, allocator fragmentation, NCCL buffers)
GPU_MEMORY_SHARE = 0.9


@dataclass(frozen=True)
class Architecture:
    """The decoder's shape, as in the checkpoint's config.json."""

    params: float
    hidden: int
    layers: int
    intermediate: int
    kv_heads: int
    head_dim: int
    vocab: int

    @classmethod
    def from_config(cls, config: dict) -> "Architecture":
        """From a decoder's ``config.json`` (Qwen2/Qwen3/Llama field names); parameters counted from the shapes."""
        H, L, I, V = config["hidden_size"], config["num_hidden_layers"], config["intermediate_size"], config["vocab_size"]
        heads = config["num_attention_heads"]
        head_dim = config.get("head_dim") or H // heads
        kv = config.get("num_key_value_heads", heads)
        per_layer = H * head_dim * (heads + 2 * kv) + heads * head_dim * H + 3 * H * I + 2 * H
        embeddings = V * H * (1 if config.get("tie_word_embeddings", False) else 2)
        return cls(float(L * per_layer + embeddings + H), H, L, I, kv, head_dim, V)


#: the paper's checkpoints (values from their config.json files)
ARCHITECTURES: dict[str, Architecture] = {
    "Qwen/Qwen2.5-1.5B-Instruct": Architecture(1.54e9, 1536, 28, 8960, 2, 128, 151_936),
    "Qwen/Qwen2.5-3B-Instruct": Architecture(3.09e9, 2048, 36, 11008, 2, 128, 151_936),
    "Qwen/Qwen2.5-Coder-3B-Instruct": Architecture(3.09e9, 2048, 36, 11008, 2, 128, 151_936),
    "Qwen/Qwen3-4B": Architecture(4.02e9, 2560, 36, 9728, 8, 128, 151_936),
    "Qwen/Qwen2.5-7B-Instruct": Architecture(7.62e9, 3584, 28, 18944, 4, 128, 152_064),
    "Qwen/Qwen2.5-Coder-7B-Instruct": Architecture(7.62e9, 3584, 28, 18944, 4, 128, 152_064),
    # not a paper model: SmolLM2-135M-Instruct, the registry's ``smollm2``
    SMOLLM2_CHECKPOINT: Architecture(1.345e8, 576, 30, 1536, 3, 64, 49_152),
}


@dataclass(frozen=True)
class BatchPlan:
    """TRL's batch settings for one run, and what they mean per step."""

    prompts_per_step: int
    num_generations: int
    num_processes: int
    per_device_train_batch_size: int  # completions per device per forward/backward (micro-batch)
    gradient_accumulation_steps: int
    steps_per_generation: int
    generation_batch_size: int  # completions generated per round, over all processes
    memory_gib_per_device: float | None  # estimated peak at this micro-batch (None: no architecture given)
    memory_terms_gib: dict | None
    fits: bool | None = None  # whether the estimate is within the budget (None: no budget given)

    @property
    def completions_per_step(self) -> int:
        return self.per_device_train_batch_size * self.num_processes * self.gradient_accumulation_steps

    def trainer_args(self) -> dict:
        """The GRPOConfig fields this plan sets."""
        return {"per_device_train_batch_size": self.per_device_train_batch_size, "num_generations": self.num_generations,
                "gradient_accumulation_steps": self.gradient_accumulation_steps,
                "steps_per_generation": self.steps_per_generation}

    def as_dict(self) -> dict:
        return {**asdict(self), "completions_per_step": self.completions_per_step}

    def require_fit(self, model: str) -> None:
        """Refuse a plan whose estimate exceeds the budget even at micro-batch 1 (``fits`` False), with its numbers
        and the way out, before any weights load."""
        if self.fits is not False:
            return
        terms = ", ".join(f"{k} {v:g}" for k, v in (self.memory_terms_gib or {}).items())
        raise DoesNotFit(
            f"{model} does not fit: an estimated {self.memory_gib_per_device:g} GiB per device on {self.num_processes} "
            f"process(es) even at micro-batch 1 (GiB: {terms}; mrtpo.models.geometry). Train it on more GPUs: "
            "processes=8 in a notebook, or accelerate launch --config_file configs/accelerate/zero3_8gpu.yaml -m "
            "mrtpo.cli train ... (mrtpo plan --gpus 8 shows the plan)"
        )


def memory_estimate(arch: Architecture, micro: int, rollout_rows: int, prompt_len: int, completion_len: int,
                    num_processes: int = 1, zero3: bool = False, kl: bool = False, replay_chunk_tokens: int = 1024,
                    frozen_teacher: bool = False) -> dict[str, float]:
    """Estimated GPU memory per device, in GiB, by phase (full fine-tuning, bf16 autocast, AdamW, gradient
    checkpointing; S = prompt + completion tokens, Sc = completion tokens, rows = the process's completions of a step).

    * ``states`` (always held): 16 B/param (fp32 weights 4, fp32 gradients 4, Adam moments 8), divided by N under
      ZeRO-3; a frozen bf16 reference model adds 2 B/param when the KL term is on; OPSD's frozen teacher
      (``frozen_teacher``: a copy of the starting weights, kept in bf16 by the trainer) adds 2 B/param on every
      process;
    * ``generation``: the KV cache of the rows, rows x S x L x 2 x kv_heads x head_dim x 4 B (TRL generates outside
      autocast, with the fp32 weights), plus under ZeRO-3 the gathered fp32 weights (4 B/param; TRL's
      ``ds3_gather_for_generation``);
    * ``replay``: the P_all hidden states kept for the rows (rows x Sc x H x 4 B) and the JS chunk working set
      (chunk x V x 4 B x 8 temporaries);
    * ``training``: per sequence of the micro-batch, the residual stream kept at every layer boundary
      (L x S x H x 4 B), one layer's recomputed activations and gradients (S x (4H + 3I) x 4 B) and the completion
      logits with their gradient (Sc x V x 6 B; an upper bound: TRL 1.16 fuses the lm_head with the log-softmax).

    ``peak = states + max(generation, replay, training)``: the phases follow each other within a step.
    """
    S, Sc = prompt_len + completion_len, completion_len
    shard = num_processes if zero3 else 1
    terms = {
        "states": arch.params * (16 + (2 if kl else 0)) / shard + (arch.params * 2 if frozen_teacher else 0),
        "generation": rollout_rows * S * arch.layers * 2 * arch.kv_heads * arch.head_dim * 4 + (arch.params * 4 if zero3 else 0),
        "replay": rollout_rows * Sc * arch.hidden * 4 + replay_chunk_tokens * arch.vocab * 4 * 8,
        "training": micro * (arch.layers * S * arch.hidden * 4 + S * (4 * arch.hidden + 3 * arch.intermediate) * 4
                             + Sc * arch.vocab * 6),
    }
    terms = {k: v / GIB for k, v in terms.items()}
    terms["peak"] = terms["states"] + max(terms["generation"], terms["replay"], terms["training"])
    return terms


def plan_batches(prompts_per_step: int, num_generations: int, num_processes: int = 1,
                 arch: Architecture | None = None, budget_gib: float | None = None, prompt_len: int = 512,
                 completion_len: int = 1024, zero3: bool = False, kl: bool = False,
                 max_micro_batch: int | None = None, frozen_teacher: bool = False) -> BatchPlan:
    """The batch settings that give ``prompts_per_step x num_generations`` completions per optimizer step over
    ``num_processes`` processes (module docstring). With ``arch`` and ``budget_gib`` the micro-batch is the largest
    that fits the per-device budget; when even one sequence does not fit, the plan has micro-batch 1 and
    ``fits=False`` (the estimate says by how much). ``max_micro_batch`` caps the micro-batch (e.g. to bound CPU
    memory). Raises ValueError when N does not divide the step."""
    total = prompts_per_step * num_generations
    if prompts_per_step < 1 or num_generations < 1 or num_processes < 1:
        raise ValueError("prompts_per_step, num_generations and num_processes must be >= 1")
    if total % num_processes:
        raise ValueError(f"{num_processes} processes cannot split a step of {prompts_per_step} x {num_generations} = "
                         f"{total} completions evenly; use a number of processes that divides {total}")
    per_process = total // num_processes

    def estimate(micro: int) -> dict[str, float] | None:
        if arch is None:
            return None
        return memory_estimate(arch, micro, per_process, prompt_len, completion_len, num_processes, zero3, kl,
                               frozen_teacher=frozen_teacher)

    cap = min(per_process, max_micro_batch or per_process)
    divisors = [d for d in range(cap, 0, -1) if per_process % d == 0]
    micro, fits = divisors[0], None
    if arch is not None and budget_gib is not None:
        fitting = [d for d in divisors if estimate(d)["peak"] <= budget_gib]
        micro, fits = (fitting[0], True) if fitting else (1, False)
    accumulation = per_process // micro
    terms = estimate(micro)
    return BatchPlan(
        prompts_per_step=prompts_per_step, num_generations=num_generations, num_processes=num_processes,
        per_device_train_batch_size=micro, gradient_accumulation_steps=accumulation, steps_per_generation=accumulation,
        generation_batch_size=micro * num_processes * accumulation,
        memory_gib_per_device=round(terms["peak"], 1) if terms else None,
        memory_terms_gib={k: round(v, 2) for k, v in terms.items() if k != "peak"} if terms else None, fits=fits,
    )


def job_processes() -> int:
    """Processes of this job: ``WORLD_SIZE`` as torchrun and accelerate launch set it, else 1."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def job_rank() -> int:
    """This process's rank in the job (``RANK``), 0 when launched alone."""
    return int(os.environ.get("RANK", "0"))


def job_uses_zero3() -> bool:
    """Whether accelerate launched this job with DeepSpeed ZeRO-3 (its launcher exports the stage)."""
    return os.environ.get("ACCELERATE_DEEPSPEED_ZERO_STAGE") == "3"


def plan_for_job(prompts_per_step: int, num_generations: int, completion_len: int, model_dir: str | Path | None = None,
                 prompt_len: int = 512, kl: bool = False, frozen_teacher: bool = False) -> BatchPlan:
    """The plan of the running job: its processes, ZeRO-3 or not, and, on a GPU, the architecture in
    ``model_dir/config.json`` against ``GPU_MEMORY_SHARE`` of the device's memory. On CPU there is no budget: each
    process takes its whole share of the step in one micro-batch (how the tiny runs have always trained)."""
    import torch

    arch = budget = None
    if torch.cuda.is_available() and model_dir is not None and (Path(model_dir) / "config.json").exists():
        arch = Architecture.from_config(json.loads((Path(model_dir) / "config.json").read_text()))
        budget = torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory * GPU_MEMORY_SHARE / GIB
    return plan_batches(prompts_per_step, num_generations, job_processes(), arch=arch, budget_gib=budget,
                        prompt_len=prompt_len, completion_len=completion_len, zero3=job_uses_zero3(), kl=kl,
                        frozen_teacher=frozen_teacher)
