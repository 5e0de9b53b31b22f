"""DeepSpeed ZeRO-3 on two CPU processes (issue 43): the multi-process checks of ``test_distributed_fixes.py`` again,
under the launcher the 7B uses (``configs/accelerate/zero3_cpu.yaml``: DeepSpeed's CPU accelerator, gloo), and the
command line end to end in bf16. Needs the DeepSpeed that ``make install`` puts in ``.deepspeed/`` (skipped without
it). The first DeepSpeed job on a machine compiles its shared-memory op (45 s on 2 cores, done by `make install`; cached under
``~/.cache/torch_extensions``).

Each of these failed before its fix: the replay's head, released by the tied embedding's own forward hooks, read as an
empty shard (ZeroDivisionError); a skipped non-finite loss built its zero from empty shards (invalid gradient shape);
the CLI crashed after training (the reload for evaluation partitioned under ``zero.Init`` with processes that had
left); a bf16 launch on CPU refused to start (DeepSpeed bf16 against ``bf16=False``); OPSD's frozen teacher, a copy of
the partitioned policy, held empty shards."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from mrtpo.runs.launch import free_port

ROOT = Path(__file__).resolve().parents[1]
DEEPSPEED = ROOT / ".deepspeed"
pytestmark = [pytest.mark.skipif(not (DEEPSPEED / "deepspeed").is_dir(), reason="DeepSpeed not installed (make install)"),
              pytest.mark.skipif(sys.platform != "linux", reason="gloo multi-process check")]


def zero3(args: list[str], tmp_path: Path, timeout: int = 600, bf16: bool = False) -> subprocess.CompletedProcess:
    """``accelerate launch`` of ``args`` on 2 ZeRO-3 CPU processes; a hang counts as a failure."""
    env = {**os.environ, "PYTHONPATH": f"{DEEPSPEED}:{ROOT}:{ROOT / 'tests'}", "DS_ACCELERATOR": "cpu",
           "DS_BUILD_OPS": "0", "OMP_NUM_THREADS": "1", "PATH": f"{DEEPSPEED / 'bin'}:{os.environ['PATH']}",
           "MRTPO_RESULTS": str(tmp_path / "results"), "MRTPO_CACHE": str(tmp_path / "cache")}
    command = [sys.executable, "-m", "accelerate.commands.launch", "--config_file",
               str(ROOT / "configs" / "accelerate" / "zero3_cpu.yaml"), "--main_process_port", str(free_port()),
               *(["--mixed_precision", "bf16"] if bf16 else []), *args]
    done = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    return done


def test_replay_makes_the_same_forwards_on_every_process(smoke_policy, tmp_path):
    zero3([str(ROOT / "tests" / "distributed_replay.py"), smoke_policy[0], str(tmp_path / "replay")], tmp_path)
    ranks = [torch.load(tmp_path / f"replay.{r}") for r in (0, 1)]
    assert ranks[0] == {"none": 14, "fewer": 14, "teacher": 3, "trainer": 5} and ranks[1] == ranks[0]


def test_a_nonfinite_loss_on_one_process_is_skipped_by_all(smoke_policy, tmp_path):
    zero3([str(ROOT / "tests" / "distributed_nonfinite.py"), smoke_policy[0], str(tmp_path / "nonfinite")], tmp_path)
    ranks = [torch.load(tmp_path / f"nonfinite.{r}") for r in (0, 1)]
    assert [r["skipped"] for r in ranks] == [[0.0, 1.0], [0.0, 1.0]]
    for name, w in ranks[0]["weights"].items():  # gathered: whole, finite and equal
        assert w.numel() > 0 and torch.isfinite(w).all() and torch.equal(w, ranks[1]["weights"][name]), name


def test_the_command_line_trains_evaluates_and_writes_the_folder_in_bf16(tmp_path):
    zero3(["-m", "mrtpo.cli", "train", "--task", "sql", "--method", "mrtpo", "--model", "smoke", "--steps", "2"],
          tmp_path, bf16=True)
    (folder,) = (tmp_path / "results" / "runs" / "sql" / "smoke").iterdir()
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["processes"] == 2 and "synthetic_test" in json.loads((folder / "eval.json").read_text())
    config = json.loads((tmp_path / "cache" / "work" / summary["work_dir"].rsplit("/", 1)[1] / "final" / "config.json").read_text())
    assert config["dtype"] == "bfloat16"  # trained with bf16 parameters, as on GPUs


def test_opsd_with_its_frozen_teacher_trains(tmp_path):
    """OPSD's initial teacher was a copy of the partitioned policy: empty shards ('weight' must be 2-D); it is now the
    starting checkpoint partitioned as TRL's reference model."""
    zero3(["-m", "mrtpo.cli", "train", "--task", "sql", "--method", "opsd", "--model", "smoke", "--steps", "2"], tmp_path)
    (folder,) = (tmp_path / "results" / "runs" / "sql" / "smoke").iterdir()
    import pandas as pd

    metrics = pd.read_csv(folder / "metrics.csv")
    assert len(metrics) == 2 and (metrics["opsd/divergence"] > 0).all() and (metrics["grad_norm"] > 0).all()
    assert "synthetic_test" in json.loads((folder / "eval.json").read_text())
