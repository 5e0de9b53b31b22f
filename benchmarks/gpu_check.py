"""GPU check: the rehearsal path at a size that fills a GPU, GDPO vs MRTPO vs joint step time, JS replay memory.

One run, on one GPU (``benchmarks/gpu_check.sh`` wraps it with the time limit):

1. a from-scratch rehearsal base (``mrtpo.models.rehearsal``) of Qwen2.5-0.5B's shape with Qwen's 151,936-row
   vocabulary, stored in bf16;
2. training steps of ``gdpo``, ``mrtpo`` and ``joint`` through ``MRTPOTrainer.train()`` with the paper path's
   settings (bf16 autocast, gradient checkpointing, one optimizer step per batch of prompts x generations),
   the arms taking turns (round robin over fresh trainers; each trainer's first step is warm-up and dropped),
   so drifts hit every arm alike. A random policy scores the same on every response, and a reward with no
   variance is never replayed, so each of the task's rewards is replaced by a coin flip on the response's hash
   (same names, same Z blocks): every response-reward pair is replayed, a 100% replay rate, the cost's upper
   bound (the paper's pooled rate is 12-21%; it reports MRTPO at +10-20% over GDPO);
3. the extra peak GPU memory of ``js_relevance`` at V = 151,936, T = 2,048, K = 8 replayed rows: hidden-state
   path at the 7B's width (H = 3,584, bf16 inputs) and logits path (bf16 logits).

Writes ``results/bench/gpu_check.csv`` (``section, name, value, unit, detail``). ``--shape cpu`` runs the same
code at the rehearsal CPU shape and a small geometry (how the script itself is rehearsed without a GPU).

    python benchmarks/gpu_check.py [--shape 0.5b] [--budget-s 420]
"""

from __future__ import annotations

import argparse
import csv
import gc
import hashlib
import platform
import statistics
import tempfile
import time
from pathlib import Path

import torch
from transformers import TrainerCallback

from mrtpo import MRTPOConfig, MRTPOTrainer
from mrtpo.models.rehearsal import QWEN_VOCAB, build_rehearsal, suppressed_ids
from mrtpo.method.relevance import js_relevance
from mrtpo.tasks import get_task
from mrtpo.tasks.base import completion_text

ROOT = Path(__file__).resolve().parents[1]
ARMS = ("gdpo", "mrtpo", "joint")
#: per shape: prompts per step, generations, completion tokens, steps per trainer (first dropped), rounds
GEOMETRY = {"0.5b": dict(prompts=8, generations=8, completion=256, steps=3, rounds=2, vocab=QWEN_VOCAB),
            "cpu": dict(prompts=2, generations=4, completion=16, steps=2, rounds=1, vocab=None)}
JS_SHAPE = dict(V=QWEN_VOCAB, T=2048, K=8, H=3584)


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


class StepTimer(TrainerCallback):
    """Wall time of every optimizer step (generation, replay, loss and update), device work included."""

    def __init__(self):
        self.times: list[float] = []
        self._start = 0.0

    def on_step_begin(self, args, state, control, **kwargs):
        sync()
        self._start = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        sync()
        self.times.append(time.perf_counter() - self._start)


def coin_flip_rewards(names: tuple[str, ...]) -> list:
    """One TRL reward function per name: 0/1 from a hash of (name, response), so every reward varies in a group."""

    def make(name: str):
        def reward(prompts, completions, completion_ids=None, **columns):
            return [float(hashlib.sha256(f"{name}|{completion_text(c)}".encode()).digest()[0] & 1) for c in completions]

        reward.__name__ = name
        return reward

    return [make(name) for name in names]


def train_arm(arm: str, base: Path, task, data, geo: dict, out: Path, gpu: bool) -> tuple[list[float], list[dict]]:
    """One fresh trainer of ``arm`` for ``geo['steps']`` steps; (step times, log rows)."""
    timer = StepTimer()
    args = MRTPOConfig(
        output_dir=str(out), advantage=arm, mrtpo_beta=0.5, beta_warmup_steps=0, learning_rate=1e-6,
        max_steps=geo["steps"], num_generations=geo["generations"],
        per_device_train_batch_size=geo["prompts"] * geo["generations"], max_completion_length=geo["completion"],
        temperature=1.0, seed=0, logging_steps=1, save_strategy="no", report_to="none", disable_tqdm=True,
        use_cpu=not gpu, bf16=gpu, gradient_checkpointing=gpu,
        generation_kwargs={"suppress_tokens": suppressed_ids(base)} if geo["vocab"] else None,
    )
    trainer = MRTPOTrainer(model=str(base), reward_funcs=coin_flip_rewards(task.reward_names), train_dataset=data,
                           z_blocks=task.z_blocks, args=args, callbacks=[timer])
    trainer.train()
    logs = [row for row in trainer.state.log_history if "time/replay" in row]
    del trainer
    gc.collect()  # the next arm's trainer starts from free memory
    if gpu:
        torch.cuda.empty_cache()
    return timer.times, logs


