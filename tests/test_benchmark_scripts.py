"""Every benchmark script imports against the current package (a moved or renamed function fails here, not on the
day the benchmark is next run), and says how to run it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPTS = sorted((Path(__file__).resolve().parents[1] / "benchmarks").glob("*.py"))


@pytest.mark.parametrize("path", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_benchmark_script_imports_and_documents_its_command(path):
    spec = importlib.util.spec_from_file_location(f"benchmark_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the script is being executed
    try:
        spec.loader.exec_module(module)  # top-level imports only: every script runs its work under __main__
    finally:
        del sys.modules[spec.name]
    assert module.__doc__ and "python benchmarks/" in module.__doc__ or path.stem == "__init__", path.name


def test_the_cpu_ratio_to_trl_pairs_steps_and_says_when_the_work_was_the_same():
    spec = importlib.util.spec_from_file_location("benchmark_step_cost", SCRIPTS[0].parent / "step_cost.py")
    step_cost = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(step_cost)
    trl = [{"cpu_s": s, "completions": [[1, 2]]} for s in (1.0, 2.0, 4.0)]
    ours = [{"cpu_s": 1.1 * r["cpu_s"], "completions": r["completions"]} for r in trl]
    exact = step_cost.paired_cpu_ratio(ours, trl)  # the step-to-step spread cancels in the pairs: no width at all
    assert exact["cpu_ratio_to_trl_gdpo"] == pytest.approx(1.1) and exact["cpu_ratio_hi"] - exact["cpu_ratio_lo"] < 1e-9
    assert exact["same_completions"] == 1.0
    ours[1] = {"cpu_s": 2.0, "completions": [[1, 3]]}
    noisy = step_cost.paired_cpu_ratio(ours, trl)
    assert noisy["cpu_ratio_lo"] < noisy["cpu_ratio_to_trl_gdpo"] < noisy["cpu_ratio_hi"]
    assert noisy["same_completions"] == pytest.approx(2 / 3)


def test_a_real_model_run_counts_only_the_steps_its_last_process_timed():
    spec = importlib.util.spec_from_file_location("benchmark_real_model_steps", SCRIPTS[0].parent / "real_model_steps.py")
    real_model_steps = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(real_model_steps)
    from mrtpo.runs.results import Run, run_folders

    runs = [Run(p) for p in run_folders("if") if p.parent.name == "smollm2"]
    resumed = [run for run in runs if run.summary.get("resumed_from_step")]
    if not resumed:
        pytest.skip("no committed smollm2 run was resumed")
    run = resumed[0]
    row = real_model_steps.row(run)
    timed = run.metrics[run.metrics.step > run.summary["resumed_from_step"]]
    assert row["steps_timed"] == len(timed) < run.settings["steps"]
    assert row["step_mean_s"] == pytest.approx(timed["step_time"].mean(), abs=0.05)
    assert row["min_per_100_steps"] == pytest.approx(100 * timed["step_time"].mean() / 60
                                                     + run.summary["eval_runtime_s"] / 60, abs=0.1)
