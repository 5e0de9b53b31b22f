"""Retrain stale run folders (``mrtpo runs --stale``, or those set aside under ``results/stale/``), one at a time,
from a queue file (one folder path a line, relative to the results root; ``stale`` lists every folder under
``results/stale/``), each with the arguments its ``config.json`` records: the same config hash, hence the same folder
name under ``results/runs/``, trained by the current code (``runs.run`` retrains a stale folder in place and records
the fingerprint). A set-aside folder is deleted once its replacement is written. Restartable: a run killed midway
resumes from its last checkpoint when its folder was set aside (a stale folder in place starts again).

    python benchmarks/retrain_stale.py QUEUE_FILE|stale [--threads 1]

Lines are read again before each run, so a queue can grow while it runs. Each finished folder is printed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path


def run_arguments(config: dict) -> tuple[tuple, dict]:
    """(task, method label, model, seed, steps) and the overrides that make ``runs.resolve`` give ``config`` back."""
    from mrtpo.runs.config import method_label, resolve

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
    from mrtpo.files.paths import results_root

    ap = argparse.ArgumentParser()
    ap.add_argument("queue")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    done: set[str] = set()
    set_aside = results_root() / "stale"
    while True:
        lines = (sorted(p.parent.relative_to(results_root()).as_posix() for p in set_aside.glob("*/*/*/config.json"))
                 if args.queue == "stale" else Path(args.queue).read_text().splitlines())
        todo = [line.strip() for line in lines if line.strip() and not line.startswith("#") and line.strip() not in done]
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
        fresh = runs.run(*call, **overrides)
        if folder != fresh.path:  # a set-aside folder: its replacement is under results/runs/
            shutil.rmtree(folder)
        print(f"[retrain] {time.strftime('%T')} done {fresh.path.relative_to(results_root()).as_posix()} in "
              f"{time.time() - start:.0f} s", flush=True)


if __name__ == "__main__":
    main()
