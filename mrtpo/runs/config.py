"""What a run is: ``RunConfig``, resolved and validated without TRL.

``resolve(task, method, model="tiny", seed=0, steps=None, **overrides)`` fills every field (hyperparameters
from the model registry, ``mrtpo.models.registry``; runner settings from the dataclass below) and fails before any work
with a message naming the valid values (the methods: ``mrtpo.method.advantages.METHODS``). TRL is imported only to
validate pass-through overrides against ``MRTPOConfig``'s fields.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from functools import cached_property

from mrtpo.method.advantages import DISTILLING, METHODS
from mrtpo.models.registry import TINY_SIZES, Model, get_model, model_names
from mrtpo.models.spec import ModelSpec
from mrtpo.tasks import TASKS, Task, get_task
from mrtpo.models.recipe import DIAL_SETTINGS, default_recipe, dial_recipe

#: run settings of the "smoke" size (seconds per run: what the test suite renders the book with); overrides win
SMOKE_RUN = dict(steps=2, prompts_per_step=2, num_generations=4, max_completion_length=16, eval_prompts=4,
                 eval_samples=1, train_size=16, save_steps=1)
#: registry fields a run takes from ``ModelSpec`` (overridable like any other field)
SPEC_FIELDS = ("steps", "prompts_per_step", "num_generations", "learning_rate", "max_completion_length",
               "mrtpo_beta", "beta_warmup_steps", "kl_beta")
#: modifiers a method may carry (``gdpo+saw``, ``mrtpo+constlen``, ``gdpo+opsd``), each a boolean RunConfig field of
#: the same name: what it does to the run
MODIFIERS = {
    "saw": "stack SAW: weight each reward's advantage by K * CV_k / sum CV over the batch",
    "opsd": "add the OPSD distillation term (teacher: the policy shown every Z block) to the RL loss",
    "constlen": "fixed-length control: normalise the loss by a constant length (Dr. GRPO) instead of the "
                "sampled lengths, so that no response length is favoured by the normaliser",
}
#: RunConfig fields added after the first committed runs, with their defaults: at the default they are left out of
#: a run's identity (``mrtpo.runs.runner.identity``), so every folder committed before them keeps its content hash
OPTIONAL_FIELDS = {"opsd": False, "constlen": False, "rewards": "default", "z_blocks": None, "dial": None,
                   "region_blend": 0.0, "lora_rank": None}
#: MRTPOConfig fields the runner sets itself (not accepted as pass-through overrides)
RUNNER_SET = ("output_dir", "advantage", "saw", "mrtpo_beta", "beta_warmup_steps", "beta", "learning_rate", "max_steps",
              "per_device_train_batch_size", "gradient_accumulation_steps", "steps_per_generation",
              "generation_batch_size", "num_generations", "max_completion_length", "temperature", "seed",
              "logging_steps", "save_strategy", "save_steps", "report_to", "use_cpu", "full_determinism",
              "profile_samples", "opsd", "region_blend")


@dataclass(frozen=True)
class RunConfig:
    """Everything that decides a run's result. Fields without a default come from the model registry."""

    task: str  # a key of mrtpo.tasks.TASKS
    method: str  # advantage scheme, one of METHODS
    model: str  # registry name ("tiny", "smoke", "7b", ...) or a local folder
    seed: int  # RL seed: sampling, data order, initialisation of nothing else (the base is fixed)
    steps: int
    prompts_per_step: int
    num_generations: int  # G, samples per prompt
    learning_rate: float
    max_completion_length: int
    mrtpo_beta: float  # reallocation strength, in [0, 1] (not TRL's ``beta``, the KL coefficient: kl_beta)
    beta_warmup_steps: int
    kl_beta: float  # TRL's KL coefficient (``beta`` in GRPOConfig)
    saw: bool = False  # stack SAW (``method="mrtpo+saw"``)
    opsd: bool = False  # add the OPSD distillation term (``method="gdpo+opsd"``)
    constlen: bool = False  # fixed-length control: Dr. GRPO's constant loss normaliser (``method="gdpo+constlen"``)
    rewards: str = "default"  # the task's reward set (``Task.reward_sets``; sql: "sub" = execution split by check)
    z_blocks: str | None = None  # a custom Z-block function: "<name> sha256:<hash of its source>" (None: the task's)
    #: the testbed's dial: start from the dial base at this gated-noise rate (``tiny.dial_recipe``; measured settings
    #: ``tiny.DIAL_SETTINGS``) instead of the task's default tiny base (None); tiny sizes only
    dial: float | None = None
    #: the placement dial of ``mrtpo`` (``MRTPOConfig.region_blend``): q replaced by (1 - lambda) q / qbar
    #: + lambda m / mbar, m the verifier's read region (0: MRTPO; 1: the ``region`` method's weights)
    region_blend: float = 0.0
    #: LoRA: train rank-r adapters on every linear layer of the decoder (TRL's ``peft_config``: ``LoraConfig(r,
    #: lora_alpha=2r, target_modules="all-linear")``) instead of every weight; None: full fine-tuning. The run's
    #: final weights are the merged ones
    lora_rank: int | None = None
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
    def frozen_teacher(self) -> bool:
        """Whether training holds OPSD's teacher frozen at the starting weights: a second copy of the model in
        memory (``opsd_teacher="initial"``, MRTPOConfig's default, for ``opsd`` and ``<method>+opsd``), except with
        LoRA."""
        return ((self.method in DISTILLING or self.opsd) and self.trainer_args.get("opsd_teacher", "initial") == "initial"
                and self.lora_rank is None)  # with LoRA the teacher is the policy with its adapters off: no copy

    @cached_property
    def task_def(self) -> Task:
        """The run's ``Task`` (its default reward set: the data, the base, the benchmarks), resolved once per config:
        ``resolve`` stores the object it was given or looked up; every layer below receives this object."""
        return get_task(self.task)

    @cached_property
    def model_def(self) -> Model:
        """The run's ``Model`` (``models.get_model``: a tiny base, the rehearsal, smollm2, a folder or a paper
        checkpoint), resolved once per config like ``task_def``."""
        return get_model(self.model)

    @cached_property
    def spec(self) -> ModelSpec:
        """The model registry's entry for ``model`` on the task (``Model.spec``), looked up once per config
        (``resolve`` stores the one it validated with): steps, checkpoint, evaluation limit."""
        return self.model_def.spec(self.task_def)

    @cached_property
    def base_identity(self) -> dict:
        """The base policy by content (``Model.identity``: a tiny recipe's hash, or the checkpoint), as the
        run's identity names it; computed once per config."""
        return self.model_def.identity(self.task_def, self.spec, self.base_seed, self.base_recipe)

    @property
    def default_steps(self) -> int:
        """The steps a run of this model on this task takes unless asked otherwise (the registry's; the smoke
        size's ``SMOKE_RUN``): a folder of other steps says so in its name."""
        return SMOKE_RUN["steps"] if self.model == "smoke" else self.spec.steps

    @property
    def training_task(self) -> Task:
        """The task the run trains with: ``task_def`` with the reward set ``rewards``; evaluation always uses
        ``task_def``."""
        return self.task_def if self.rewards == "default" else type(self.task_def)(rewards=self.rewards)

    @property
    def base_recipe(self):
        """The ``tiny.Recipe`` of the base a tiny run starts from: the dial base at ``dial`` (``tiny.dial_recipe``)
        or the task's default (``tiny.default_recipe``); None for a checkpoint or a local folder."""
        if self.scale != "tiny":
            return None
        task = self.task_def
        return default_recipe(task, self.model) if self.dial is None else dial_recipe(task, self.dial, size=self.model)

    @property
    def label(self) -> str:
        return arm_label(dataclasses.asdict(self))

    @property
    def scale(self) -> str:
        """"tiny" (synthetic data, CPU) or "real" (the paper's data; a paper checkpoint or a local folder)."""
        return self.model_def.scale

    @property
    def model_label(self) -> str:
        """The model's name in folder names: the registry name, or a local folder's last part."""
        return self.model_def.label


