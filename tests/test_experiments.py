"""Experiment runner and CLI on smoke sizes: folder layout, caching, atomic folders, the lock, kill-and-resume,
bad parameters, the paper-scale error and plan, ``--help``."""

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch

from mrtpo.runs import config
from mrtpo.runs import runner as E
from mrtpo.runs.results import Run, runs_table
from mrtpo.cli import main
from mrtpo.models.spec import ModelNotAvailable

#: 3 steps of 2 prompts x 4 samples on the smoke base; checkpoints every step (for kill-and-resume)
SMOKE = dict(model="smoke", steps=3, prompts_per_step=2, num_generations=4, max_completion_length=16, eval_prompts=4,
             eval_samples=2, train_size=16, save_steps=1)
CLI_SMOKE = ["--model", "smoke", "--steps", "3", "--set", "prompts_per_step=2", "num_generations=4",
             "max_completion_length=16", "eval_prompts=4", "eval_samples=2", "train_size=16", "save_steps=1"]


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    """One cache (the smoke bases are built once) and a results folder for this module."""
    root = tmp_path_factory.mktemp("experiments")
    saved = {k: os.environ.get(k) for k in ("MRTPO_CACHE", "MRTPO_RESULTS", "MRTPO_MODEL_DIR")}
    os.environ.update(MRTPO_CACHE=str(root / "cache"), MRTPO_RESULTS=str(root / "results"))
    os.environ.pop("MRTPO_MODEL_DIR", None)
    yield root
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def cli(*args, results: Path, wait: bool = True):
    env = {**os.environ, "MRTPO_RESULTS": str(results), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    cmd = [sys.executable, "-c", "from mrtpo.cli import main; main()", *args]
    if wait:
        return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def verdict(stdout: str) -> str:
    """The CLI's "trained: <folder>" / "reused: <folder>" line (TRL prints its logs to stdout too)."""
    return next(line for line in stdout.splitlines() if line.startswith(("trained: ", "reused: ")))


def comparable(metrics: pd.DataFrame) -> pd.DataFrame:
    """Per-step metrics without wall-clock fields."""
    return metrics[[c for c in metrics.columns if not c.startswith("time/") and c != "step_time"]]


# ---------------------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("kwargs, match", [
    (dict(task="chess"), "valid values: sql, if, tool"),
    (dict(method="ppo"), "grpo, gdpo, mrtpo, joint, shuffled, uniform"),
    (dict(model="13b"), "tiny, smoke, rehearsal, smollm2, 1.5b, 3b, 4b, 7b"),
    (dict(model="4b"), "not a paper setting for task 'sql'"),
    (dict(mrtpo_beta=1.5), r"\[0, 1\]"),
    (dict(beta=0.5), "mrtpo_beta.*kl_beta"),
    (dict(num_generations=1), ">= 2"),
    (dict(steps=0), ">= 1"),
    (dict(learning_rat=1e-3), "valid values: run settings"),
])
def test_bad_parameters_fail_before_any_work(dirs, kwargs, match):
    args = dict(task="sql", method="mrtpo", model="smoke") | kwargs
    with pytest.raises(config.BadRequest, match=match):
        E.run(**args)
    assert not (dirs / "results" / "runs").exists() and not (dirs / "cache" / "work").exists()


def test_paper_model_gives_the_registry_error_and_plan_prints(dirs, capsys):
    with pytest.raises(ModelNotAvailable, match=r"Qwen/Qwen2.5-Coder-7B-Instruct.*MRTPO_MODEL_DIR"):
        E.run("sql", "mrtpo", model="7b")
    main(["plan", "--task", "sql", "--model", "7b"])
    plan = json.loads(capsys.readouterr().out)
    assert plan["checkpoint"] == "Qwen/Qwen2.5-Coder-7B-Instruct" and plan["geometry"]["memory_gib_per_device"] > 100


def test_help_is_usable(capsys):
    for argv in (["--help"], ["train", "--help"]):
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "mrtpo train --task sql --method mrtpo --model tiny" in out and "--mrtpo-beta" in out and "resumes" in out


def test_cli_bad_input_is_one_line(dirs, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["train", "--task", "sql", "--method", "mrtpo", "--mrtpo-beta", "2"])
    assert "mrtpo_beta=2.0 is not valid" in str(exit_.value.code)


