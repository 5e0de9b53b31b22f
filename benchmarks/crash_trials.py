"""Crash trials: SIGKILL a smoke-size run at random moments of each phase, rerun the same command, compare.

Kinds, by where the kill lands:

* ``generation``: inside TRL's generate-and-score of a training step (sampling and the rewards, SQL sandbox included);
* ``replay``: inside MRTPO's advantages (the leave-one-out replays);
* ``optimizer``: inside ``AdamW.step``;
* ``checkpoint``: inside ``Trainer._save_checkpoint``;
* ``rename``: just before or just after the finished run folder is renamed into place;
* ``evaluation``: inside a sampling call of the final evaluation.

First two uninterrupted runs of the command, which must agree; the second times every phase's calls. Then,
per trial: a fresh results folder and no checkpoints; the command runs with a hook that picks one call of the
phase at random and sends SIGKILL to its own process at a uniformly random moment of the first half of that
call's duration in the uninterrupted run (at the call's end if it finishes sooner: durations vary with the
machine's load); the same command then runs again, without the hook, to completion. The trial matches when the
rerun's folder has the uninterrupted run's weights hash, metrics (wall-clock columns aside), evaluation and
profiles. Single-threaded; one run at a time.
Writes ``results/bench/crash_trials.csv``.

    python benchmarks/crash_trials.py [--trials 5] [--seed 0] [--task sql] [--method mrtpo]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KINDS = ("generation", "replay", "optimizer", "checkpoint", "rename", "evaluation")
#: the command under trial: a smoke-size run (the runner's "smoke" model fixes its size: seconds per run)
COMMAND = ["train", "--model", "smoke"]


# ------------------------------------------------------------------------------------ inside the run
def phase_functions() -> dict:
    """kind -> (owner, attribute) of the function whose calls make up that phase."""
    import pathlib

    import torch
    import transformers
    import trl

    import mrtpo.analysis.diagnostics
    import mrtpo.method.trainer

    return {"generation": (trl.GRPOTrainer, "_generate_and_score_completions"),
            "replay": (mrtpo.method.trainer.MRTPOTrainer, "_advantages"),
            "optimizer": (torch.optim.AdamW, "step"),
            "checkpoint": (transformers.Trainer, "_save_checkpoint"),
            "rename": (pathlib.Path, "rename"),
            "evaluation": (mrtpo.analysis.diagnostics, "sample")}


def _is_run_folder_rename(args) -> bool:
    """``Path.rename(self, target)`` of a temporary folder onto ``.../runs/<task>/<model>/<name>``."""
    target = Path(args[1]) if len(args) > 1 else None
    return target is not None and len(target.parents) > 2 and target.parents[2].name == "runs"


def install_hooks(spec: dict) -> dict:
    """Wrap every phase function: time each call (``spec["measure"]``), or kill this process during the call
    ``spec["call"]`` of ``spec["kind"]``, ``spec["delay"]`` seconds into it (``"before"``/``"after"`` for rename)."""
    timings = {kind: [] for kind in KINDS}
    for kind, (owner, name) in phase_functions().items():
        original = getattr(owner, name)

        def wrapper(*args, __kind=kind, __original=original, **kwargs):
            if __kind == "rename" and not _is_run_folder_rename(args):
                return __original(*args, **kwargs)
            call = len(timings[__kind]) + 1
            timings[__kind].append(None)
            target = not spec.get("measure") and spec["kind"] == __kind and spec["call"] == call
            if target and spec["delay"] == "before":
                kill(spec, "before")
            timer = None
            if target and isinstance(spec["delay"], float):
                timer = threading.Timer(spec["delay"], kill, (spec, "during"))
                timer.start()
            start = time.perf_counter()
            result = __original(*args, **kwargs)
            timings[__kind][-1] = time.perf_counter() - start
            if target:  # the call ended before the timer (or the kill comes right after it by design)
                kill(spec, "after" if spec["delay"] == "after" else "at the call's end")
            return result

        setattr(owner, name, wrapper)
    return timings


_KILLING = threading.Lock()  # taken by the first of the timer and the call's end; never released


def kill(spec: dict, where: str) -> None:
    """Record where the kill landed, then SIGKILL this process (no handler, no cleanup, like a power cut)."""
    _KILLING.acquire()  # the second caller waits here for the signal
    with open(spec["log"], "w") as fh:
        json.dump({"where": where}, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.kill(os.getpid(), signal.SIGKILL)


def child(spec: dict, argv: list[str]) -> None:
    import torch

    torch.set_num_threads(1)
    timings = install_hooks(spec)
    from mrtpo.cli import main

    main(argv)
    if spec.get("measure"):
        Path(spec["measure"]).write_text(json.dumps(timings))


# ----------------------------------------------------------------------------------- the trial driver
def run_command(argv: list[str], env: dict, spec: dict | None = None) -> subprocess.CompletedProcess:
    """The CLI in a fresh interpreter: plainly, or through ``child`` with hooks when ``spec`` is given."""
    if spec is None:
        cmd = [sys.executable, "-c", "import sys; from mrtpo.cli import main; main(sys.argv[1:])", *argv]
    else:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(spec), "--", *argv]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)


def run_folder(stdout: str) -> Path:
    line = next(line for line in stdout.splitlines() if line.startswith(("trained: ", "reused: ")))
    return Path(line.split(": ", 1)[1])


def fingerprint(folder: Path) -> dict:
    """What must not depend on the kill: weights hash, metrics without wall-clock columns, eval, profiles."""
    import pandas as pd

    metrics = pd.read_csv(folder / "metrics.csv")
    metrics = metrics[[c for c in metrics.columns if not c.startswith("time/") and c not in ("step_time", "train_runtime")]]
    profiles = folder / "profiles.jsonl"
    return {"weights": json.loads((folder / "summary.json").read_text())["weights_sha256"],
            "metrics": metrics.to_csv(index=False),
            "eval": json.loads((folder / "eval.json").read_text()),
            "profiles": profiles.read_text() if profiles.exists() else ""}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5, help="trials per kind")
    parser.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS)
    parser.add_argument("--seed", type=int, default=0, help="seed of the kill moments")
    parser.add_argument("--task", default="sql")
    parser.add_argument("--method", default="mrtpo")
    parser.add_argument("--out", default=str(ROOT / "results" / "bench" / "crash_trials.csv"))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args, rest = parser.parse_known_args()
    if args.child:
        child(json.loads(args.child), [a for a in rest if a != "--"])
        return

    import pandas as pd

    rng = random.Random(args.seed)
    argv = COMMAND + ["--task", args.task, "--method", args.method]
    scratch = Path(tempfile.mkdtemp(prefix="crash_trials-"))
    env = {**os.environ, "MRTPO_CACHE": str(scratch / "cache"), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}

    def fresh(name: str) -> dict:
        """A new results folder, and no checkpoints left by an earlier trial (the smoke base stays)."""
        shutil.rmtree(scratch / "cache" / "work", ignore_errors=True)
        return {**env, "MRTPO_RESULTS": str(scratch / name)}

    # two uninterrupted runs: the first also builds the smoke base; the second times every phase's calls.
    # They must agree with each other, or no trial could be judged.
    start = time.time()
    first = run_command(argv, fresh("uninterrupted-0"))
    reference = run_command(argv, fresh("uninterrupted-1"), {"measure": str(scratch / "timings.json")})
    for done in (first, reference):
        if done.returncode != 0:
            raise SystemExit(f"an uninterrupted run failed:\n{done.stderr[-3000:]}")
    expected = fingerprint(run_folder(reference.stdout))
    if fingerprint(run_folder(first.stdout)) != expected:
        raise SystemExit("two uninterrupted runs of the same command differ: the run is not deterministic")
    timings = json.loads((scratch / "timings.json").read_text())
    print(f"uninterrupted runs agree ({time.time() - start:.0f} s); calls per phase: "
          f"{ {k: len(v) for k, v in timings.items()} }", flush=True)

    rows = []
    for kind in args.kinds:
        if not timings[kind]:
            raise SystemExit(f"the run never entered phase {kind!r}: nothing to kill")
        for trial in range(args.trials):
            call = rng.randrange(len(timings[kind])) + 1
            delay = rng.choice(["before", "after"]) if kind == "rename" else rng.uniform(0, 0.5 * timings[kind][call - 1])
            log = scratch / "kill.json"
            log.unlink(missing_ok=True)
            trial_env = fresh(f"{kind}-{trial}")
            t0 = time.time()
            killed = run_command(argv, trial_env, {"kind": kind, "call": call, "delay": delay, "log": str(log)})
            where = json.loads(log.read_text())["where"] if log.exists() else "not killed"
            leftovers = sorted(p.name for p in Path(trial_env["MRTPO_RESULTS"]).glob("runs/*/*/*"))
            rerun = run_command(argv, trial_env)
            row = {"kind": kind, "trial": trial, "call": call, "delay_s": delay if isinstance(delay, str) else round(delay, 4),
                   "killed": killed.returncode == -signal.SIGKILL, "where": where,
                   "folders_after_kill": len([n for n in leftovers if not n.startswith(".")]),
                   "rerun_ok": rerun.returncode == 0, "rerun": "", "weights": False, "metrics": False, "eval": False,
                   "profiles": False}
            if rerun.returncode == 0:
                folder = run_folder(rerun.stdout)
                got = fingerprint(folder)
                row.update({k: got[k] == expected[k] for k in expected})
                row["rerun"] = "reused" if rerun.stdout.count("reused: ") else "trained"
                row["resumed_from_step"] = json.loads((folder / "summary.json").read_text())["resumed_from_step"]
            else:
                print(rerun.stderr[-2000:])
            row["matched"] = row["killed"] and all(row[k] for k in ("weights", "metrics", "eval", "profiles"))
            row["seconds"] = round(time.time() - t0, 1)
            rows.append(row)
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            pd.DataFrame(rows).to_csv(args.out, index=False)  # after every trial: a long session keeps what it has
            print({k: row[k] for k in ("kind", "trial", "call", "delay_s", "where", "rerun", "resumed_from_step", "matched")
                   if k in row}, flush=True)
    frame = pd.DataFrame(rows)
    print(frame.groupby("kind", sort=False)[["killed", "matched"]].sum().to_string())
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
