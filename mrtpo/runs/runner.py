"""Run folders: one call trains, evaluates and writes a folder that notebooks read back in seconds.

``run(task, method, model="tiny", seed=0, steps=None, **overrides)`` resolves a ``RunConfig``
(``mrtpo.runs.config``), hashes it together with the base model, the data and the package versions, and either
returns the finished folder of that hash or trains::

    results/runs/<task>/<model>/<method>[-dial<setting>][-beta<mrtpo_beta>][-steps<n>]-seed<s>-<hash8>/   (files: ``mrtpo.runs.results``)

Faults (issue 7): the folder is written under a temporary name and renamed when complete, so a crash never
leaves a folder the cache would reuse; a lock file makes a second process asking for the same run wait and
reuse it; checkpoints live in ``$MRTPO_CACHE/work/<hash>/`` and a rerun after a kill resumes from the last
complete one, with RNG states restored, giving the same weights.

Identity: ``identity(cfg)`` is what the content hash covers. Its keys are the committed folders' keys and
must not change meaning: a changed key changes every hash and makes a fresh clone retrain everything
(``tests/test_identity.py`` holds every committed folder to its stored hash).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import shutil
from pathlib import Path

from mrtpo import __version__
from mrtpo.method.advantages import TOKEN_LEVEL
from mrtpo.runs.config import OPTIONAL_FIELDS, BadRequest, RunConfig, resolve
from mrtpo.runs.evaluation import benchmarks, require_benchmark_files, write_evaluation
from mrtpo.runs.behaviour import BASE_ARM, folder_arm, is_stale, record
from mrtpo.runs.launch import launch_run, train_command
from mrtpo.models.geometry import job_processes
from mrtpo.files.folders import (
    copy_tokenizer,
    folder_in_place,
    last_checkpoint,
    locked,
    truncate_profiles,
    weights_hash,
)
from mrtpo.files.manifest import check_writable
from mrtpo.files.paths import cache_root, data_root, portable, results_root
from mrtpo.runs.results import Run

#: checkpoints kept in a run's work dir (``save_total_limit``): the newest complete one is what a rerun resumes from
#: (``last_checkpoint``), the one before it covers a kill while the newest is written; without a limit a 7B ZeRO-3 run
#: kept every 10 steps' weights and optimizer state (~1.2 TB). Deleting older checkpoints changes no number trained.
KEEP_CHECKPOINTS = 2


# ----------------------------------------------------------------------------------------------------
# identity


def train_data(cfg: RunConfig):
    """Training prompts: synthetic at the tiny scale, the paper's training set at the real scale."""
    task = cfg.task_def
    if cfg.scale == "tiny":
        return task.synthetic(cfg.train_size, seed=cfg.data_seed, split="train")
    return task.training_set(data_root())


def _rows_digest(rows) -> str:
    """Content hash of dataset rows; absolute paths (sqlite files) are reduced to their last three parts."""
    h = hashlib.sha256()
    for row in rows:
        row = {k: "/".join(Path(v).parts[-3:]) if k.endswith("_path") else v for k, v in row.items()}
        h.update(json.dumps(row, sort_keys=True, default=str).encode())
    return h.hexdigest()[:16]


#: data versions computed in this process, by what they read (a result page looks up hundreds of runs of one data)
_DATA_VERSIONS: dict[tuple, dict] = {}


def data_version(cfg: RunConfig) -> dict:
    """What the run trains and is evaluated on, by content: a changed generator or file changes the key. Computed
    once per process for each set of the fields it reads (task, model: its scale and evaluation limit, the synthetic
    sizes and seeds, the data root)."""
    key = (cfg.task, cfg.model, cfg.train_size, cfg.data_seed, cfg.eval_prompts, cfg.eval_seed, str(data_root()))
    if key not in _DATA_VERSIONS:
        version = {"train": _rows_digest(train_data(cfg))}
        for name, bench in benchmarks(cfg).items():
            version[name] = _rows_digest(bench.data)
        _DATA_VERSIONS[key] = version
    return dict(_DATA_VERSIONS[key])


def package_versions() -> dict:
    import torch
    import transformers
    import trl

    return {"mrtpo": __version__, "trl": trl.__version__, "transformers": transformers.__version__,
            "torch": torch.__version__}