# ---------------------------------------------------------------------------------------------- the runner


@pytest.fixture(scope="module")
def reference(dirs):
    """Two processes asked for the same run at once: one trains, the other waits on the lock and reuses."""
    results = dirs / "results"
    procs = [cli("train", "--task", "sql", "--method", "mrtpo", "--seed", "3", *CLI_SMOKE, results=results, wait=False)
             for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-3000:]
    return [out for out, _ in outs], Run(next((results / "runs" / "sql" / "smoke").iterdir()))


def test_run_folder_then_second_call_trains_nothing(dirs, reference, monkeypatch):
    first = reference[1]
    assert first.path.name.startswith("mrtpo-beta0.5-steps3-seed3-")  # 3 steps, not the smoke size's 2: named so
    assert first.path.relative_to(dirs / "results" / "runs").parts[:2] == ("sql", "smoke")
    files = {p.name for p in first.path.iterdir()}
    assert files == {"config.json", "metrics.csv", "eval.json", "eval.csv", "eval_prompts.csv", "profiles.jsonl",
                     "summary.json", "tokenizer", "base_recipe.json", "SHA256SUMS"}
    # the run carries its base's tokenizer and warm-up recipe: token-level pages need no base model
    assert len(first.tokenizer()) == first.base_recipe["vocab_size"] and first.base_recipe["task"] == "sql"
    config = first.config
    assert set(config) >= {"config", "data", "packages", "model", "hash"} and config["config"]["mrtpo_beta"] == 0.5
    m = first.metrics
    assert len(m) == 3 and {"loss", "reward", "mrtpo/s", "mrtpo/beta_t", "time/generation", "time/replay"} <= set(m.columns)
    assert set(first.eval) == {"synthetic_test", "synthetic_hide_value"}
    assert set(first.eval["synthetic_test"]["temp1"]) == {"format", "executable", "execution_match"}
    assert first.profiles() and "q" in first.profiles()[0]
    # per prompt: the scorer on each prompt's samples alone; every text-to-SQL reward applies to every prompt, so
    # the mean over prompts is the run's metric
    per_prompt = first.eval_prompts
    assert per_prompt.groupby("benchmark")["prompt"].nunique().to_dict() == {b: r["n_prompts"] for b, r in first.eval.items()}
    for (bench, decoding, metric), value in per_prompt.groupby(["benchmark", "decoding", "metric"])["value"].mean().items():
        assert value == pytest.approx(first.eval[bench][decoding][metric])
    assert sum(f.stat().st_size for f in first.path.iterdir()) < 1_000_000  # nothing large in results/

    from mrtpo.method.trainer import MRTPOTrainer

    monkeypatch.setattr(MRTPOTrainer, "train", lambda *a, **k: pytest.fail("a cached run trained"))
    start = time.perf_counter()
    second = E.run("sql", "mrtpo", seed=3, **SMOKE)
    assert not second.trained and second.path == first.path and time.perf_counter() - start < 10
    table = pd.read_csv(first.path / "eval.csv")
    assert set(table["benchmark"]) == {"synthetic_test", "synthetic_hide_value"}
    assert set(table["decoding"]) == {"temp1", "greedy"} and (table["run"] == first.path.name).all()
    assert runs_table()["path"].tolist() == [first.path.relative_to(E.results_root()).as_posix()]  # no machine path
    assert first.summary["eval_runtime_s"] > 0 and runs_table()["eval_s"].tolist() == [first.summary["eval_runtime_s"]]
    assert "$MRTPO_CACHE" in first.summary["base_model"] and str(E.cache_root()) not in json.dumps(first.summary)
    assert first.summary["torch_threads"] >= 1 and first.summary["load_average_15min"] >= 0  # what the time ran under
    # any setting that changes the result changes the folder
    other = E.locate(E.resolve("sql", "mrtpo", seed=3, **(SMOKE | {"mrtpo_beta": 0.25})))[2]
    assert other != first.path and "beta0.25" in other.name


