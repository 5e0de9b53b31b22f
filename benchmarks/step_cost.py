"""Step cost of MRTPO's replay: median step time of mrtpo, joint and entropy (no replay, entropies read during
generation) relative to gdpo, and ours vs TRL's gdpo.

One process, one model, the same prompts and seed for every variant; the variants take their steps in
turn (round robin), so that machine load drifts affect all of them alike. Writes
``results/bench/step_cost.csv`` (one row per variant) with the machine it ran on.

    python benchmarks/step_cost.py [--task sql] [--steps 20] [--model PATH]
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import time
from pathlib import Path

import pandas as pd
import torch
from trl import GRPOConfig, GRPOTrainer

from mrtpo import MRTPOConfig, MRTPOTrainer
from mrtpo.paths import cache_root
from mrtpo.tasks import get_task

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = ("trl-gdpo", "gdpo", "entropy", "joint", "mrtpo")


def make_trainer(variant: str, model_path: str, task, dataset, out: Path, steps: int, args):
    common = dict(
        output_dir=str(out / variant), use_cpu=not torch.cuda.is_available(), bf16=False, report_to="none",
        num_generations=args.generations, per_device_train_batch_size=args.prompts * args.generations,
        max_completion_length=args.max_completion, learning_rate=3e-4, seed=0, max_steps=steps,
        gradient_checkpointing=False, disable_tqdm=True, logging_steps=1, save_strategy="no",
    )
    if variant == "trl-gdpo":
        return GRPOTrainer(model=model_path, reward_funcs=task.reward_funcs(), train_dataset=dataset,
                           args=GRPOConfig(multi_objective_aggregation="normalize_then_sum", **common))
    return MRTPOTrainer(model=model_path, reward_funcs=task.reward_funcs(), train_dataset=dataset,
                        z_blocks=task.z_blocks, args=MRTPOConfig(advantage=variant, beta_warmup_steps=0, **common))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="sql")
    parser.add_argument("--model", default=None, help="policy path (default: the task's tiny base)")
    parser.add_argument("--steps", type=int, default=20, help="timed steps per variant (after 2 warm-up steps)")
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--generations", type=int, default=8)
    parser.add_argument("--max-completion", type=int, default=96)
    parser.add_argument("--out", default=str(ROOT / "results" / "bench" / "step_cost.csv"))
    args = parser.parse_args()
    torch.set_num_threads(min(2, os.cpu_count() or 1))

    task = get_task(args.task)
    if args.model is None:
        from mrtpo.tiny import tiny_base

        args.model = str(tiny_base(args.task))
    dataset = task.synthetic(512, seed=0, split="train")
    work = cache_root() / "bench"
    warmup = 2
    trainers = {v: make_trainer(v, args.model, task, dataset, work, warmup + args.steps, args) for v in VARIANTS}
    loops = {}
    for v, t in trainers.items():
        t.create_optimizer_and_scheduler(num_training_steps=warmup + args.steps)
        t.current_gradient_accumulation_steps = 1  # set by Trainer.train(); the loss normaliser reads it
        t.model.train()
        loops[v] = iter(t.get_train_dataloader())
    times = {v: [] for v in VARIANTS}
    replay = {v: [] for v in VARIANTS}
    for step in range(warmup + args.steps):
        for v, t in trainers.items():  # round robin: each variant takes one step in turn
            batch = next(loops[v])
            start = time.perf_counter()
            t.training_step(t.model, batch, None)
            t.optimizer.step()
            t.optimizer.zero_grad()
            t.state.global_step += 1
            elapsed = time.perf_counter() - start
            if step >= warmup:
                times[v].append(elapsed)
                replay[v].append(getattr(t, "_step_time", {}).get("replay", 0.0))
        print(f"step {step}: " + ", ".join(f"{v} {times[v][-1] if times[v] else 0:.2f}s" for v in VARIANTS), flush=True)

    med = {v: statistics.median(times[v]) for v in VARIANTS}
    rows = []
    for v in VARIANTS:
        t = trainers[v]
        metrics = t._metrics["train"]
        rows.append({
            "variant": v,
            "task": args.task,
            "steps_timed": args.steps,
            "median_step_s": med[v],
            "ratio_to_gdpo": med[v] / med["gdpo"],
            "ratio_to_trl_gdpo": med[v] / med["trl-gdpo"],
            "replay_share": statistics.median(r / s for r, s in zip(replay[v], times[v])),
            "replayed_pair_frac": statistics.mean(metrics["mrtpo/frac_replayed"]) if metrics.get("mrtpo/frac_replayed") else 0.0,
            "effective_k": statistics.mean(metrics["mrtpo/effective_k"]) if metrics.get("mrtpo/effective_k") else 0.0,
            "num_rewards": len(task.reward_names),
            "prompts_x_generations": f"{args.prompts}x{args.generations}",
            "max_completion": args.max_completion,
            "peak_rss_mb_process": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else f"cpu ({os.cpu_count()} cores)",
            "machine": f"{platform.system()} {platform.machine()}, torch {torch.__version__}",
            "model": Path(args.model).name,
        })
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(out, index=False)
    print(pd.DataFrame(rows)[["variant", "median_step_s", "ratio_to_gdpo", "ratio_to_trl_gdpo", "replay_share", "effective_k"]])


if __name__ == "__main__":
    main()
