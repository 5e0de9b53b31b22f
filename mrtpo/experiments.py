"""Experiment runner: one call trains, evaluates and writes a run folder that notebooks read back in seconds.

``run(task, method, model="tiny", seed=0, steps=None, **overrides)`` resolves a ``RunConfig`` (hyperparameters
from the model registry, ``mrtpo.models``; runner settings from the dataclass below), hashes it together with
the data and the package versions, and either returns the finished folder of that hash or trains:

    results/runs/<task>/<model>/<method>[-beta<b>]-seed<s>-<hash8>/
        config.json     resolved config, content hash, package and data versions
        metrics.csv     one row per step: every field the trainer logs (TRL's, mrtpo/*, time/*)
        eval.json       held-out evaluation, nested; eval.csv the same, one row per benchmark x decoding x metric
        profiles.jsonl  sampled per-token q profiles (token-level methods)
        summary.json    weights hash, train runtime, whether the run was resumed

Faults (issue 7): the folder is written under a temporary name and renamed when complete, so a crash never
leaves a folder the cache would reuse; a lock file makes a second process asking for the same run wait and
reuse it; checkpoints live in ``$MRTPO_CACHE/work/<hash>/`` (default ``~/.cache/mrtpo``) and a rerun after
a kill resumes from the last complete one, with RNG states restored, giving the same weights.
``collect()`` gathers every run's evaluation into one tidy table.
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import inspect
import json
import math
import os
import shutil
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from . import __version__
from .models import MODELS, model_spec, resolve_model
from .tasks import TASKS, get_task

ROOT = Path(__file__).resolve().parents[1]
#: advantage schemes (``mrtpo.trainer.METHODS``; repeated here so validation needs no TRL import)
METHODS = ("grpo", "gdpo", "mrtpo", "joint", "shuffled", "uniform")
TOKEN_LEVEL = ("mrtpo", "joint", "shuffled", "uniform")
#: tiny-base sizes (``mrtpo.tiny.SIZES``): "smoke" trains with the tiny hyperparameters on a seconds-to-build base
TINY_SIZES = ("tiny", "smoke")
#: run settings of the "smoke" size (seconds per run: what the test suite renders the book with); overrides win
SMOKE_RUN = dict(steps=2, prompts_per_step=2, num_generations=4, max_completion_length=16, eval_prompts=4,
                 eval_samples=1, train_size=16, save_steps=1)
#: registry fields a run takes from ``ModelSpec`` (overridable like any other field)
SPEC_FIELDS = ("steps", "prompts_per_step", "num_generations", "learning_rate", "max_completion_length",
               "mrtpo_beta", "beta_warmup_steps", "kl_beta")
#: short names accepted as overrides
ALIASES = {"beta": "mrtpo_beta"}


def results_root() -> Path:
    """Where run folders go: ``$MRTPO_RESULTS`` or the repository's ``results/``."""
    return Path(os.environ.get("MRTPO_RESULTS", ROOT / "results"))


def cache_root() -> Path:
    """Checkpoints and final weights: ``$MRTPO_CACHE`` or ``~/.cache/mrtpo`` (never inside the repo)."""
    return Path(os.environ.get("MRTPO_CACHE", Path.home() / ".cache" / "mrtpo"))


def data_root() -> Path:
    """Real benchmark files (Spider, IFEval, IFBench, RLLA): ``$MRTPO_DATA_DIR`` or ``../shared/data``."""
    return Path(os.environ.get("MRTPO_DATA_DIR", ROOT.parent / "shared" / "data"))


