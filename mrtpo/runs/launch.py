"""Runs on several processes from one kernel: ``accelerate launch`` of ``mrtpo train``.

A notebook trains in its kernel, one process. A scale that needs more — the 7B's full fine-tuning on eight GPUs under
ZeRO-3, or ``processes=2`` gloo processes on a CPU to rehearse it — is trained by ``accelerate launch`` with the
plan's config (``accelerate_args``), running ``mrtpo train`` with the same settings (``train_command``): the folder
gets the hash of the same run launched by hand, and the kernel reads it. The job's output streams into the kernel
as it comes.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections import deque
from pathlib import Path

from mrtpo.runs.config import BadRequest

#: the shipped accelerate configs (``configs/accelerate`` of the repository)
CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "accelerate"


def accelerate_args(processes: int, gpu: bool, configs: Path = CONFIGS) -> list[str]:
    """``accelerate launch``'s options for ``processes`` processes: on GPUs the one-GPU config, or ZeRO-3's for
    several (its ``num_processes`` replaced), from ``configs``; on a CPU, accelerate's multi-process launcher
    (torchrun), whose processes join over gloo where there is no GPU."""
    if not gpu:
        return ["--multi_gpu", "--num_processes", str(processes), "--num_machines", "1", "--mixed_precision", "no",
                "--dynamo_backend", "no"]
    config = configs / ("zero3_8gpu.yaml" if processes > 1 else "one_gpu.yaml")
    return ["--config_file", str(config), "--num_processes", str(processes)]


def train_command(task: str, method: str, model: str, seed: int, steps: int | None, processes: int,
                  overrides: dict, gpu: bool | None = None) -> list[str]:
    """The ``accelerate launch ... -m mrtpo.cli train`` command of a run: every override as ``--set key=<JSON>``
    (the CLI reads JSON back to the same value, so the run's hash is the one ``run(...)`` computes); a custom
    ``z_blocks`` function as ``--z-blocks module:function``, which needs it importable (not defined in the kernel).
    ``gpu``: whether to launch on GPUs (default: whether this process sees one)."""
    if gpu is None:
        import torch

        gpu = torch.cuda.is_available()
    args = ["--task", task, "--method", method, "--model", str(model), "--seed", str(seed)]
    if steps is not None:
        args += ["--steps", str(steps)]
    settings = []
    for key, value in overrides.items():
        if key == "z_blocks":
            module, name = getattr(value, "__module__", "__main__"), getattr(value, "__qualname__", "")
            if module == "__main__" or "<" in name:
                raise BadRequest(f"z_blocks={name or value!r} is defined in this kernel, which launched processes "
                                 "cannot import: put it in a module beside the notebook and import it from there")
            args += ["--z-blocks", f"{module}:{name}"]
            continue
        try:
            settings.append(f"{key}={json.dumps(value)}")
        except TypeError:
            raise BadRequest(f"{key}={value!r} cannot be passed to launched processes (not JSON); set it in a "
                             "module the run imports, or train on one process") from None
    launch = [sys.executable, "-m", "accelerate.commands.launch", *accelerate_args(processes, gpu),
              "--main_process_port", str(free_port())]  # two kernels launching at once do not collide
    return [*launch, "-m", "mrtpo.cli", "train", *args, *(["--set", *settings] if settings else [])]


def free_port() -> int:
    """A TCP port free on this machine now, for the job's rendezvous."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run_streaming(command: list[str]) -> None:
    """Run ``command``, copying its output to this process's stdout as it comes (progress bars included); a
    failure raises with the output's last lines."""
    tail: deque[str] = deque(maxlen=40)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env) as proc:
        for chunk in iter(lambda: proc.stdout.read1(4096), b""):
            text = chunk.decode(errors="replace")
            sys.stdout.write(text)
            sys.stdout.flush()
            tail.extend(text.splitlines())
    if proc.returncode != 0:
        last = "\n".join(tail)
        raise RuntimeError(f"the launched run failed (exit {proc.returncode}): {' '.join(command)}\n{last}")


def launch_run(folder: Path, command: list[str]) -> None:
    """Train a run folder by ``command`` (``train_command``), streaming its output; fails unless the job wrote it."""
    run_streaming(command)
    if not folder.is_dir():
        raise RuntimeError(f"the launched run finished without writing {folder}: it computed another hash")
