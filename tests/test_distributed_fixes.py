"""Fixes of the multi-process / ZeRO-3 path that a CPU can show (issue 43): the weights hash of bfloat16
parameters and a checkpoint written by several processes counted as complete. (The logged concentration's cumsum,
moved to the CPU because CUDA's raises under deterministic algorithms, only a GPU can show.)"""

import hashlib

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
