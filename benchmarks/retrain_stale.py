"""Retrain run folders in place, one at a time, from a queue file (one folder path a line, relative to the results
root), each with the arguments its ``config.json`` records and ``force=True``: the same config hash, hence the same
folder name, trained by the current code. Restartable: a folder already retrained (``summary.json`` newer than the
queue's start, or recording the current behaviour fingerprint) is skipped; a killed run resumes from its checkpoint.

    python benchmarks/retrain_stale.py QUEUE_FILE [--threads 1]

Lines are read again before each run, so a queue can grow while it runs. Each finished folder is printed.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def run_arguments(config: dict) -> tuple[tuple, dict]:
    """(task, method label, model, seed, steps) and the overrides that make ``runs.resolve`` give ``config`` back."""
    from mrtpo.config import method_label, resolve

    args = (config["task"], method_label(config), config["model"], config["seed"], config["steps"])
    default = resolve(*args).__dict__
    overrides = {k: v for k, v in config.items()
                 if k not in ("task", "method", "model", "seed", "steps", "trainer_args", "saw", "opsd", "constlen")
                 and default.get(k) != v}
    overrides.update(config.get("trainer_args") or {})
    return args, overrides


def main() -> None:
    import torch

    from mrtpo import runs
    from mrtpo.paths import results_root

    ap = argparse.ArgumentParser()
    ap.add_argument("queue")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    done: set[str] = set()
    while True:
        todo = [line.strip() for line in Path(args.queue).read_text().splitlines()
                if line.strip() and not line.startswith("#") and line.strip() not in done]
        if not todo:
            break
        rel = todo[0]
        done.add(rel)
        folder = results_root() / rel
        config = json.loads((folder / "config.json").read_text())
        if config.get("config", {}).get("z_blocks"):
            print(f"[retrain] skip {rel}: a custom Z-block function (its notebook retrains it)", flush=True)
            continue
        call, overrides = run_arguments(config["config"])
        cfg = runs.resolve(*call, **overrides)
        digest = runs.locate(cfg)[1]
        if digest != config["hash"]:
            print(f"[retrain] skip {rel}: its arguments give hash {digest[:8]}, not {config['hash'][:8]}", flush=True)
            continue
        start = time.time()
        print(f"[retrain] {time.strftime('%T')} {rel}", flush=True)
        runs.run(*call, force=True, **overrides)
        print(f"[retrain] {time.strftime('%T')} done {rel} in {time.time() - start:.0f} s", flush=True)


if __name__ == "__main__":
    main()
