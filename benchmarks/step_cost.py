"""Step cost of MRTPO's replay against its limit (issue 13), per task, with the arms interleaved.

Per task (the default tiny base of each task that is built; a missing base is skipped, never built here) and per
arm (``trl-gdpo``: TRL's own GRPOTrainer with ``normalize_then_sum``; ``gdpo``; ``entropy``; ``joint``; ``mrtpo``),
one trainer each, with the runner's tiny configuration (prompts x generations, completion length, learning rate,
temperature) and the same seed; the arms take their steps in turn (round robin), so that load drifts hit them
alike, and each from the same random state (while two arms' policies are equal, they sample the same completions).
Each step is split into

* generation: TRL's sampling and everything of ``_generate_and_score_completions`` that is not below;
* rewards: the reward functions (``_calculate_rewards``);
* replay: what MRTPO adds after TRL's scoring (Z blocks, the leave-one-out replay, the advantages);
* loss: the loss forward and backward (the rest of ``training_step``);
* other: the optimizer step and what else the step takes.

**Limit.** Replay cannot cost less than one no-grad forward per replayed row over prompt + Z + response. After
each step of a replaying arm, one no-grad forward over the step's B rows under P_all (``forward_seconds``: packed
by length as the replay packs them, logits at the valid completion positions) is timed: ``forward_s``. With
``forwards_per_response`` = replayed rows / B (= K_eff + the share of responses with any replayed reward, at most
K_eff + 1), ``limit_s = forwards_per_response x forward_s`` and ``replay_to_limit = replay_s / limit_s``
(median over steps; goal <= 1.2). ``ratio_to_trl_gdpo`` of ``gdpo``: goal <= 1.02; since wall time moves with
whatever else the machine runs, ``cpu_ratio_to_trl_gdpo`` pairs the two trainers' CPU seconds step by step, with
its 95% interval and whether both sampled the same completions (:func:`paired_cpu_ratio`).

**Loss pass.** Forward and backward cost about three forwards: after each step, one no-grad forward over the
step's rows (prompt + response, packed the same way) is timed (``plain_forward_s``), ``loss_limit_s`` = 3 x that
and ``loss_to_limit`` = loss_s / loss_limit_s.

Writes ``results/bench/step_cost.csv`` (one row per task, model and arm; a measurement replaces the earlier rows of
its model and tasks) with the machine it ran on, the threads and what else ran meanwhile (``--load``).

    python benchmarks/step_cost.py [--tasks sql tool if] [--model tiny|smollm2] [--variants ...] [--steps 6] [--threads 1]
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
from mrtpo.files.paths import cache_root
from mrtpo.method.contexts import append_section
from mrtpo.method.replay import replay_hidden, safe_z_blocks
from mrtpo.models.tiny import tiny_path
from mrtpo.runs.config import resolve
from mrtpo.runs.runner import base_path, lora_config, train_data
from mrtpo.tasks import get_task

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = ("trl-gdpo", "gdpo", "entropy", "joint", "mrtpo")
PHASES = ("generation", "rewards", "replay", "loss", "other")


def make_trainer(variant: str, task_name: str, out: Path, steps: int, model_name: str = "tiny", lora_rank: int = 0):
    cfg = resolve(task_name, "gdpo" if variant == "trl-gdpo" else variant, model_name, lora_rank=lora_rank or None)
    lora = {"peft_config": lora_config(cfg)} if lora_rank else {}  # the runner's adapters (every linear layer)
    task, model = cfg.task_def, str(base_path(cfg))
    common = dict(
        output_dir=str(out / task_name / variant), use_cpu=not torch.cuda.is_available(), bf16=False, report_to="none",
        num_generations=cfg.num_generations, per_device_train_batch_size=cfg.prompts_per_step * cfg.num_generations,
        max_completion_length=cfg.max_completion_length, learning_rate=cfg.learning_rate, temperature=cfg.temperature,
        seed=0, max_steps=steps, gradient_checkpointing=False, disable_tqdm=True, logging_steps=1, save_strategy="no",
    )
    if variant == "trl-gdpo":
        return GRPOTrainer(model=model, reward_funcs=task.reward_funcs(), train_dataset=train_data(cfg),
                           args=GRPOConfig(multi_objective_aggregation="normalize_then_sum", **common), **lora)
    return MRTPOTrainer(model=model, reward_funcs=task.reward_funcs(), train_dataset=train_data(cfg),
                        z_blocks=task.z_blocks, args=MRTPOConfig(advantage=variant, beta_warmup_steps=0, **common), **lora)


def timed(trainer, name: str, clock: dict) -> None:
    """Wrap ``trainer.<name>`` so that its seconds add to ``clock[name]``."""
    original = getattr(trainer, name)

    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            clock[f"{name}_output"] = original(*args, **kwargs)
            return clock[f"{name}_output"]
        finally:
            clock[name] = clock.get(name, 0.0) + time.perf_counter() - start

    setattr(trainer, name, wrapper)


@torch.no_grad()
def forward_seconds(trainer, with_z: bool = True) -> float:
    """One no-grad forward over the step's rows under P_all (prompt + all Z blocks + response; ``with_z=False``:
    prompt + response, what the loss pass reads), packed as the replay packs its rows (``replay_hidden``: longest
    first, ``replay_batch_size`` rows a batch), then the lm_head at every valid completion position: the cost of
    one replayed row per response, without the JS and the bookkeeping."""
    sc = trainer._scored
    if with_z:
        blocks, _ = safe_z_blocks(trainer.z_blocks, sc.inputs, sc.prompts, sc.completions, sc.completion_ids)
        prompts = trainer._tokenize_prompts([append_section(p, b) for p, b in zip(sc.prompts, blocks)])[0]
    else:
        prompts = trainer._tokenize_prompts(sc.prompts)[0]
    model = trainer.accelerator.unwrap_model(trainer.model)
    completions = [torch.tensor(list(c), dtype=torch.long, device=model.device) for c in sc.completion_ids]
    lengths = torch.tensor([len(c) for c in completions], device=model.device)
    model.eval()
    try:
        start = time.perf_counter()
        h = replay_hidden(model, prompts, completions, trainer._tokenizer.pad_token_id, trainer.args.replay_batch_size)
        model.get_output_embeddings()(h[torch.arange(h.shape[1], device=h.device) < lengths[:, None]])
        return time.perf_counter() - start
    finally:
        model.train()


def paired_cpu_ratio(arm: list[dict], trl: list[dict]) -> dict:
    """An arm's CPU time per step over TRL's GDPO, paired by step (both trainers in this process, so other jobs on
    the machine take wall time from both alike and CPU time from neither): the geometric mean of the per-step ratios
    with its 95% t interval (``cpu_ratio_to_trl_gdpo``, ``_lo``, ``_hi``), and the share of steps on which the two
    trainers sampled the very same completions (``same_completions``: the same work, so the ratio is the
    machinery's alone)."""
    import math

    from mrtpo.analysis.significance import t_quantile

    logs = [math.log(a["cpu_s"] / b["cpu_s"]) for a, b in zip(arm, trl)]
    mean, n = statistics.fmean(logs), len(logs)
    half = t_quantile(0.975, n - 1) * statistics.stdev(logs) / math.sqrt(n) if n > 1 else float("nan")
    same = sum(a["completions"] == b["completions"] for a, b in zip(arm, trl)) / n
    return {"cpu_ratio_to_trl_gdpo": math.exp(mean), "cpu_ratio_lo": math.exp(mean - half),
            "cpu_ratio_hi": math.exp(mean + half), "same_completions": same}


def bench_task(task_name: str, steps: int, warmup: int, work: Path, model_name: str = "tiny",
               variants=VARIANTS, threads: int = 1, lora_rank: int = 0) -> list[dict]:
    trainers = {v: make_trainer(v, task_name, work / model_name, warmup + steps, model_name, lora_rank) for v in variants}
    clocks, loops = {v: {} for v in variants}, {}
    for v, t in trainers.items():
        t.create_optimizer_and_scheduler(num_training_steps=warmup + steps)
        t.current_gradient_accumulation_steps = 1  # set by Trainer.train(); the loss normaliser reads it
        t.model.train()
        loops[v] = iter(t.get_train_dataloader())
        timed(t, "_generate_and_score_completions", clocks[v])
        timed(t, "_calculate_rewards", clocks[v])
    log = {v: [] for v in variants}
    for step in range(warmup + steps):
        for v, t in trainers.items():  # round robin: each arm takes one step in turn
            batch = next(loops[v])
            clocks[v].clear()
            torch.manual_seed(step)  # every arm samples its step from the same random state: the same work where it can
            start, cpu = time.perf_counter(), time.process_time()
            t.training_step(t.model, batch, None)
            trained = time.perf_counter()
            t.optimizer.step()
            t.optimizer.zero_grad()
            t.state.global_step += 1
            end, cpu = time.perf_counter(), time.process_time() - cpu
            score = clocks[v]["_generate_and_score_completions"]
            rewards = clocks[v]["_calculate_rewards"]
            replay = getattr(t, "_step_time", {}).get("replay", 0.0)
            row = {"step_s": end - start, "generation": score - rewards - replay, "rewards": rewards, "replay": replay,
                   "loss": trained - start - score, "other": end - trained, "cpu_s": cpu,
                   "completions": clocks[v]["_generate_and_score_completions_output"]["completion_ids"].tolist()}
            metrics = t._metrics["train"]
            if v != "trl-gdpo":  # TRL's trainer keeps no scored batch to replay the forward over
                row["plain_forward_s"] = forward_seconds(t, with_z=False)
                row["loss_limit_s"] = 3 * row["plain_forward_s"]  # forward + backward: about three forwards
                row["loss_to_limit"] = row["loss"] / row["loss_limit_s"]
            if v in ("joint", "mrtpo"):
                row["forward_s"] = forward_seconds(t)
                row["forwards_per_response"] = metrics["mrtpo/replay_forwards_per_response"][-1]
                row["effective_k"] = metrics["mrtpo/effective_k"][-1]
                row["limit_s"] = row["forwards_per_response"] * row["forward_s"]
                row["replay_to_limit"] = replay / row["limit_s"] if row["limit_s"] > 0 else float("nan")
            if step >= warmup:
                log[v].append(row)
        print(f"{task_name} step {step}: " + ", ".join(f"{v} {log[v][-1]['step_s'] if log[v] else 0:.2f}s" for v in variants),
              flush=True)
    med = {v: statistics.median(r["step_s"] for r in log[v]) for v in variants}
    to_trl = {v: paired_cpu_ratio(log[v], log["trl-gdpo"]) for v in variants if "trl-gdpo" in log}
    cfg = resolve(task_name, "mrtpo", model_name)
    rows = []
    for v in variants:
        def median(key):
            values = [r[key] for r in log[v] if key in r and r[key] == r[key]]
            return statistics.median(values) if values else float("nan")

        rows.append({
            "task": task_name, "variant": v, "steps_timed": steps, "median_step_s": med[v],
            **{f"{phase}_s": median(phase) for phase in PHASES},
            "ratio_to_gdpo": med[v] / med.get("gdpo", float("nan")),
            "ratio_to_trl_gdpo": med[v] / med.get("trl-gdpo", float("nan")),
            **to_trl.get(v, {}),
            "replay_share": median("replay") / med[v],
            "effective_k": median("effective_k"), "forwards_per_response": median("forwards_per_response"),
            "forward_s": median("forward_s"), "limit_s": median("limit_s"), "replay_to_limit": median("replay_to_limit"),
            "plain_forward_s": median("plain_forward_s"), "loss_limit_s": median("loss_limit_s"),
            "loss_to_limit": median("loss_to_limit"),
            "num_rewards": len(get_task(task_name).reward_names),
            "prompts_x_generations": f"{cfg.prompts_per_step}x{cfg.num_generations}",
            "max_completion": cfg.max_completion_length,
            "device": torch.cuda.get_device_name(0) if torch.cuda.is_available()
            else f"cpu ({os.cpu_count()} cores, {threads} thread{'s' if threads > 1 else ''})",
            "machine": f"{platform.system()} {platform.machine()}, {torch.backends.cpu.get_cpu_capability()}, "
                       f"torch {torch.__version__}",
            "model": base_path(cfg).name, "lora_rank": lora_rank,
        })
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=["sql", "tool", "if"])
    parser.add_argument("--model", default="tiny", help="a registry name: tiny (default) or smollm2 (converted when absent)")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    parser.add_argument("--steps", type=int, default=6, help="timed steps per arm (after one warm-up step)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--lora-rank", type=int, default=0, help="LoRA adapters of this rank (the runner's "
                        "`--set lora_rank=r`: every linear layer, alpha 2r) instead of full fine-tuning; 0: full")
    parser.add_argument("--load", default="none", help="what else ran on the machine meanwhile (stated in the file)")
    parser.add_argument("--out", default=str(ROOT / "results" / "bench" / "step_cost.csv"))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    rows = []
    for task_name in args.tasks:
        if args.model == "tiny" and not (tiny_path(get_task(task_name)) / "mrtpo_recipe.json").exists():
            print(f"{task_name}: its tiny base is not built ({tiny_path(get_task(task_name)).name}); skipped "
                  f"(build it with `mrtpo train --task {task_name}` or benchmarks/tiny_models.py)", flush=True)
            continue
        rows += bench_task(task_name, args.steps, 1, cache_root() / "bench", args.model, args.variants, args.threads,
                           args.lora_rank)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    df = pd.DataFrame(rows).assign(peak_rss_mb_process=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                                   load=args.load)
    if out.exists():  # a measurement replaces the earlier rows of its model, tasks and LoRA rank, and keeps the others
        old = pd.read_csv(out)
        rank = old["lora_rank"].fillna(0) if "lora_rank" in old else 0
        same = (old["model"].isin(df["model"]) & old["task"].isin(df["task"]) & old["variant"].isin(df["variant"])
                & (rank == args.lora_rank))
        df = pd.concat([old[~same], df], ignore_index=True)
    df.to_csv(out, index=False)
    print(df[["task", "model", "variant", "median_step_s", "ratio_to_gdpo", "ratio_to_trl_gdpo", "replay_s",
              "replay_to_limit", "loss_to_limit"] + [c for c in ("cpu_ratio_to_trl_gdpo", "cpu_ratio_lo", "cpu_ratio_hi",
                                                                "same_completions") if c in df]])


if __name__ == "__main__":
    main()
