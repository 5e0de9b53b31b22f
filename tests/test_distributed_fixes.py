"""Fixes of the multi-process / ZeRO-3 path that a CPU can show (issue 43): the weights hash of bfloat16
parameters, a checkpoint written by several processes counted as complete, the replay's forwards in step on every
process, and a non-finite loss on one process skipped by all. (The logged concentration's cumsum, moved to the CPU
because CUDA's raises under deterministic algorithms, only a GPU can show.)"""

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from mrtpo.runs import runner as runs


def test_weights_hash_reads_bfloat16_and_keeps_float32_hashes():
    model = torch.nn.Linear(3, 2)
    old = hashlib.sha256()  # the float32 hash every committed folder records
    for name, tensor in model.state_dict().items():
        old.update(name.encode())
        old.update(tensor.detach().contiguous().numpy().tobytes())
    assert runs.weights_hash(model) == old.hexdigest()
    assert len(runs.weights_hash(model.to(torch.bfloat16))) == 64  # .numpy() raised TypeError on bfloat16


def test_checkpoint_of_several_processes_is_complete(tmp_path):
    for step, files in ((10, ["rng_state.pth"]), (20, ["rng_state_0.pth", "rng_state_1.pth"]), (30, [])):
        ckpt = tmp_path / f"checkpoint-{step}"
        ckpt.mkdir()
        for name in files + ["trainer_state.json"]:
            (ckpt / name).write_text("{}")
    assert runs.last_checkpoint(tmp_path).name == "checkpoint-20"  # the 2-process one was deleted before
    assert not (tmp_path / "checkpoint-30").exists()  # no RNG state: killed while saving


def torchrun(script: str, policy: str, out: Path, port: int, timeout: int = 180) -> subprocess.CompletedProcess:
    """``script`` (under tests/) on 2 gloo processes; a hang counts as a failure after ``timeout`` seconds."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(port),
               str(Path(__file__).with_name(script)), policy, str(out)]
    job = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=out.parent)
    try:
        stdout, stderr = job.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        # SIGTERM: torchrun ends its workers (each in a session of its own) before it exits; a SIGKILL would orphan them
        job.terminate()
        job.communicate(timeout=120)
        pytest.fail(f"{script} on 2 processes did not finish in {timeout} s (a process waits on the other)")
    return subprocess.CompletedProcess(command, job.returncode, stdout, stderr)


@pytest.mark.skipif(sys.platform != "linux", reason="gloo multi-process check")
def test_replay_makes_the_same_forwards_on_every_process(smoke_policy, tmp_path):
    """Under ZeRO-3 every decoder forward is a collective: a process with less (or nothing) to replay still makes
    as many as the process that replays most, in ``replay.relevance``, in OPSD's teacher forward and through the
    trainer."""
    done = torchrun("distributed_replay.py", smoke_policy[0], tmp_path / "replay", 29563)
    assert done.returncode == 0, done.stderr[-3000:]
    ranks = [torch.load(tmp_path / f"replay.{r}") for r in (0, 1)]
    # rank 0: 2 groups x (1 prefix + 12 rows / 2 a batch); trainer: 1 prefix + 8 rows / 2
    assert ranks[0] == {"none": 14, "fewer": 14, "teacher": 3, "trainer": 5}
    assert ranks[1] == ranks[0], f"decoder forwards per rank: {ranks}"


@pytest.mark.skipif(sys.platform != "linux", reason="gloo multi-process check")
def test_a_nonfinite_loss_on_one_process_is_skipped_by_all(smoke_policy, tmp_path):
    """Rank 1's loss is NaN at step 1: both processes finish, both log the skip, the weights stay equal."""
    done = torchrun("distributed_nonfinite.py", smoke_policy[0], tmp_path / "nonfinite", 29564)
    assert done.returncode == 0, done.stderr[-3000:]
    ranks = [torch.load(tmp_path / f"nonfinite.{r}") for r in (0, 1)]
    assert [r["skipped"] for r in ranks] == [[0.0, 1.0], [0.0, 1.0]]
    for name, w in ranks[0]["weights"].items():
        assert torch.isfinite(w).all() and torch.equal(w, ranks[1]["weights"][name]), name
