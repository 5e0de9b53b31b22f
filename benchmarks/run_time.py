"""Runs per hour (issue 13): wall time of a whole 100-step MRTPO tiny run (training and the final evaluation) per
task, before and after the speed-ups, on the same machine and configuration.

Each row trains ``mrtpo train --task <task> --method mrtpo --model tiny --seed 0`` from a checkout of the code
(``--before``: a checkout of the commit before the speed-ups; ``--after``: this one), in a fresh process, with
``MRTPO_RESULTS`` and ``MRTPO_CACHE`` pointed at folders of its own under ``--work`` (so that no run folder or
checkpoint is reused; the cache's ``models/`` links to the shared tiny bases, which are never rebuilt here). A row
records the wall time, the run folder's name (its content hash: the same before and after when the change leaves
every run's identity alone) and whether the first steps' rewards agree. Rows are appended to
``results/bench/run_time.csv`` as each run ends; a rerun skips the rows already there (restartable), one run at a
time.

    python benchmarks/run_time.py --before ../perf-before [--tasks sql tool if] [--work /tmp/run_time]
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

import pandas as pd

from mrtpo.tasks import get_task

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "results" / "bench" / "run_time.csv"


def commit_of(checkout: Path) -> str:
    return subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()


def one_run(task: str, version: str, checkout: Path, work: Path, steps: int) -> dict:
    """Train and evaluate one run from ``checkout`` in a fresh process; its wall time and folder."""
    results, cache = work / version / "results", work / version / "cache"
    cache.mkdir(parents=True, exist_ok=True)
    models = cache / "models"
    if not models.exists():
        models.symlink_to(Path(os.environ.get("MRTPO_CACHE", Path.home() / ".cache" / "mrtpo")) / "models")
    env = {**os.environ, "MRTPO_RESULTS": str(results), "MRTPO_CACHE": str(cache), "PYTHONPATH": str(checkout),
           "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    cmd = [sys.executable, "-m", "mrtpo.cli", "train", "--task", task, "--method", "mrtpo", "--model", "tiny",
           "--seed", "0", "--steps", str(steps)]
    load_before = os.getloadavg()[1]
    commit = commit_of(checkout)  # the code the run starts from (a checkout may move on while the run is going)
    start = time.perf_counter()
    subprocess.run(cmd, cwd=checkout, env=env, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    (folder,) = [p for p in (results / "runs" / task / "tiny").iterdir() if p.name.startswith("mrtpo-")]
    summary = json.loads((folder / "summary.json").read_text())
    return {"task": task, "version": version, "commit": commit, "wall_s": round(wall, 1),
            "train_s": summary.get("train_runtime_s"), "steps": steps, "run_folder": folder.name,
            # the machine's other work: 5-minute load averages (runnable processes) when the run started and ended
            "load_start": round(load_before, 2), "load_end": round(os.getloadavg()[1], 2),
            "metrics": str(folder / "metrics.csv")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="a checkout of the code before the speed-ups")
    parser.add_argument("--tasks", nargs="+", default=["sql", "tool", "if"])
    parser.add_argument("--versions", nargs="+", default=["before", "after"], choices=["before", "after"])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--work", default="/tmp/mrtpo-run-time")
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args()
    out = Path(args.out)
    done = pd.read_csv(out) if out.exists() else pd.DataFrame(columns=["task", "version"])
    checkouts = {"before": Path(args.before).resolve(), "after": ROOT}
    from mrtpo.models.tiny import tiny_path

    for version in args.versions:  # every "before" first: the slow runs, which no change of this checkout affects
        for task in args.tasks:
            if not (tiny_path(get_task(task)) / "mrtpo_recipe.json").exists():  # a run would build it: not this script's job
                print(f"{task}: its tiny base is not built ({tiny_path(get_task(task)).name}); skipped", flush=True)
                continue
            if ((done["task"] == task) & (done["version"] == version)).any():
                continue
            row = one_run(task, version, checkouts[version], Path(args.work) / task, args.steps)
            metrics = pd.read_csv(row.pop("metrics"))
            row["first_step_reward"] = float(metrics["reward"].iloc[0])
            row["machine"] = f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores"
            done = pd.concat([done, pd.DataFrame([row])], ignore_index=True)
            before = done[(done["task"] == task) & (done["version"] == "before")]
            if version == "after" and len(before):
                before = before.iloc[0]
                done.loc[done.index[-1], "speedup"] = round(before["wall_s"] / row["wall_s"], 3)
                done.loc[done.index[-1], "same_run_hash"] = before["run_folder"] == row["run_folder"]
            out.parent.mkdir(parents=True, exist_ok=True)
            done.to_csv(out, index=False)
            print(f"{task} {version}: {row['wall_s']:.0f} s ({row['run_folder']})", flush=True)


if __name__ == "__main__":
    main()