def method_label(config: dict) -> str:
    """``method`` with its modifiers, as the runner and the CLI spell it (``mrtpo+saw``); a config dict (a run
    folder's ``config.json`` config) may lack the modifiers added later."""
    return config["method"] + "".join(f"+{m}" for m in MODIFIERS if config.get(m))


def arm_label(config: dict) -> str:
    """What tables and folder names call a run: ``method_label``, then ``-blend<lambda>`` for a placement dial
    setting (``mrtpo-blend0.5``), ``-<set>_rewards`` for a reward set other than the default and ``-custom_zk`` for a
    custom Z-block function (``mrtpo-sub_rewards``). The base a run starts from (``model``, ``dial``) is not part of
    its arm."""
    rewards = config.get("rewards", "default")
    return (method_label(config) + (f"-blend{config['region_blend']:g}" if config.get("region_blend") else "")
            + (f"-{rewards}_rewards" if rewards != "default" else "") + ("-custom_zk" if config.get("z_blocks") else ""))


def z_blocks_key(func) -> str:
    """What a custom Z-block function contributes to a run's key: its name and the sha256 of its source.

    Only the function's own source is hashed: a change in what it calls does not change the key (pass
    ``force=True`` after such a change)."""
    import hashlib
    import inspect

    if not callable(func):
        raise BadRequest(f"z_blocks must be a function with a reward function's signature, got {type(func).__name__}")
    try:
        source = inspect.getsource(func)
    except (OSError, TypeError):
        raise BadRequest("z_blocks: the function's source cannot be read (define it in a file or a notebook cell, "
                         "not at an interactive prompt); its source is part of the run's key") from None
    name = getattr(func, "__qualname__", getattr(func, "__name__", "z_blocks"))
    return f"{name} sha256:{hashlib.sha256(source.encode()).hexdigest()[:16]}"