def identity(cfg: RunConfig) -> dict:
    """Everything the cache key covers: config, base model, data version, package versions. Fields added after
    the first committed runs (``OPTIONAL_FIELDS``) enter only when set away from their defaults."""
    config = {k: v for k, v in dataclasses.asdict(cfg).items() if k not in OPTIONAL_FIELDS or v != OPTIONAL_FIELDS[k]}
    packages = package_versions()
    if cfg.lora_rank is not None:  # only LoRA runs depend on peft: the other runs' identities stay as they were
        from importlib.metadata import version

        packages["peft"] = version("peft")
    return {"config": config, "model": cfg.base_identity, "data": data_version(cfg), "packages": packages}


def content_hash(ident: dict) -> str:
    return hashlib.sha256(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()


def run_name(cfg: RunConfig, digest: str) -> str:
    """cleanRL-style folder name, the same every time: ``mrtpo+saw-beta0.5-seed0-1a2b3c4d`` (``beta`` is
    ``mrtpo_beta``; the committed folders are named so); on a dial base ``gdpo-dial0.2-seed0-1a2b3c4d``; a run
    of other than the model's default steps (``RunConfig.default_steps``) says so: ``gdpo-steps300-seed0-1a2b3c4d``."""
    beta = f"-beta{cfg.mrtpo_beta:g}" if cfg.method in TOKEN_LEVEL and cfg.method != "uniform" else ""
    dial = f"-dial{cfg.dial:g}" if cfg.dial is not None else ""
    steps = f"-steps{cfg.steps}" if cfg.steps != cfg.default_steps else ""
    return f"{cfg.label}{dial}{beta}{steps}-seed{cfg.seed}-{digest[:8]}"


def locate(cfg: RunConfig) -> tuple[dict, str, Path]:
    """(identity, content hash, run folder) of a config; the folder may not exist yet."""
    ident = identity(cfg)
    digest = content_hash(ident)
    return ident, digest, results_root() / "runs" / cfg.task / cfg.model_label / run_name(cfg, digest)


# ----------------------------------------------------------------------------------------------------
# the run


def base_path(cfg: RunConfig) -> Path:
    """Local folder of the policy a run starts from (``Model.resolve``; a tiny base of ``RunConfig.base_recipe``,
    built when absent)."""
    return cfg.model_def.resolve(cfg.task_def, cfg.base_seed, recipe=cfg.base_recipe)


def find(task: str, method: str, model: str = "tiny", seed: int = 0, steps: int | None = None, **overrides) -> Run | None:
    """The finished run of these arguments (``z_blocks=`` the same function as ``run``'s), or None; never trains."""
    folder = locate(resolve(task, method, model, seed, steps, **overrides))[2]
    return Run(folder) if folder.is_dir() and not is_stale(folder) else None


def locate_base(cfg: RunConfig) -> tuple[dict, str, Path]:
    """(identity, content hash, folder) of the base evaluation of a run config (:func:`base_evaluation`)."""
    ident = identity(cfg)
    digest = content_hash({**ident, "base": True})
    dial = f"-dial{cfg.dial:g}" if cfg.dial is not None else ""
    return ident, digest, results_root() / "base" / cfg.task / cfg.model_label / f"base{dial}-{digest[:8]}"


def base_evaluation(task: str, model: str = "tiny", force: bool = False, **overrides) -> Run:
    """The untrained base policy (RL step 0) evaluated with the same benchmarks, decodings and evaluation seed as a
    run of these settings: the main tables' "base" row. Written once to
    ``results/base/<task>/<model>/base[-dial<d>]-<hash>/`` (``config.json``, ``eval.json``, ``eval.csv`` with
    method "base", ``eval_prompts.csv``, ``summary.json``) and reused; the key is a run's (:func:`identity`) of
    GDPO at seed 0, so a changed base, benchmark or evaluation setting evaluates afresh. ``force`` re-evaluates."""
    cfg = resolve(task, "gdpo", model, **overrides)
    ident, digest, folder = locate_base(cfg)
    if folder.is_dir() and not force and not is_stale(folder):
        return Run(folder)
    check_writable(folder.parent)
    with locked(cache_root() / "work" / f"{digest}.base-eval.lock"):
        if folder.is_dir() and not force and not is_stale(folder):
            return Run(folder)
        with folder_in_place(folder) as tmp:
            (tmp / "config.json").write_text(json.dumps({**ident, "hash": digest, "name": folder.name}, indent=2,
                                                        default=str))
            write_evaluation(cfg, base_path(cfg), folder.name, tmp, {"train_runtime_s": 0.0, **record(task, BASE_ARM)},
                             method="base")
    return Run(folder, trained=True)


def run(task: str, method: str, model: str = "tiny", seed: int = 0, steps: int | None = None, force: bool = False,
        processes: int = 1, **overrides) -> Run | None:
    """Train ``method`` on ``task`` with ``model``, evaluate, write the run folder; reuse it when it exists.

    ``overrides``: any ``RunConfig`` field (``mrtpo_beta=``, ``saw=True``, ``rewards="sub"``, ``dial=0.2``, ...) or any
    other ``MRTPOConfig`` field. ``z_blocks=fn``: train with your own Z blocks (a function with a reward function's
    signature returning ``{reward name: text}`` per response); its source is part of the run's key. ``force``
    retrains from scratch and replaces the folder. ``processes`` > 1 from one process (a notebook's kernel): a
    missing folder is trained by ``accelerate launch`` on that many processes (``mrtpo.runs.launch``), same hash.
    Inside a multi-process job, processes other than 0 get None: process 0 evaluates and writes the folder.
    """
    z_blocks = overrides.get("z_blocks")
    if z_blocks is not None and not callable(z_blocks):
        raise BadRequest(f"z_blocks= takes the function itself (the CLI takes --z-blocks module:function), got {z_blocks!r}")
    cfg = resolve(task, method, model, seed, steps, **overrides)
    ident, digest, folder = locate(cfg)
    if folder.is_dir() and not force:
        if not is_stale(folder):
            return Run(folder)
        print(f"[mrtpo] {folder.name} was written by code of another behaviour (mrtpo runs --stale): retraining it")
        force = True
    check_writable(folder.parent)  # read-only or full: fail now, not after training
    work = cache_root() / "work" / digest
    if force and max(processes, job_processes()) > 1:
        raise BadRequest(f"retraining {folder.name} (force=True, or a folder of another code behaviour) is not "
                         "supported on several processes: delete the run folder instead")
    if processes > 1 and job_processes() == 1:  # the kernel asks for a multi-process job: launch it, read its folder
        launch_run(folder, train_command(cfg.task, method, model, seed, steps, processes, overrides))
        return Run(folder, trained=True)
    if job_processes() > 1:
        return _run_multiprocess(cfg, ident, digest, work, folder)
    with locked(cache_root() / "work" / f"{digest}.lock"):
        if folder.is_dir() and not force and not is_stale(folder):  # another process finished it while we waited
            return Run(folder)
        if force:
            shutil.rmtree(work, ignore_errors=True)
        summary = train(cfg, work, z_blocks)
        _write_folder(cfg, ident, digest, work, summary, folder)
    return Run(folder, trained=True)


def _run_multiprocess(cfg: RunConfig, ident: dict, digest: str, work: Path, folder: Path) -> Run | None:
    """A run launched on several processes (``torchrun``, ``accelerate launch``): every process trains (no lock:
    a process waiting on it would stall the others' collectives); process 0 then evaluates the saved final weights
    alone and writes the folder (the weights hash is taken from the saved weights, whole even under ZeRO-3).
    The other processes return None as soon as training ends (the folder is process 0's to write)."""
    from mrtpo.models.geometry import job_rank

    summary = train(cfg, work)
    from transformers.integrations.deepspeed import unset_hf_deepspeed_config

    unset_hf_deepspeed_config()  # else from_pretrained below partitions the weights with processes that have left
    if job_rank() == 0:
        from transformers import AutoModelForCausalLM

        summary["weights_sha256"] = weights_hash(AutoModelForCausalLM.from_pretrained(work / "final"))
        _write_folder(cfg, ident, digest, work, summary, folder)
        return Run(folder, trained=True)
    return None


def trainer_config(cfg: RunConfig, output_dir: Path, model_dir: Path | None = None):
    """The MRTPOConfig of a run. Batch geometry from ``mrtpo.models.geometry.plan_for_job``: ``prompts_per_step x
    num_generations`` completions per optimizer step over all processes, micro-batches and accumulation from the
    GPU's memory and the model in ``model_dir``; a plan that does not fit refuses (``BatchPlan.require_fit``). bf16
    on a GPU or where the launch asks for it (fp32 on CPU); gradient checkpointing on a
    GPU and at the real scale everywhere (so the CPU rehearsal of the paper path exercises it). A checkpoint every
    ``save_steps``, the last ``KEEP_CHECKPOINTS`` kept."""
    import torch

    from mrtpo.models.geometry import plan_for_job
    from mrtpo.method.trainer import MRTPOConfig

    gpu = torch.cuda.is_available()
    plan = plan_for_job(cfg.prompts_per_step, cfg.num_generations, cfg.max_completion_length, model_dir,
                        kl=cfg.kl_beta > 0, frozen_teacher=cfg.frozen_teacher)
    plan.require_fit(f"{cfg.model} ({cfg.spec.checkpoint})")
    return MRTPOConfig(**{**dict(
        output_dir=str(output_dir), advantage=cfg.method, saw=cfg.saw, opsd=cfg.opsd, mrtpo_beta=cfg.mrtpo_beta,
        region_blend=cfg.region_blend, beta_warmup_steps=cfg.beta_warmup_steps, beta=cfg.kl_beta, learning_rate=cfg.learning_rate,
        max_steps=cfg.steps, **plan.trainer_args(), max_completion_length=cfg.max_completion_length,
        temperature=cfg.temperature, seed=cfg.seed, logging_steps=1, save_strategy="steps", save_steps=cfg.save_steps,
        # bf16 on a GPU, or where the launch asks for it (a DeepSpeed bf16 config on CPU processes)
        report_to="none", use_cpu=not gpu, bf16=gpu or os.environ.get("ACCELERATE_MIXED_PRECISION") == "bf16",
        gradient_checkpointing=gpu or cfg.scale == "real",
        full_determinism=cfg.deterministic,
        profile_samples=cfg.profile_samples if cfg.method in TOKEN_LEVEL else 0, **({"loss_type": "dr_grpo"} if cfg.constlen else {}),
    ), "save_total_limit": KEEP_CHECKPOINTS, **cfg.trainer_args})  # a pass-through setting wins (--set bf16=true)


def train(cfg: RunConfig, work: Path, z_blocks=None) -> dict:
    """Train in ``work`` (resuming from its last complete checkpoint), save the final weights there.
    ``z_blocks``: the custom Z-block function ``cfg.z_blocks`` names (default: the task's)."""
    from mrtpo.models.tokenizer import load_tokenizer
    from mrtpo.method.trainer import MRTPOTrainer

    if (cfg.z_blocks is None) != (z_blocks is None):
        raise ValueError("train: pass the Z-block function whose key the config holds (and only then)")
    peft_config = lora_config(cfg)
    require_benchmark_files(cfg)  # a paper-scale run missing a benchmark file fails now, not after training
    behaviour = record(cfg.task, folder_arm(dataclasses.asdict(cfg)))  # the behaviour of the code that trains it
    data, task, out = train_data(cfg), cfg.training_task, work / "trainer"
    path = base_path(cfg)
    resume = last_checkpoint(out)
    if resume is not None:  # profiles written after that checkpoint are written again when resumed
        truncate_profiles(out / "profiles.jsonl", int(resume.name.split("-")[1]))
        if int(resume.name.split("-")[1]) >= cfg.steps:  # killed after training: Trainer.train would take a step more
            return {**_finished(resume, work, path), **behaviour}
    elif out.exists():
        shutil.rmtree(out)
    args, tokenizer = trainer_config(cfg, out, path), load_tokenizer(path)
    trainer = MRTPOTrainer(
        model=str(path), processing_class=tokenizer, reward_funcs=task.reward_funcs(), train_dataset=data,
        args=args, z_blocks=z_blocks or task.z_blocks, check_regions=task.read_regions, peft_config=peft_config,
    )
    result = trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    if cfg.lora_rank is None:
        trainer.save_model(str(work / "final"))
        final = trainer.model
    else:  # the adapters merged into the weights: the final folder is a plain model, evaluated as any other
        final = trainer.accelerator.unwrap_model(trainer.model).merge_and_unload()
        if trainer.accelerator.is_main_process:
            final.save_pretrained(str(work / "final"))
    if trainer.accelerator.is_main_process:
        trainer.processing_class.save_pretrained(str(work / "final"))
    import torch

    return {
        "weights_sha256": weights_hash(final),
        "train_runtime_s": round(result.metrics.get("train_runtime", math.nan), 2),
        # what the time was measured under: the CPU is shared with whatever else ran (runs before these keys lack them)
        "torch_threads": torch.get_num_threads(), "processes": job_processes(),
        "load_average_15min": round(os.getloadavg()[2], 2),
        "resumed_from_step": int(resume.name.split("-")[1]) if resume else None,
        "base_model": portable(str(path)),
        # runs committed before mrtpo.models.tokenizer.load_tokenizer lack this: they ran with AutoTokenizer's
        # Qwen2Tokenizer, which split identifiers ("person_id" -> "person" "_id") as the warm-up never did
        "tokenizer_class": type(trainer.processing_class).__name__,
        **behaviour,
        "work_dir": portable(str(work)),
        "log_history": trainer.state.log_history,
    }


def lora_config(cfg: RunConfig):
    """TRL's ``peft_config`` of a LoRA run (``RunConfig.lora_rank``), None for full fine-tuning."""
    if cfg.lora_rank is None:
        return None
    from peft import LoraConfig

    return LoraConfig(r=cfg.lora_rank, lora_alpha=2 * cfg.lora_rank, lora_dropout=0.0, target_modules="all-linear",
                      task_type="CAUSAL_LM")


def _finished(checkpoint: Path, work: Path, base: Path) -> dict:
    """``train``'s summary for a run killed after its last checkpoint: the weights and the log come from it (a
    LoRA checkpoint's adapters merged into the base)."""
    from transformers import AutoModelForCausalLM

    from mrtpo.models.tokenizer import load_tokenizer

    adapters = (checkpoint / "adapter_config.json").exists()  # a LoRA checkpoint holds the adapters alone
    model = AutoModelForCausalLM.from_pretrained(base if adapters else checkpoint)
    if adapters:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, checkpoint).merge_and_unload()
    model.save_pretrained(str(work / "final"))
    tokenizer = load_tokenizer(checkpoint)
    tokenizer.save_pretrained(str(work / "final"))
    state = json.loads((checkpoint / "trainer_state.json").read_text())
    return {"weights_sha256": weights_hash(model), "train_runtime_s": math.nan, "resumed_from_step": state["global_step"],
            "base_model": str(base), "tokenizer_class": type(tokenizer).__name__, "work_dir": str(work),
            "log_history": state["log_history"]}


