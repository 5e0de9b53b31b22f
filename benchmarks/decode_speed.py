"""Sampling speed against its limits (issue 41): tokens per second of ``generate`` on a policy, per batch size and
cache, beside what one decoding step cannot beat on this CPU.

Per batch size B (rows decoded together: RL's 16 completions of a step, and the larger batches a generation
spanning several steps would give), ``models.sampling.sample`` at temperature 1 with every row forced to
``--tokens`` new tokens (``min_new_tokens``: no row stops early, so that tokens/s counts only decoded tokens),
with transformers' default dynamic cache and its static cache (``cache_implementation="static"``). Then, per B,
one decoding step's floor, each measured on this machine with the same threads:

* ``step_forward_ms``: one forward of the model over B rows × 1 new token with a KV cache of the prompt plus half
  the completion (what ``generate`` cannot avoid per step; its bookkeeping and sampling excluded);
* ``flop_limit_ms``: B × 2 × (parameters) FLOP at the rate of a large float32 matrix product (``gemm_gflops``,
  2048 × hidden × intermediate), the arithmetic bound;
* ``memory_limit_ms``: the weights' bytes read once at the measured read bandwidth (``read_gbs``, summing a
  512 MiB tensor), the memory bound.

``limit_ms`` = max(flop, memory) and ``to_limit`` = the measured step / ``limit_ms``. Writes
``results/bench/decode_speed.csv`` (one row per model, threads, B and cache; rows of other models and thread counts
are kept) with the machine (its vector instructions too: AVX2 and AVX-512 machines differ) and whether other jobs
were running (``--load``, stated by whoever runs it).

    python benchmarks/decode_speed.py [--model smollm2] [--batches 16 32 64] [--tokens 128] [--threads 1] [--load "..."]
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import pandas as pd
import torch

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "results" / "bench" / "decode_speed.csv"


def timed(fn, repeat: int) -> float:
    """Median seconds of ``repeat`` calls of ``fn`` after one warm-up call."""
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return sorted(times)[len(times) // 2]


def machine_rates(hidden: int, intermediate: int) -> tuple[float, float]:
    """(GFLOP/s of a large float32 product 2048 x hidden @ hidden x intermediate, GB/s of reading 512 MiB)."""
    a, b = torch.randn(2048, hidden), torch.randn(hidden, intermediate)
    gflops = 2 * 2048 * hidden * intermediate / timed(lambda: a @ b, 10) / 1e9
    x = torch.randn(128 * 1024 * 1024)
    read = x.numel() * 4 / timed(x.sum, 5) / 1e9
    return gflops, read


def main(argv=None) -> None:
    from transformers import AutoModelForCausalLM

    from mrtpo.models.registry import resolve_model
    from mrtpo.models.sampling import decoding_config, prompt_ids
    from mrtpo.models.tokenizer import load_tokenizer
    from mrtpo.tasks import get_task

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--task", default="if", help="whose training prompts are decoded")
    ap.add_argument("--batches", type=int, nargs="+", default=[16, 32, 64])
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--load", default="none", help="what else ran on the machine meanwhile (stated in the file)")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    task = get_task(args.task)
    path = resolve_model(task, args.model)
    tokenizer = load_tokenizer(path)
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    cfg = model.config
    params = sum(p.numel() for p in model.parameters())
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    gflops, read = machine_rates(cfg.hidden_size, cfg.intermediate_size)
    prompts = [r["prompt"] for r in task.synthetic(max(args.batches), seed=0, split="train")]
    rows = []
    for B in args.batches:
        encoded = [prompt_ids(tokenizer, p) for p in prompts[:B]]
        width = max(map(len, encoded))
        pad = tokenizer.pad_token_id
        ids = torch.tensor([[pad] * (width - len(e)) + e for e in encoded])
        mask = (torch.arange(width) >= torch.tensor([width - len(e) for e in encoded])[:, None]).long()
        with torch.inference_mode():
            out = model(input_ids=ids, attention_mask=mask, use_cache=True)
            cache, nxt = out.past_key_values, out.logits[:, -1:].argmax(-1)
            for _ in range(args.tokens // 2):  # a cache of the prompt and half the completion
                step_mask = torch.cat([mask, torch.ones(B, cache.get_seq_length() + 1 - width, dtype=torch.long)], 1)
                out = model(input_ids=nxt, attention_mask=step_mask, past_key_values=cache, use_cache=True)
                nxt = out.logits[:, -1:].argmax(-1)
            step_mask = torch.cat([mask, torch.ones(B, cache.get_seq_length() + 1 - width, dtype=torch.long)], 1)

            def one_step():
                model(input_ids=nxt, attention_mask=step_mask, past_key_values=cache, use_cache=True)
                cache.crop(-1)  # the step's entry removed: every call sees the same cache

            step_s = timed(one_step, 5)
        flop_ms = B * 2 * params / (gflops * 1e9) * 1e3
        memory_ms = weight_bytes / (read * 1e9) * 1e3
        for cache_kind in ("dynamic", "static"):
            config = decoding_config(1.0, args.tokens, pad, tokenizer.eos_token_id)
            config.min_new_tokens = args.tokens
            if cache_kind == "static":
                config.cache_implementation = "static"
            torch.manual_seed(0)
            with torch.inference_mode():
                t = time.perf_counter()
                model.generate(input_ids=ids, attention_mask=mask, generation_config=config)
                seconds = time.perf_counter() - t
            step_ms = seconds / args.tokens * 1e3
            rows.append({"model": args.model, "batch": B, "cache": cache_kind, "new_tokens": args.tokens,
                         "prompt_tokens": width, "seconds": round(seconds, 2), "tokens_per_s": round(B * args.tokens / seconds, 1),
                         "step_ms": round(step_ms, 1), "step_forward_ms": round(step_s * 1e3, 1),
                         "flop_limit_ms": round(flop_ms, 1), "memory_limit_ms": round(memory_ms, 1),
                         "limit_ms": round(max(flop_ms, memory_ms), 1), "to_limit": round(step_ms / max(flop_ms, memory_ms), 2),
                         "gemm_gflops": round(gflops, 1), "read_gbs": round(read, 1), "params": params, "threads": args.threads,
                         "load": args.load, "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores, "
                                                       f"{torch.backends.cpu.get_cpu_capability()}, torch {torch.__version__}"})
            print(rows[-1], flush=True)
    table = pd.DataFrame(rows)
    if OUT.exists():
        table = pd.concat([pd.read_csv(OUT).query("model != @args.model or threads != @args.threads"), table],
                          ignore_index=True)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(OUT, index=False)
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