@dataclass(frozen=True)
class RunConfig:
    """Everything that decides a run's result. Fields without a default come from the model registry."""

    task: str  # "sql", "if", "tool"
    method: str  # advantage scheme, one of METHODS
    model: str  # registry name ("tiny", "1.5b", ...) or "smoke"
    seed: int  # RL seed: sampling, data order, initialisation of nothing else (the base is fixed)
    steps: int
    prompts_per_step: int
    num_generations: int  # G, samples per prompt
    learning_rate: float
    max_completion_length: int
    mrtpo_beta: float  # reallocation strength, in [0, 1]
    beta_warmup_steps: int
    kl_beta: float  # TRL's KL coefficient (``beta`` in GRPOConfig)
    saw: bool = False  # stack SAW (``method="mrtpo+saw"``)
    temperature: float = 1.0  # sampling temperature in training and in the temperature-1 evaluation
    train_size: int = 1024  # synthetic training prompts (tiny scale); 100 steps x 8 prompts is under one epoch
    data_seed: int = 0  # seed of the synthetic data (and of its sqlite databases): the base was warmed on it
    base_seed: int = 0  # seed of the tiny base: one base per task, RL seeds vary only the RL
    eval_prompts: int = 64  # held-out prompts per benchmark
    eval_samples: int = 4  # samples per prompt at temperature 1 (plus one greedy)
    eval_seed: int = 0  # seed of the held-out synthetic test split and of evaluation sampling
    save_steps: int = 10  # checkpoint every N steps in the work dir (resume after a kill)
    profile_samples: int = 2  # responses per step whose q profiles are saved
    deterministic: bool = True  # torch.use_deterministic_algorithms: resumed == uninterrupted on CPU
    trainer_args: dict = field(default_factory=dict)  # any other MRTPOConfig field, passed through

    @property
    def label(self) -> str:
        return self.method + ("+saw" if self.saw else "")

    @property
    def scale(self) -> str:
        return "tiny" if self.model in TINY_SIZES else "real"


class BadRequest(ValueError):
    """A run request with an invalid parameter; raised before any work, naming the valid values."""


def _fail(what: str, value, valid) -> None:
    raise BadRequest(f"{what}={value!r} is not valid; valid values: {valid}")


def resolve(task: str, method: str, model: str = "tiny", seed: int = 0, steps: int | None = None, **overrides) -> RunConfig:
    """Validate the request and fill every field; fails before any work with a message naming the valid values.

    ``method`` may carry ``+saw``; ``beta`` is an alias of ``mrtpo_beta``; keys that are neither RunConfig
    fields nor MRTPOConfig fields are rejected. For a paper checkpoint whose weights are absent, the registry's
    ``ModelNotAvailable`` is raised here (before any data is built).
    """
    if task not in TASKS:
        _fail("task", task, ", ".join(TASKS))
    base, _, extra = method.partition("+")
    if base not in METHODS or extra not in ("", "saw"):
        _fail("method", method, ", ".join(METHODS) + " (each optionally with +saw, e.g. mrtpo+saw)")
    names = list(MODELS) + ["smoke"]
    if model not in names:
        _fail("model", model, ", ".join(names))
    try:
        spec = model_spec(task, "tiny" if model in TINY_SIZES else model)
    except ValueError as exc:  # a registry name that is not a paper setting for this task
        raise BadRequest(str(exc)) from None
    overrides = {ALIASES.get(k, k): v for k, v in overrides.items()}
    if model == "smoke":
        overrides = {**SMOKE_RUN, **overrides}
    if steps is not None:
        overrides["steps"] = steps
    own = {f.name for f in dataclasses.fields(RunConfig)} - {"task", "method", "model", "seed", "trainer_args"}
    passthrough = {k: v for k, v in overrides.items() if k not in own}
    if passthrough:
        from .trainer import MRTPOConfig

        allowed = {f.name for f in dataclasses.fields(MRTPOConfig)} - set(RUNNER_SET)
        unknown = sorted(set(passthrough) - allowed)
        if unknown:
            _fail("override", unknown[0], "run settings " + ", ".join(sorted(own | set(ALIASES)))
                  + "; or a MRTPOConfig field not set by the runner")
    values = {k: getattr(spec, k) for k in SPEC_FIELDS}
    values.update({k: v for k, v in overrides.items() if k in own})
    cfg = RunConfig(task=task, method=base, model=model, seed=int(seed), saw=bool(values.pop("saw", False)) or extra == "saw",
                    trainer_args=passthrough, **values)
    if not 0.0 <= cfg.mrtpo_beta <= 1.0:
        _fail("beta", cfg.mrtpo_beta, "a number in [0, 1]")
    if cfg.num_generations < 2:
        _fail("num_generations", cfg.num_generations, "an integer >= 2 (a group needs a spread)")
    if cfg.steps <= 0:
        _fail("steps", cfg.steps, "an integer >= 1")
    for name in ("prompts_per_step", "max_completion_length", "eval_prompts", "eval_samples", "save_steps", "train_size"):
        if getattr(cfg, name) < 1:
            _fail(name, getattr(cfg, name), "an integer >= 1")
    if cfg.scale == "real":
        resolve_model(task, model)  # ModelNotAvailable, with where it looked and how to provide it
    return cfg


