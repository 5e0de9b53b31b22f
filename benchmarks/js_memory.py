"""Extra peak memory of ``js_relevance`` at the paper's vocabulary (issue 13): V = 151,936, T = 2,048 completion
positions, K_eff = 8 replayed rows, fp32 and bf16 inputs, logits path and hidden-state path (H = 3,584, the 7B's
width; the lm_head in the inputs' dtype). Goal: <= 512 MiB (a (K T, V) fp32 temporary alone is ~9.3 GiB).

Each configuration runs in its own process (one thread), and two figures are taken around the one call:

* ``extra_peak_alloc_mib``: the peak of torch's CPU allocator above what was allocated before the call, from the
  allocation and free events of ``torch.profiler`` (``profile_memory=True``): the CPU counterpart of
  ``torch.cuda.max_memory_allocated``;
* ``extra_peak_rss_mib``: the process's resident-set high-water mark above its resident set before the call (the
  mark is reset through ``/proc/self/clear_refs`` first), which also sees memory outside torch's allocator (and
  the profiler's own records).

A warm-up call on one position comes first, so that one-time set-up (libraries' code and buffers loaded on first
use) is not counted.

The K rows of each input are one (T, ·) tensor expanded to K rows (stride 0): 8 distinct rows of fp32 logits are
19 GiB, more than the 24 GiB machine can hold next to its other work, and ``js_relevance`` does the same work and
holds the same temporaries for any row contents. By default only the first ``--positions`` of the K x T positions
are computed (``mask`` = 1 there, 0 elsewhere; masked positions are skipped): the work proceeds in chunks of equal
size, so the peak is reached in the first chunk; ``--positions 16384`` computes every position.

    python benchmarks/js_memory.py [--positions 1024] [--out results/bench/js_memory.csv]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
V, T, K, H = 151_936, 2_048, 8, 3_584
GOAL_MIB = 512
CONFIGS = [(path, dtype) for path in ("logits", "hidden") for dtype in ("float32", "bfloat16")]


def _rss_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def measure(path: str, dtype_name: str, positions: int) -> dict:
    """One configuration, in this process: inputs, then one call of js_relevance under the profiler."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from mrtpo.method.relevance import js_chunk_positions, js_relevance

    torch.set_num_threads(1)
    dtype = getattr(torch, dtype_name)
    g = torch.Generator().manual_seed(0)
    width = V if path == "logits" else H
    scale = 3.0 if path == "logits" else 1.0
    a1 = torch.randn(1, T, width, generator=g) * scale
    b1 = (a1 + 0.1 * scale * torch.randn(1, T, width, generator=g)).to(dtype)
    a1 = a1.to(dtype)
    a, b = a1.expand(K, T, width), b1.expand(K, T, width)
    kwargs = {}
    if path == "hidden":
        kwargs["lm_head"] = (torch.randn(V, H, generator=g) * 0.02).to(dtype)
    mask = torch.zeros(K, T)
    mask.view(-1)[:1] = 1
    js_relevance(a, b, mask, **kwargs)  # warm-up on one position: libraries' lazy set-up is not the call's memory
    mask.view(-1)[:positions] = 1
    rss_before = _rss_kib("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current resident set
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        start = time.perf_counter()
        q = js_relevance(a, b, mask, **kwargs)
        seconds = time.perf_counter() - start
    hwm = _rss_kib("VmHWM")
    level = peak = 0
    events = sorted((e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events() if e.name() == "[memory]")
    for _, nbytes in events:
        level += nbytes
        peak = max(peak, level)
    return {
        "path": path, "input_dtype": dtype_name, "V": V, "T": T, "rows": K, "H": H if path == "hidden" else "",
        "positions_computed": positions, "chunk_positions": js_chunk_positions(V),
        "extra_peak_alloc_mib": round(peak / 2**20, 1), "extra_peak_rss_mib": round((hwm - rss_before) / 1024, 1),
        "goal_mib": GOAL_MIB, "seconds": round(seconds, 2), "mean_q": round(float(q.view(-1)[:positions].mean()), 4),
        "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--positions", type=int, default=1024, help="positions computed, of the K x T (default 1024)")
    parser.add_argument("--out", default=str(ROOT / "results" / "bench" / "js_memory.csv"))
    parser.add_argument("--one", nargs=2, metavar=("PATH", "DTYPE"), help=argparse.SUPPRESS)  # the child process
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(*args.one, args.positions)))
        return
    import pandas as pd

    rows = []
    for path, dtype in CONFIGS:  # one process each: a fresh allocator and resident set per measurement
        done = subprocess.run([sys.executable, __file__, "--one", path, dtype, "--positions", str(args.positions)],
                              check=True, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(f"{path:7s} {dtype:9s} extra peak {rows[-1]['extra_peak_alloc_mib']:8.1f} MiB (allocator), "
              f"{rows[-1]['extra_peak_rss_mib']:8.1f} MiB (RSS), {rows[-1]['seconds']} s", flush=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(out, index=False)


if __name__ == "__main__":
    main()
