"""What the model registry (``mrtpo.models.registry``) hands out: a model's run hyperparameters (``ModelSpec``),
and the one error for weights that are not on this machine."""

from __future__ import annotations

from dataclasses import dataclass

class ModelNotAvailable(RuntimeError):
    """The requested checkpoint's weights are not on this machine (and the hub is offline)."""


@dataclass(frozen=True)
class ModelSpec:
    """One (model name, task) entry: checkpoint and run hyperparameters."""

    checkpoint: str  # Hugging Face id, "tiny" for the embedded bases, or a local folder
    params: float  # parameter count, for the memory estimate
    steps: int
    prompts_per_step: int
    num_generations: int
    seeds: tuple[int, ...]
    learning_rate: float
    max_completion_length: int
    mrtpo_beta: float = 0.5
    beta_warmup_steps: int = 10
    kl_beta: float = 0.0
    #: hyperparameters the paper does not state, with the reason for the value chosen
    choices: tuple[str, ...] = ()
    #: prompts per real-scale benchmark (None: every one; the rehearsal evaluates a few)
    eval_limit: int | None = None