# ----------------------------------------------------------------------------------------------------
# data and identity


def train_data(cfg: RunConfig):
    """Training prompts: synthetic at the tiny scale, the paper's training sets at the real scale."""
    task = get_task(cfg.task)
    if cfg.scale == "tiny":
        return task.synthetic(cfg.train_size, seed=cfg.data_seed, split="train")
    d = data_root()
    if cfg.task == "sql":
        from .tasks.sql import load_spider

        return load_spider(d / "spider" / "train_spider_syn.json", d / "spider" / "tables.json", d / "spider" / "database",
                           missing_db="skip")
    if cfg.task == "if":
        return task.load(d / "hir" / "hir16k.jsonl")
    from .tasks.tools import load_rlla

    return load_rlla(d / "rlla" / "rlla_sft.json")


def benchmarks(cfg: RunConfig) -> dict:
    """name -> (task, held-out Dataset, scorer) for this run's scale; scorer(task, rows, texts) -> {metric: value}.

    Tiny: the held-out synthetic test split, and a ``hide_value`` split (the needed value only in Z) where the
    task supports it. Real: Spider dev / Spider-Realistic, IFEval / IFBench, BFCL v4 non-live / live.
    """
    task = get_task(cfg.task)
    n, seed = cfg.eval_prompts, cfg.eval_seed
    if cfg.scale == "tiny":
        out = {"synthetic_test": (task, task.synthetic(n, seed=seed, split="test"), reward_means)}
        if "hide_value" in inspect.signature(task.synthetic).parameters:  # sql: a fraction or True
            out["synthetic_hide_value"] = (task, task.synthetic(n, seed=seed, split="test", hide_value=True), reward_means)
        elif "hide_value" in inspect.signature(type(task).__init__).parameters:  # tool: a task option
            hidden = get_task(cfg.task, hide_value=True)
            out["synthetic_hide_value"] = (hidden, hidden.synthetic(n, seed=seed, split="test"), reward_means)
        return out
    d = data_root()
    if cfg.task == "sql":
        from .tasks.sql import load_spider

        spider = d / "spider"
        return {name: (task, load_spider(spider / f, spider / "tables.json", spider / "database"), reward_means)
                for name, f in (("spider_dev", "dev.json"), ("spider_realistic", "spider_realistic.json"))}
    if cfg.task == "if":
        from .tasks.instruct import evaluate as if_accuracy

        def ifeval(task, rows, texts):
            return if_accuracy(list(zip(rows, texts)))

        return {"ifeval": (task, task.load(d / "ifeval" / "input_data.jsonl"), ifeval),
                "ifbench": (task, task.load(d / "ifbench" / "IFBench_test.jsonl"), ifeval)}
    from .tasks.tools import LIVE, NON_LIVE, load_bfcl

    return {"bfcl_non_live": (task, load_bfcl(NON_LIVE), reward_means), "bfcl_live": (task, load_bfcl(LIVE), reward_means)}


def _rows_digest(rows) -> str:
    """Content hash of dataset rows; absolute paths (sqlite files) are reduced to their last three parts."""
    h = hashlib.sha256()
    for row in rows:
        row = {k: "/".join(Path(v).parts[-3:]) if k.endswith("_path") else v for k, v in row.items()}
        h.update(json.dumps(row, sort_keys=True, default=str).encode())
    return h.hexdigest()[:16]