def _write_folder(cfg: RunConfig, ident: dict, digest: str, work: Path, summary: dict, folder: Path) -> None:
    """Evaluate and write every file of the run folder, complete or not at all (:func:`folder_in_place`)."""
    import pandas as pd

    log_history = summary.pop("log_history")
    with folder_in_place(folder) as tmp:
        (tmp / "config.json").write_text(json.dumps({**ident, "hash": digest, "name": folder.name}, indent=2, default=str))
        metrics = pd.DataFrame([h for h in log_history if "loss" in h])
        # fixed column order: a resumed run reads its early rows back from trainer_state.json with sorted keys
        metrics[["step"] + sorted(c for c in metrics.columns if c != "step")].to_csv(tmp / "metrics.csv", index=False)
        if (work / "trainer" / "profiles.jsonl").exists():
            (tmp / "profiles.jsonl").write_text(portable((work / "trainer" / "profiles.jsonl").read_text()))
        copy_tokenizer(work / "final", tmp / "tokenizer")
        recipe = base_path(cfg) / "mrtpo_recipe.json"  # the tiny base's warm-up mix travels with the run
        if recipe.exists():
            shutil.copy(recipe, tmp / "base_recipe.json")
        write_evaluation(cfg, work / "final", folder.name, tmp, summary)
    shutil.rmtree(work / "trainer", ignore_errors=True)  # checkpoints are no longer needed; final/ stays