def js_memory_rows(device: str) -> list[dict]:
    """Extra peak memory of js_relevance over its inputs at the paper's vocabulary (GPU only)."""
    V, T, K, H = JS_SHAPE["V"], JS_SHAPE["T"], JS_SHAPE["K"], JS_SHAPE["H"]
    rows = []
    g = torch.Generator(device=device).manual_seed(0)
    head = (torch.randn(V, H, generator=g, device=device) * 0.02).to(torch.bfloat16)
    for path in ("hidden", "logits"):
        if path == "hidden":
            a = torch.randn(K, T, H, generator=g, device=device).to(torch.bfloat16)
            b = (a.float() + 0.01 * torch.randn(K, T, H, generator=g, device=device)).to(torch.bfloat16)
            kwargs = dict(lm_head=head)
        else:
            a = torch.empty(K, T, V, dtype=torch.bfloat16, device=device)
            b = torch.empty(K, T, V, dtype=torch.bfloat16, device=device)
            for k in range(K):  # filled row by row: a (T, V) fp32 temporary, not (K, T, V)
                a[k] = torch.randn(T, V, generator=g, device=device) * 3
                b[k] = (a[k].float() + 0.1 * torch.randn(T, V, generator=g, device=device)).to(torch.bfloat16)
            kwargs = {}
        mask = torch.ones(K, T, device=device)
        sync()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        start = time.perf_counter()
        q = js_relevance(a, b, mask, **kwargs)
        sync()
        seconds = time.perf_counter() - start
        extra = (torch.cuda.max_memory_allocated() - before) / 2**20
        detail = f"V={V} T={T} K={K}" + (f" H={H}" if path == "hidden" else "") + ", bf16 inputs, chunk 1024, mean q %.4f" % float(q.mean())
        rows += [{"section": "js_memory", "name": f"{path}_extra_peak", "value": round(extra, 1), "unit": "MiB", "detail": detail},
                 {"section": "js_memory", "name": f"{path}_time", "value": round(seconds, 3), "unit": "s", "detail": detail}]
        del a, b, q
        torch.cuda.empty_cache()
    return rows


def step_rows(times: dict, logs: dict, geo: dict, rounds_done: int) -> list[dict]:
    """Median step time per arm, its ratio to GDPO, and the replay and generation medians."""
    gdpo = statistics.median(times["gdpo"])
    geometry = (f"{geo['prompts']} prompts x {geo['generations']} generations, {geo['completion']} completion tokens, "
                f"{rounds_done} round(s) x {geo['steps'] - 1} timed steps per arm, coin-flip rewards (100% replayed)")
    rows = []
    for arm in ARMS:
        med = statistics.median(times[arm])
        replay = statistics.median(row["time/replay"] for row in logs[arm])
        generation = statistics.median(row["time/generation"] for row in logs[arm])
        eff_k = statistics.mean(row.get("mrtpo/effective_k", 0.0) for row in logs[arm])
        rows += [{"section": "step_time", "name": f"{arm}_median_step", "value": round(med, 3), "unit": "s", "detail": geometry},
                 {"section": "step_time", "name": f"{arm}_ratio_to_gdpo", "value": round(med / gdpo, 3), "unit": "x", "detail": geometry},
                 {"section": "step_time", "name": f"{arm}_replay_median", "value": round(replay, 3), "unit": "s",
                  "detail": f"generation median {generation:.3f} s; effective K {eff_k:.2f}"}]
    return rows


def write(out: Path, rows: list[dict], device: str) -> None:
    """The CSV, each row's detail ending with the device and versions."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=["section", "name", "value", "unit", "detail"])
        writer.writeheader()
        writer.writerows({**row, "detail": f"{row['detail']}; {device}; torch {torch.__version__}; {platform.machine()}"}
                         for row in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="0.5b", choices=sorted(GEOMETRY))
    parser.add_argument("--budget-s", type=float, default=420.0, help="start no round that would end after this many seconds")
    parser.add_argument("--out", default=str(ROOT / "results" / "bench" / "gpu_check.csv"))
    args = parser.parse_args()
    began = time.perf_counter()
    gpu = torch.cuda.is_available()
    if args.shape != "cpu" and not gpu:
        raise SystemExit("gpu_check: no CUDA device visible; --shape cpu rehearses the script on CPU")
    if not gpu:
        torch.set_num_threads(1)
    geo = GEOMETRY[args.shape]
    work = Path(tempfile.mkdtemp(prefix="mrtpo_gpu_check_"))
    task = get_task("sql", db_cache_dir=work / "dbs")
    data = task.synthetic(geo["prompts"] * geo["steps"] * geo["rounds"] * len(ARMS) * 4, seed=0, split="train")
    start = time.perf_counter()
    base = build_rehearsal(task, work / "base", shape=args.shape, vocab_size=geo["vocab"])
    rows = [{"section": "setup", "name": "build_base", "value": round(time.perf_counter() - start, 1), "unit": "s",
             "detail": (base / "mrtpo_rehearsal.json").read_text().replace("\n", " ")}]

    device = torch.cuda.get_device_name(0) if gpu else "cpu"
    out = Path(args.out)
    if gpu:  # first, so that a step-time run cut by the time limit still leaves these rows
        rows += js_memory_rows("cuda")
        write(out, rows, device)
    times = {arm: [] for arm in ARMS}
    logs = {arm: [] for arm in ARMS}
    for r in range(geo["rounds"]):
        round_start = time.perf_counter()
        for arm in ARMS:
            t, log = train_arm(arm, base, task, data, geo, work / f"{arm}-{r}", gpu)
            times[arm] += t[1:]  # the first step of a fresh trainer carries one-off costs
            logs[arm] += log[1:]
            print(f"round {r} {arm}: " + ", ".join(f"{x:.2f}s" for x in t), flush=True)
        write(out, rows + step_rows(times, logs, geo, r + 1), device)  # after every round: a cut run keeps its rounds
        if time.perf_counter() - began + (time.perf_counter() - round_start) > args.budget_s:
            break  # another round would overrun the budget
    print(f"wrote {out} in {time.perf_counter() - began:.0f} s")


if __name__ == "__main__":
    main()