def data_version(cfg: RunConfig) -> dict:
    """What the run trains and is evaluated on, by content: a changed generator or file changes the key."""
    version = {"train": _rows_digest(train_data(cfg))}
    for name, (_, data, _) in benchmarks(cfg).items():
        version[name] = _rows_digest(data)
    return version


def package_versions() -> dict:
    import torch
    import transformers
    import trl

    return {"mrtpo": __version__, "trl": trl.__version__, "transformers": transformers.__version__,
            "torch": torch.__version__}


def model_identity(cfg: RunConfig) -> dict:
    """The base policy by content: tiny recipe hash (the cache folder's name) or the paper checkpoint id."""
    if cfg.scale == "tiny":
        from .tiny import default_recipe, recipe_hash

        return {"tiny_size": cfg.model, "recipe": recipe_hash(cfg.task, default_recipe(cfg.task, cfg.model), cfg.base_seed)}
    return {"checkpoint": model_spec(cfg.task, cfg.model).checkpoint}


def identity(cfg: RunConfig) -> dict:
    """Everything the cache key covers: config, base model, data version, package versions."""
    return {"config": dataclasses.asdict(cfg), "model": model_identity(cfg), "data": data_version(cfg),
            "packages": package_versions()}


def content_hash(ident: dict) -> str:
    return hashlib.sha256(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()


def run_name(cfg: RunConfig, digest: str) -> str:
    """cleanRL-style folder name, the same every time: ``mrtpo+saw-beta0.5-seed0-1a2b3c4d``."""
    beta = f"-beta{cfg.mrtpo_beta:g}" if cfg.method in TOKEN_LEVEL and cfg.method != "uniform" else ""
    return f"{cfg.label}{beta}-seed{cfg.seed}-{digest[:8]}"


# ----------------------------------------------------------------------------------------------------
# the run


@dataclass
class Run:
    """A finished run folder. ``trained`` is False when the folder was reused from the cache."""

    path: Path
    trained: bool = False

    @property
    def config(self) -> dict:
        return json.loads((self.path / "config.json").read_text())

    @property
    def eval(self) -> dict:
        return json.loads((self.path / "eval.json").read_text())

    @property
    def summary(self) -> dict:
        return json.loads((self.path / "summary.json").read_text())

    @property
    def metrics(self):
        import pandas as pd

        return pd.read_csv(self.path / "metrics.csv")

    def profiles(self) -> list[dict]:
        path = self.path / "profiles.jsonl"
        return [json.loads(line) for line in path.open()] if path.exists() else []

    @property
    def base_recipe(self) -> dict | None:
        """The tiny base's recipe and warm-up mix (``mrtpo_recipe.json``); None for a paper checkpoint."""
        path = self.path / "base_recipe.json"
        return json.loads(path.read_text()) if path.exists() else None

    def tokenizer(self):
        """The run's tokenizer (saved in the folder, so that token-level figures need no base model)."""
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(self.path / "tokenizer")


#: the files ``save_pretrained`` writes for a tokenizer
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "special_tokens_map.json")