def test_crash_leaves_no_finished_folder(dirs, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("evaluation crashed")

    from mrtpo.runs import evaluation

    monkeypatch.setattr(evaluation, "evaluate", broken)  # the name write_evaluation calls
    with pytest.raises(RuntimeError, match="evaluation crashed"):
        E.run("sql", "gdpo", seed=7, **(SMOKE | {"steps": 1}))
    assert E.find("sql", "gdpo", seed=7, **(SMOKE | {"steps": 1})) is None
    assert not list((dirs / "results" / "runs" / "sql" / "smoke").glob("*gdpo*"))  # no temporary folder either


def test_lock_second_process_reuses(reference):
    outs, run = reference
    assert sorted(verdict(o).split(":")[0] for o in outs) == ["reused", "trained"]
    assert all(verdict(o).endswith(str(run.path)) for o in outs) and all("synthetic_test" in o for o in outs)


def test_kill_and_resume_gives_identical_results(dirs, reference):
    """SIGKILL at a random checkpointed step, rerun the same command: the resumed run equals the uninterrupted one."""
    _, uninterrupted = reference
    results = dirs / "results_kill"
    digest = E.locate(E.resolve("sql", "mrtpo", seed=3, **SMOKE))[1]
    target = dirs / "cache" / "work" / digest / "trainer" / f"checkpoint-{random.Random().choice([1, 2])}"
    proc = cli("train", "--task", "sql", "--method", "mrtpo", "--seed", "3", *CLI_SMOKE, results=results, wait=False)
    deadline = time.time() + 240
    while not (target / "trainer_state.json").exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, "the run finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not [p for p in results.glob("runs/*/*/*") if not p.name.startswith(".")]  # nothing finished written
    rerun = cli("train", "--task", "sql", "--method", "mrtpo", "--seed", "3", *CLI_SMOKE, results=results)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert verdict(rerun.stdout).startswith("trained")
    resumed = Run(Path(verdict(rerun.stdout).split()[1]))
    assert resumed.summary["resumed_from_step"] in (1, 2, 3)
    assert resumed.summary["weights_sha256"] == uninterrupted.summary["weights_sha256"]
    pd.testing.assert_frame_equal(comparable(resumed.metrics), comparable(uninterrupted.metrics))
    assert resumed.eval == uninterrupted.eval
    assert resumed.profiles() == uninterrupted.profiles()


def test_trainer_resume_gives_identical_weights(smoke_policy, tmp_path):
    """The gradient path (the smoke base's rewards are all 0): 3 steps straight == stop after 1, resume to 3."""
    from test_trainer import make_trainer
    from transformers import TrainerCallback

    class StopAfterOne(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            control.should_training_stop = True

    kwargs = dict(save_strategy="steps", save_steps=1, full_determinism=True, beta_warmup_steps=0)
    full = make_trainer(smoke_policy, tmp_path / "full", "mrtpo", steps=3, **kwargs)
    full.train()
    stopped = make_trainer(smoke_policy, tmp_path / "resumed", "mrtpo", steps=3, **kwargs)
    stopped.add_callback(StopAfterOne())
    stopped.train()
    resumed = make_trainer(smoke_policy, tmp_path / "resumed", "mrtpo", steps=3, **kwargs)
    resumed.train(resume_from_checkpoint=True)
    assert E.weights_hash(resumed.model) == E.weights_hash(full.model) != E.weights_hash(stopped.model)
    steps = lambda t: [(h["step"], h["loss"], h["reward"]) for h in t.state.log_history if "loss" in h]  # noqa: E731
    assert steps(resumed) == steps(full) and len(steps(full)) == 3


# ---------------------------------------------------------------------------------------------- the arms


Z_CALLS = []


def custom_z_blocks(prompts, completions, **columns):
    """A Z_k formulation of the test's own: the task's blocks, with the reference shown to execution_match only."""
    from mrtpo.tasks import get_task

    Z_CALLS.append(len(completions))
    blocks = get_task("sql").z_blocks(prompts=prompts, completions=completions, **columns)
    return [{k: v for k, v in b.items() if k == "execution_match"} for b in blocks]


@pytest.mark.parametrize("method, overrides, logged", [
    ("gdpo+saw", {}, "reward"),
    ("opsd", {}, "opsd/divergence"),
    ("gdpo+opsd", {"opsd_coef": 0.1, "opsd_divergence": "reverse"}, "opsd/divergence"),
    ("mrtpo+constlen", {}, "mrtpo/s"),
    ("mrtpo", {"rewards": "sub"}, "rewards/sql_tables/mean"),
    ("opsd", {"z_blocks": custom_z_blocks}, "opsd/divergence"),  # OPSD's teacher reads Z at every step
])
def test_every_arm_trains_through_the_runner(dirs, method, overrides, logged):
    run = E.run("sql", method, seed=5, **(SMOKE | {"steps": 1}), **overrides)
    stored = run.settings
    assert run.trained and run.path.name.startswith(method + "-") and config.method_label(stored) == method
    assert logged in run.metrics.columns and run.metrics[logged].notna().all()
    # evaluation scores the default rewards whatever the run trained on: arms stay comparable
    assert set(run.eval["synthetic_test"]["temp1"]) == {"format", "executable", "execution_match"}
    # new settings are in the key only when set away from their defaults
    assert {k for k in config.OPTIONAL_FIELDS if k in stored} == {k for k in config.OPTIONAL_FIELDS
                                                                   if k in method.split("+")[1:] or k in overrides}
    assert E.find("sql", method, seed=5, **(SMOKE | {"steps": 1}), **overrides).path == run.path
    if "rewards" in overrides:
        assert "rewards/execution_match/mean" not in run.metrics.columns and stored["rewards"] == "sub"
    if "z_blocks" in overrides:
        assert stored["z_blocks"].startswith("custom_z_blocks sha256:") and Z_CALLS


def test_constlen_is_dr_grpo_and_the_z_blocks_source_is_the_key(dirs, capsys):
    cfg = E.resolve("sql", "gdpo+constlen", **SMOKE)
    assert E.trainer_config(cfg, dirs / "unused").loss_type == "dr_grpo"
    assert E.trainer_config(E.resolve("sql", "gdpo", **SMOKE), dirs / "unused").loss_type == "dapo"

    def custom_z_blocks(prompts, completions, **columns):  # same name, other source: another run
        return [{} for _ in completions]

    assert config.z_blocks_key(custom_z_blocks) != E.resolve("sql", "mrtpo", z_blocks=globals()["custom_z_blocks"]).z_blocks
    # the CLI finds the run trained with the same function by its dotted path
    trained = E.run("sql", "opsd", seed=5, **(SMOKE | {"steps": 1}), z_blocks=globals()["custom_z_blocks"])
    main(["eval", "--task", "sql", "--method", "opsd", "--seed", "5", *CLI_SMOKE[:2], "--steps", "1",
          "--z-blocks", "test_experiments:custom_z_blocks", "--set", *CLI_SMOKE[5:]])
    assert str(trained.path) in capsys.readouterr().out
    with pytest.raises(config.BadRequest, match="the function itself"):
        E.run("sql", "mrtpo", z_blocks="test_experiments:custom_z_blocks", **SMOKE)
    with pytest.raises(SystemExit, match="MODULE:FUNCTION"):
        main(["eval", "--task", "sql", "--method", "mrtpo", "--z-blocks", "no_colon"])


def test_region_blend_names_its_folder_and_leaves_other_keys_alone():
    """The placement dial is part of the arm (folder name, tables) and of the key only when set: every run without
    it keeps its hash (``OPTIONAL_FIELDS``); 1 and 1.0 are one setting; only mrtpo has the dial."""
    plain, ident = E.locate(E.resolve("sql", "mrtpo", **SMOKE))[2], E.identity(E.resolve("sql", "mrtpo", **SMOKE))
    blended = E.locate(E.resolve("sql", "mrtpo", **SMOKE, region_blend=0.5))[2]
    assert "region_blend" not in ident["config"] and blended.name.startswith("mrtpo-blend0.5-beta0.5-")
    assert plain.name.split("-")[-1] != blended.name.split("-")[-1]
    assert E.locate(E.resolve("sql", "mrtpo", **SMOKE, region_blend=1))[1] == E.locate(E.resolve("sql", "mrtpo", **SMOKE, region_blend=1.0))[1]
    assert E.trainer_config(E.resolve("sql", "mrtpo", **SMOKE, region_blend=0.5), Path("unused")).region_blend == 0.5
    assert E.locate(E.resolve("sql", "region+saw", **SMOKE))[2].name.startswith("region+saw-beta0.5-")
    for method, blend in (("gdpo", 0.5), ("region", 0.5), ("mrtpo", 1.5)):
        with pytest.raises(config.BadRequest, match="region_blend"):
            E.resolve("sql", method, **SMOKE, region_blend=blend)
