"""Fixes of the multi-process / ZeRO-3 path that a CPU can show (issue 43): the weights hash of bfloat16
parameters, a checkpoint written by several processes counted as complete, the replay's forwards in step on every
process, and a non-finite loss on one process skipped by all. (The logged concentration's cumsum, moved to the CPU
because CUDA's raises under deterministic algorithms, only a GPU can show.)"""

import hashlib
import json
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


@pytest.mark.parametrize("bf16", [False, True])
def test_the_replay_floor_is_the_runs_precision(smoke_policy, tmp_path, monkeypatch, bf16):
    """Item 7: the trainer hands the replay its compute precision, so a bf16 run's rounding floor is bf16's whether its
    hidden states arrive in fp32 (autocast) or bf16 (ZeRO-3); an fp32 run keeps fp32's (the tiny runs unchanged)."""
    from mrtpo.method import replay
    from test_trainer import make_trainer

    seen = []

    def spy(*args, **kwargs):
        seen.append(kwargs.get("precision"))
        return js_relevance(*args, **kwargs)

    js_relevance = replay.js_relevance
    monkeypatch.setattr(replay, "js_relevance", spy)
    make_trainer(smoke_policy, tmp_path, steps=1, bf16=bf16).train()
    assert seen and set(seen) == {torch.bfloat16 if bf16 else None}


def test_a_launched_command_reads_back_as_the_same_run():
    """Item 5: the kernel launches ``mrtpo train`` with every setting as JSON; the CLI resolves the same hash."""
    from mrtpo.cli import _overrides, build_parser
    from mrtpo.runs.config import BadRequest
    from mrtpo.runs.launch import train_command
    from mrtpo.runs.runner import locate, resolve

    overrides = dict(mrtpo_beta=0.25, save_steps=5, learning_rate=1e-6, region_blend=0.5, rewards="default")
    command = train_command("sql", "mrtpo+saw", "rehearsal", 3, 2, 2, overrides, gpu=False)
    assert command[command.index("--num_processes") + 1] == "2" and "--multi_gpu" in command
    args = build_parser().parse_args(command[command.index("mrtpo.cli") + 1:])
    assert _overrides(args) == overrides
    launched = resolve(args.task, args.method, args.model, args.seed, args.steps, **_overrides(args))
    assert locate(launched)[1] == locate(resolve("sql", "mrtpo+saw", "rehearsal", 3, 2, **overrides))[1]
    gpu = train_command("sql", "gdpo", "7b", 0, None, 8, {}, gpu=True)
    assert gpu[gpu.index("--config_file") + 1].endswith("configs/accelerate/zero3_8gpu.yaml")

    def my_blocks(prompts, completions, **kw):
        return [{} for _ in completions]

    with pytest.raises(BadRequest, match="cannot import"):
        train_command("sql", "mrtpo", "smoke", 0, 1, 2, {"z_blocks": my_blocks})