def copy_tokenizer(model_dir: Path, out: Path) -> None:
    """Copy a saved model folder's tokenizer files (not the weights) to ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    for name in TOKENIZER_FILES:
        if (model_dir / name).exists():
            shutil.copy(model_dir / name, out / name)


def locate(cfg: RunConfig) -> tuple[dict, str, Path]:
    """(identity, content hash, run folder) of a config; the folder may not exist yet."""
    ident = identity(cfg)
    digest = content_hash(ident)
    return ident, digest, results_root() / "runs" / cfg.task / cfg.model / run_name(cfg, digest)


def find(task: str, method: str, model: str = "tiny", seed: int = 0, steps: int | None = None, **overrides) -> Run | None:
    """The finished run of these arguments, or None; never trains."""
    folder = locate(resolve(task, method, model, seed, steps, **overrides))[2]
    return Run(folder) if folder.is_dir() else None


def evaluate_base(task: str, model: str = "tiny", **overrides) -> dict:
    """Evaluation of the untrained base policy (RL step 0) with the same benchmarks and decodings as a run."""
    cfg = resolve(task, "gdpo", model, **overrides)
    return evaluate(cfg, base_path(cfg))


@contextmanager
def locked(path: Path):
    """Exclusive lock on ``path`` (blocks while another process holds it; released if that process dies)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def run(task: str, method: str, model: str = "tiny", seed: int = 0, steps: int | None = None, force: bool = False,
        **overrides) -> Run:
    """Train ``method`` on ``task`` with ``model``, evaluate, write the run folder; reuse it when it exists.

    ``overrides``: any ``RunConfig`` field (``beta=`` for ``mrtpo_beta``, ``saw=True``, ``prompts_per_step``,
    ...) or any other ``MRTPOConfig`` field. ``force`` retrains from scratch and replaces the folder.
    """
    cfg = resolve(task, method, model, seed, steps, **overrides)
    ident, digest, folder = locate(cfg)
    if folder.is_dir() and not force:
        return Run(folder)
    work = cache_root() / "work" / digest
    with locked(cache_root() / "work" / f"{digest}.lock"):
        if folder.is_dir() and not force:  # another process finished it while we waited
            return Run(folder)
        if force:
            shutil.rmtree(work, ignore_errors=True)
        summary = train(cfg, work)
        _write_folder(cfg, ident, digest, work, summary, folder)
    return Run(folder, trained=True)


#: MRTPOConfig fields the runner sets itself (not accepted as pass-through overrides)
RUNNER_SET = ("output_dir", "advantage", "saw", "mrtpo_beta", "beta_warmup_steps", "beta", "learning_rate", "max_steps",
              "per_device_train_batch_size", "num_generations", "max_completion_length", "temperature", "seed",
              "logging_steps", "save_strategy", "save_steps", "report_to", "use_cpu", "full_determinism",
              "profile_samples")


def trainer_config(cfg: RunConfig, output_dir: Path):
    """The MRTPOConfig of a run; CPU when no GPU is visible (then fp32, no gradient checkpointing)."""
    import torch

    from .trainer import MRTPOConfig

    gpu = torch.cuda.is_available()
    return MRTPOConfig(
        output_dir=str(output_dir), advantage=cfg.method, saw=cfg.saw, mrtpo_beta=cfg.mrtpo_beta,
        beta_warmup_steps=cfg.beta_warmup_steps, beta=cfg.kl_beta, learning_rate=cfg.learning_rate,
        max_steps=cfg.steps, per_device_train_batch_size=cfg.prompts_per_step * cfg.num_generations,
        num_generations=cfg.num_generations, max_completion_length=cfg.max_completion_length,
        temperature=cfg.temperature, seed=cfg.seed, logging_steps=1, save_strategy="steps", save_steps=cfg.save_steps,
        report_to="none", use_cpu=not gpu, bf16=gpu, gradient_checkpointing=gpu, full_determinism=cfg.deterministic,
        profile_samples=cfg.profile_samples if cfg.method in TOKEN_LEVEL else 0, **cfg.trainer_args,
    )


def last_checkpoint(output_dir: Path) -> Path | None:
    """The newest complete checkpoint (trainer_state.json is written last); partial ones are deleted."""
    found = []
    for path in output_dir.glob("checkpoint-*"):
        if (path / "trainer_state.json").exists() and (path / "rng_state.pth").exists():
            found.append(path)
        else:  # killed while saving
            shutil.rmtree(path, ignore_errors=True)
    return max(found, key=lambda p: int(p.name.split("-")[1]), default=None)


