"""Runs per hour on a real model (issue 41), read off the committed runs: what a step and a whole run of
``--model smollm2`` cost in the runs the book shows, per phase, with the threads and the machine's load they ran
under.

A benchmark of two steps (``step_cost.py``) cannot say what a whole run costs: completions shorten as the policy
trains, and the runs ran beside other work or alone. So each finished run folder of ``--model`` is one row: its
threads and processes, the 15-minute load average at its end, the steps it trained in this process (a resumed run
trained fewer; its wall time then covers those only), the median and mean step and its phases (``metrics.csv``'s
``step_time``, ``time/generation``, ``time/replay``, ``time/loss_backward``: seconds per step, the rest being
rewards and TRL's bookkeeping), the evaluation's wall time, and the minutes a 100-step run of that geometry would
take at its mean step (training) plus its evaluation — the figure the issue's target of 60 minutes is set on.

    python benchmarks/real_model_steps.py [--model smollm2]      # writes results/bench/real_model_steps.csv
"""

from __future__ import annotations

import argparse

import pandas as pd

from mrtpo.files.paths import results_root
from mrtpo.runs.results import Run, run_folders

PHASES = {"step": "step_time", "generation": "time/generation", "replay": "time/replay", "loss": "time/loss_backward"}


def row(run: Run) -> dict:
    """One run's costs: its settings, where it ran, its per-step phases (median; the step's mean too) and a 100-step
    projection in minutes (100 × mean step + the evaluation)."""
    cfg, summary, m = run.settings, run.summary, run.metrics
    resumed = summary.get("resumed_from_step") or 0
    trained = m[m.step > resumed]  # the steps this process timed (a resumed run's earlier steps ran elsewhere)
    out = {"run": run.path.name, "task": cfg["task"], "method": cfg["method"], "seed": cfg["seed"],
           "geometry": f"{cfg['prompts_per_step']}x{cfg['num_generations']}x{cfg['max_completion_length']}",
           "steps": cfg["steps"], "steps_timed": len(trained), "threads": summary.get("torch_threads"),
           "processes": summary.get("processes"), "load_15min_at_end": summary.get("load_average_15min")}
    for name, column in PHASES.items():
        out[f"{name}_median_s"] = round(trained[column].median(), 1) if column in trained else None
    out["step_mean_s"] = round(trained["step_time"].mean(), 1)
    out["mean_completion_tokens"] = round(trained["completions/mean_length"].mean(), 1)
    out["eval_min"] = round(summary.get("eval_runtime_s", float("nan")) / 60, 1)
    out["min_per_100_steps"] = round(100 * out["step_mean_s"] / 60 + out["eval_min"], 1)
    return out


def main(argv=None) -> pd.DataFrame:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm2")
    args = ap.parse_args(argv)
    runs = [Run(p) for p in run_folders() if p.parent.name == args.model]
    if not runs:
        raise SystemExit(f"no finished run folder of --model {args.model} under {results_root() / 'runs'}: "
                         f"train one with `mrtpo train --task if --method gdpo --model {args.model} --seed 0`")
    table = pd.DataFrame([row(r) for r in runs]).sort_values(["task", "method", "seed"])
    out = results_root() / "bench" / "real_model_steps.csv"
    table.to_csv(out, index=False)
    print(table.to_string(index=False))
    print(f"wrote {out}")
    return table


if __name__ == "__main__":
    main()