@pytest.mark.skipif(sys.platform != "linux", reason="gloo multi-process check")
def test_a_kernel_trains_a_missing_run_as_a_two_process_job(tmp_path, monkeypatch, capfd):
    """Item 5: ``run(..., processes=2)`` from one process launches the job (two gloo processes, output streamed),
    then reads the folder the job wrote: the hash of the same run on one process; asked again, it is reused."""
    from mrtpo.runs.runner import locate, resolve, run

    monkeypatch.setenv("MRTPO_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("MRTPO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    first = run("sql", "gdpo", "smoke", steps=1, processes=2)
    assert first.trained and first.path == locate(resolve("sql", "gdpo", "smoke", 0, 1))[2]
    assert first.summary["processes"] == 2
    assert "[rank1]" in capfd.readouterr().out  # the job's output reached this process as it came
    again = run("sql", "gdpo", "smoke", steps=1, processes=2)
    assert not again.trained and again.path == first.path


def test_a_run_that_does_not_fit_refuses_with_the_plans_numbers(monkeypatch, tmp_path):
    """Item 5: the plan's ``fits=False`` is checked before any weights load (the 7B on one 80 GB GPU: ~155 GiB)."""
    from mrtpo.models import geometry
    from mrtpo.runs.runner import resolve, trainer_config

    seven_b = geometry.ARCHITECTURES["Qwen/Qwen2.5-Coder-7B-Instruct"]
    one_gpu = geometry.plan_batches(32, 8, 1, arch=seven_b, budget_gib=80 * geometry.GPU_MEMORY_SHARE,
                                    prompt_len=512, completion_len=1024)
    assert one_gpu.fits is False
    monkeypatch.setattr(geometry, "plan_for_job", lambda *a, **k: one_gpu)
    with pytest.raises(geometry.DoesNotFit, match=r"does not fit: an estimated \d+(\.\d+)? GiB per device.*processes=8"):
        trainer_config(resolve("sql", "gdpo", "smoke"), tmp_path)  # the plan is the 7B's on one GPU


@pytest.mark.skipif(sys.platform != "linux", reason="gloo multi-process check")
def test_two_processes_killed_after_a_checkpoint_resume_to_the_uninterrupted_run(tmp_path):
    """Item 3 on two processes: the job is killed (SIGKILL to both) once a checkpoint is complete, the same command
    runs again and resumes from it: its weights equal those of the job that was never interrupted."""
    import signal
    import time

    import psutil

    from mrtpo.runs.launch import free_port
    from mrtpo.runs.runner import locate, resolve

    settings = dict(prompts_per_step=2, num_generations=4, max_completion_length=16, eval_prompts=4, eval_samples=2,
                    train_size=16, save_steps=1)
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(free_port()), "-m",
               "mrtpo.cli", "train", "--task", "sql", "--method", "mrtpo", "--model", "smoke", "--steps", "3",
               "--seed", "3", "--set", *(f"{k}={v}" for k, v in settings.items())]
    digest = locate(resolve("sql", "mrtpo", "smoke", 3, 3, **settings))[1]

    def job(name: str) -> subprocess.Popen:
        env = {**os.environ, "OMP_NUM_THREADS": "1", "MRTPO_RESULTS": str(tmp_path / name / "results"),
               "MRTPO_CACHE": str(tmp_path / name / "cache")}
        log = open(tmp_path / f"{name}.log", "a")  # a pipe nobody reads would fill and stall the job
        return subprocess.Popen(command, env=env, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def summary(name: str) -> dict:
        (folder,) = (tmp_path / name / "results" / "runs" / "sql" / "smoke").iterdir()
        return json.loads((folder / "summary.json").read_text())

    whole = job("whole")
    assert whole.wait(timeout=300) == 0, (tmp_path / "whole.log").read_text()[-3000:]
    killed = job("killed")
    first = tmp_path / "killed" / "cache" / "work" / digest / "trainer" / "checkpoint-1"
    deadline = time.time() + 240
    while not all((first / f).exists() for f in ("trainer_state.json", "rng_state_0.pth", "rng_state_1.pth")):
        assert killed.poll() is None and time.time() < deadline, "the job ended before it could be killed"
        time.sleep(0.02)
    for process in [*psutil.Process(killed.pid).children(recursive=True), psutil.Process(killed.pid)]:
        process.send_signal(signal.SIGKILL)  # torchrun starts each worker in a session of its own: kill each
    killed.wait()
    assert not [p for p in (tmp_path / "killed" / "results").glob("runs/*/*/*") if not p.name.startswith(".")]
    again = job("killed")
    assert again.wait(timeout=300) == 0, (tmp_path / "killed.log").read_text()[-3000:]
    assert summary("killed")["resumed_from_step"] in (1, 2)
    assert summary("killed")["weights_sha256"] == summary("whole")["weights_sha256"]


def test_bf16_follows_the_launch_and_a_set_trainer_field_wins(monkeypatch, tmp_path):
    """A DeepSpeed bf16 launch on CPU processes asked for bf16 and the runner said fp32 (DeepSpeed refused to start);
    ``--set bf16=true`` raised 'got multiple values for keyword argument'."""
    from mrtpo.runs.runner import resolve, trainer_config

    assert not trainer_config(resolve("sql", "gdpo", "smoke"), tmp_path).bf16  # the tiny runs: fp32 on CPU
    assert trainer_config(resolve("sql", "gdpo", "smoke", bf16=True), tmp_path).bf16
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "bf16")
    assert trainer_config(resolve("sql", "gdpo", "smoke"), tmp_path).bf16