def train(cfg: RunConfig, work: Path) -> dict:
    """Train in ``work`` (resuming from its last complete checkpoint), save the final weights there."""
    from transformers import AutoTokenizer

    from .trainer import MRTPOTrainer

    path = base_path(cfg)
    task = get_task(cfg.task)
    out = work / "trainer"
    resume = last_checkpoint(out)
    if resume is not None:  # profiles written after that checkpoint are written again when resumed
        _truncate_profiles(out / "profiles.jsonl", int(resume.name.split("-")[1]))
    elif out.exists():
        shutil.rmtree(out)
    trainer = MRTPOTrainer(
        model=str(path), processing_class=AutoTokenizer.from_pretrained(path), reward_funcs=task.reward_funcs(),
        train_dataset=train_data(cfg), args=trainer_config(cfg, out), z_blocks=task.z_blocks,
    )
    result = trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    trainer.save_model(str(work / "final"))
    trainer.processing_class.save_pretrained(str(work / "final"))
    return {
        "weights_sha256": weights_hash(trainer.model),
        "train_runtime_s": round(result.metrics.get("train_runtime", math.nan), 2),
        "resumed_from_step": int(resume.name.split("-")[1]) if resume else None,
        "base_model": str(path),
        "work_dir": str(work),
        "log_history": trainer.state.log_history,
    }


def base_path(cfg: RunConfig) -> Path:
    """Local folder of the policy a run starts from (the tiny base is built when absent)."""
    if cfg.scale == "real":
        return resolve_model(cfg.task, cfg.model)
    from .tiny import tiny_base

    return tiny_base(cfg.task, cfg.model, cfg.base_seed)


def weights_hash(model) -> str:
    """sha256 over every parameter and buffer, in state-dict order."""
    h = hashlib.sha256()
    for name, tensor in model.state_dict().items():
        h.update(name.encode())
        h.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def _truncate_profiles(path: Path, step: int) -> None:
    if path.exists():
        keep = [line for line in path.open() if json.loads(line)["step"] < step]
        path.write_text("".join(keep))


