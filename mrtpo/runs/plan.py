"""``dry_run``: the plan of a run (``mrtpo plan``) without loading any weights."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from mrtpo.method.advantages import DISTILLING
from mrtpo.models.registry import model_spec
from mrtpo.runs.launch import accelerate_args
from mrtpo.tasks import Task


def dry_run(task: Task, name: str = "tiny", method: str = "mrtpo", print_plan: bool = True, gpus: int = 1,
            gpu_memory_gib: float = 80.0, prompt_len: int = 512) -> dict:
    """The run plan without loading weights: model, data files (present with their sizes, or where to get them),
    steps, and the batch geometry on ``gpus`` GPUs of ``gpu_memory_gib`` each (ZeRO-3 when more than one):
    per-device micro-batch, gradient accumulation, generation batch and the estimated memory per GPU
    (``mrtpo.models.geometry``; ``prompt_len`` is the assumed prompt length in tokens)."""
    from mrtpo.models.geometry import ARCHITECTURES, GPU_MEMORY_SHARE, plan_batches
    from mrtpo.files.paths import data_root

    spec = model_spec(task, name)
    t = task
    arch = ARCHITECTURES.get(spec.checkpoint)
    base, *modifiers = method.split("+")  # OPSD holds a frozen teacher (its default ``opsd_teacher="initial"``)
    geometry = plan_batches(spec.prompts_per_step, spec.num_generations, gpus, arch=arch,
                            budget_gib=gpu_memory_gib * GPU_MEMORY_SHARE if arch else None, prompt_len=prompt_len,
                            completion_len=spec.max_completion_length, zero3=gpus > 1, kl=spec.kl_beta > 0,
                            frozen_teacher=base in DISTILLING or "opsd" in modifiers)
    plan = {
        "task": task.name,
        "method": method,
        "model": name,
        "checkpoint": spec.checkpoint,
        "data": t.data_description,
        "data_files": t.data_status(data_root()),
        "steps": spec.steps,
        "prompts_per_step": spec.prompts_per_step,
        "num_generations": spec.num_generations,
        "seeds": list(spec.seeds),
        **{k: v for k, v in asdict(spec).items() if k not in ("checkpoint", "steps", "prompts_per_step",
                                                              "num_generations", "seeds", "choices", "params")},
        "gpus": gpus,
        "launch": " ".join(["accelerate launch", *accelerate_args(gpus, True, Path("configs/accelerate")),
                            f"-m mrtpo.cli train --task {task.name} --model {name} --method {method}"]),
        "geometry": geometry.as_dict(),
        "memory_note": (f"estimate per GPU at {gpu_memory_gib:g} GiB x {GPU_MEMORY_SHARE}, prompts ~{prompt_len} tokens; "
                        "terms and assumptions: mrtpo.models.geometry.memory_estimate" if arch else
                        "no architecture entry for this checkpoint: no memory estimate"),
        "choices": list(spec.choices),
    }
    if print_plan:
        print(json.dumps(plan, indent=2))
    return plan