class BadRequest(ValueError):
    """A run request with an invalid parameter; raised before any work, naming the valid values."""


def _fail(what: str, value, valid) -> None:
    raise BadRequest(f"{what}={value!r} is not valid; valid values: {valid}")


def dial_setting(value, model: str) -> float:
    """``dial`` as a float, after checking that it names a dial base: a tiny size and a rate in [0, 1]."""
    if model not in TINY_SIZES:
        raise BadRequest(f"dial={value!r} selects a dial base of the tiny testbed (mrtpo.models.recipe.dial_recipe), but model "
                         f"{model!r} is not a tiny size: use --model {' or '.join(TINY_SIZES)}, or leave dial unset to "
                         "train the checkpoint itself")
    try:
        setting = float(value)
    except (TypeError, ValueError):
        setting = float("nan")
    if isinstance(value, bool) or not 0 <= setting <= 1:  # NaN fails the comparison too
        _fail("dial", value, f"a gated-noise rate in [0, 1]; the measured settings are {', '.join(map(str, DIAL_SETTINGS))} "
              "(results/tiny_models.csv, rows dial/<setting>/...)")
    return setting


def resolve(task: str | Task, method: str, model: str = "tiny", seed: int = 0, steps: int | None = None, **overrides) -> RunConfig:
    """Validate the request and fill every field; fails before any work with a message naming the valid values.

    ``method`` may carry modifiers (``MODIFIERS``: ``+saw``, ``+opsd``, ``+constlen``); ``rewards`` names one of the
    task's reward sets; ``z_blocks`` is a custom Z-block function (its source enters the key); ``dial`` a setting of
    the testbed's dial (a tiny size's dial base, ``tiny.dial_recipe``); ``region_blend`` mrtpo's placement dial (from
    its relevance, 0, to the check region, 1: ``MRTPOConfig.region_blend``). Keys that are neither RunConfig fields
    nor MRTPOConfig fields are rejected.
    ``model`` is a registry name or a local folder of weights. For a paper checkpoint whose weights are absent,
    the registry's ``ModelNotAvailable`` is raised here (before any data is built).
    """
    if not isinstance(task, Task) and task not in TASKS:
        _fail("task", task, ", ".join(TASKS))
    if overrides.get("dial") is not None:
        overrides = {**overrides, "dial": dial_setting(overrides["dial"], model)}
    try:  # the one lookup of a run's model
        model_def = get_model(model)
    except ValueError:
        model_def = None
    if model_def is None:  # outside the except: the error a user reads is BadRequest's alone
        _fail("model", model, ", ".join(model_names()) + ", or a local folder of weights")
    task = task if isinstance(task, Task) else get_task(task)  # the one lookup of a run's task
    base, *mods = method.split("+")
    if base not in METHODS or any(m not in MODIFIERS for m in mods) or len(set(mods)) < len(mods):
        _fail("method", method, ", ".join(METHODS) + " (each optionally with " + ", ".join(f"+{m}" for m in MODIFIERS)
              + ", e.g. mrtpo+saw, gdpo+opsd)")
    if base in DISTILLING and mods:
        _fail("method", method, f"{base} without modifiers: it has no RL loss to stack them on")
    try:
        spec = model_def.spec(task)
    except ValueError as exc:  # a registry name that is not a paper setting for this task
        raise BadRequest(str(exc)) from None
    if "beta" in overrides:  # TRL's name for the KL coefficient: never guess which of the two was meant
        raise BadRequest("beta is ambiguous: the MRTPO reallocation strength is mrtpo_beta, TRL's KL coefficient "
                         "is kl_beta")
    if model == "smoke":
        overrides = {**SMOKE_RUN, **overrides}
    if steps is not None:
        overrides["steps"] = steps
    own = {f.name for f in dataclasses.fields(RunConfig)} - {"task", "method", "model", "seed", "trainer_args"}
    passthrough = {k: v for k, v in overrides.items() if k not in own}
    if passthrough:
        from mrtpo.method.trainer import MRTPOConfig

        allowed = {f.name for f in dataclasses.fields(MRTPOConfig)} - set(RUNNER_SET)
        unknown = sorted(set(passthrough) - allowed)
        if unknown:
            _fail("override", unknown[0], "run settings " + ", ".join(sorted(own))
                  + "; or a MRTPOConfig field not set by the runner")
    values = {k: getattr(spec, k) for k in SPEC_FIELDS}
    values.update({k: v for k, v in overrides.items() if k in own})
    for m in MODIFIERS:
        values[m] = bool(values.get(m, False)) or m in mods
    if callable(values.get("z_blocks")):
        values["z_blocks"] = z_blocks_key(values["z_blocks"])
    try:  # a float: 1 (from JSON) and 1.0 are one setting, one hash
        values["region_blend"] = float(values.get("region_blend", 0.0))
    except (TypeError, ValueError):
        _fail("region_blend", values["region_blend"], "a number in [0, 1]")
    cfg = RunConfig(task=task.name, method=base, model=model, seed=int(seed), trainer_args=passthrough, **values)
    if cfg.constlen and "loss_type" in cfg.trainer_args:
        _fail("loss_type", cfg.trainer_args["loss_type"], "unset with +constlen (it sets loss_type='dr_grpo')")
    cfg.__dict__.update(task_def=task, model_def=model_def, spec=spec)  # handed down as objects from here
    reward_sets = task.reward_sets
    if cfg.rewards not in reward_sets:
        _fail("rewards", cfg.rewards, ", ".join(reward_sets))
    if not 0.0 <= cfg.mrtpo_beta <= 1.0:
        _fail("mrtpo_beta", cfg.mrtpo_beta, "a number in [0, 1]")
    if not (0.0 <= cfg.region_blend <= 1.0 and (cfg.region_blend == 0 or cfg.method == "mrtpo")):
        _fail("region_blend", cfg.region_blend, "a number in [0, 1], and 0 unless method is mrtpo (the dial from "
              "MRTPO's relevance, 0, to the check region, 1; the region's own arm is method region)")
    if cfg.lora_rank is not None and (not isinstance(cfg.lora_rank, int) or cfg.lora_rank < 1):
        _fail("lora_rank", cfg.lora_rank, "an integer >= 1 (LoRA's rank), or unset for full fine-tuning")
    if cfg.num_generations < 2:
        _fail("num_generations", cfg.num_generations, "an integer >= 2 (a group needs a spread)")
    if cfg.steps <= 0:
        _fail("steps", cfg.steps, "an integer >= 1")
    for name in ("prompts_per_step", "max_completion_length", "eval_prompts", "eval_samples", "save_steps", "train_size"):
        if getattr(cfg, name) < 1:
            _fail(name, getattr(cfg, name), "an integer >= 1")
    model_def.require_available(task)  # ModelNotAvailable, with where it looked and how to provide it
    return cfg