def _write_folder(cfg: RunConfig, ident: dict, digest: str, work: Path, summary: dict, folder: Path) -> None:
    """Evaluate and write every file under a temporary name, then rename: the folder is complete or absent."""
    import pandas as pd

    log_history = summary.pop("log_history")
    tmp = folder.with_name(f".{folder.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        (tmp / "config.json").write_text(json.dumps({**ident, "hash": digest, "name": folder.name}, indent=2, default=str))
        metrics = pd.DataFrame([h for h in log_history if "loss" in h])
        # fixed column order: a resumed run reads its early rows back from trainer_state.json with sorted keys
        metrics[["step"] + sorted(c for c in metrics.columns if c != "step")].to_csv(tmp / "metrics.csv", index=False)
        if (work / "trainer" / "profiles.jsonl").exists():
            shutil.copy(work / "trainer" / "profiles.jsonl", tmp / "profiles.jsonl")
        copy_tokenizer(work / "final", tmp / "tokenizer")
        recipe = base_path(cfg) / "mrtpo_recipe.json"  # the tiny base's warm-up mix travels with the run
        if recipe.exists():
            shutil.copy(recipe, tmp / "base_recipe.json")
        results = evaluate(cfg, work / "final")
        (tmp / "eval.json").write_text(json.dumps(results, indent=2))
        pd.DataFrame(eval_rows(cfg, folder.name, results)).to_csv(tmp / "eval.csv", index=False)
        (tmp / "summary.json").write_text(json.dumps(summary, indent=2))
        if folder.exists():  # force: replace the old folder only once the new one is complete
            shutil.rmtree(folder)
        tmp.rename(folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(work / "trainer", ignore_errors=True)  # checkpoints are no longer needed; final/ stays


# ----------------------------------------------------------------------------------------------------
# evaluation


def reward_means(task, rows: list[dict], texts: list[str]) -> dict[str, float]:
    """Mean of every reward over (row, completion) pairs; rewards that do not apply (None) are left out."""
    columns = {k: [r[k] for r in rows] for k in rows[0] if k != "prompt"}
    completions = [[{"role": "assistant", "content": t}] for t in texts]
    out = {}
    for func in task.reward_funcs():
        values = [v for v in func([r["prompt"] for r in rows], completions, **columns) if v is not None and v == v]
        out[func.__name__] = sum(values) / len(values) if values else math.nan
    return out


def evaluate(cfg: RunConfig, model_path: Path, chunk: int = 16) -> dict:
    """{benchmark: {decoding: {metric: value}, "n_prompts": n}}: temperature 1 (``eval_samples`` per prompt)
    and greedy at the tiny scale, greedy only at the real scale."""
    import torch
    from tqdm.auto import tqdm
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from .diagnostics import sample

    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = AutoModelForCausalLM.from_pretrained(model_path).eval()
    if torch.cuda.is_available():
        model = model.cuda()
    decodings = {"temp1": (cfg.temperature, cfg.eval_samples), "greedy": (0.0, 1)}
    if cfg.scale == "real":
        decodings = {"greedy": (0.0, 1)}
    results = {}
    for bench, (task, data, scorer) in benchmarks(cfg).items():
        rows = list(data)
        results[bench] = {"n_prompts": len(rows)}
        for decoding, (temperature, n) in decodings.items():
            texts = []
            for start in tqdm(range(0, len(rows), chunk), desc=f"eval {bench} {decoding}", leave=False):
                batch = rows[start : start + chunk]
                samples = sample(model, tokenizer, [r["prompt"] for r in batch], n=n, temperature=temperature,
                                 max_new_tokens=cfg.max_completion_length, seed=cfg.eval_seed + start)
                texts += [text for group in samples for _, text in group]
            results[bench][decoding] = scorer(task, [r for r in rows for _ in range(n)], texts)
    return results


def eval_rows(cfg: RunConfig, name: str, results: dict) -> list[dict]:
    """Tidy rows: one per benchmark x decoding x metric, with the run's identifying columns."""
    rows = []
    for bench, res in results.items():
        for decoding, metrics in res.items():
            if not isinstance(metrics, dict):
                continue
            for metric, value in metrics.items():
                rows.append({"run": name, "task": cfg.task, "model": cfg.model, "method": cfg.label,
                             "beta": cfg.mrtpo_beta, "seed": cfg.seed, "steps": cfg.steps, "benchmark": bench,
                             "decoding": decoding, "metric": metric, "value": value, "n_prompts": res["n_prompts"]})
    return rows


# ----------------------------------------------------------------------------------------------------
# reading results back


def run_folders(task: str | None = None) -> list[Path]:
    """Finished run folders (temporary ones start with a dot and are never listed)."""
    root = results_root() / "runs"
    pattern = f"{task}/*/*" if task else "*/*/*"
    return sorted(p for p in root.glob(pattern) if p.is_dir() and not p.name.startswith(".")
                  and (p / "eval.csv").exists())


def collect(task: str | None = None):
    """Every run's evaluation as one tidy DataFrame (one row per run x benchmark x decoding x metric)."""
    import pandas as pd

    frames = [pd.read_csv(p / "eval.csv") for p in run_folders(task)]
    columns = ["run", "task", "model", "method", "beta", "seed", "steps", "benchmark", "decoding", "metric", "value",
               "n_prompts"]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=columns)


def runs_table(task: str | None = None):
    """One row per run folder: task, model, method, beta, seed, steps, train time, and its path."""
    import pandas as pd

    rows = []
    for p in run_folders(task):
        cfg = json.loads((p / "config.json").read_text())["config"]
        summary = json.loads((p / "summary.json").read_text())
        rows.append({"task": cfg["task"], "model": cfg["model"], "method": cfg["method"] + ("+saw" if cfg["saw"] else ""),
                     "beta": cfg["mrtpo_beta"], "seed": cfg["seed"], "steps": cfg["steps"],
                     "train_s": summary["train_runtime_s"], "path": str(p)})
    return pd.DataFrame(rows, columns=["task", "model", "method", "beta", "seed", "steps", "train_s", "path"])
