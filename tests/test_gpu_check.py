"""The prepared GPU check runs end to end (at the rehearsal CPU shape) and writes its CSV."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_gpu_check_script_runs_at_cpu_shape(tmp_path):
    out = tmp_path / "gpu_check.csv"
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", CUDA_VISIBLE_DEVICES="")
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--shape", "cpu", "--out", str(out)],
                   check=True, env=env, cwd=tmp_path, capture_output=True, timeout=600)
    rows = {(r["section"], r["name"]): r for r in csv.DictReader(out.open())}
    for arm in ("gdpo", "mrtpo", "joint"):
        assert float(rows["step_time", f"{arm}_median_step"]["value"]) > 0
    assert float(rows["step_time", "gdpo_ratio_to_gdpo"]["value"]) == 1.0
    assert "effective K 3.00" in rows["step_time", "mrtpo_replay_median"]["detail"]  # coin flips: every pair replayed
    assert float(rows["step_time", "mrtpo_replay_median"]["value"]) > float(rows["step_time", "gdpo_replay_median"]["value"])
