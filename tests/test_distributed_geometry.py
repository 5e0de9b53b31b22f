"""1 and 2 processes see the same prompts per step and produce the same advantages (torchrun, gloo, CPU)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch


@pytest.mark.skipif(sys.platform != "linux", reason="gloo multi-process check")
def test_one_and_two_processes_see_the_same_step(smoke_policy, tmp_path):
    script = Path(__file__).with_name("distributed_geometry.py")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    one = subprocess.run([sys.executable, str(script), smoke_policy[0], str(tmp_path / "one.pt")], env=env,
                         capture_output=True, text=True, cwd=tmp_path)
    assert one.returncode == 0, one.stderr[-3000:]
    two = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "29541",
                          str(script), smoke_policy[0], str(tmp_path / "two.pt")], env=env, capture_output=True, text=True,
                         cwd=tmp_path)
    assert two.returncode == 0, two.stderr[-3000:]
    a, b = torch.load(tmp_path / "one.pt"), torch.load(tmp_path / "two.pt")
    assert a["plan"]["gradient_accumulation_steps"] == 4 and b["plan"]["gradient_accumulation_steps"] == 2
    assert a["plan"]["completions_per_step"] == b["plan"]["completions_per_step"] == 16
    for method in ("mrtpo",):
        assert len(a[method]) == len(b[method]) == 2  # one generation round per optimizer step
        for round_a, round_b in zip(a[method], b[method]):
            assert len(round_a) == len(round_b) == 16
            assert [r[0] for r in round_a] == [r[0] for r in round_b]  # the same prompts, in the same order
            assert len({r[0] for r in round_a}) == 4
            for (_, ids_a, adv_a), (_, ids_b, adv_b) in zip(round_a, round_b):
                assert ids_a == ids_b
                assert torch.allclose(torch.tensor(adv_a), torch.tensor(adv_b), atol=1e-5)
        assert any(any(abs(x) > 0 for x in r[2]) for rnd in a[method] for r in rnd)  # advantages are not all 0
    token_level = [r[2] for rnd in a["mrtpo"] for r in rnd]
    assert any(len(set(adv)) > 1 for adv in token_level)  # the replay moved token weights somewhere


@pytest.mark.skipif(sys.platform != "linux", reason="gloo multi-process check")
def test_the_runner_trains_on_two_processes(tmp_path):
    """The 8-GPU command's shape on CPU: two processes train one run; process 0 evaluates and writes the folder."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
           "MRTPO_RESULTS": str(tmp_path / "results"), "MRTPO_CACHE": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "29547",
                           "-m", "mrtpo.cli", "train", "--task", "sql", "--model", "smoke", "--method", "mrtpo"],
                          env=env, capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    (folder,) = (tmp_path / "results" / "runs" / "sql" / "smoke").iterdir()
    assert done.stdout.count("trained: ") == 1  # process 0 alone reports
    import pandas as pd

    assert len(pd.read_csv(folder / "metrics.csv")) == 2 and (folder / "eval.json").exists()
