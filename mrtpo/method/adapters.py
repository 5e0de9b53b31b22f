"""The starting policy: OPSD's frozen teacher (``frozen_initial``), and LoRA adapters (TRL's ``peft_config``).

With adapters the policy is ``W0 + B A`` and the starting policy is the same model with its adapters switched off
(``B = 0`` at initialisation), so OPSD's frozen teacher (``opsd_teacher="initial"``) needs no copy of the weights:
its forwards run under :func:`initial_policy`. Everything else goes through the adapters as it is: the replay and
the entropy recording call the wrapped model, whose decoder carries them; TRL's reference policy (``beta`` > 0) is
the model with adapters disabled, as TRL does it.
"""

from __future__ import annotations

import copy
from contextlib import contextmanager, nullcontext

import torch


def has_adapters(model) -> bool:
    """Whether ``model`` (unwrapped from accelerate) is a PEFT model with adapters."""
    return hasattr(model, "peft_config") and hasattr(model, "disable_adapter")


@contextmanager
def initial_policy(model):
    """Within: ``model`` computes as at its starting weights where it has adapters (disabled); unchanged otherwise."""
    with model.disable_adapter() if has_adapters(model) else nullcontext():
        yield model


def frozen_initial(policy, trainer) -> tuple:
    """(teacher, its DeepSpeed engine or None): OPSD's frozen teacher at the starting weights
    (``opsd_teacher="initial"``) for ``trainer``'s ``policy``. None with adapters (the policy itself under
    :func:`initial_policy`); under DeepSpeed, whose parameters are shards that a copy would copy empty, the starting
    checkpoint loaded again and partitioned as TRL's reference model is (the engine must outlive the teacher: its
    hooks gather the shards); else a copy of the policy, stored in bf16 under bf16 training (2 B/param,
    ``mrtpo.models.geometry``)."""
    if has_adapters(policy):
        return None, None
    if trainer.is_deepspeed_enabled:
        from trl.models import prepare_deepspeed
        from trl.trainer.utils import create_model_from_path, get_config_model_id

        teacher = create_model_from_path(get_config_model_id(policy.config), dtype=policy.dtype, device_map=None)
        engine = prepare_deepspeed(teacher.eval().requires_grad_(False), trainer.accelerator)
        return engine.module, engine
    return copy.deepcopy(policy).eval().requires_grad_(False).to(torch.bfloat16 if trainer.args.bf16 else None), None
